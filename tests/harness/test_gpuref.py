"""The spot checks' references in a process of their own (gpuref.py), on this machine.

There is no GPU here, so the child computes with torch's CPU build
(OPTIML_REFERENCE_DEVICE=cpu): the same process, requests, files, cross-checks and
fall-backs as on a GPU host, where tests/gpu/test_gpu_references.py runs them on CUDA.
"""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest

from profiling.harness import tasks
from profiling.harness.gpuref import DEVICE_ENV, GpuReferences, disagreement
from profiling.harness.inputs import Expected, allowance_of, make_inputs, reference_outputs, run_reference

pytest.importorskip("torch")
pytest.importorskip("array_api_compat")

SGEMM = {"M": 17, "N": 33, "K": 65}
ATTENTION = {"B": 1, "H": 2, "S": 129, "D": 7}


def host(task, inputs, sizes) -> Expected:
    reference = reference_outputs(task, inputs, sizes)
    return Expected(reference, allowance_of(task, inputs, reference, sizes))


@pytest.fixture
def references(monkeypatch, tmp_path):
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    made = []

    def start(task_name: str) -> GpuReferences:
        made.append(GpuReferences(tasks.get(task_name), str(tmp_path)))
        return made[-1]

    yield start
    for refs in made:
        refs.close()


def test_the_childs_references_agree_with_the_hosts_and_serve_once_checked_at_l1(references):
    task_name, sizes = "self_attention", ATTENTION
    task = tasks.get(task_name)
    refs = references(task_name)
    inputs = make_inputs(task, sizes, seed=11, distribution="heavy_tailed")
    expected = host(task, inputs, sizes)

    assert refs.expected(inputs, sizes) is None  # nothing compared yet: the host computes
    refs.cross_check("L0", inputs, sizes, expected)
    assert not refs.usable  # L0 alone is not enough

    refs.submit_cross_check("L1", inputs, sizes, expected)  # as the worker does: beside its checks
    refs.settle()
    assert refs.usable, refs.describe()
    other = make_inputs(task, sizes, seed=12, distribution="normal")
    served = refs.expected(other, sizes)
    truth = host(task, other, sizes)
    for t in task.outputs:
        np.testing.assert_array_equal(served[t.name], truth[t.name])
        np.testing.assert_allclose(served.allowed[t.name], truth.allowed[t.name], rtol=1e-6)
    assert refs.describe().startswith("gpu (torch ")
    assert "L0" in refs.describe() and "L1" in refs.describe()
    refs.close()  # asked: EOF, and it leaves on its own
    assert refs.child.starts == 1 and refs.child._last_returncode == 0


def test_a_child_started_early_and_never_asked_is_killed_not_waited_for(references):
    refs = references("self_attention")
    refs.warm()  # as the worker does before its L0 checks
    assert refs.child.alive and refs.child.starts == 1
    refs.close()  # a candidate rejected at L0: the child was asked nothing
    assert not refs.child.alive and refs.child._last_returncode == -signal.SIGKILL


def test_a_reference_that_disagrees_with_the_hosts_sends_the_session_to_the_host(references):
    task = tasks.get("self_attention")
    refs = references("self_attention")
    inputs = make_inputs(task, ATTENTION, seed=3, distribution="normal")
    truth = host(task, inputs, ATTENTION)
    # One element off by a quarter of its allowance: a candidate could pass with it, a
    # reference must not be that far from the host's.
    off = {"out": truth["out"].copy()}
    off["out"][0, 1, 5, 6] += np.float32(0.25 * truth.allowed["out"][0, 1, 5, 6])

    refs.cross_check("L1", inputs, ATTENTION, Expected(off, truth.allowed))

    assert not refs.usable
    assert refs.expected(inputs, ATTENTION) is None
    assert refs.describe().startswith("host (the GPU's reference disagreed with the host's at L1")
    assert "(0, 1, 5, 6)" in refs.describe()


