"""Where a candidate's buffer lies in its own reserved address range: pure arithmetic.

Every input, output and scratch buffer the candidate can reach gets an address range of
its own (buffers.GuardedRanges, through the driver's virtual memory management), of
which only the middle is backed by memory:

    reserved:  [ guard, unmapped | mapped granules | guard, unmapped ]
    mapped:    [ lead canary ... | canary | user's bytes | pad + canary ]
                                          ^ ptr, 256-byte aligned

The user's bytes end at most 255 + CANARY_BYTES before the mapping does, so a write just
past either end lands on a canary (the guard `out_of_bounds_write`, naming the buffer
and the offset, as before), and one farther out lands in unmapped memory and faults
(`out_of_bounds_access`: faults.py) instead of reaching another allocation. The lead
canary, the mapping's slack before the user's bytes, is checked whole with the canary
before them: a stray write there reaches nothing else, but it is still caught.

The guards are at least GUARD_FLOOR_BYTES and at least the mapping itself, so an index
off by up to one buffer length faults at every size. They cost address space only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import GUARD_BYTES

# cudaMalloc's guaranteed alignment (CUDA C++ Programming Guide, "Device Memory
# Accesses"): what a kernel may assume of a pointer it is given, float4 loads included.
USER_ALIGNMENT = 256
# The canary beside the user's bytes, per side: the same 4 KiB the cuMemAlloc path has.
CANARY_BYTES = GUARD_BYTES
# Unmapped address space on each side of a mapping, at least: far past the 1 MiB stray
# write of issue 33, and as large as the suite's largest buffers (relu's and
# cross_entropy's 1 GiB), so the harness's own allocations (seeds, references, the L2
# flush, the timed runs' output copies) lie farther than that from every candidate
# buffer. Address space only, no memory backs it: a check holds a handful of buffers, a
# few GiB of reservations in a 2^47-byte address space.
GUARD_FLOOR_BYTES = 1 << 30


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class GuardedLayout:
    """One buffer's place in its reservation. Offsets are in bytes: `user_offset` and the
    canaries from the mapping's start, the mapping from the reservation's start."""

    user_bytes: int
    granularity: int
    guard_bytes: int  # unmapped, on each side of the mapping
    mapped_bytes: int
    user_offset: int

    @property
    def reserved_bytes(self) -> int:
        return 2 * self.guard_bytes + self.mapped_bytes

    @property
    def mapped_offset(self) -> int:
        return self.guard_bytes

    @property
    def canary_before(self) -> tuple[int, int]:
        """(offset, length) of everything mapped before the user's bytes."""
        return 0, self.user_offset

    @property
    def canary_after(self) -> tuple[int, int]:
        """(offset, length) of everything mapped after the user's bytes."""
        end = self.user_offset + self.user_bytes
        return end, self.mapped_bytes - end

    def faults_past_end(self) -> range:
        """Byte distances past the end of the user's bytes where an access faults."""
        after = self.canary_after[1]
        return range(after, after + self.guard_bytes)

    def faults_before_start(self) -> range:
        """Byte distances before the start of the user's bytes where an access faults
        (1: the byte just before it)."""
        return range(self.user_offset + 1, self.user_offset + self.guard_bytes + 1)


def guarded_layout(user_bytes: int, granularity: int, *, canary_bytes: int = CANARY_BYTES,
                   guard_floor_bytes: int = GUARD_FLOOR_BYTES) -> GuardedLayout:
    """The layout of a buffer of `user_bytes` in memory mapped `granularity` bytes at a
    time (cuMemGetAllocationGranularity): the user's bytes as late in the mapping as
    USER_ALIGNMENT allows, after at least `canary_bytes` of canary and followed by
    `canary_bytes` more."""
    if user_bytes < 0:
        raise ValueError(f"a buffer of {user_bytes} bytes")
    if granularity <= 0 or granularity % USER_ALIGNMENT:
        raise ValueError(f"granularity {granularity} is not a positive multiple of {USER_ALIGNMENT}")
    if canary_bytes < 0 or canary_bytes % USER_ALIGNMENT:
        raise ValueError(f"canary of {canary_bytes} bytes is not a multiple of {USER_ALIGNMENT}")
    span = round_up(user_bytes, USER_ALIGNMENT)
    mapped = round_up(canary_bytes + span + canary_bytes, granularity)
    guard = round_up(max(guard_floor_bytes, mapped), granularity)
    return GuardedLayout(user_bytes=user_bytes, granularity=granularity, guard_bytes=guard,
                         mapped_bytes=mapped, user_offset=mapped - canary_bytes - span)


def footprint(user_bytes: int, granularity: int | None) -> int:
    """Device memory a canaried buffer of `user_bytes` takes: in a guarded range mapped
    `granularity` bytes at a time, or (None) in one allocation with a canary each side."""
    if granularity is None:
        return user_bytes + 2 * CANARY_BYTES
    return guarded_layout(user_bytes, granularity).mapped_bytes


def describe_guard_regions(granularity: int, guard_floor_bytes: int = GUARD_FLOOR_BYTES) -> str:
    """The verdict's evidence (Environment.buffers) for buffers in guarded ranges."""
    return (f"guard regions: every input, output and scratch buffer in its own reserved address "
            f"range (the driver's virtual memory management), mapped in {_size(granularity)} "
            f"granules, with at least {_size(guard_floor_bytes)} (or the mapping's own size) "
            f"unmapped on each side and {_size(CANARY_BYTES)} canaries inside: a write near a "
            f"buffer is out_of_bounds_write, an access farther out faults (out_of_bounds_access)")


def describe_canaries_only(why: str) -> str:
    """The verdict's evidence when buffers are plain allocations with canaries."""
    return (f"canaries only: {_size(CANARY_BYTES)} on each side of every buffer in one "
            f"cuMemAlloc, no guard regions ({why}); a stray write farther out can land in "
            f"another allocation unseen")


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"
