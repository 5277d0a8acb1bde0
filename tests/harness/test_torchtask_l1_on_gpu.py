"""A torchtask's L1 check stays on the GPU (issue 32): its inputs drawn there, the
reference child drawing the same inputs itself from the worker's draws (no input file),
and the candidate's outputs judged there (drawn.py, draws.py, gpuref.py).

There is no GPU here: the child computes with torch's CPU build (OPTIML_REFERENCE_DEVICE=cpu)
and draws with the numpy replays of the harness's kernels, and the worker's side is played
by those replays too. tests/gpu/test_torchtask_l1_gate.py runs the whole gate on CUDA.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest

from profiling.harness import drawn, tasks
from profiling.harness.checks import GuardFailure
from profiling.harness.draws import (
    GENERATE_F32,
    INPUT_CHECKSUM_KEY,
    REFRESH_INT32,
    Draw,
    check_draws,
    checksum_text,
    generated_on_gpu,
    host_values,
    keyed_checksum_host,
    why_not_drawn,
    why_not_on_gpu,
)
from profiling.harness.inputs import Check, Expected, allowance_of, make_inputs, reference_outputs
from profiling.harness.spec import TensorSpec
from profiling.harness.torchtask.task import TorchTask, save, to_task

torch = pytest.importorskip("torch")

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
RELU = HEADER + """class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 - x

batch = 64
dim = 96

def get_inputs():
    return [torch.rand(batch, dim)]

def get_init_inputs():
    return []
"""
TARGETS = HEADER + """class Model(nn.Module):
    def forward(self, x, t):
        return F.cross_entropy(x, t, reduction='none')

batch = 64
classes = 37

def get_inputs():
    return [torch.rand(batch, classes), torch.randint(0, classes, (batch,))]

def get_init_inputs():
    return []
