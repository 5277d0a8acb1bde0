"""The hardened gate on a real GPU: each kernel under exploits/ was written to get past one
check, each test names the guard that must stop it, and the honest kernels of the suite
must still pass with every guard on.

Sizes are reduced (L1 overrides) to keep the file to a few minutes on an H200; the
timing tests keep the standard 30 timed runs and 8 verified ones, because those numbers
are what they test. The timing cheats stay honest at L0 sizes and under every
correctness check, and the sanitizer bugs give right answers (all measured on the H200),
so each test also asserts that the checks it is not about passed: only the guard it
names could have caught the kernel.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.ceilings import ceilings_for, physics_floor_ms
from profiling.harness.gate import GateOptions, evaluate, gpu_name, harness_cubin
from profiling.harness.screen import Screener, ScreenOptions
from profiling.harness.verdict import Verdict

pytestmark = pytest.mark.gpu

EXPLOITS = Path(__file__).with_name("exploits")
FIXTURES = Path(__file__).parents[1] / "fixtures"
STANDARD = GateOptions()
# How many full-size calls the gate makes before the timed runs: one per L1 seed. The
# kernels that count their calls stay honest this long (their plans pass the number).
L1_CHECKS = STANDARD.seeds
# ... and how many it makes up to the last timed run (warm-ups included).
CALLS_THROUGH_TIMING = L1_CHECKS + STANDARD.warmup_runs + STANDARD.timing_runs

# Honest block-per-row softmax here: 0.052 ms on the H200, physics floor 0.028 ms.
SOFTMAX = {"M": 2048, "N": 8192}
RELU = {"n": 1 << 24}  # the counting cheats switch on at n >= 2**20
SMALL_RELU = {"n": 1 << 22}  # fits timing_stale.cu's 2**22-element buffer
SMALL_SUM = {"n": 1 << 22}

H200_DENSE_FP16_FLOPS = 989.4e12  # NVIDIA H200 SXM datasheet, dense (no sparsity)


def exploit(task_name: str, name: str, plan: dict | None = None) -> Candidate:
    source = (EXPLOITS / name).read_text()
    return Candidate.from_source_and_plan(source, plan or tasks.get(task_name).naive_plan)


def judge(task_name: str, candidate: Candidate, sizes: dict, **options) -> Verdict:
    settings = {"profile": False, "l1_sizes": sizes, **options}
    return evaluate(task_name, candidate, GateOptions(**settings))


def assert_caught(verdict: Verdict, *guards: str) -> None:
    assert verdict.status == "rejected", f"{verdict.status}: {verdict.message}"
    assert verdict.guard in guards, f"caught by {verdict.guard}, not {guards}: {verdict.message}"


def assert_checks_passed(verdict: Verdict) -> None:
    """Every correctness check ran and passed: the kernel was honest whenever checked."""
    assert verdict.correctness and all(r.passed for r in verdict.correctness), \
        [(r.level, r.sizes, r.guard, r.detail) for r in verdict.correctness if not r.passed]


def assert_plausible_time(verdict: Verdict) -> None:
    """The median was above the physics floor: the floor cannot have been what caught it."""
    timing = verdict.timing
    assert timing is not None and timing.median_ms >= timing.floor_ms, timing


def one_thread(kernel: str, args: list) -> dict:
    return {"kernel": kernel, "grid": [1], "block": [1], "args": args}


def grid_stride_relu(args: list) -> dict:
    return {"kernel": "relu", "grid": [1024], "block": [256], "args": args}


def relu_launch(args: list) -> dict:
    return {"kernel": "relu", "grid": ["cdiv(n, 256)"], "block": [256], "args": args}


def block_sum_plan() -> dict:
    return {"launches": [one_thread("zero_output", ["y"]),
                         {"kernel": "block_sum", "grid": ["cdiv(n, 256)"], "block": [256],
                          "args": ["x", "y", "n"]}]}


# -- 1. timing cheats: every timed run looks the same to the kernel -------------------------

GAP_PLAN = {"launches": [
    one_thread("gap_decide", ["M", "N"]),
    {"kernel": "softmax_rows", "grid": ["M"], "block": [256], "args": ["x", "y", "M", "N"]},
]}


def test_a_softmax_that_cheats_only_after_a_short_pause_is_caught_by_the_verified_runs():
    verdict = judge("softmax", exploit("softmax", "timing_gap.cu", GAP_PLAN), SOFTMAX,
                    timing_runs=30)

    assert_caught(verdict, "timed_output")
    assert_checks_passed(verdict)
    assert_plausible_time(verdict)
    assert verdict.timing.spot_checks == STANDARD.spot_checks


def test_a_kernel_replaying_a_stale_result_is_caught_by_the_verified_runs():
    plan = {"launches": [one_thread("gap_decide", ["n"]), grid_stride_relu(["x", "y", "n"]),
                         one_thread("mark_stash", ["n"])]}
    verdict = judge("relu", exploit("relu", "timing_stale.cu", plan), SMALL_RELU, timing_runs=30)

    assert_caught(verdict, "timed_output")
    assert_checks_passed(verdict)
    assert_plausible_time(verdict)


def alternating(spot_checks: int) -> Verdict:
    plan = {"launches": [one_thread("count_and_decide", ["n", f"i32:{L1_CHECKS}"]),
                         grid_stride_relu(["x", "y", "n", "i64:60000"])]}
    return judge("relu", exploit("relu", "timing_alternate.cu", plan), RELU, timing_runs=30,
                 spot_checks=spot_checks)


def test_a_kernel_skipping_every_other_run_is_caught_by_the_poison_it_leaves():
    verdict = alternating(STANDARD.spot_checks)

    assert_caught(verdict, "timed_output")
    assert "unwritten" in verdict.message
    assert_checks_passed(verdict)
    assert_plausible_time(verdict)  # its skipped runs wait as long as an honest one


def test_the_poison_left_by_skipped_runs_is_counted_in_every_run_not_only_the_verified():
    verdict = alternating(spot_checks=0)  # nothing verified: the count must do the work

    assert_caught(verdict, "timed_output")
    assert "unwritten" in verdict.message


def after_k(honest_calls: int, mode: int) -> Candidate:
    plan = {"launches": [one_thread("count_calls", ["n", f"i32:{honest_calls}"]),
                         grid_stride_relu(["x", "y", "n", f"i32:{mode}"])]}
    return exploit("relu", "timing_after_k.cu", plan)


def test_a_kernel_that_stops_working_after_the_correctness_checks_is_rejected():
    verdict = judge("relu", after_k(L1_CHECKS, mode=0), RELU, timing_runs=30)

    # Every timed run takes no time: the floor or the poison count, whichever looks first.
    assert_caught(verdict, "timed_output", "physics_floor")
    assert_checks_passed(verdict)


def test_a_kernel_that_stops_working_only_after_the_timed_runs_is_caught_by_the_check_after_them():
    # Honest through the last timed run (so the poison count and every verified run
    # pass), then it copies x to y: a plausible time, every element written.
    verdict = judge("relu", after_k(CALLS_THROUGH_TIMING, mode=1), RELU, timing_runs=30)

    assert_caught(verdict, "timed_output")
    assert_checks_passed(verdict)
    assert_plausible_time(verdict)


def test_a_kernel_skipping_runs_at_random_is_rejected():
    plan = {"launches": [one_thread("draw", ["n", f"i32:{L1_CHECKS}"]),
                         grid_stride_relu(["x", "y", "n"])]}
    verdict = judge("relu", exploit("relu", "timing_random.cu", plan), RELU, timing_runs=30)

    # About 18 of 30 runs skip: the median is impossible and the skipped runs unwritten.
    assert_caught(verdict, "timed_output", "physics_floor")
    assert_checks_passed(verdict)


# -- 2. a slow but correct kernel is stopped by the bound on one launch ----------------------

@pytest.mark.parametrize("spin_from_n", [0, 1 << 20], ids=["every_launch", "full_size_only"])
def test_a_kernel_that_spins_for_30_s_a_launch_is_stopped_within_seconds(spin_from_n):
    plan = {"launches": [relu_launch(["x", "y", "n", f"i32:{spin_from_n}"])]}
    verdict = judge("relu", exploit("relu", "slow_correct.cu", plan), SMALL_RELU, timing_runs=5)

    assert_caught(verdict, "timeout")
    # Under the default 600 s time limit: the bound on one launch is max(2 s, 50x the
    # naive relu's 0.81 ms scaled to these sizes) = 2 s; compile, process start and the
    # L0 checks come on top.
    assert verdict.seconds < 60, verdict.seconds
    if spin_from_n:  # right at every small size: stopped at its first full-size launch
        assert verdict.stage.startswith("correctness L1"), verdict.stage


# -- 3. a printf flood does not fill the disk or hang the gate -------------------------------

def test_a_kernel_printing_from_every_thread_gets_a_verdict_and_a_bounded_log(tmp_path):
    verdict = judge("relu", exploit("relu", "printf_flood.cu"), {"n": 1 << 20}, seeds=2,
                    timing_runs=5, workdir=str(tmp_path), time_limit_s=120)

    assert verdict.status in ("passed", "rejected"), verdict.message
    assert verdict.guard not in ("internal", "crash"), verdict.message
    assert verdict.seconds < 120, "the whole time limit ran out: the flood looked like a hang"
    log = tmp_path / "worker.log"
    assert log.stat().st_size <= 1.1 * 2**20, log.stat().st_size
    with open(log, "rb") as file:  # the flood passed the cap, so the log says so at its end
        file.seek(max(0, log.stat().st_size - 4096))
        assert b"dropped" in file.read()
    for other in [*tmp_path.glob("*.log"), *tmp_path.glob("*.out")]:
        assert other.stat().st_size <= 1.1 * 2**20, (other.name, other.stat().st_size)


# -- 4. bugs that give the right answer, caught by compute-sanitizer at L0 -------------------

SANITIZED = [
    # (task, exploit, plan, guard)
    ("reduce_sum", "race_warp_tail.cu", block_sum_plan(), "race"),
    ("reduce_sum", "race_cross_warp.cu", block_sum_plan(), "race"),
    ("relu", "uninit_heap.cu", {"launches": [relu_launch(["x", "y", "n"])]}, "uninitialized_read"),
    # Caught only if the sanitize run leaves outputs and scratch as allocated: initcheck
    # counts the poison memset as a write (measured), so this reads "initialised" memory.
    ("relu", "uninit_output.cu", {"launches": [relu_launch(["x", "y", "n"])]}, "uninitialized_read"),
    ("relu", "oob_read.cu", {"launches": [{"kernel": "relu", "grid": ["cdiv(n, 1024)"],
                                            "block": [256], "args": ["x", "y", "n"]}]},
     "out_of_bounds"),
    ("reduce_sum", "divergent_sync.cu", block_sum_plan(), "sync_error"),
]


@pytest.mark.parametrize(("task_name", "name", "plan", "guard"), SANITIZED,
                         ids=[case[1].removesuffix(".cu") for case in SANITIZED])
def test_a_bug_that_gives_the_right_answer_is_caught_by_its_sanitizer(task_name, name, plan, guard):
    sizes = SMALL_SUM if task_name == "reduce_sum" else SMALL_RELU
    verdict = judge(task_name, exploit(task_name, name, plan), sizes, timing_runs=5)

    assert_caught(verdict, guard)
    # Right at every size and seed, and timed: without the sanitizers it would have passed.
    assert_checks_passed(verdict)
    assert verdict.timing is not None


# -- 5. the screen's resident seeds are checked for corruption -------------------------------

@pytest.fixture(scope="module")
def gpu():
    """A CUDA context in this process, with the harness's kernels, for device-level tests."""
    from profiling.harness import device

    context = SimpleNamespace(gpu=device.Gpu())
    context.harness = device.cuda.module_from_file(harness_cubin())
    try:
        yield context
    finally:
        del context.harness
        gc.collect()  # the module and allocations go before their context is popped
        context.gpu.close()


