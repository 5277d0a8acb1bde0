"""The shared vocabulary of optimization intents.

Every expert's flags (`OPT_<NAME>`), every lineage transition and, later, every skill
card is named from this one table, so that "the same idea" means the same name across
tasks: a float4 load in relu and in softmax are both VEC4. An intent has a sentence (what
the step does) and the family of bottleneck it usually addresses (memory, compute,
latency, occupancy), which part 2 turns into a card's profile precondition.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Intent:
    name: str  # the flag is OPT_<name>
    family: str  # memory, compute, latency, occupancy
    sentence: str


_INTENTS = [
    Intent("VEC4", "memory",
           "load and store four floats at a time (float4), so each instruction moves 16 bytes"),
    Intent("GRID_STRIDE", "latency",
           "launch one wave of blocks and let each thread stride over the data"),
    Intent("UNROLL", "latency",
           "unroll the inner loop so independent loads are in flight together"),
    Intent("LAUNCH_BOUNDS", "occupancy",
           "declare the block size to the compiler (__launch_bounds__) so it budgets registers"),
    Intent("RESTRICT", "memory",
           "mark pointers __restrict__ so loads can go through the read-only path"),
    Intent("BLOCK_PER_ROW", "occupancy",
           "give each row a whole block instead of a single thread"),
    Intent("WARP_PER_ROW", "occupancy",
           "give each row one warp, reducing with shuffles and no shared memory"),
    Intent("WARP_SHUFFLE_REDUCE", "latency",
           "reduce within a warp with __shfl_*_sync instead of shared memory"),
    Intent("WARP_SHUFFLE_SCAN", "latency",
           "scan within a warp with __shfl_up_sync, then the warps' totals once per block, so a "
           "row's running values come from all its threads instead of one walking it"),
    Intent("BLOCK_REDUCE", "latency",
           "reduce across a block in shared memory, once per block"),
    Intent("GRID_STRIDE_ACCUMULATE", "latency",
           "sum a grid-stride slice in registers first: one atomic per block"),
    Intent("ONLINE_SOFTMAX", "memory",
           "compute the row maximum and the sum of exponentials in one pass"),
    Intent("ROW_IN_REGISTERS", "memory",
           "keep a row in registers between passes instead of reading it again"),
    Intent("SINGLE_PASS_STATS", "memory",
           "compute mean and variance in one pass (Welford or sum and sum of squares)"),
    Intent("FAST_MATH", "compute",
           "use the hardware's fast exponentials and divisions where the tolerance allows"),
    Intent("SMEM_TILE", "memory",
           "stage tiles of the inputs in shared memory so each global value is read once per block"),
    Intent("REG_TILE", "compute",
           "compute a small tile of outputs per thread so each loaded value is used many times"),
    Intent("DOUBLE_BUFFER", "latency",
           "load the next tile while computing on the current one"),
    Intent("ASYNC_COPY", "latency",
           "copy global to shared memory asynchronously (cp.async) to overlap it with math"),
    Intent("SMEM_PADDING", "memory",
           "pad shared-memory rows so threads of a warp hit different banks"),
    Intent("TENSOR_CORES", "compute",
           "do the products on tensor cores (mma), keeping the task's accuracy (split products)"),
    Intent("IMPLICIT_GEMM", "compute",
           "compute a convolution as a matrix product without materialising the im2col matrix"),
    Intent("FLASH_TILING", "memory",
           "tile attention over keys with an online softmax, never writing the score matrix"),
    Intent("RADIX_SELECT", "compute",
           "select the k largest by radix passes over the bits instead of sorting"),
    Intent("WARP_TOPK", "latency",
           "keep candidate top-k lists per warp and merge them"),
    Intent("CANDIDATE_FILTER", "compute",
           "drop, by a cheap bound proven to keep the result, the elements that cannot be in it "
           "before the exact selection runs on the few that remain"),
    Intent("WINDOW_REUSE", "memory",
           "load each input once for all the pooling windows that overlap it"),
]

INTENTS: dict[str, Intent] = {intent.name: intent for intent in _INTENTS}
FLAG_PREFIX = "OPT_"


def flag_name(intent: str) -> str:
    return FLAG_PREFIX + intent


def intent_of(flag: str) -> Intent:
    """The intent a flag names; a flag outside the vocabulary is an error that says so."""
    name = flag.removeprefix(FLAG_PREFIX)
    if not flag.startswith(FLAG_PREFIX) or name not in INTENTS:
        known = ", ".join(flag_name(n) for n in INTENTS)
        raise ValueError(f"{flag!r} is not in the shared vocabulary of intents (known: {known})")
    return INTENTS[name]