"""


def described(name: str) -> TorchTask:
    """What build.py makes of the modules above (written by hand: nothing runs)."""
    if name == "kb_relu":
        return TorchTask(name=name, source=RELU, sizes={"batch": 64, "dim": 96},
                         l0_sizes=[{"batch": 3, "dim": 5}, {"batch": 7, "dim": 11}],
                         inputs=[{"name": "x0", "dtype": "float32", "module_dtype": "float32",
                                  "shape": ["batch", "dim"]}],
                         weights=[], outputs=[{"name": "out", "dtype": "float32", "shape": ["batch", "dim"]}])
    return TorchTask(name=name, source=TARGETS, sizes={"batch": 64, "classes": 37},
                     l0_sizes=[{"batch": 3, "classes": 5}],
                     inputs=[{"name": "x0", "dtype": "float32", "module_dtype": "float32",
                              "shape": ["batch", "classes"]},
                             {"name": "x1", "dtype": "int32", "module_dtype": "int64", "shape": ["batch"],
                              "bounds": ["0", "classes"]}],
                     weights=[], outputs=[{"name": "out", "dtype": "float32", "shape": ["batch"]}])


def l1_check(task, distribution: str = "normal", seed: int = 4321) -> Check:
    return Check("L1", 0, dict(task.sizes), seed, distribution)


# -- which checks are drawn on the GPU -------------------------------------------------------
@pytest.mark.parametrize("name", ["kb_relu", "kb_targets"])
def test_a_torchtasks_l1_checks_are_drawn_on_the_gpu_and_its_l0_checks_on_the_host(name):
    task = to_task(described(name))
    assert task.l1_in_reference_child and task.reference_on_gpu
    for distribution in task.distributions:
        assert generated_on_gpu(task, l1_check(task, distribution)), why_not_on_gpu(task, l1_check(task))
    l0 = Check("L0", 0, dict(task.l0_sizes[0]), 1, "normal")
    assert not generated_on_gpu(task, l0)
    assert "generated on the host" in why_not_on_gpu(task, l0)


def test_integer_targets_are_drawn_on_the_gpu_within_the_range_get_inputs_drew_them_from():
    task = to_task(described("kb_targets"))
    x, t = check_draws(task, l1_check(task))
    assert (x.kernel, t.kernel) == (GENERATE_F32, REFRESH_INT32)
    assert (t.low, t.high, t.dtype, t.shape) == (0, 37, "int32", (64,))
    values = host_values(t)
    assert values.min() >= 0 and values.max() < 37 and len(np.unique(values)) > 20


def test_what_the_gpu_cannot_draw_stays_on_the_host_and_says_why():
    own = TensorSpec("labels", "int32", ("n",), generate=lambda rng, shape, d, s: np.zeros(shape, np.int32),
                     refresh="int:0:n")
    assert "a generator of its own" in why_not_drawn(own, "normal", {"n": 8})
    assert "float64" in why_not_drawn(TensorSpec("x", "float64", ("n",)), "normal", {"n": 8})
    assert "lognormal" in why_not_drawn(TensorSpec("x", "float32", ("n",)), "lognormal", {"n": 8})
    entropy = tasks.get("cross_entropy")  # a suite task: its labels keep their own generator
    assert "a generator of its own" in why_not_on_gpu(entropy, l1_check(entropy))
    relu = tasks.get("relu")  # and a suite task of default float inputs is drawn as before
    assert why_not_on_gpu(relu, l1_check(relu)) is None and not relu.l1_in_reference_child


# -- the draw description: what the child gets instead of input files -----------------------
def test_a_draw_round_trips_as_json_and_replays_the_same_inputs():
    task = to_task(described("kb_targets"))
    for d in check_draws(task, l1_check(task, "heavy_tailed")):
        again = Draw.from_dict(json.loads(json.dumps(d.to_dict())))
        assert again == d
        np.testing.assert_array_equal(host_values(again), host_values(d))
    other = check_draws(task, l1_check(task, "heavy_tailed", seed=4322))
    assert not np.array_equal(host_values(other[0]), host_values(check_draws(task, l1_check(task))[0]))


def test_the_host_replay_of_the_keyed_checksum_is_the_kernels_sum():
    from profiling.harness.draws import _splitmix64

    words = np.array([0, 7, 0xFFFFFFFF], np.uint32)
    mask = (1 << 64) - 1
    expected = 0
    for i, word in enumerate(words.tolist()):
        with np.errstate(over="ignore"):
            weight = int(_splitmix64(np.uint64(INPUT_CHECKSUM_KEY) ^ _splitmix64(np.uint64(i)))) | 1
        expected = (expected + weight * (word + 1)) & mask
    assert keyed_checksum_host(words, INPUT_CHECKSUM_KEY) == expected
    changed = words.copy()
    changed[1] ^= 1
    assert keyed_checksum_host(changed, INPUT_CHECKSUM_KEY) != expected
    assert checksum_text({"x0": 255, "x1": 1}) == "x0:00000000000000ff x1:0000000000000001"


# -- the reference child draws and judges ---------------------------------------------------
@pytest.fixture
def registered(monkeypatch, tmp_path):
    """The tasks above saved in a task directory, found through the registry as the
    worker's and the child's processes find them; the child on torch's CPU build."""
    from profiling.harness.gpuref import DEVICE_ENV

    for name in ("kb_relu", "kb_targets"):
        save(described(name), tmp_path / "tasks")
    monkeypatch.setenv(tasks.TASK_PATH_VARIABLE, str(tmp_path / "tasks"))
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    tasks._reset_for_tests()
    yield tmp_path
    tasks._reset_for_tests()


def cross_checked(name: str, workdir) -> object:
    """A reference session whose references agreed with the host's at every L0 shape."""
    from profiling.harness.gpuref import GpuReferences

    task = tasks.get(name)
    refs = GpuReferences(task, str(workdir), harness_cubin="refresh.cubin (unused on the CPU)")
    assert not refs.trusts_draws  # nothing agreed yet
    for index, sizes in enumerate(task.l0_sizes):
        inputs = make_inputs(task, sizes, seed=5 + index, distribution="normal")
        reference = reference_outputs(task, inputs, sizes)
        allowed = allowance_of(task, inputs, reference, sizes)
        refs.cross_check("L0", inputs, sizes, Expected(reference, allowed))
    assert refs.trusts_draws, refs.describe()
    return refs