def download(allocation, like: np.ndarray) -> np.ndarray:
    from profiling.harness import device

    out = np.empty_like(like)
    device.cuda.memcpy_dtoh(out, int(allocation))
    return out


def test_resident_seeds_name_the_seed_a_write_corrupted_and_upload_it_again(gpu):
    from profiling.harness import device

    seeds = device.ResidentSeeds()
    rng = np.random.default_rng(3)
    arrays = {}
    for key in (("relu", "seed", 1), ("relu", "seed", 2)):
        x = rng.standard_normal(1 << 20, dtype=np.float32)
        arrays[key] = ({"x": x}, {"y": np.maximum(x, np.float32(0))})
    try:
        held = {key: seeds.get(key, *pair, gpu.harness, gpu.gpu) for key, pair in arrays.items()}
        assert seeds.verify(gpu.harness, gpu.gpu) == []

        corrupted = ("relu", "seed", 1)
        device.cuda.memset_d8(int(held[corrupted].reference["y"]) + 4096, 0x5A, 4)  # one word

        assert not seeds.intact(held[corrupted], gpu.harness, gpu.gpu)
        assert seeds.intact(held[("relu", "seed", 2)], gpu.harness, gpu.gpu)
        assert seeds.verify(gpu.harness, gpu.gpu) == [corrupted]
        inputs, reference = arrays[corrupted]
        rebuilt = seeds.get(corrupted, inputs, reference, gpu.harness, gpu.gpu)
        assert np.array_equal(download(rebuilt.inputs["x"], inputs["x"]), inputs["x"])
        assert np.array_equal(download(rebuilt.reference["y"], reference["y"]), reference["y"])
        assert seeds.verify(gpu.harness, gpu.gpu) == []
    finally:
        seeds.clear()