@pytest.mark.parametrize("task_name, sizes", [("sgemm", SGEMM), ("self_attention", ATTENTION)])
def test_the_array_api_references_give_the_same_in_torch_as_in_numpy(task_name, sizes):
    import torch

    task = tasks.get(task_name)
    inputs = make_inputs(task, sizes, seed=7, distribution="heavy_tailed")
    truth = host(task, inputs, sizes)
    tensors = {k: torch.from_numpy(v) for k, v in inputs.items()}
    reference = task.reference(tensors, sizes)
    allowed = task.allowance(tensors, reference, sizes)
    for t in task.outputs:
        np.testing.assert_array_equal(reference[t.name].numpy(), truth[t.name])
        np.testing.assert_allclose(allowed[t.name].numpy(), truth.allowed[t.name], rtol=1e-6)


def test_a_reduced_precision_reference_is_not_the_hosts():
    # What a GPU path that quietly used TF32 (inputs rounded to 10 mantissa bits) would
    # give: the cross-check must tell it from the float64 reference.
    task = tasks.get("sgemm")
    sizes = {"M": 64, "N": 64, "K": 1024}
    inputs = make_inputs(task, sizes, seed=5, distribution="normal")
    truth = host(task, inputs, sizes)
    tf32 = {k: (v.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32) for k, v in inputs.items()}
    rounded = host(task, tf32, sizes)

    assert disagreement(task, truth, truth) is None
    assert "elements differ" in disagreement(task, rounded, truth)


def test_a_task_without_a_gpu_reference_is_refused_by_the_child_and_computed_on_the_host(references):
    task = tasks.get("relu")
    refs = references("relu")
    sizes = {"n": 1000}
    inputs = make_inputs(task, sizes, seed=1, distribution="normal")

    refs.cross_check("L1", inputs, sizes, host(task, inputs, sizes))

    assert not refs.usable
    assert "has no reference written for the GPU" in refs.describe()


def test_a_timed_runs_reference_comes_from_elsewhere_when_it_answers_and_from_the_host_when_not(tmp_path):
    task = tasks.get("sgemm")
    inputs = make_inputs(task, SGEMM, seed=9, distribution="normal")
    truth = host(task, inputs, SGEMM)
    given = Expected({"C": np.zeros_like(truth["C"])}, truth.allowed)

    assert run_reference(task, inputs, SGEMM, str(tmp_path), lambda i, s: given) is given
    from_host = run_reference(task, inputs, SGEMM, str(tmp_path), lambda i, s: None)
    np.testing.assert_array_equal(from_host["C"], truth["C"])


def test_a_host_without_torch_computes_every_reference_itself_and_says_why(references, monkeypatch,
                                                                            tmp_path):
    import os

    shadow = tmp_path / "shadow"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text("raise ImportError('no torch on this host')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", ""),
                                                      str(Path(__file__).resolve().parents[2])]))
    task = tasks.get("self_attention")
    refs = references("self_attention")
    inputs = make_inputs(task, ATTENTION, seed=2, distribution="normal")

    refs.cross_check("L1", inputs, ATTENTION, host(task, inputs, ATTENTION))

    assert not refs.usable
    assert refs.describe().startswith("host (the reference process failed: it died")
    assert "no torch on this host" in refs.describe()


def test_a_verified_run_is_judged_in_the_child_and_one_outside_its_allowance_comes_back(references):
    from profiling.harness.spec import _within_allowance

    task = tasks.get("self_attention")
    refs = references("self_attention")
    first = make_inputs(task, ATTENTION, seed=4, distribution="heavy_tailed")
    assert refs.within(first, host(task, first, ATTENTION), ATTENTION) is None  # not cross-checked yet
    refs.cross_check("L1", first, ATTENTION, host(task, first, ATTENTION))

    inputs = make_inputs(task, ATTENTION, seed=5, distribution="normal")
    truth = host(task, inputs, ATTENTION)
    assert refs.within(inputs, {"out": truth["out"].copy()}, ATTENTION) is True

    off = truth["out"].copy()
    off[0, 1, 7, 3] += np.float32(4 * truth.allowed["out"][0, 1, 7, 3])
    returned = refs.within(inputs, {"out": off}, ATTENTION)
    assert isinstance(returned, Expected)  # the child's reference, for the host's own diagnosis
    wrong = _within_allowance(task, {"out": off}, returned, inputs, ATTENTION)
    assert wrong is not None and wrong.bad_elements == 1 and wrong.first_bad_index == (0, 1, 7, 3)

    nan = truth["out"].copy()
    nan[0, 0, 0, 0] = np.nan  # the poison is a NaN: never within
    assert isinstance(refs.within(inputs, {"out": nan}, ATTENTION), Expected)