class HostOutputs:
    """The candidate's outputs as the worker hands them to the child (gpuref.OutputsOnGpu):
    `fill` writes them; `handles` stands for CUDA IPC handles (None: files)."""

    def __init__(self, fill, handles: dict | None = None) -> None:
        self.fill, self.handles = fill, handles

    def ipc_handles(self):
        return self.handles

    def read_into(self, arrays) -> None:
        self.fill(arrays)


def staging(outputs: HostOutputs):
    """What judge_drawn stages the outputs with (drawn.staged_outputs in the worker)."""
    return lambda: contextlib.nullcontext(outputs)


def worker_draws(task, check):
    """What the worker draws for the check (the replay of its kernels) and its public sum."""
    draws = check_draws(task, check)
    values = {d.name: host_values(d) for d in draws}
    sums = {name: keyed_checksum_host(v, INPUT_CHECKSUM_KEY) for name, v in values.items()}
    return draws, values, checksum_text(sums)


@pytest.mark.parametrize("name", ["kb_relu", "kb_targets"])
def test_the_child_draws_the_inputs_itself_and_passes_right_outputs_with_no_input_file(registered, name,
                                                                                        monkeypatch):
    from profiling.harness import gpuref

    monkeypatch.setattr(gpuref, "MEMORY_DIR", registered)  # where the outputs go: seen below
    task = tasks.get(name)
    refs = cross_checked(name, registered)
    try:
        check = l1_check(task, "heavy_tailed")
        draws, values, public = worker_draws(task, check)
        right = reference_outputs(task, values, check.sizes)  # the host's, on the worker's draws
        seen = []

        def read_outputs(arrays):
            seen.extend(sorted(p.name for p in registered.glob(f"{gpuref.MEMORY_PREFIX}*/r-*/*")))
            for output, array in arrays.items():
                array[...] = right[output]

        judged = refs.judge_drawn(draws, check.sizes, public, staging(HostOutputs(read_outputs)))
        assert judged is not None and judged.within, refs.describe()
        assert seen == ["candidate-out.npy"]  # the candidate's outputs travel; no input does
        assert refs.usable and "judged there on inputs it drew itself" in refs.describe()
        assert not list(registered.glob(f"{gpuref.MEMORY_PREFIX}*/r-*"))  # each request's folder is gone
    finally:
        refs.close()
    assert not list(registered.glob(f"{gpuref.MEMORY_PREFIX}*"))  # and the session's, at its end


def test_outputs_out_of_their_allowance_or_unwritten_come_back_with_the_childs_reference(registered):
    task = tasks.get("kb_relu")
    refs = cross_checked("kb_relu", registered)
    try:
        check = l1_check(task)
        draws, values, public = worker_draws(task, check)
        host = reference_outputs(task, values, check.sizes)

        def wrong(arrays):
            arrays["out"][...] = host["out"] + 1e-2

        judged = refs.judge_drawn(draws, check.sizes, public, staging(HostOutputs(wrong)))
        assert judged is not None and not judged.within and not judged.reference_has_poison
        np.testing.assert_allclose(judged.expected["out"], host["out"], rtol=1e-6, atol=1e-6)
        assert judged.expected.allowed is not None  # for check_run to name the element

        def unwritten(arrays):
            arrays["out"].view(np.uint32)[...] = 0xFFFFFFFF  # the gate's poison, as left

        assert not refs.judge_drawn(draws, check.sizes, public, staging(HostOutputs(unwritten))).within
    finally:
        refs.close()


def test_a_child_whose_draws_differ_from_the_workers_is_never_believed_again(registered):
    task = tasks.get("kb_relu")
    refs = cross_checked("kb_relu", registered)
    try:
        check = l1_check(task)
        draws, values, public = worker_draws(task, check)
        right = reference_outputs(task, values, check.sizes)

        def fill(arrays):
            arrays["out"][...] = right["out"]

        other = public.replace(public[-1], "0" if public[-1] != "0" else "1")
        staged = []

        def stage():  # the outputs are staged only once the child's draws are known to be right
            staged.append(True)
            return contextlib.nullcontext(HostOutputs(fill))

        assert refs.judge_drawn(draws, check.sizes, other, stage) is None
        assert "drew other inputs" in refs.failed and staged == []
        again = refs.judge_drawn(draws, check.sizes, public, staging(HostOutputs(fill)))
        assert again is None  # the host decides from now on
        assert refs.describe().startswith("host (")
    finally:
        refs.close()