# (offset, span) of the scribble, from the start of the allocation of the candidate's upper
# buffer. "aimed": where a bare pycuda process put the seed's reference on the H200 (32 MB
# up); "wide": 256 MB either side. On the H200 both reach unmapped memory and fault, so
# the worker is replaced; the seeds' checksums are tested directly above.
SCRIBBLES = {"aimed": (32 << 20, 16 << 20), "wide": (-(256 << 20), 512 << 20)}


@pytest.mark.parametrize("scribble", SCRIBBLES, ids=list(SCRIBBLES))
def test_a_wild_writer_in_the_screen_cannot_spoil_the_next_candidates_check(tmp_path, scribble):
    offset, span = SCRIBBLES[scribble]
    relu = tasks.get("relu")
    honest = Candidate.from_source_and_plan(relu.naive_source, relu.naive_plan)
    wild = exploit("relu", "scribbler.cu",
                   {"launches": [relu_launch(["x", "y", "n", f"i64:{offset}", f"i64:{span}"])]})
    options = ScreenOptions(l1_sizes=SMALL_RELU, seed=13, input_cache=str(tmp_path / "inputs"),
                            workdir=str(tmp_path), time_limit_s=60)
    with Screener(options) as screener:
        first = screener.screen("relu", honest)  # puts the L1 seed on the GPU
        scribbled = screener.screen("relu", wild)  # writes around its buffers, near the seed
        after = screener.screen("relu", honest)

    assert first.status == "passed", first.message
    # Faulting on unmapped memory (a guard region, or a gap between allocations) is
    # `out_of_bounds_access` (the worker is replaced); corrupting a seed without faulting
    # is `out_of_bounds_write` (found by the seeds' checksums).
    if scribbled.status != "passed":
        assert_caught(scribbled, "out_of_bounds_access", "out_of_bounds_write")
    assert after.status == "passed", f"after {scribbled.guard}: {after.message}"
    [full_size] = [r for r in after.correctness if r.level == "L1"]
    assert full_size.passed and full_size.max_abs_error == 0.0