# -- the worker's side (worker.Session): when it starts the child, what it cross-checks ------


def worker_session(task_name: str, **options):
    from profiling.harness.worker import Session

    task = tasks.get(task_name)
    request = {"task": task_name, "candidate": {"source": task.naive_source, **task.naive_plan},
               "options": {"levels": ["L0", "L1"], "seeds": 2, "timing_runs": 30, "spot_checks": 8,
                           "gpu_references": True, **options}}
    return Session(request, channel=None)


@pytest.mark.parametrize(("task_name", "options", "starts"), [
    ("self_attention", {}, True),
    ("sgemm", {}, True),
    ("relu", {}, False),                                # its reference is the host's only
    ("self_attention", {"gpu_references": False}, False),
    ("self_attention", {"spot_checks": 0}, False),      # the screen verifies no timed run
    ("self_attention", {"timing_runs": 0}, False),
    ("self_attention", {"mode": "sanitize"}, False),
    ("self_attention", {"levels": ["L0"]}, False),      # never cross-checked at L1
])
def test_the_worker_starts_the_reference_child_only_where_timed_runs_will_use_it(references, task_name,
                                                                                 options, starts):
    session = worker_session(task_name, **options)
    session.start_gpu_references()
    try:
        assert (session.gpu_refs is not None) is starts
    finally:
        session.stop_gpu_references()
    assert session.gpu_refs is None
    if starts:  # what the verdict says: nothing was cross-checked, so the host decided
        assert session.environment["references"].startswith("host (the GPU's references were not")


def test_the_worker_cross_checks_the_first_seed_of_each_shape_with_the_hosts_allowance():
    from profiling.harness.inputs import check_plan

    session = worker_session("self_attention")
    submitted = []

    class Recorder:  # stands in for GpuReferences: what the worker hands it, in order
        def submit_cross_check(self, *args) -> None:
            submitted.append(args)

    session.gpu_refs = Recorder()
    plan = check_plan(session.task, ["L0", "L1"], {"B": 1, "H": 2, "S": 33, "D": 8}, {"L0": 2, "L1": 2}, 1)
    compared = []
    for check in plan:
        inputs = make_inputs(session.task, check.sizes, check.seed, check.distribution)
        reference = Expected(reference_outputs(session.task, inputs, check.sizes))  # no cache: no allowance
        compared.append(session.cross_check_reference(check, inputs, reference))
        if check.level == "L0":  # held until the first L1 check: a rejection at L0 never starts the child
            assert submitted == []

    shapes = len(session.task.l0_sizes) + 1
    assert len(plan) == 2 * shapes and len(submitted) == shapes  # one seed of each shape
    assert [level for level, *_ in submitted] == ["L0"] * (shapes - 1) + ["L1"]
    assert all(host.allowed is not None for *_, host in submitted)  # worked out for the cross-check
    # ... and handed on to the comparison, which does not work it out a second time
    assert sum(any(r is host for *_, host in submitted) for r in compared) == shapes
    assert sum(r.allowed is None for r in compared) == len(plan) - shapes


@pytest.mark.parametrize(("task_name", "level", "options", "generates"), [
    ("relu", "L1", {}, True),
    ("self_attention", "L1", {}, True),
    ("relu", "L0", {}, False),                      # small: generated on the host
    ("relu", "L1", {"gpu_inputs": False}, False),
    ("cross_entropy", "L1", {}, False),             # its labels have a generator of their own
])
def test_l1_inputs_are_generated_on_the_gpu_for_default_float_inputs(task_name, level, options, generates):
    from profiling.harness.inputs import check_plan

    session = worker_session(task_name, **{"gpu_inputs": True, **options})
    check = next(c for c in check_plan(session.task, [level], session.task.sizes, {level: 1}, 1))
    assert session.generates_on_gpu(check) is generates
    session.resident = object()  # a screen's serving process draws the seed it keeps the same way
    assert session.generates_on_gpu(check) is generates