def test_outputs_the_child_cannot_open_by_cuda_ipc_come_as_files_from_then_on(registered):
    task = tasks.get("kb_relu")
    refs = cross_checked("kb_relu", registered)  # its child computes on the CPU: no CUDA IPC
    try:
        check = l1_check(task)
        draws, values, public = worker_draws(task, check)
        right = reference_outputs(task, values, check.sizes)
        filled = []

        def fill(arrays):
            filled.append(True)
            arrays["out"][...] = right["out"]

        shared = HostOutputs(fill, handles={"out": "00" * 64})  # as if by CUDA IPC
        judged = refs.judge_drawn(draws, check.sizes, public, staging(shared))
        assert judged.within and filled == [True] and refs.failed is None
        assert "the CPU" in refs.ipc_failed and "no CUDA IPC" in refs.describe()
        assert refs.judge_drawn(draws, check.sizes, public, staging(shared)).within
        assert filled == [True, True] and refs.moved["memory-backed files"] == 2  # not asked again
    finally:
        refs.close()


def test_a_timed_runs_draws_are_its_refresh_and_replay_as_the_l1_normal_draw_does():
    from profiling.harness.draws import REFRESH_NORMAL_F32, run_draws

    task = to_task(described("kb_targets"))
    x, t = run_draws(task, task.sizes, seed=99)
    assert (x.kernel, t.kernel, t.low, t.high) == (REFRESH_NORMAL_F32, REFRESH_INT32, 0, 37)
    # optiml_refresh_normal_f32 draws what optiml_generate_f32 draws for the normal code
    same = Draw(x.name, GENERATE_F32, x.dtype, x.shape, x.seed, distribution=0)
    np.testing.assert_array_equal(host_values(x), host_values(same))
    zipf = TensorSpec("x0", "float32", ("batch", "classes"), refresh="zipf")
    odd = dataclasses.replace(task, inputs=(zipf,))
    with pytest.raises(ValueError, match="no GPU refresh for 'zipf'"):
        run_draws(odd, task.sizes, seed=99)


def test_a_suite_task_is_never_judged_by_draws_in_the_child(registered):
    from profiling.harness.gpuref import GpuReferences

    refs = GpuReferences(tasks.get("self_attention"), str(registered), harness_cubin="x")
    try:
        refs.checked = ["L0 {}"] * 10  # even with every L0 shape agreed
        assert not refs.trusts_draws
    finally:
        refs.close()


# -- the worker's decisions (drawn.py) --------------------------------------------------------
class FakeRefs:
    """Stands in for GpuReferences: records what the worker asks."""

    def __init__(self, trusts: bool = True, judged=None) -> None:
        self.trusts_draws, self.judged, self.asked, self.settled, self.submitted = trusts, judged, [], 0, []

    def submit_cross_check(self, *args) -> None:
        self.submitted.append(args)

    def settle(self) -> None:
        self.settled += 1

    def judge_drawn(self, draws, sizes, checksum, stage):
        self.asked.append((draws, sizes, checksum))
        return self.judged


def worker_session(name: str, **options):
    from profiling.harness.worker import Session

    task = tasks.get(name)
    request = {"task": name, "candidate": {"source": 'extern "C" __global__ void k() {}', **task.naive_plan},
               "options": {"levels": ["L0", "L1"], "seeds": 2, "timing_runs": 30, "spot_checks": 8,
                           "gpu_references": True, "gpu_inputs": True, **options}}
    return Session(request, channel=None)


