"""The candidate's buffers on the GPU: canaried, and where the driver allows, each in an
address range of its own between unmapped guard regions (guard_layout.py, vmm.py).

Checked and timed runs allocate alike (worker.Session.allocate), so what a kernel can
observe of its pointers does not tell it which run it is in.
"""

from __future__ import annotations

import numpy as np
import pycuda.driver as cuda

from . import vmm
from .checks import CANARY_BYTE, GUARD_BYTES, POISON_BYTE
from .guard_layout import GuardedLayout, describe_canaries_only, describe_guard_regions, guarded_layout


class GuardedRanges:
    """Maps each buffer into its own reservation on the current context's device."""

    def __init__(self, device: int, granularity: int):
        self.device, self.granularity = device, granularity

    @classmethod
    def open(cls) -> tuple[GuardedRanges | None, str]:
        """(the allocator, the verdict's evidence), or (None, why not) where the driver or
        the device has no virtual memory management: the buffers then have canaries only."""
        why = vmm.unavailable()
        if why is not None:
            return None, describe_canaries_only(why)
        try:
            device = vmm.current_device()
            ranges = cls(device, vmm.granularity(device))
            ranges.map(ranges.layout(0)).release()  # one range made and given back, or none is used
        except vmm.DriverError as error:
            return None, describe_canaries_only(f"a first guarded range failed: {error}")
        return ranges, describe_guard_regions(ranges.granularity)

    def layout(self, nbytes: int) -> GuardedLayout:
        return guarded_layout(nbytes, self.granularity)

    def map(self, layout: GuardedLayout) -> vmm.Mapping:
        return vmm.map_in_reservation(layout.reserved_bytes, layout.mapped_offset, layout.mapped_bytes,
                                      self.device, self.granularity)


class Buffer:
    """A device buffer with canaries before and after the user's bytes; with `ranges`,
    in its own reservation (guard_layout.py), else in one cuMemAlloc.

    `guard_bytes=0` gives an allocation of exactly the user's bytes, for runs under
    compute-sanitizer, whose memcheck then sees any access past either end (canaries
    only ever catch writes, and only within their width).
    """

    def __init__(self, name: str, dtype: np.dtype, shape: tuple[int, ...],
                 guard_bytes: int = GUARD_BYTES, ranges: GuardedRanges | None = None):
        self.name, self.dtype, self.shape = name, np.dtype(dtype), shape
        self.guard_bytes = guard_bytes
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize
        self.allocation: cuda.DeviceAllocation | None = None
        self.mapping: vmm.Mapping | None = None
        if ranges is not None and guard_bytes:
            layout = ranges.layout(self.nbytes)
            self.mapping = ranges.map(layout)
            start = self.mapping.mapped
            self.ptr = start + layout.user_offset
            # (address, length) of the canaries: all the mapping holds besides the user's bytes
            self._before = (start, layout.canary_before[1])
            self._after = (start + layout.canary_after[0], layout.canary_after[1])
        else:
            self.allocation = cuda.mem_alloc(max(1, self.nbytes + 2 * guard_bytes))
            self.ptr = int(self.allocation) + guard_bytes
            self._before = (int(self.allocation), guard_bytes)
            self._after = (self.ptr + self.nbytes, guard_bytes)
        for address, length in (self._before, self._after):
            if length:
                cuda.memset_d8(address, CANARY_BYTE, length)

    def poison(self, stream: cuda.Stream | None = None) -> None:
        if self.nbytes:
            cuda.memset_d8_async(self.ptr, POISON_BYTE, self.nbytes, stream)

    def upload(self, array: np.ndarray) -> None:
        assert array.dtype == self.dtype and array.shape == self.shape, (array.dtype, array.shape)
        if self.nbytes:
            cuda.memcpy_htod(self.ptr, np.ascontiguousarray(array))

    def copy_from(self, source: cuda.DeviceAllocation) -> None:
        """Fill the user's bytes from a device copy of the same size (a resident seed)."""
        if self.nbytes:
            cuda.memcpy_dtod(self.ptr, source, self.nbytes)

    def download(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        if self.nbytes:
            cuda.memcpy_dtoh(out, self.ptr)
        return out

    def guards(self) -> tuple[np.ndarray, np.ndarray]:
        """The canary bytes before and after the user's bytes, as they are now."""
        if not self.guard_bytes:  # nothing to compare: memcheck watches these bounds
            return np.full(GUARD_BYTES, CANARY_BYTE, np.uint8), np.full(GUARD_BYTES, CANARY_BYTE, np.uint8)
        regions = []
        for address, length in (self._before, self._after):
            region = np.empty(length, np.uint8)
            if length:
                cuda.memcpy_dtoh(region, address)
            regions.append(region)
        return regions[0], regions[1]

    def copy_to_async(self, target: cuda.DeviceAllocation, stream: cuda.Stream) -> None:
        """The user's bytes into another allocation of at least that size, on the stream."""
        if self.nbytes:
            cuda.memcpy_dtod_async(target, self.ptr, self.nbytes, stream)

    def free(self) -> None:
        if self.mapping is not None:
            self.mapping.release()
        elif self.allocation is not None:
            self.allocation.free()