# -- 6. a kernel's parameter sizes are checked against the plan, before the GPU ---------------

def test_a_long_parameter_given_a_32_bit_argument_is_refused_before_anything_runs():
    verdict = judge("relu", exploit("relu", "long_n.cu"), SMALL_RELU, timing_runs=5)

    assert_caught(verdict, "plan")
    assert "'i64:n'" in verdict.message
    assert not verdict.correctness and verdict.timing is None


# -- 7. the physics floor: measured ceilings, and fp32 on tensor cores -----------------------

def on_an_h200() -> None:
    if "H200" not in (gpu_name() or ""):
        pytest.skip(f"the expected numbers are the H200's; this is {gpu_name()}")


def test_measured_ceilings_are_near_the_h200s_copy_bandwidth_and_fma_rate(gpu):
    from profiling.harness import device

    on_an_h200()
    copy_bytes_per_s, fma_flops_per_s = device.measure_ceilings(gpu.harness, gpu.gpu)

    # GPU.md: a 4 GiB device copy moves 4.25 TB/s (read + write), under the 4.8 TB/s peak;
    # 132 SMs x 128 lanes x 2 flops x 1.98 GHz = 66.9 TFLOP/s (datasheet: 67).
    assert 3.0e12 <= copy_bytes_per_s <= 4.8e12, copy_bytes_per_s
    assert 30e12 <= fma_flops_per_s <= 70e12, fma_flops_per_s


