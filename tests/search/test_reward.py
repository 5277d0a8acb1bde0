"""The composite reward: log-speedup, proxy gains weighted by the parent's bottleneck, guardrails."""

from __future__ import annotations

import math

import pytest

from search.engine.reward import PROXY_WEIGHTS, Guardrails, metric_gains, ratios, reward
from search.engine.types import Measurement


def measured(time_ms: float = 1.0, bottleneck: str = "memory", registers: int = 32,
             spill_bytes: int = 0, **metrics: float) -> Measurement:
    return Measurement(status="passed", time_ms=time_ms, spread_ms=0.001, metrics=metrics,
                       bottleneck=bottleneck, registers=registers, spill_bytes=spill_bytes)


def test_halving_the_time_earns_ln_2():
    value, terms = reward(measured(2.0), measured(1.0))

    assert value == pytest.approx(math.log(2))
    assert terms == {"log_speedup": pytest.approx(math.log(2))}


def test_the_terms_add_up_to_the_reward():
    parent = measured(1.0, dram_bytes=2e9, sol_dram_pct=50.0, l1_global_load_sectors=4e7)
    child = measured(0.8, dram_bytes=1e9, sol_dram_pct=80.0, l1_global_load_sectors=2e7)

    value, terms = reward(parent, child)

    assert value == pytest.approx(sum(terms.values()))
    assert set(terms) == {"log_speedup", "dram_bytes", "sol_dram_pct", "l1_sectors"}


def test_a_memory_bound_parent_rewards_less_dram_traffic_more_than_a_compute_bound_one():
    memory = reward(measured(1.0, "memory", dram_bytes=2e9), measured(1.0, "memory", dram_bytes=1e9))
    compute = reward(measured(1.0, "compute", dram_bytes=2e9), measured(1.0, "compute", dram_bytes=1e9))

    assert memory[1]["dram_bytes"] == pytest.approx(PROXY_WEIGHTS["memory"]["dram_bytes"] * math.log(2))
    assert compute[1]["dram_bytes"] == pytest.approx(PROXY_WEIGHTS["compute"]["dram_bytes"] * math.log(2))
    assert memory[0] > compute[0] > 0


def test_a_compute_bound_parent_rewards_fewer_instructions_and_more_sm_throughput():
    parent = measured(1.0, "compute", instructions_executed=4e8, sol_sm_pct=60.0)
    child = measured(1.0, "compute", instructions_executed=2e8, sol_sm_pct=80.0)

    _, compute_terms = reward(parent, child)
    _, memory_terms = reward(measured(1.0, "memory", instructions_executed=4e8, sol_sm_pct=60.0),
                             measured(1.0, "memory", instructions_executed=2e8, sol_sm_pct=80.0))

    assert compute_terms["instructions_executed"] == pytest.approx(0.15 * math.log(2))
    assert compute_terms["sol_sm_pct"] == pytest.approx(0.10 * 0.20)
    assert "instructions_executed" not in memory_terms and "sol_sm_pct" not in memory_terms


def test_sol_percentages_gain_by_points_over_a_hundred():
    gains = metric_gains({"sol_dram_pct": 55.0}, {"sol_dram_pct": 85.0})

    assert gains == {"sol_dram_pct": pytest.approx(0.30)}


def test_l1_sectors_count_loads_and_stores_together():
    gains = metric_gains({"l1_global_load_sectors": 3.0, "l1_global_store_sectors": 1.0},
                         {"l1_global_load_sectors": 1.0, "l1_global_store_sectors": 1.0})

    assert gains["l1_sectors"] == pytest.approx(math.log(2))


def test_an_unknown_bottleneck_uses_the_balanced_weights():
    _, terms = reward(measured(1.0, "strange", dram_bytes=2e9), measured(1.0, "strange", dram_bytes=1e9))

    assert terms["dram_bytes"] == pytest.approx(PROXY_WEIGHTS["unknown"]["dram_bytes"] * math.log(2))


def test_a_proxy_gain_never_outweighs_a_real_slowdown():
    parent = measured(1.0, "memory", dram_bytes=2e9, l1_global_load_sectors=4e7, sol_dram_pct=40.0)
    child = measured(1.5, "memory", dram_bytes=1e9, l1_global_load_sectors=2e7, sol_dram_pct=60.0)

    assert reward(parent, child)[0] < 0


@pytest.mark.parametrize(("after", "penalised"), [(38, False), (40, False), (41, True), (64, True)])
def test_registers_growing_past_a_quarter_cost_a_penalty(after, penalised):
    _, terms = reward(measured(1.0, registers=32), measured(1.0, registers=after))

    assert ("registers_grew" in terms) is penalised
    if penalised:
        assert terms["registers_grew"] == -Guardrails().register_penalty


def test_spills_that_appear_or_grow_cost_a_penalty():
    appeared = reward(measured(1.0), measured(0.9, spill_bytes=64))[1]
    grew = reward(measured(1.0, spill_bytes=64), measured(0.9, spill_bytes=128))[1]
    shrank = reward(measured(1.0, spill_bytes=128), measured(0.9, spill_bytes=64))[1]

    assert appeared["spills"] == grew["spills"] == -Guardrails().spill_penalty
    assert "spills" not in shrank


def test_occupancy_falling_below_half_the_parents_is_a_collapse():
    collapsed = reward(measured(1.0, achieved_occupancy_pct=70.0),
                       measured(1.0, achieved_occupancy_pct=30.0))[1]
    lowered = reward(measured(1.0, achieved_occupancy_pct=70.0),
                     measured(1.0, achieved_occupancy_pct=40.0))[1]

    assert collapsed["occupancy_collapse"] == -Guardrails().occupancy_penalty
    assert "occupancy_collapse" not in lowered


@pytest.mark.parametrize(("status", "guard", "term", "expected"), [
    ("rejected", "compile", "compile_failure", -0.3),
    ("rejected", "source_policy", "compile_failure", -0.3),
    ("rejected", "wrong_values", "rejected", -0.5),
    ("rejected", "timeout", "rejected", -0.5),
    ("error", None, "error", -0.1),
])
def test_a_failed_child_gets_a_fixed_negative_reward(status, guard, term, expected):
    child = Measurement(status=status, guard=guard, message="no")

    value, terms = reward(measured(1.0), child)

    assert value == expected and terms == {term: expected}
    assert value == getattr(Guardrails(), term)


def test_a_wrong_kernel_costs_more_than_one_that_did_not_build_or_could_not_be_measured():
    rails = Guardrails()

    assert rails.rejected < rails.compile_failure < rails.error < 0


def test_guardrail_constants_are_keyword_arguments():
    strict = Guardrails(compile_failure=-3.0, register_growth=0.0, register_penalty=1.0)

    assert reward(measured(1.0), Measurement(status="rejected", guard="compile"),
                  guardrails=strict)[0] == -3.0
    assert reward(measured(1.0, registers=32), measured(1.0, registers=33),
                  guardrails=strict)[1]["registers_grew"] == -1.0


def test_ratios_are_after_over_before_for_time_registers_and_metrics():
    before = measured(2.0, registers=20, dram_bytes=4e9, block_size=256.0)
    after = measured(1.0, registers=30, dram_bytes=1e9, block_size=512.0)

    assert ratios(before, after) == {"time": 0.5, "registers": 1.5, "dram_bytes": 0.25}
    assert ratios(before, Measurement(status="rejected")) == {}
