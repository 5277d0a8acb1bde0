"""Inputs and references kept on disk between candidates are the ones made fresh."""

import numpy as np

from profiling.harness import tasks
from profiling.harness.inputs import inputs_and_reference, reference_outputs


def test_a_cached_entry_holds_exactly_what_a_fresh_computation_makes(tmp_path):
    task, sizes = tasks.get("layernorm"), {"M": 7, "N": 33}
    fresh_inputs, fresh_reference = inputs_and_reference(task, sizes, 42, "heavy_tailed", None)
    first = inputs_and_reference(task, sizes, 42, "heavy_tailed", str(tmp_path))
    again = inputs_and_reference(task, sizes, 42, "heavy_tailed", str(tmp_path))
    for (inputs, reference) in (first, again):
        assert inputs.keys() == fresh_inputs.keys() and reference.keys() == fresh_reference.keys()
        for name in inputs:
            np.testing.assert_array_equal(inputs[name], fresh_inputs[name])
        for name in reference:
            np.testing.assert_array_equal(reference[name], fresh_reference[name])
    assert len(list(tmp_path.iterdir())) == 1  # one entry, no leftover staging directories


def test_cached_arrays_are_read_only_so_nothing_can_alter_them(tmp_path):
    task = tasks.get("relu")
    inputs, reference = inputs_and_reference(task, {"n": 1000}, 1, "normal", str(tmp_path))
    assert not inputs["x"].flags.writeable and not reference["y"].flags.writeable


def test_other_seeds_and_distributions_get_their_own_entries(tmp_path):
    task = tasks.get("relu")
    a, _ = inputs_and_reference(task, {"n": 100}, 1, "normal", str(tmp_path))
    b, _ = inputs_and_reference(task, {"n": 100}, 2, "normal", str(tmp_path))
    c, _ = inputs_and_reference(task, {"n": 100}, 1, "heavy_tailed", str(tmp_path))
    assert not np.array_equal(a["x"], b["x"]) and not np.array_equal(a["x"], c["x"])
    assert len(list(tmp_path.iterdir())) == 3


def test_the_check_plan_derives_every_seed_from_the_base_seed_as_the_worker_runs_them():
    from profiling.harness.inputs import check_plan

    task = tasks.get("softmax")
    plan = check_plan(task, ["L0", "L1"], task.sizes, {"L0": 2, "L1": 3}, base_seed=7)

    l0 = [c for c in plan if c.level == "L0"]
    assert len(l0) == 2 * len(task.l0_sizes)
    assert [c.seed for c in l0[:2]] == [7000, 7001] and l0[2].seed == 7100
    assert [(c.seed, c.distribution) for c in plan if c.level == "L1"] == [
        (7000, "normal"), (7001, "heavy_tailed"), (7002, "normal")]
    assert all(c.sizes == task.sizes for c in plan if c.level == "L1")


def test_prepared_entries_in_worker_processes_are_the_ones_the_worker_would_make(tmp_path):
    """prepare() builds the cache in parallel processes; a later read finds each entry
    done and holding exactly what a fresh, uncached computation makes."""
    from profiling.harness.inputs import check_plan, prepare

    task = tasks.get("layernorm")
    plan = check_plan(task, ["L0", "L1"], {"M": 9, "N": 65}, {"L0": 1, "L1": 2}, base_seed=3)

    built = prepare(task, plan, str(tmp_path), workers=2)

    assert built == len(plan) and prepare(task, plan, str(tmp_path), workers=2) == 0
    for check in plan:
        cached = inputs_and_reference(task, check.sizes, check.seed, check.distribution, str(tmp_path))
        fresh = inputs_and_reference(task, check.sizes, check.seed, check.distribution, None)
        for got, want in zip(cached, fresh, strict=True):
            for name in want:
                np.testing.assert_array_equal(got[name], want[name])
    assert len(list(tmp_path.iterdir())) == len(plan)  # no staging directories left behind