def test_measured_ceilings_are_kept_per_gpu_and_driver(gpu, tmp_path, monkeypatch):
    from profiling.harness import device, measure

    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path))
    first = measure.measured_ceilings(gpu.gpu, gpu.harness)
    cached = json.loads(measure.cache_path().read_text())

    [key] = cached
    assert gpu.gpu.name in key and gpu.gpu.environment()["driver_api"] in key
    monkeypatch.setattr(device, "measure_ceilings", lambda *a: pytest.fail("measured again"))
    assert measure.measured_ceilings(gpu.gpu, gpu.harness) == first
    assert first.dram_bytes_per_s >= cached[key]["copy_bytes_per_s"]  # a margin above, never below


def test_the_fp32_floor_of_sgemm_uses_a_third_of_the_dense_16_bit_tensor_peak():
    on_an_h200()
    sgemm = tasks.get("sgemm")
    flops, moved = sgemm.flops(sgemm.sizes), sgemm.bytes(sgemm.sizes)

    floor_ms, reason = physics_floor_ms(moved, flops, sgemm.math, ceilings_for(gpu_name()))

    # An fp32-accurate product needs three lower-precision ones (3xTF32, or FP16 with error
    # correction): 989.4 / 3 = 330 TFLOP/s, so 4096^3 cannot take less than 0.42 ms (the
    # memory floor is 0.04 ms).
    assert floor_ms == pytest.approx(flops / (H200_DENSE_FP16_FLOPS / 3) * 1e3, rel=0.01)
    assert "TFLOP" in reason


# -- 8. honest kernels pass every guard ------------------------------------------------------

# The suite's sizes, reduced where the naive kernel or the host reference would be slow.
REDUCED = {
    "relu": {"n": 1 << 22},
    "reduce_sum": {"n": 1 << 22},
    "softmax": {"M": 512, "N": 8192},
    "layernorm": {"M": 1024, "N": 4096},
    "cross_entropy": {"B": 1024, "C": 32000},
    "maxpool3d": {"N": 2, "C": 32, "D": 64, "H": 64, "W": 64},
    "sgemm": {"M": 1024, "N": 1024, "K": 1024},
    "self_attention": {"B": 2, "H": 4, "S": 512, "D": 64},
    "conv2d": {"N": 4, "C": 64, "H": 56, "W": 56, "K": 128},
    "topk": {"M": 512, "N": 4096, "k": 64},
}


def fixture_kernel(source_prefix: str) -> Candidate:
    recorded = json.loads((FIXTURES / "recorded" / "schema-h200.json").read_text())["recorded"]
    [entry] = [r for r in recorded if r["candidate"]["source"].startswith(source_prefix)]
    return Candidate.from_source_and_plan(entry["candidate"]["source"], entry["candidate"]["plan"])


# Faster kernels, as a search finds them or a person writes them: label -> (task, maker).
FASTER = {
    "relu_grid_stride_fixture": ("relu", lambda: fixture_kernel("// ReLU, grid-stride")),
    "relu_float4": ("relu", lambda: exploit("relu", "honest_relu_float4.cu", {"launches": [
        {"kernel": "relu_float4", "grid": ["min(cdiv(n, 1024), 4096)"], "block": [256],
         "args": ["x", "y", "n"]}]})),
    "reduce_shuffle": ("reduce_sum", lambda: exploit("reduce_sum", "honest_reduce_shuffle.cu", {
        "launches": [one_thread("zero_output", ["y"]),
                     {"kernel": "block_sum", "grid": ["min(cdiv(n, 256), 1056)"], "block": [256],
                      "args": ["x", "y", "n"]}]})),
    "softmax_block_per_row": ("softmax", lambda: exploit("softmax", "honest_softmax_block.cu", {
        "launches": [{"kernel": "softmax_rows", "grid": ["M"], "block": [256],
                      "args": ["x", "y", "M", "N"]}]})),
}


def honest(task_name: str, label: str) -> Candidate:
    if label in FASTER:
        return FASTER[label][1]()
    task = tasks.get(task_name)
    return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)


HONEST = [(name, f"naive_{name}") for name in REDUCED] + [(t, label) for label, (t, _) in FASTER.items()]


