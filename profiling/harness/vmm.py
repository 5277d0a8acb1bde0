"""The CUDA driver's virtual memory management, through ctypes on libcuda.so.1.

One job: reserve an address range, back part of it with device memory readable and
writable by the current context's device, and give both back. pycuda does not wrap
these calls; they act on the context pycuda made current, and the raw addresses they
return are what pycuda's copies and launches take. Nothing here knows about buffers or
canaries (buffers.py) or where in a range the memory goes (guard_layout.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

from .faults import CONTEXT_LOST

# Enum values from cuda.h (CUDA 13.0)
ATTRIBUTE_VMM_SUPPORTED = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
ALLOCATION_TYPE_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
LOCATION_TYPE_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
HANDLE_TYPE_NONE = 0  # CU_MEM_HANDLE_TYPE_NONE
GRANULARITY_MINIMUM = 0  # CU_MEM_ALLOC_GRANULARITY_MINIMUM
ACCESS_READWRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE

_CALLS = ("cuCtxGetDevice", "cuCtxSynchronize", "cuDeviceGetAttribute", "cuMemGetAllocationGranularity",
          "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
          "cuMemUnmap", "cuMemSetAccess", "cuGetErrorName")


class _Location(ctypes.Structure):  # CUmemLocation
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):  # CUmemAllocationProp.allocFlags
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class DriverError(RuntimeError):
    """A driver call failed; `code` is its CUresult."""

    def __init__(self, call: str, code: int):
        super().__init__(f"{call} failed: {error_name(code)} ({code})")
        self.call, self.code = call, code


@lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _call(name: str, *args) -> None:
    code = getattr(_driver(), name)(*args)
    if code:
        raise DriverError(name, code)


def error_name(code: int) -> str:
    text = ctypes.c_char_p()
    try:
        if _driver().cuGetErrorName(code, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode()
    except OSError:
        pass  # no driver to ask: the number alone
    return f"CUresult {code}"


def unavailable() -> str | None:
    """Why guarded ranges cannot be made in this process's current context, or None."""
    try:
        driver = _driver()
    except OSError as error:
        return f"libcuda.so.1 could not be loaded: {error}"
    missing = [name for name in _CALLS if not hasattr(driver, name)]
    if missing:
        return f"the driver lacks {', '.join(missing)}"
    try:
        supported = device_attribute(ATTRIBUTE_VMM_SUPPORTED, current_device())
    except DriverError as error:
        return f"could not ask the device: {error}"
    if not supported:
        return "the device reports CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0"
    return None


def current_device() -> int:
    device = ctypes.c_int()
    _call("cuCtxGetDevice", ctypes.byref(device))
    return device.value


def device_attribute(attribute: int, device: int) -> int:
    value = ctypes.c_int()
    _call("cuDeviceGetAttribute", ctypes.byref(value), ctypes.c_int(attribute), ctypes.c_int(device))
    return value.value


def context_error() -> int:
    """The current context's sticky error (0 if none): cuCtxSynchronize returns the
    fault that lost a context to every caller after it."""
    return int(_driver().cuCtxSynchronize())


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type, prop.requestedHandleTypes = ALLOCATION_TYPE_PINNED, HANDLE_TYPE_NONE
    prop.location = _Location(LOCATION_TYPE_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    """The smallest size and alignment cuMemCreate and cuMemMap accept on the device."""
    value = ctypes.c_size_t()
    _call("cuMemGetAllocationGranularity", ctypes.byref(value), ctypes.byref(_prop(device)),
          ctypes.c_int(GRANULARITY_MINIMUM))
    return value.value


@dataclass
class Mapping:
    """A reserved range of which [mapped, mapped + mapped_bytes) is backed by memory."""

    reservation: int
    reserved_bytes: int
    mapped: int
    mapped_bytes: int
    handle: int
    released: bool = False

    def release(self) -> None:
        """Unmap, free the memory and the range. After a fault the context is lost and
        so is everything it held (the process then exits: worker.run_session): those
        errors are not raised, any other is, after every step was tried."""
        if self.released:
            return
        self.released = True
        size_t, address = ctypes.c_size_t, ctypes.c_uint64
        steps = (("cuMemUnmap", address(self.mapped), size_t(self.mapped_bytes)),
                 ("cuMemRelease", ctypes.c_ulonglong(self.handle)),
                 ("cuMemAddressFree", address(self.reservation), size_t(self.reserved_bytes)))
        failures = []
        for name, *args in steps:
            try:
                _call(name, *args)
            except DriverError as error:
                failures.append(error)
        raised = [f for f in failures if f.code not in CONTEXT_LOST]
        if raised:
            raise raised[0]


def map_in_reservation(reserved_bytes: int, mapped_offset: int, mapped_bytes: int, device: int,
                       alignment: int) -> Mapping:
    """Reserve `reserved_bytes` of address space and back [mapped_offset, mapped_offset +
    mapped_bytes) of it with the device's memory, read-write for that device only; the
    rest stays unmapped, and any access to it faults. Undone on any failure."""
    reservation = ctypes.c_uint64()
    _call("cuMemAddressReserve", ctypes.byref(reservation), ctypes.c_size_t(reserved_bytes),
          ctypes.c_size_t(alignment), ctypes.c_uint64(0), ctypes.c_ulonglong(0))
    handle = ctypes.c_ulonglong()
    mapped = reservation.value + mapped_offset
    done: list[tuple] = [("cuMemAddressFree", reservation, ctypes.c_size_t(reserved_bytes))]
    try:
        _call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(mapped_bytes), ctypes.byref(_prop(device)),
              ctypes.c_ulonglong(0))
        done.append(("cuMemRelease", handle))
        _call("cuMemMap", ctypes.c_uint64(mapped), ctypes.c_size_t(mapped_bytes), ctypes.c_size_t(0), handle,
              ctypes.c_ulonglong(0))
        done.append(("cuMemUnmap", ctypes.c_uint64(mapped), ctypes.c_size_t(mapped_bytes)))
        access = _AccessDesc(_Location(LOCATION_TYPE_DEVICE, device), ACCESS_READWRITE)
        _call("cuMemSetAccess", ctypes.c_uint64(mapped), ctypes.c_size_t(mapped_bytes), ctypes.byref(access),
              ctypes.c_size_t(1))
    except DriverError:
        for name, *args in reversed(done):
            getattr(_driver(), name)(*args)  # best effort: the first error is the one raised
        raise
    return Mapping(reservation.value, reserved_bytes, mapped, mapped_bytes, handle.value)