@pytest.mark.parametrize(("level", "options", "resident", "trusts", "in_child"), [
    ("L1", {}, False, True, True),
    ("L1", {}, False, False, False),                   # not cross-checked at every L0 shape
    ("L0", {}, False, True, False),                    # small: on the host, as today
    ("L1", {"gpu_inputs": False}, False, True, False),
    ("L1", {"adversary": {"stale_reference": True}}, False, True, False),
    ("L1", {}, True, True, False),                     # the screen's serving process keeps its seed
])
def test_an_l1_check_is_judged_in_the_child_only_where_it_may_be(registered, level, options, resident, trusts,
                                                                 in_child):
    session = worker_session("kb_relu", **options)
    session.gpu_refs = FakeRefs(trusts)
    session.resident = object() if resident else None
    session.held_cross_checks = [("L0", {}, {"batch": 3, "dim": 5}, None)]
    sizes = session.task.sizes if level == "L1" else session.task.l0_sizes[0]
    assert drawn.judged_in_child(session, Check(level, 0, dict(sizes), 1, "normal")) is in_child
    if in_child or not trusts:  # the held L0 cross-checks went to the child, and were waited for
        assert len(session.gpu_refs.submitted) == 1 and session.gpu_refs.settled == 1
    else:  # nothing asked of the child for a check it does not judge
        assert session.gpu_refs.submitted == [] and session.held_cross_checks


@pytest.mark.parametrize(("options", "starts"), [
    ({}, True),
    ({"timing_runs": 0}, True),                      # a correctness-only gate judges its L1 there too
    ({"timing_runs": 0, "gpu_inputs": False}, False),  # then nothing would ask the child
    ({"gpu_references": False}, False),
    ({"levels": ["L0"]}, False),
    ({"mode": "sanitize"}, False),
])
def test_a_torchtasks_reference_child_starts_wherever_its_l1_checks_will_be_judged_there(
        registered, monkeypatch, options, starts):
    from profiling.harness import gpuref

    started = []
    monkeypatch.setattr(gpuref.GpuReferences, "warm", lambda refs: started.append(refs))
    session = worker_session("kb_relu", **options)
    session.sanitizing = options.get("mode") == "sanitize"
    session.request["harness_cubin"] = "refresh.cubin"
    session.start_gpu_references()
    try:
        assert (session.gpu_refs is not None) is starts and len(started) == int(starts)
    finally:
        session.stop_gpu_references()


class FakeBuffer:
    def __init__(self, canary_ok: bool = True) -> None:
        self.canary_ok = canary_ok

    def guards(self):
        before = np.full(8, 0xA5, np.uint8)
        return before, before if self.canary_ok else np.zeros(8, np.uint8)


@pytest.fixture
def staged(monkeypatch):
    """drawn.staged_outputs without a GPU: the outputs stay where they are."""
    monkeypatch.setattr(drawn, "staged_outputs", lambda task, buffers: contextlib.nullcontext(
        HostOutputs(lambda arrays: None)))


def judging_session(refs: FakeRefs, changed: bool = False):
    """The parts of a worker session drawn.judge uses, recording what it reads back."""
    task = to_task(described("kb_relu"))
    calls = []
    session = SimpleNamespace(
        task=task, gpu_refs=refs, reference_has_poison=False, options={}, calls=calls,
        input_checksum=lambda buffer, key: 1 if changed else 0,
        add_seconds=lambda *a: None,
        tell_where_inputs_came_from=lambda where: calls.append(("told", where)),
        inputs_after_launch=lambda *a: calls.append("read back inputs") or ({}, {}),
        read_back=lambda *a: calls.append("read back outputs"),
        check=lambda run, sizes: (GuardFailure("wrong_values", "named on the host"), 1.0, 1.0))
    return session, task


def test_a_check_within_its_allowance_in_the_child_reads_nothing_back(staged):
    from profiling.harness.gpuref import Judged
    from profiling.harness.worker import Drawn

    session, task = judging_session(FakeRefs(judged=Judged(True, False)))
    buffers = {"x0": FakeBuffer(), "out": FakeBuffer()}
    result = drawn.judge(session, l1_check(task), buffers, Drawn(7, {"x0": 0}), "x0:0")
    assert result == (None, 0.0, 0.0)
    assert session.calls == [("told", "child")] and len(session.gpu_refs.asked) == 1