@pytest.mark.parametrize(("task_name", "label"), HONEST, ids=[label for _, label in HONEST])
def test_an_honest_kernel_passes_every_guard_of_the_hardened_gate(task_name, label):
    candidate = honest(task_name, label)
    # Two seeds (both input distributions), the standard timing, every sanitizer.
    verdict = judge(task_name, candidate, REDUCED[task_name], seeds=2)

    assert verdict.status == "passed", f"{verdict.guard}: {verdict.message}"
    # Every tool ran (a host without compute-sanitizer would pass kernels unexamined).
    assert verdict.settings.get("sanitize") == sorted(STANDARD.sanitize), verdict.settings
    assert verdict.stage_seconds.get("sanitize", 0) > 0, verdict.stage_seconds
    # ... started while the worker verified its timed runs (gate._EarlySanitizers)
    assert verdict.stage_seconds.get("sanitize_overlapped") == 1.0, verdict.stage_seconds
    assert verdict.timing.spot_checks == STANDARD.spot_checks
    assert verdict.timing.median_ms >= verdict.timing.floor_ms > 0


# -- references on the GPU (gpuref.py): as sound as the host's, and cheaper -----------------

ATTENTION = {"B": 2, "H": 8, "S": 512, "D": 64}  # B * H = 16: the cheat counts these calls


def test_a_kernel_cheating_only_while_timed_is_caught_by_runs_verified_against_gpu_references():
    naive = tasks.get("self_attention").naive_plan
    plan = {**naive, "launches": [
        one_thread("count_calls", ["B * H", f"i32:{L1_CHECKS}", f"i32:{CALLS_THROUGH_TIMING}"]),
        *naive["launches"]]}
    verdict = judge("self_attention", exploit("self_attention", "attention_half_while_timed.cu", plan),
                    ATTENTION, timing_runs=30)

    assert_caught(verdict, "timed_output")
    assert "timed run" in verdict.message  # a verified run, not the check after the loop
    assert_checks_passed(verdict)
    assert_plausible_time(verdict)
    assert verdict.environment.references.startswith("gpu (torch "), verdict.environment.references


def test_gpu_references_pass_an_honest_kernel_after_agreeing_with_the_host():
    naive = tasks.get("self_attention")
    candidate = Candidate.from_source_and_plan(naive.naive_source, naive.naive_plan)
    on = judge("self_attention", candidate, ATTENTION, sanitize=())
    off = judge("self_attention", candidate, ATTENTION, sanitize=(), gpu_references=False)

    assert on.status == "passed" and off.status == "passed", (on.message, off.message)
    assert on.environment.references.startswith("gpu (torch "), on.environment.references
    assert "L1" in on.environment.references
    assert off.environment.references == ""
    assert on.timing.spot_checks == off.timing.spot_checks == STANDARD.spot_checks


# -- L1 inputs generated on the GPU (inputs.generated_on_gpu) --------------------------------

@pytest.mark.parametrize("distribution", ["normal", "heavy_tailed", "uniform"])
def test_the_gpu_generator_draws_what_its_host_replay_draws(gpu, distribution):
    from profiling.harness import device
    from profiling.harness.inputs import GPU_DISTRIBUTIONS, gpu_like_values

    n, seed = 1 << 20, 0x1234_5678_9ABC
    buffer = device.Buffer("x", np.float32, (n,))
    try:
        gpu.harness.get_function("optiml_generate_f32")(
            np.uintp(buffer.ptr), np.uint64(n), np.uint64(seed), np.int32(GPU_DISTRIBUTIONS[distribution]),
            grid=(4096, 1, 1), block=(256, 1, 1), stream=gpu.gpu.stream)
        gpu.gpu.synchronize()
        drawn = buffer.download()
    finally:
        buffer.free()
    # The same integers; the GPU's logf/cospif/sqrtf against the host's float64 ones
    np.testing.assert_allclose(drawn, gpu_like_values(n, seed, distribution), rtol=1e-5, atol=1e-5)


