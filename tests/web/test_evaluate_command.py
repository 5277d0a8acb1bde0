"""`manage.py evaluate`: bad input is one clear line and no database writes; good input
is the harness's report, with the naive baseline when there is one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from profiling.harness import gate
from profiling.harness import tasks as task_registry
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.models import Candidate, Evaluation, Task

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]


def row_counts() -> tuple[int, int, int]:
    return Task.objects.count(), Candidate.objects.count(), Evaluation.objects.count()


def evaluate(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("evaluate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def kernel(tmp_path, fast) -> Path:
    path = tmp_path / "relu.cu"
    path.write_text(fast.source)
    return path


@pytest.fixture
def plan(tmp_path, fast) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(fast.plan))
    return path


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD_INPUTS = {
    "an unknown task, listing the known ones": (
        lambda tmp, k, p: ["--task", "softmaxx", k, "--plan", p],
        r"unknown task 'softmaxx'; known tasks: .*relu.*softmax",
    ),
    "a kernel file that does not exist": (
        lambda tmp, k, p: ["--task", "relu", str(tmp / "missing.cu"), "--plan", p],
        r"kernel file .*missing.cu does not exist",
    ),
    "an empty kernel file": (
        lambda tmp, k, p: ["--task", "relu", write(tmp, "empty.cu", "  \n\n"), "--plan", p],
        r"kernel file .*empty.cu is empty",
    ),
    "a plan file that does not exist": (
        lambda tmp, k, p: ["--task", "relu", k, "--plan", str(tmp / "nope.json")],
        r"plan file .*nope.json does not exist",
    ),
    "a plan that is not JSON": (
        lambda tmp, k, p: ["--task", "relu", k, "--plan", write(tmp, "p.json", '{"launches": [')],
        r"plan file .*p.json is not valid JSON: line 1 column 15",
    ),
    "a plan that is not an object": (
        lambda tmp, k, p: ["--task", "relu", k, "--plan", write(tmp, "p.json", "[1, 2]")],
        r"must hold a JSON object, not list",
    ),
    "a plan with a malformed field, naming it": (
        lambda tmp, k, p: [
            "--task",
            "relu",
            k,
            "--plan",
            write(
                tmp,
                "p.json",
                json.dumps({"launches": [{"kernel": "relu_grid_stride", "grid": [], "block": [256]}]}),
            ),
        ],
        r"launches\[0\]\.grid must be 1 to 3 expressions",
    ),
    "a plan with an unknown field, naming it": (
        lambda tmp, k, p: [
            "--task",
            "relu",
            k,
            "--plan",
            write(tmp, "p.json", '{"launches": [], "threads": 4}'),
        ],
        r"unknown candidate fields: threads",
    ),
    "a number of timed runs that is not positive": (
        lambda tmp, k, p: ["--task", "relu", k, "--plan", p, "--runs", "0"],
        r"--runs: 0 is not a positive integer",
    ),
    "a --json path in a folder that does not exist": (
        lambda tmp, k, p: ["--task", "relu", k, "--plan", p, "--json", str(tmp / "no" / "v.json")],
        r"--json: folder .* does not exist",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_a_one_line_command_error_and_writes_nothing(
    case, tmp_path, kernel, plan, use_recordings
):
    arguments, message = BAD_INPUTS[case]
    before = row_counts()

    with pytest.raises(CommandError, match=message) as caught:
        evaluate(*arguments(tmp_path, str(kernel), str(plan)))

    assert "\n" not in str(caught.value)
    assert row_counts() == before == (0, 0, 0)


def test_on_the_command_line_bad_input_prints_one_line_and_no_traceback(tmp_path, kernel):
    environment = {**os.environ, "OPTIML_VAR_DIR": str(tmp_path / "var")}

    finished = subprocess.run(
        [sys.executable, "manage.py", "evaluate", "--task", "softmaxx", str(kernel)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert finished.returncode == 1
    assert "Traceback" not in finished.stderr
    assert len(finished.stderr.strip().splitlines()) == 1
    assert finished.stderr.startswith("CommandError: unknown task 'softmaxx'; known tasks:")


def test_a_passing_kernel_prints_the_report_and_writes_the_verdict_with_speedups(
    tmp_path, kernel, plan, fast, use_recordings
):
    verdict_path = tmp_path / "verdict.json"

    out, _ = evaluate(
        "--task", "relu", str(kernel), "--plan", str(plan), "--no-naive", "--json", str(verdict_path)
    )

    assert "Verdict: PASSED" in out
    assert "Timing: 0.5121 ms" in out
    assert "the vendor reference" in out
    written = json.loads(verdict_path.read_text())
    assert written["candidate_hash"] == fast.content_hash
    assert written["speedups"]["vs_vendor"] == pytest.approx(0.5059 / 0.5121)
    assert "vs_naive" not in written["speedups"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    evaluation = Evaluation.objects.get()
    assert (evaluation.status, evaluation.source) == ("passed", "recorded")


def test_the_naive_kernel_is_evaluated_first_and_becomes_the_baseline(
    tmp_path, kernel, plan, baseline, store, relu_task, use_recordings
):
    # Stand the recorded baseline in for relu's naive kernel, which has no recording.
    relu_task.naive_candidate = store(baseline)
    relu_task.save()
    verdict_path = tmp_path / "verdict.json"

    out, err = evaluate("--task", "relu", str(kernel), "--plan", str(plan), "--json", str(verdict_path))

    assert "Evaluating the naive relu kernel first" in err
    assert "1.20x the naive kernel (0.6144 ms)" in out
    assert json.loads(verdict_path.read_text())["speedups"]["vs_naive"] == pytest.approx(0.6144 / 0.5121)
    assert Evaluation.objects.filter(status="passed").count() == 2


def test_a_naive_kernel_without_a_recording_leaves_no_baseline_but_the_kernel_is_judged(
    kernel, plan, use_recordings
):
    out, err = evaluate("--task", "relu", str(kernel), "--plan", str(plan))

    assert "No naive baseline: the naive kernel is failed (no recorded verdict" in err
    assert "Verdict: PASSED" in out
    assert "the naive kernel" not in out


def test_a_rejected_kernel_prints_why_and_exits_with_status_2(tmp_path, leaky, use_recordings):
    kernel = write(tmp_path, "leaky.cu", leaky.source)
    plan = write(tmp_path, "leaky.json", json.dumps(leaky.plan))
    out = StringIO()

    with pytest.raises(CommandError, match="rejected by the 'wrong_values' guard") as caught:
        call_command(
            "evaluate", "--task", "relu", kernel, "--plan", plan, "--no-naive", stdout=out, stderr=StringIO()
        )

    assert caught.value.returncode == 2
    assert "Verdict: REJECTED by guard 'wrong_values'" in out.getvalue()
    assert "497 of 1000 elements differ" in out.getvalue()


def test_a_kernel_with_no_recording_fails_with_the_reason(tmp_path, fast, plan, use_recordings):
    kernel = write(tmp_path, "other.cu", fast.source + "\n// changed\n")

    with pytest.raises(CommandError, match="the evaluation failed: no recorded verdict"):
        evaluate("--task", "relu", kernel, "--plan", str(plan), "--no-naive")
    assert Evaluation.objects.get().status == "failed"


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs the CUDA compiler")
def test_with_the_real_gate_and_no_plan_the_tasks_naive_plan_is_used(tmp_path, settings):
    settings.OPTIML_EVALUATOR = "gate"
    settings.OPTIML_WORKDIR = tmp_path / "work"
    spec = task_registry.get("relu")
    kernel = write(tmp_path, "relu.cu", spec.naive_source)

    out, _ = evaluate("--task", "relu", kernel, "--no-profile")

    expected = HarnessCandidate.from_source_and_plan(spec.naive_source, spec.naive_plan)
    evaluation = Evaluation.objects.get()
    assert evaluation.candidate.content_hash == expected.content_hash()
    assert evaluation.source == "gate"
    assert "Compile: ok" in out
    if gate.gpu_name() is None:
        assert evaluation.status == "incomplete"
        assert "running it needs a GPU host" in out