@pytest.mark.parametrize(("canary_ok", "changed"), [(False, False), (True, True)])
def test_a_written_canary_or_a_changed_input_is_named_on_the_host_without_asking_the_child(
        canary_ok, changed, monkeypatch, staged):
    from profiling.harness.gpuref import Judged
    from profiling.harness.worker import Drawn

    session, task = judging_session(FakeRefs(judged=Judged(True, False)), changed=changed)
    buffers = {"x0": FakeBuffer(), "out": FakeBuffer(canary_ok)}
    reference = Expected({"out": np.zeros((64, 96), np.float32)}, {"out": np.zeros((64, 96))})
    monkeypatch.setattr(drawn, "gpu_seed_reference", lambda *a, **k: reference)  # the host's, as ever
    failure, _, _ = drawn.judge(session, l1_check(task), buffers, Drawn(7, {"x0": 0}), "x0:0")
    assert failure is not None and session.gpu_refs.asked == []
    assert "read back inputs" in session.calls and "read back outputs" in session.calls


def test_outputs_the_child_rejects_are_named_on_the_host_with_its_reference(staged):
    from profiling.harness.gpuref import Judged
    from profiling.harness.worker import Drawn

    reference = Expected({"out": np.zeros((64, 96), np.float32)}, {"out": np.zeros((64, 96))})
    session, task = judging_session(FakeRefs(judged=Judged(False, True, reference)))
    buffers = {"x0": FakeBuffer(), "out": FakeBuffer()}
    failure, _, _ = drawn.judge(session, l1_check(task), buffers, Drawn(7, {"x0": 0}), "x0:0")
    assert failure.message == "named on the host"
    assert session.reference_has_poison  # what the timed runs' unwritten count must know
    assert session.calls == ["read back inputs", ("told", "gpu"), "read back outputs"]


class FakeAllocation:
    def __init__(self, freed: list) -> None:
        self.freed = freed

    def free(self) -> None:
        self.freed.append(self)


@pytest.mark.parametrize("room", [True, False])
def test_timed_run_snapshots_leave_the_gpu_only_when_the_childs_work_would_not_fit_beside_them(
        monkeypatch, room):
    import sys

    import profiling.harness as harness

    task = to_task(described("kb_relu"))
    freed, judged = [], []

    def verify(session, buffers, outputs, seed, on_gpu=False) -> bool:  # the child passes the first run only
        judged.append((on_gpu, type(outputs["out"]).__name__))
        return len(judged) == 1

    fake_device = SimpleNamespace(download=lambda allocation, dtype, shape: np.zeros(shape, dtype))
    monkeypatch.setitem(sys.modules, "profiling.harness.device", fake_device)
    monkeypatch.setattr(harness, "device", fake_device, raising=False)  # once imported, the package's
    monkeypatch.setattr(drawn, "verify_timed_run", verify)
    needed = drawn.CHILD_FOOTPRINTS * task.footprint_bytes(task.sizes)
    session = SimpleNamespace(task=task, l1_sizes=task.sizes, base_seed=5,
                              gpu=SimpleNamespace(free_bytes=lambda: needed + (1 if room else -1)))
    buffers = {"out": SimpleNamespace(dtype=np.dtype(np.float32), shape=(64, 96))}
    slots = [{"out": FakeAllocation(freed)} for _ in range(3)]
    sink = {"out": FakeAllocation(freed)}
    left, snapshots = drawn.verify_timed_runs(session, buffers, slots, sink, [(0, 3), (2, 7)])
    assert left == [(2, 7)]  # what the child did not pass goes to the host, from its snapshot
    if room:  # opened where they are, by CUDA IPC
        assert freed == [] and judged == [(True, "FakeAllocation")] * 2 and snapshots[2] is slots[2]
    else:  # read back, every GPU copy freed (the sink's too), then put back one at a time
        assert len(freed) == 4 and judged == [(False, "ndarray")] * 2
        assert not any(slots) and not sink and isinstance(snapshots[2]["out"], np.ndarray)