def test_a_search_draws_its_l1_inputs_on_the_gpu_and_keeps_only_their_references(tmp_path):
    relu = tasks.get("relu")
    naive = Candidate.from_source_and_plan(relu.naive_source, relu.naive_plan)
    first = judge("relu", naive, RELU, sanitize=(), seed=7, input_cache=str(tmp_path))
    second = judge("relu", naive, RELU, sanitize=(), seed=7, input_cache=str(tmp_path))

    for verdict in (first, second):
        assert verdict.status == "passed", f"{verdict.guard}: {verdict.message}"
    seeds = STANDARD.seeds
    assert first.environment.inputs.startswith(f"gpu: {seeds} L1 seed(s) drawn on the GPU"), first.environment
    assert f"their references: {seeds} from the input cache;" in second.environment.inputs, \
        second.environment.inputs
    assert f"their references: {seeds} from the host;" in first.environment.inputs, first.environment.inputs
    l1 = [[(r.seed, r.distribution, r.max_abs_error) for r in v.correctness if r.level == "L1"]
          for v in (first, second)]
    assert len(l1[0]) == seeds and l1[0] == l1[1]  # the same draws, judged alike
    entries = [p for p in tmp_path.iterdir() if p.name.endswith("-gpu")]
    assert len(entries) == seeds and not any((e / "x.npy").exists() for e in entries)
    assert (first.stage_seconds.get("prepare_inputs", 1e9) < 5), first.stage_seconds  # L0 only


@pytest.mark.parametrize("cached", [False, True], ids=["read-back-before", "keyed-checksum"])
def test_an_l1_input_drawn_on_the_gpu_that_a_kernel_overwrites_is_caught(tmp_path, cached):
    relu = tasks.get("relu")
    if cached:  # a search's later candidate: the draws' references are cached, nothing is
        # read back before the launch, and the keyed checksum must see the change
        naive = Candidate.from_source_and_plan(relu.naive_source, relu.naive_plan)
        warm = judge("relu", naive, RELU, sanitize=(), timing_runs=0, seed=9, input_cache=str(tmp_path))
        assert warm.status == "passed", warm.message
    # Honest at L0; at L1 (n >= 2**20) it also writes its input: the guards compare the
    # draw with what is left after the launch, as they do with a host upload.
    verdict = judge("relu", exploit("relu", "mutates_inputs_at_scale.cu"), RELU, sanitize=(),
                    seed=9, input_cache=str(tmp_path))
    assert_caught(verdict, "input_mutated")
    assert verdict.correctness[-1].level == "L1" and all(r.passed for r in verdict.correctness[:-1])
    assert "element(s), first at" in verdict.message, verdict.message  # named, as for an upload
    where = "the input cache" if cached else "the host"
    cached_refs = f"their references: 1 from {where};"
    assert cached_refs in verdict.environment.inputs, verdict.environment.inputs


def test_an_attention_kernel_rejected_at_l0_never_waits_for_the_reference_child():
    naive = tasks.get("self_attention")
    unscaled = naive.naive_source.replace("scores[idx] = dot / sqrtf((float)D);", "scores[idx] = dot;")
    assert unscaled != naive.naive_source
    verdict = judge("self_attention", Candidate.from_source_and_plan(unscaled, naive.naive_plan), ATTENTION,
                    sanitize=())

    assert verdict.status == "rejected" and verdict.correctness[-1].level == "L0", verdict.message
    # the L0 cross-checks were held for the first L1 check, so the child never started
    assert verdict.environment.references == "host (the GPU's references were not cross-checked at L1)"
    assert verdict.stage_seconds.get("worker_gpu_references") == 0.0, verdict.stage_seconds


def test_after_the_first_l1_seed_agreed_the_reference_child_computes_the_other_seeds_references(tmp_path):
    naive = tasks.get("self_attention")
    candidate = Candidate.from_source_and_plan(naive.naive_source, naive.naive_plan)
    first = judge("self_attention", candidate, ATTENTION, sanitize=(), timing_runs=10, seed=5,
                  input_cache=str(tmp_path))
    second = judge("self_attention", candidate, ATTENTION, sanitize=(), timing_runs=10, seed=5,
                   input_cache=str(tmp_path))

    assert first.status == "passed" and second.status == "passed", (first.message, second.message)
    seeds = STANDARD.seeds
    said = f"their references: {seeds - 1} from the reference child, 1 from the host;"
    assert said in first.environment.inputs, first.environment.inputs
    assert f"their references: {seeds} from the input cache;" in second.environment.inputs
    assert first.environment.references.startswith("gpu (torch "), first.environment.references
    errors = [[r.max_abs_error for r in v.correctness if r.level == "L1"] for v in (first, second)]
    assert errors[0] == errors[1]  # the same draws against the same (kept) references
