"""The timed runs' design, checked without a GPU: which runs are verified, how seeds are
derived, and what bounds a launch."""

import secrets
from collections import Counter
from math import comb

from profiling.harness import tasks
from profiling.harness.timing import input_seed, reservoir_slot, run_seed
from profiling.harness.worker import LAUNCH_MIN_S, LAUNCH_NAIVE_FACTOR, Session


def verified(runs: int, slots: int, rng) -> frozenset[int]:
    kept: list[int | None] = [None] * slots
    for i in range(runs):
        slot = reservoir_slot(rng, i, slots)
        if slot is not None:
            kept[slot] = i
    return frozenset(k for k in kept if k is not None)


def test_reservoir_sampling_verifies_a_uniform_choice_of_runs():
    rng = secrets.SystemRandom()
    seen = Counter()
    trials = 6000
    for _ in range(trials):
        chosen = verified(30, 8, rng)
        assert len(chosen) == 8
        seen.update(chosen)
    expected = trials * 8 / 30  # 1600 per run
    assert all(abs(seen[i] - expected) < 0.12 * expected for i in range(30)), seen


def test_a_kernel_skipping_half_the_runs_escapes_eight_checks_rarely():
    # docs/gate.md's argument: C(15, 8) / C(30, 8).
    assert comb(15, 8) / comb(30, 8) < 0.0012
    rng = secrets.SystemRandom()
    skipped = frozenset(range(0, 30, 2))
    escapes = sum(not (verified(30, 8, rng) & skipped) for _ in range(4000))
    assert escapes <= 20  # expected ~4.4


def test_runs_and_inputs_get_distinct_seeds():
    seeds = {run_seed(7, i) for i in range(33)}
    assert len(seeds) == 33 and run_seed(7, 3) == run_seed(7, 3)
    assert input_seed(5, 0) != input_seed(5, 1)


def session(task: str, sizes=None) -> Session:
    t = tasks.get(task)
    request = {"task": task, "candidate": {"source": t.naive_source, **t.naive_plan},
               "options": {"l1_sizes": sizes, "levels": ["L0", "L1"], "seeds": 1}}
    return Session(request, channel=None)


def test_a_launch_is_bounded_by_the_naive_kernel_scaled_to_the_sizes_run():
    topk = session("topk")
    assert topk.launch_bound_s(topk.task.sizes) == LAUNCH_NAIVE_FACTOR * topk.task.naive_ms / 1e3
    relu = session("relu")
    assert relu.launch_bound_s(relu.task.sizes) == LAUNCH_MIN_S
    smaller = {k: v // 2 for k, v in topk.task.sizes.items()}
    assert LAUNCH_MIN_S < topk.launch_bound_s(smaller) < topk.launch_bound_s(topk.task.sizes)


def test_the_fp32_floor_says_it_is_a_rate_for_fp32_accurate_results_not_the_fp32_cores():
    from profiling.harness.ceilings import H200, physics_floor_ms

    floor_ms, reason = physics_floor_ms(1e6, 137.4e9, "fp32", H200)  # sgemm 4096^3: compute-bound

    assert abs(floor_ms - 137.4e9 / (989.4e12 / 3) * 1e3) < 1e-9
    assert "329.8 TFLOP/s for fp32-accurate results, a third of the 16-bit tensor rate" in reason
    assert "for fp16" in physics_floor_ms(1e6, 137.4e9, "fp16", H200)[1]