def run_inputs(task, sizes, seed):
    from profiling.harness.inputs import make_inputs

    return make_inputs(task, sizes, seed, task.distributions[0])


def test_a_timed_run_s_reference_is_cached_for_its_exact_inputs_only(tmp_path, monkeypatch):
    from profiling.harness import inputs as module
    from profiling.harness.inputs import reference_outputs, run_reference

    task, sizes = tasks.get("softmax"), {"M": 5, "N": 37}
    inputs = run_inputs(task, sizes, 3)
    first = run_reference(task, inputs, sizes, str(tmp_path))
    np.testing.assert_array_equal(first["y"], reference_outputs(task, inputs, sizes)["y"])

    computed = []
    monkeypatch.setattr(module, "reference_outputs",
                        lambda *a: computed.append(1) or reference_outputs(*a))
    again = run_reference(task, {k: v.copy() for k, v in inputs.items()}, sizes, str(tmp_path))
    np.testing.assert_array_equal(again["y"], first["y"])
    assert computed == []  # the same inputs: read from the cache

    changed = {k: v.copy() for k, v in inputs.items()}
    changed["x"].flat[11] += 1.0  # one element differs: not the cached run's inputs
    other = run_reference(task, changed, sizes, str(tmp_path))
    assert computed == [1]
    np.testing.assert_array_equal(other["y"], reference_outputs(task, changed, sizes)["y"])
    assert not any(p.name.startswith(".run-") for p in (tmp_path / "runs").iterdir())


def test_large_runs_and_runs_without_a_cache_are_computed_each_time(tmp_path, monkeypatch):
    from profiling.harness import inputs as module
    from profiling.harness.inputs import run_reference

    task, sizes = tasks.get("relu"), {"n": 4096}
    inputs = run_inputs(task, sizes, 1)
    run_reference(task, inputs, sizes, None)
    monkeypatch.setattr(module, "RUN_REFERENCE_MAX_BYTES", 1024)
    run_reference(task, inputs, sizes, str(tmp_path))
    assert not (tmp_path / "runs").exists()


# -- a task's allowance, kept with the reference --------------------------------------------


def _counting_allowance(task):
    """The task with its allowance counted: how often it is worked out."""
    import dataclasses

    calls = []

    def allowance(inputs, expected, sizes):
        calls.append(1)
        return task.allowance(inputs, expected, sizes)

    return dataclasses.replace(task, allowance=allowance), calls


