"""The newcomer tasks (bench/newcomer_tasks/): 34 operators, each with a first kernel
written the ways people write one (a thread per output, per row or per element with
atomics; 1-D, 2-D and 3-D grids; grid-stride and `while` loops; a row done by thread 0;
the tutorial's shared-memory trees and tiled product; helper functions; double accumulators), none of them
shaped to a card. On the CPU: each naive kernel computes its reference on the emulator;
each lifts to the family written here, or is refused for the reason written here; and
every skeleton the skills source offers for it (the admitted cards) computes the
reference on the emulator too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cuda_on_cpu import mismatch_at_l0
from newcomer_audit import lifted, naive, offered_skeletons, tasks_in

DIRECTORY = Path(__file__).resolve().parents[2] / "bench" / "newcomer_tasks"
ROWS, MAP, FULL, PRODUCT = "row_map_reduce", "elementwise_map", "full_reduction", "batched_contraction"
# name -> each launch's family (one entry: the whole plan's), or the words of its refusal
EXPECTED = {
    "argmin": [ROWS], "avgpool2d": [MAP], "batchnorm": [MAP], "bias_relu": [MAP], "bmm": [PRODUCT],
    "btranspose": ["permutation"], "chan_scale": [MAP], "col_mean": [ROWS], "conv1d": [PRODUCT],
    "cosine": [ROWS],  # thread 0 of each block does the row (forms/lone_thread.py)
    "embedding": [MAP], "gelu_helper": [MAP], "huber": [FULL],
    "frob": ["expected the bounds check", FULL, MAP],  # zero, sum of squares, divide
    "l1sum": [FULL],  # the tutorial's tree into an atomic (forms/block_reduce.py)
    "l2norm": [ROWS], "layernorm_w": [ROWS], "leaky_scale": [MAP], "logsumexp": [ROWS],
    "matmul_nt": [PRODUCT], "maxpool1d": [ROWS], "maxpool2d": ["window_reduction"], "mean_all": [FULL],
    "mid_mean": [ROWS], "outer": ["permutation"], "powsqrt": [MAP],
    "rowmax": [ROWS],  # a row per block, thread 0 combining the shared array
    "rowsum_double": [ROWS],
    "softmax_shared": [ROWS],  # two reductions through one shared array
    "softplus": [MAP], "tril": [MAP],
    "tiled_matmul": [PRODUCT],  # already tiled by hand in shared memory (forms/hand_tiled.py)
    # refused: the lift says why, and no card is offered
    "one_thread": ["early return's condition"],  # one thread for the whole tensor
    "online_softmax": ["carries a value from one iteration to the next"],  # the online pair
}
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")


@pytest.fixture(scope="module")
def newcomer():
    with tasks_in(DIRECTORY, EXPECTED) as found:
        yield found


def test_the_directory_holds_the_tasks_listed_here():
    files = {path.stem for path in DIRECTORY.glob("*.py")} - {"vendor", "_make"}
    assert files == set(EXPECTED)
    from bench.newcomer_tasks import vendor

    assert set(vendor.OPS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_naive_kernel_lifts_to_its_family_or_says_why_not(newcomer, name):
    read = lifted(naive(newcomer[name]))
    assert len(read) == len(EXPECTED[name]), read
    for got, expected in zip(read, EXPECTED[name], strict=True):
        assert expected == got or (expected not in (ROWS, MAP, FULL, PRODUCT) and expected in got), read


@needs_gxx
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_naive_kernel_and_every_skeleton_offered_compute_the_reference(newcomer, name, tmp_path):
    task = newcomer[name]
    candidate = naive(task)
    offered = offered_skeletons(task, name)
    refused = not any(f in (ROWS, MAP, FULL, PRODUCT, "permutation") for f in EXPECTED[name])
    if refused:
        assert offered == []
    for label, kernel in [("naive", candidate), *((p.source.split(":")[-1], p.candidate) for p in offered)]:
        assert mismatch_at_l0(task, kernel, tmp_path / label) is None, label


def test_the_product_tiled_by_hand_is_offered_the_contraction_tile(newcomer):
    offered = {p.source.split(":")[-1] for p in offered_skeletons(newcomer["tiled_matmul"], "tiled_matmul")}
    assert "contraction.smem_register_tile" in offered
