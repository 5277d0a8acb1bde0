"""TunableSource: power-of-two neighbours within sensible bounds, only valid plans, and
compile-flag variants (fast math only when the tolerance allows it; a register cap only
when registers limit occupancy and nothing spills)."""

import json

import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.gate import check_plan
from search.engine.sources import TunableSource, register_cap, resident_warps, tunable_kind
from search.engine.types import FAMILIES, Measurement, NodeContext

RELU = 'extern "C" __global__ void relu(const float* x, float* y, int n) { }'
NAIVE_TASKS = tuple(task.name for task in tasks.all_tasks())  # the whole suite


def relu(
    tunables: dict, grid: str = "cdiv(n, BLOCK)", block: str = "BLOCK", shared: str | int = 0
) -> Candidate:
    return Candidate.from_dict(
        {
            "source": RELU,
            "tunables": tunables,
            "launches": [
                {
                    "kernel": "relu",
                    "grid": [grid],
                    "block": [block],
                    "shared_bytes": shared,
                    "args": ["x", "y", "n"],
                }
            ],
        }
    )


def propose(
    candidate: Candidate, task: str = "relu", fast_math: bool = False, measurement: Measurement | None = None
):
    return TunableSource().propose(
        NodeContext(
            task=task,
            candidate=candidate,
            measurement=measurement,
            diagnosis=None,
            tolerance_allows_fast_math=fast_math,
        )
    )


def moves(proposals) -> set[tuple[str, int, int]]:
    return {
        (p.params["tunable"], p.params["from"], p.params["to"]) for p in proposals if p.source == "tunable"
    }


def test_a_block_size_moves_one_power_of_two_up_and_down():
    proposals = propose(relu({"BLOCK": 256}))
    assert moves(proposals) == {("BLOCK", 256, 512), ("BLOCK", 256, 128)}
    up = next(p for p in proposals if p.params["to"] == 512)
    assert up.title == "BLOCK 256 → 512"
    assert up.candidate.tunables == {"BLOCK": 512} and up.candidate.source == RELU
    assert set(up.families) <= set(FAMILIES) and "occupancy" in up.families
    assert (
        '-    "BLOCK": 256' in up.diff
        and '+    "BLOCK": 512' in up.diff
        and up.diff.startswith("--- a/plan.json")
    )
    assert "more warps per block" in up.rationale


@pytest.mark.parametrize(("value", "expected"), [(1024, {512}), (32, {64})])
def test_a_block_size_stays_between_one_warp_and_1024_threads(value, expected):
    assert {to for _, _, to in moves(propose(relu({"BLOCK": value})))} == expected


def test_unroll_and_vector_widths_stay_between_1_and_16():
    low = relu({"BLOCK": 256, "UNROLL": 1, "VEC": 16}, grid="cdiv(n, BLOCK * UNROLL * VEC)")
    assert moves(propose(low)) >= {("UNROLL", 1, 2), ("VEC", 16, 8)}
    assert not {m for m in moves(propose(low)) if m[2] in (0, 32)}


def test_a_tile_that_would_make_a_block_of_more_than_1024_threads_is_skipped():
    sgemm = tasks.get("sgemm")
    parent = Candidate.from_source_and_plan(sgemm.naive_source, sgemm.naive_plan)  # TILE 32: 1024 threads
    assert moves(propose(parent, task="sgemm")) == {("TILE", 32, 16)}


def test_a_tile_that_would_leave_less_than_a_warp_per_block_is_skipped():
    parent = relu({"TILE": 8}, grid="cdiv(n, TILE * TILE)", block="TILE * TILE")
    assert moves(propose(parent)) == {("TILE", 8, 16)}  # 4 x 4 = 16 threads is less than a warp


def test_a_neighbour_whose_plan_fails_at_some_size_is_skipped():
    # shared_bytes divides by (BLOCK - 128): at BLOCK = 128 the plan cannot be evaluated.
    parent = relu({"BLOCK": 256}, shared="4096 // (BLOCK - 128)")
    assert moves(propose(parent)) == {("BLOCK", 256, 512)}


def test_a_neighbour_over_the_shared_memory_limit_is_skipped():
    parent = relu({"BLOCK": 256}, shared="BLOCK * 512")  # 128 KiB at 256, 256 KiB at 512
    assert moves(propose(parent)) == {("BLOCK", 256, 128)}