def _one_wrong(expected):
    wrong = {name: np.array(values, copy=True) for name, values in expected.items()}
    first = next(iter(wrong.values())).reshape(-1)
    first[first.size // 2] += 1 + abs(first[first.size // 2])
    return wrong


def test_an_allowance_is_worked_out_once_per_seed_and_read_back_by_every_later_candidate(tmp_path):
    """sgemm's |A| @ |B|, conv2d's |x| conv |w| and self_attention's propagated error cost
    as much as the reference or more: each candidate of a search (a process of its own)
    reads them from the cache, with the same verdict and message as working them out."""
    for name in ("sgemm", "conv2d", "self_attention"):
        task, calls = _counting_allowance(tasks.get(name))
        sizes = task.l0_sizes[2]
        inputs, expected = inputs_and_reference(task, sizes, 5, "heavy_tailed", str(tmp_path))
        assert calls == [1], name  # with the reference, at the entry's build
        for _candidate in range(3):
            inputs, expected = inputs_and_reference(task, sizes, 5, "heavy_tailed", str(tmp_path))
            assert expected.allowed is not None and not next(iter(expected.allowed.values())).flags.writeable
            right = {n: np.array(v, copy=True) for n, v in expected.items()}
            assert task.comparison()(right, expected, inputs, sizes) is None
            cached = task.comparison()(_one_wrong(expected), expected, inputs, sizes)
        assert calls == [1], name  # never again

        fresh_inputs, fresh = inputs_and_reference(task, sizes, 5, "heavy_tailed", None)
        assert fresh.allowed is None  # no cache: the comparison works it out, as before
        worked_out = task.comparison()(_one_wrong(fresh), fresh, fresh_inputs, sizes)
        assert calls == [1, 1], name
        assert cached is not None and cached.message == worked_out.message, name
        for output, allowed in expected.allowed.items():
            np.testing.assert_array_equal(
                allowed, np.broadcast_to(task.allowance(fresh_inputs, fresh, sizes)[output], allowed.shape))


def test_a_timed_run_s_allowance_is_kept_with_its_reference_for_its_exact_inputs_only(tmp_path):
    from profiling.harness.inputs import run_reference

    task, calls = _counting_allowance(tasks.get("sgemm"))
    sizes = task.l0_sizes[2]
    inputs = run_inputs(task, sizes, 3)
    first = run_reference(task, inputs, sizes, str(tmp_path))
    again = run_reference(task, {k: v.copy() for k, v in inputs.items()}, sizes, str(tmp_path))
    assert calls == [1]
    np.testing.assert_array_equal(again.allowed["C"], first.allowed["C"])

    changed = {k: v.copy() for k, v in inputs.items()}
    changed["A"].flat[0] += 1.0
    other = run_reference(task, changed, sizes, str(tmp_path))
    assert calls == [1, 1] and not np.array_equal(other.allowed["C"], first.allowed["C"])
    assert run_reference(task, inputs, sizes, None).allowed is None  # no cache: none kept


def test_an_entry_written_without_the_allowance_still_compares(tmp_path):
    """A cache entry from before allowances were kept: the comparison works it out."""
    task = tasks.get("sgemm")
    sizes = task.l0_sizes[2]
    inputs_and_reference(task, sizes, 1, "normal", str(tmp_path))
    for file in tmp_path.glob("*/allowed-*.npy"):
        file.unlink()
    inputs, expected = inputs_and_reference(task, sizes, 1, "normal", str(tmp_path))
    assert expected.allowed is None
    assert task.comparison()(_one_wrong(expected), expected, inputs, sizes) is not None


# -- L1 inputs generated on the GPU (inputs.generated_on_gpu) ---------------------------------

def test_the_host_replay_of_the_gpu_generator_draws_each_distribution():
    from profiling.harness.inputs import gpu_like_values

    n = 1 << 18
    normal = gpu_like_values(n, 7, "normal")
    assert normal.dtype == np.float32 and abs(normal.mean()) < 0.01 and abs(normal.std() - 1) < 0.01
    heavy = gpu_like_values(n, 7, "heavy_tailed")
    # 4 t(3): |x| > 40 with probability 0.14 %, so some hundreds here, and no normal draw does
    assert 100 < int((np.abs(heavy) > 40).sum()) < 800 and np.abs(normal).max() < 6
    assert np.isfinite(heavy).all()
    uniform = gpu_like_values(n, 7, "uniform")
    assert uniform.min() > -1 and uniform.max() < 1 and abs(uniform.mean()) < 0.01
    assert not np.array_equal(normal, gpu_like_values(n, 8, "normal"))  # the seed matters
    np.testing.assert_array_equal(gpu_like_values(3, 7, "heavy_tailed", start=5), heavy[5:8])


def test_only_a_full_gate_s_l1_checks_of_default_float_inputs_are_generated_on_the_gpu():
    from profiling.harness.inputs import check_plan, generated_on_gpu

    relu = tasks.get("relu")
    plan = check_plan(relu, ["L0", "L1"], relu.sizes, {"L0": 2, "L1": 2}, 3)
    assert [generated_on_gpu(relu, c) for c in plan] == [c.level == "L1" for c in plan]
    entropy = tasks.get("cross_entropy")  # int labels from a generator of its own
    plan = check_plan(entropy, ["L1"], entropy.sizes, {"L1": 2}, 3)
    assert not any(generated_on_gpu(entropy, c) for c in plan)


def test_prepare_builds_no_entry_for_checks_the_worker_generates_on_the_gpu(tmp_path):
    from profiling.harness.gate import prepare_inputs

    relu, sizes = tasks.get("relu"), {"n": 4096}
    prepare_inputs(relu, ["L0", "L1"], sizes, {"L0": 1, "L1": 2}, 5, str(tmp_path / "gpu"), gpu_inputs=True)
    prepare_inputs(relu, ["L0", "L1"], sizes, {"L0": 1, "L1": 2}, 5, str(tmp_path / "host"), gpu_inputs=False)
    entries = lambda d: [p for p in (tmp_path / d).iterdir() if not p.name.startswith(".")]  # noqa: E731
    assert len(entries("gpu")) == len(relu.l0_sizes)
    assert len(entries("host")) == len(relu.l0_sizes) + 2


def test_a_gpu_seed_s_reference_is_reused_only_for_inputs_with_the_same_checksum(tmp_path):
    from profiling.harness.inputs import Check, gpu_like_values, gpu_seed_reference

    task = tasks.get("self_attention")  # with an allowance, kept beside the reference
    sizes = {"B": 1, "H": 2, "S": 16, "D": 8}
    check = Check("L1", 0, sizes, 11, "normal")
    n = 1 * 2 * 16 * 8
    inputs = {t.name: gpu_like_values(n, 11 + i, "normal").reshape(1, 2, 16, 8)
              for i, t in enumerate(task.inputs)}
    first = gpu_seed_reference(task, check, inputs, "q:1 k:2 v:3", str(tmp_path))
    assert first.allowed is not None

    other = {name: np.flip(values).copy() for name, values in inputs.items()}  # stands for a different draw
    cached = gpu_seed_reference(task, check, other, "q:1 k:2 v:3", str(tmp_path))
    assert cached.cached and not first.cached
    np.testing.assert_array_equal(cached["out"], first["out"])  # read back, not recomputed
    np.testing.assert_array_equal(cached.allowed["out"], first.allowed["out"])

    recomputed = gpu_seed_reference(task, check, other, "q:4 k:5 v:6", str(tmp_path))
    assert not recomputed.cached
    fresh = reference_outputs(task, other, sizes)
    np.testing.assert_array_equal(recomputed["out"], fresh["out"])
    assert not np.array_equal(recomputed["out"], first["out"])
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 1  # the first one stays


def test_a_gpu_seed_s_reference_may_come_from_elsewhere_and_is_kept_like_the_host_s(tmp_path):
    from profiling.harness.inputs import Check, Expected, gpu_like_values, gpu_seed_reference

    task, sizes = tasks.get("relu"), {"n": 64}
    check = Check("L1", 0, sizes, 3, "normal")
    inputs = {"x": gpu_like_values(64, 3, "normal")}
    asked = []

    def child(given, given_sizes):  # stands in for the reference child: any answer it gives is used
        asked.append(given_sizes)
        return Expected({"y": np.full(64, 7, np.float32)})

    from_child = gpu_seed_reference(task, check, inputs, "x:1", str(tmp_path), elsewhere=child)
    assert asked == [sizes] and from_child.computed_elsewhere and not from_child.cached
    np.testing.assert_array_equal(from_child["y"], np.full(64, 7, np.float32))
    kept = gpu_seed_reference(task, check, inputs, "x:1", str(tmp_path), elsewhere=child)
    assert kept.cached and asked == [sizes]  # read back, the child not asked again
    np.testing.assert_array_equal(kept["y"], from_child["y"])

    host = gpu_seed_reference(task, check, inputs, "x:2", None, elsewhere=lambda *_: None)
    assert not host.computed_elsewhere  # the child declined: the host computed it
    np.testing.assert_array_equal(host["y"], np.maximum(inputs["x"], 0))
