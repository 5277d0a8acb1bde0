"""What a CUDA error during a candidate's run says about the candidate (no GPU needed;
pycuda is imported only to classify one of its exceptions).

An illegal address is a kernel touching memory that is not mapped for it. With every
buffer in its own range between unmapped guards (guard_layout.py) that is what a stray
index past a buffer does, read or write alike, so it is named for it, not as a failed
launch. Any such fault is sticky: the context is lost, every later call returns it,
and the process must not run another candidate (worker.run_session).
"""

from __future__ import annotations

# CUresult values, from cuda.h (CUDA 13.0)
OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY
ILLEGAL_ADDRESS = 700  # CUDA_ERROR_ILLEGAL_ADDRESS
# The errors after which "the context cannot be used anymore" (cuda.h's words for each):
# an illegal address, a hardware stack error, an illegal instruction, a misaligned or
# wrong-address-space access, an invalid program counter, a failed launch (a trap).
CONTEXT_LOST = frozenset({ILLEGAL_ADDRESS, 714, 715, 716, 717, 718, 719})
# cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS): how pycuda's exceptions name it (they
# carry the driver's text, not its code).
ILLEGAL_ADDRESS_TEXT = "an illegal memory access was encountered"

OUT_OF_BOUNDS_ACCESS = "out_of_bounds_access"


def is_illegal_address(code: int | None, message: str) -> bool:
    return code == ILLEGAL_ADDRESS or ILLEGAL_ADDRESS_TEXT in message


def guard_for_fault(code: int | None, message: str, guard_regions: bool) -> tuple[str, str] | None:
    """(guard, message) for an illegal address during a candidate's run, or None for any
    other error. `code`: the context's sticky error if it could be read (None if not);
    `guard_regions`: whether the candidate's buffers were in guarded ranges."""
    if not is_illegal_address(code, message):
        return None
    where = ("every buffer lies in its own address range between unmapped guard regions, so "
             "this is an access past one of them" if guard_regions else
             "an address outside every allocation (the buffers had canaries only)")
    return OUT_OF_BOUNDS_ACCESS, (f"a kernel touched memory outside its buffers and faulted "
                                  f"(CUDA_ERROR_ILLEGAL_ADDRESS: {where}); the CUDA context is "
                                  f"lost and its process serves no other candidate. {message}")


def classify_exception(error: Exception, *, guard_regions: bool = False) -> tuple[str, str]:
    """(guard, message) for an exception out of a candidate's run in the GPU worker;
    `guard_regions`: whether its buffers were in guarded ranges. Imports pycuda: called
    only where one was raised."""
    import pycuda.driver as cuda

    from . import vmm
    from .device import PlanError

    if isinstance(error, PlanError):
        return error.guard, str(error)
    if isinstance(error, vmm.DriverError | cuda.Error):
        # pycuda's exceptions carry the driver's text, not its code: the context's sticky
        # error is asked for (cuCtxSynchronize), and the text read where it cannot be
        code = error.code if isinstance(error, vmm.DriverError) else _sticky_error()
        fault = guard_for_fault(code, str(error), guard_regions)
        if fault is not None:
            return fault
    if isinstance(error, vmm.DriverError):
        return ("resources", f"device memory: {error}") if error.code == OUT_OF_MEMORY \
            else ("internal", str(error))
    if isinstance(error, cuda.MemoryError):
        return "resources", f"device memory: {error}"
    if isinstance(error, cuda.Error):  # LaunchError, LogicError, RuntimeError: all pycuda's Error
        return "launch", f"{type(error).__name__}: {error}"
    return "internal", f"{type(error).__name__}: {error}"


def _sticky_error() -> int | None:
    from . import vmm

    try:
        return vmm.context_error()
    except (OSError, AttributeError):  # no driver library to ask: the message decides
        return None