def test_tunables_whose_names_say_nothing_about_size_are_left_alone():
    assert tunable_kind("SEED") is None and tunable_kind("BLOCK_M") is not None
    assert tunable_kind("TILE_SIZE") is not None and tunable_kind("ITEMS_PER_THREAD") is not None
    assert moves(propose(relu({"BLOCK": 256, "SEED": 4}))) == {("BLOCK", 256, 512), ("BLOCK", 256, 128)}


def test_every_tunable_neighbour_of_every_naive_kernel_passes_the_plan_check():
    for name in NAIVE_TASKS:
        task = tasks.get(name)
        proposals = propose(Candidate.from_source_and_plan(task.naive_source, task.naive_plan), task=name)
        assert proposals, name
        for proposal in proposals:
            check_plan(task, proposal.candidate, task.sizes)


# --- compile flags ----------------------------------------------------------------------------


def flags(proposals) -> list[str]:
    return [p.params["flag"] for p in proposals if p.source == "flags"]


def test_fast_math_is_proposed_only_when_the_tolerance_allows_it():
    assert flags(propose(relu({"BLOCK": 256}), fast_math=False)) == []
    (proposal,) = [p for p in propose(relu({"BLOCK": 256}), fast_math=True) if p.source == "flags"]
    assert proposal.candidate.compile_options == ("--use_fast_math",)
    assert proposal.families == ("fast_math",) and proposal.title == "--use_fast_math"
    assert '+    "--use_fast_math"' in proposal.diff


def test_fast_math_is_not_proposed_twice():
    parent = Candidate.from_dict({**relu({"BLOCK": 256}).to_dict(), "compile_options": ["--use_fast_math"]})
    assert flags(propose(parent, fast_math=True)) == []


def measured(registers: int, occupancy: float, spills: int = 0) -> Measurement:
    return Measurement(
        status="passed",
        registers=registers,
        spill_bytes=spills,
        time_ms=1.0,
        metrics={"achieved_occupancy_pct": occupancy},
    )


def test_a_register_cap_is_proposed_when_registers_limit_occupancy_and_nothing_spills():
    # 72 registers x 256 threads: 3 blocks (24 of 64 warps) per SM; at 64 registers 4 blocks fit.
    assert resident_warps(72, 256) == 24 and resident_warps(64, 256) == 32
    (proposal,) = [
        p for p in propose(relu({"BLOCK": 256}), measurement=measured(72, 30.0)) if p.source == "flags"
    ]
    assert proposal.params == {"flag": "--maxrregcount=64", "from": 72, "to": 64}
    assert proposal.candidate.compile_options == ("--maxrregcount=64",)
    assert "24 of its 64 warps" in proposal.rationale and "fits 32 warps" in proposal.rationale


@pytest.mark.parametrize(
    "measurement",
    [measured(72, 30.0, spills=16), measured(72, 80.0), measured(32, 30.0), None],
    ids=["spills", "occupancy-is-high", "registers-are-not-the-limit", "not-measured"],
)
def test_no_register_cap_without_evidence_that_registers_are_the_limit(measurement):
    assert flags(propose(relu({"BLOCK": 256}), measurement=measurement)) == []
    assert register_cap(measurement, 256) is None


def test_a_new_register_cap_replaces_an_old_one():
    parent = Candidate.from_dict({**relu({"BLOCK": 256}).to_dict(), "compile_options": ["--maxrregcount=96"]})
    (proposal,) = [p for p in propose(parent, measurement=measured(72, 30.0)) if p.source == "flags"]
    assert proposal.candidate.compile_options == ("--maxrregcount=64",)


def test_every_proposal_differs_from_its_parent_and_carries_its_plan_diff():
    parent = relu({"BLOCK": 256, "UNROLL": 2}, grid="cdiv(n, BLOCK * UNROLL)")
    proposals = propose(parent, fast_math=True, measurement=measured(72, 30.0))
    hashes = {p.candidate.content_hash() for p in proposals}
    assert parent.content_hash() not in hashes and len(hashes) == len(proposals) == 6
    for proposal in proposals:
        after = json.loads(json.dumps(proposal.candidate.plan_dict()))
        assert after != parent.plan_dict() and "+++ b/plan.json" in proposal.diff
