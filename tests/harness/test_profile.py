"""Reading Nsight Compute output recorded on the H200, and naming the bottleneck."""

from pathlib import Path

import pytest

from profiling.harness import profile

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ncu"


def test_it_reads_the_metrics_of_a_real_h200_profile():
    (relu,) = profile.parse_raw_csv((FIXTURES / "h200-relu-naive-raw.csv").read_text())
    m = relu.metrics
    assert relu.kernel == "relu"
    # 2**28 fp32 in and out: about 2.15 GB must cross DRAM.
    assert m["dram_read_bytes"] + m["dram_write_bytes"] == pytest.approx(2 * 2**30, rel=0.02)
    # One 32-byte sector per 8 floats, loads and stores alike.
    assert m["l1_global_load_sectors"] == 2**28 / 8
    assert m["l1_global_store_sectors"] == 2**28 / 8
    assert m["registers_per_thread"] == 16
    assert m["grid_size"] == 2**28 / 256 and m["block_size"] == 256
    assert 0 < m["sol_dram_pct"] <= 100 and 0 < m["achieved_occupancy_pct"] <= 100
    assert m["duration_ns"] > 0


def test_the_naive_relu_on_the_h200_is_latency_bound_with_dram_half_used():
    metrics = profile.aggregate(profile.parse_raw_csv((FIXTURES / "h200-relu-naive-raw.csv").read_text()))
    bottleneck, evidence = profile.classify(metrics)
    assert bottleneck == "latency"
    assert any("DRAM 55.2%" in line for line in evidence)


def test_several_launches_add_their_counts_and_weight_their_rates_by_time():
    a = profile.KernelProfile(
        "a", {"duration_ns": 300.0, "dram_read_bytes": 10.0, "sol_dram_pct": 90.0, "registers_per_thread": 32}
    )
    b = profile.KernelProfile(
        "b", {"duration_ns": 100.0, "dram_read_bytes": 5.0, "sol_dram_pct": 10.0, "registers_per_thread": 64}
    )
    merged = profile.aggregate([a, b])
    assert merged["duration_ns"] == 400 and merged["dram_read_bytes"] == 15
    assert merged["sol_dram_pct"] == pytest.approx(70.0)
    assert merged["registers_per_thread"] == 64


@pytest.mark.parametrize(
    "metrics, expected",
    [
        (
            {"sol_sm_pct": 20, "sol_memory_pct": 85, "sol_dram_pct": 85, "achieved_occupancy_pct": 80},
            "memory",
        ),
        (
            {"sol_sm_pct": 88, "sol_memory_pct": 30, "sol_dram_pct": 5, "achieved_occupancy_pct": 50},
            "compute",
        ),
        (
            {"sol_sm_pct": 20, "sol_memory_pct": 25, "sol_dram_pct": 20, "achieved_occupancy_pct": 12},
            "occupancy",
        ),
        (
            {"sol_sm_pct": 20, "sol_memory_pct": 25, "sol_dram_pct": 20, "achieved_occupancy_pct": 70},
            "latency",
        ),
    ],
)
def test_the_bottleneck_follows_the_busier_unit_then_occupancy(metrics, expected):
    bottleneck, evidence = profile.classify(metrics)
    assert bottleneck == expected
    assert evidence and all(isinstance(line, str) for line in evidence)


def test_a_csv_without_kernel_rows_is_an_error_not_an_empty_profile():
    with pytest.raises(ValueError):
        profile.parse_raw_csv("==PROF== nothing profiled\n")


def test_units_are_normalised_to_bytes_and_nanoseconds():
    text = (
        '"ID","Kernel Name","dram__bytes_read.sum","gpu__time_duration.sum"\n'
        '"","","Mbyte","usecond"\n'
        '"0","k","1.5","2.25"\n'
    )
    (k,) = profile.parse_raw_csv(text)
    assert k.metrics["dram_read_bytes"] == 1.5e6 and k.metrics["duration_ns"] == 2250


# What ncu's counters said of each naive kernel on the H200 (bench/results/2026-11-29-*):
# one thread per row starves softmax-like tasks of warps; the tiled ones are busy units.
RECORDED_BOTTLENECKS = {
    "relu": "latency", "reduce_sum": "latency", "softmax": "occupancy", "layernorm": "occupancy",
    "cross_entropy": "occupancy", "topk": "occupancy", "maxpool3d": "compute", "sgemm": "memory",
    "self_attention": "memory", "conv2d": "memory",
}


