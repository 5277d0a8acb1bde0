"""The second newcomer audit (bench/newcomer_tasks_2/): 16 operators written before their
author read the lift (int64_t, size_t and unsigned indices, #define constants and an
indexing macro, helper functions, 2-D grids, nested checks, loops counting down, a row
per warp, a warp's shuffles into an atomic, a two-pass dot product), none of them shaped
to a card. On the CPU: each naive kernel computes its reference on the emulator; each
lifts to the family written here, or is refused for the reason written here; the
skeletons named here are among those the skills source offers; and every skeleton it
offers computes the reference on the emulator too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from newcomer_audit import (
    FULL,
    MAP,
    PRODUCT,
    ROWS,
    SCAN,
    WINDOW,
    check_directory,
    check_lift,
    check_offered,
    check_references,
    tasks_in,
)

DIRECTORY = Path(__file__).resolve().parents[2] / "bench" / "newcomer_tasks_2"
# name -> each launch's family (one entry: the whole plan's), or the words of its refusal
EXPECTED = {
    "argmax_ties": [ROWS],  # counted down with `>=`: the first of equal values (rows._ascending)
    "avgpool1d": [WINDOW], "bmv": [ROWS],
    "col_min": [ROWS],  # an unsigned counter counting down to 1
    "cumprod": [SCAN], "elu": [MAP],
    "glu": [MAP],  # nested checks, one index each (reading._guarded)
    "hardswish": [MAP],
    "kl_div": [FULL],  # a warp's shuffles into lane 0's atomic (warp_reduce.py), zeroed on thread 0
    "log_softmax": [ROWS],  # a row per warp (warp_reduce.py)
    "matmul_tn": [PRODUCT], "mid_max": [ROWS], "rms_rows": [ROWS], "stencil5": [MAP],
    "to_heads": [MAP],  # a gather whose reads and write are both contiguous along D: no transpose
    "dot": [FULL],  # partials per block through shared memory, then one thread sums them (two_pass.py)
}
# the admitted skeletons offered for each (at least these)
OFFERED = {
    "argmax_ties": {"rows.block_per_row"}, "bmv": {"rows.block_per_row"}, "col_min": {"rows.split_strided"},
    "cumprod": {"scan.block_scan"}, "dot": {"full.grid_stride_accumulate"}, "elu": {"map.vec4"},
    "glu": {"map.quads"}, "hardswish": {"map.vec4"},
    "kl_div": {"full.grid_stride_accumulate"}, "log_softmax": {"rows.block_per_row"},
    "matmul_tn": {"contraction.smem_register_tile"}, "mid_max": {"rows.split_strided"},
    "rms_rows": {"rows.block_per_row"}, "stencil5": {"map.quads"},
}
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")


@pytest.fixture(scope="module")
def newcomer():
    with tasks_in(DIRECTORY, EXPECTED) as found:
        yield found


def test_the_directory_holds_the_tasks_listed_here():
    from bench.newcomer_tasks_2 import vendor

    check_directory(DIRECTORY, EXPECTED, vendor.OPS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_naive_kernel_lifts_to_its_family_or_says_why_not(newcomer, name):
    check_lift(newcomer[name], EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_skeletons_named_here_are_offered_and_none_for_a_refused_kernel(newcomer, name):
    check_offered(newcomer[name], name, EXPECTED[name], OFFERED.get(name, set()))


@needs_gxx
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_naive_kernel_and_every_skeleton_offered_compute_the_reference(newcomer, name, tmp_path):
    check_references(newcomer[name], name, tmp_path)
