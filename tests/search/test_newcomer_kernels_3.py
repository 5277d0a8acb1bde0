"""The third newcomer audit (bench/newcomer_tasks_3/): 12 operators from KernelBench level
1's kinds, written before their author read the lift (size_t and int64_t indices, a
`while` grid-stride loop, a clamp macro and an indexing macro, helper device functions,
2-D grids, early returns, a reversed and an exclusive scan, a masked scan, a per-element
atomic mean, a block per plane with shared-memory trees), none of them shaped to a card.
On the CPU: each naive kernel computes its reference on the emulator; each lifts to the
family written here, or is refused for the reason written here; the skeletons named here
are among those the skills source offers; and every skeleton it offers computes the
reference on the emulator too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from newcomer_audit import (
    FULL,
    MAP,
    ROWS,
    SCAN,
    check_directory,
    check_lift,
    check_offered,
    check_references,
    tasks_in,
)

DIRECTORY = Path(__file__).resolve().parents[2] / "bench" / "newcomer_tasks_3"
# name -> each launch's family (one entry: the whole plan's), or the words of its refusal
EXPECTED = {
    "argmin_mid": [ROWS],  # a `while` loop down the middle dim
    "cumsum_exclusive": [SCAN], "cumsum_reverse": [SCAN], "masked_cumsum": [SCAN],
    "diag_matmul": [MAP],  # d[i] broadcast along a row: a map, but not `p[i]`
    "hardsigmoid": [MAP], "softsign": [MAP],
    "hinge_loss": [FULL],  # every thread's atomicAdd of its share, zeroed by another launch
    "instance_norm": ["__shared__ memory"],  # a block per plane, two shared-memory trees
    "l1_normalize": [ROWS], "matvec_t": [ROWS],
    "triu_matmul": [MAP],  # k runs from i to j: each output's own loop, read as a map's math
}
# the admitted skeletons offered for each (at least these)
OFFERED = {
    "argmin_mid": {"rows.split_strided"}, "cumsum_exclusive": {"scan.block_scan"},
    "cumsum_reverse": {"scan.block_scan"}, "masked_cumsum": {"scan.block_scan"},
    "hardsigmoid": {"map.quads"}, "softsign": {"map.vec4"}, "hinge_loss": {"full.grid_stride_accumulate"},
    "l1_normalize": {"rows.block_per_row"}, "matvec_t": {"rows.split_strided"}, "triu_matmul": {"map.quads"},
}
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")


@pytest.fixture(scope="module")
def newcomer():
    with tasks_in(DIRECTORY, EXPECTED) as found:
        yield found


def test_the_directory_holds_the_tasks_listed_here():
    from bench.newcomer_tasks_3 import vendor

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