@pytest.mark.parametrize("task_name", sorted(RECORDED_BOTTLENECKS))
def test_every_recorded_h200_profile_parses_and_names_its_bottleneck(task_name):
    from profiling.harness import tasks

    task = tasks.get(task_name)
    kernels = profile.parse_raw_csv((FIXTURES / f"h200-{task_name}-naive-raw.csv").read_text())
    launched = [launch["kernel"] for launch in task.naive_plan["launches"]]
    assert [k.kernel for k in kernels] == launched  # the kernel filter kept the plan's launches only
    metrics = profile.aggregate(kernels)
    # Counters can fall short of the compulsory traffic (writes still in the L2 when the
    # kernel ends) but not by half; re-reads make them exceed it.
    assert metrics["dram_bytes"] > 0.5 * task.bytes(task.sizes)
    assert metrics["instructions_executed"] > 0 and metrics["duration_ns"] > 0
    bottleneck, evidence = profile.classify(metrics)
    assert bottleneck == RECORDED_BOTTLENECKS[task_name], evidence


PROBE = Path(__file__).parents[2] / "bench" / "results" / "2026-12-03-h200-ncu-roofline.json"


def probed_names() -> set[str]:
    """The counter names the probe found on the H200's ncu."""
    import json

    return {name for name, exists in json.loads(PROBE.read_text())["exists"].items() if exists}


def probe_csv(kernels: list[str]) -> str:
    """A raw ncu CSV (header, units, one row a kernel) holding what the H200's ncu read
    for bench/ncu_roofline_probe.py's kernels (bench/results/2026-12-03-h200-ncu-roofline.json)."""
    import csv
    import io
    import json

    probe = json.loads(PROBE.read_text())["profile"]["kernels"]
    names = list(probe[kernels[0]])
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(["Kernel Name", *names])
    writer.writerow(["", *(probe[kernels[0]][n]["unit"] for n in names)])
    for kernel in kernels:
        writer.writerow([kernel, *(probe[kernel][n]["value"] for n in names)])
    return out.getvalue()


def test_the_hierarchical_roofline_has_the_h200s_own_ceilings():
    """Every counter the profile asks for exists there, and the ceilings it reads are
    the H200's: L1 132 SMs x 512 B a cycle at 1.98 GHz, L2, DRAM at the datasheet's 4.8
    TB/s, FP32 132 x 128 FMA lanes at 1.98 GHz (GPU.md's 66.9 TFLOP/s)."""
    (fma,) = profile.parse_raw_csv(probe_csv(["probe_fma"]))
    assert set(profile.METRICS) - probed_names() == {
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "smsp__inst_executed.sum", "launch__registers_per_thread",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
        "launch__grid_size", "launch__block_size",
    }  # the rest: the fixtures above, recorded there on 2026-11-29
    roof = profile.hierarchical_roofline(profile.aggregate([fma]))
    ceilings = {level["level"]: level["ceiling_bytes_per_s"] for level in roof["levels"]}
    assert ceilings["L1"] == pytest.approx(132 * 512 * 1.98e9, rel=0.01)
    assert ceilings["L2"] == pytest.approx(15.4e12, rel=0.01)
    assert ceilings["DRAM"] == pytest.approx(4.8e12, rel=0.01)
    assert roof["fp32_flops_per_s"] == pytest.approx(66.9e12, rel=0.01)
    # The FMA chain: compute-bound, most of the FP32 peak, far right of every ridge.
    assert 0.7 * roof["fp32_flops_per_s"] < roof["achieved_flops_per_s"] < roof["fp32_flops_per_s"]
    assert all(level["intensity"] > 1000 for level in roof["levels"])


def test_a_copy_moves_bytes_through_every_level_and_does_no_flop():
    (copy,) = profile.parse_raw_csv(probe_csv(["probe_copy"]))
    roof = profile.hierarchical_roofline(profile.aggregate([copy]))
    moved = {level["level"]: level["bytes"] for level in roof["levels"]}
    assert moved["L1"] == pytest.approx(2 * 2**30, rel=0.01)  # 1 GiB read, 1 GiB written
    assert moved["DRAM"] == pytest.approx(2 * 2**30, rel=0.02)
    assert roof["flops"] == 0 and all(level["intensity"] is None for level in roof["levels"])
    dram = next(level for level in roof["levels"] if level["level"] == "DRAM")
    assert 0.7 * dram["ceiling_bytes_per_s"] < dram["achieved_bytes_per_s"] < dram["ceiling_bytes_per_s"]


def test_a_profile_without_these_counters_has_no_hierarchical_roofline():
    metrics = profile.aggregate(profile.parse_raw_csv((FIXTURES / "h200-relu-naive-raw.csv").read_text()))
    assert profile.hierarchical_roofline(metrics) is None

