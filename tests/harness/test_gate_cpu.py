"""The gate on a host without a GPU: it compiles, checks the plan, and says what it cannot do."""

import json
import shutil

import pytest

from profiling.harness import tasks
from profiling.harness.__main__ import main as cli
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import GateOptions, evaluate, gpu_name

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None or gpu_name() is not None, reason="for hosts with nvcc and no GPU"
)


def naive(name):
    task = tasks.get(name)
    return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)


@pytest.mark.parametrize("name", [t.name for t in tasks.all_tasks()])
def test_every_naive_kernel_compiles_and_is_marked_as_needing_a_gpu(name):
    verdict = evaluate(name, naive(name), GateOptions())
    assert verdict.status == "incomplete", verdict.message
    assert verdict.guard is None and "needs a GPU host" in verdict.message
    assert verdict.compile.ok and verdict.compile.kernels


def test_a_compile_error_is_a_rejection_with_the_line():
    task = tasks.get("relu")
    broken = Candidate.from_source_and_plan(task.naive_source.replace("fmaxf", "fmaxx"), task.naive_plan)
    verdict = evaluate("relu", broken)
    assert (verdict.status, verdict.guard) == ("rejected", "compile")
    assert verdict.message.startswith("line ") and "fmaxx" in verdict.message


def test_a_plan_that_launches_a_missing_kernel_is_rejected_naming_what_exists():
    task = tasks.get("relu")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0], "kernel": "relu2"}]}
    verdict = evaluate("relu", Candidate.from_source_and_plan(task.naive_source, plan))
    assert verdict.guard == "plan" and "'relu2'" in verdict.message and "relu" in verdict.message


@pytest.mark.parametrize("name", ["optiml_relu", "relu_optiml_"])
def test_a_kernel_named_like_the_harness_own_is_refused_as_compute_sanitizer_would_skip_it(name):
    task = tasks.get("relu")
    kernel = task.naive_plan["launches"][0]["kernel"]
    source = task.naive_source.replace(f"void {kernel}(", f"void {name}(")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0], "kernel": name}]}
    verdict = evaluate("relu", Candidate.from_source_and_plan(source, plan), GateOptions())
    assert (verdict.status, verdict.guard) == ("rejected", "source_policy"), verdict.message
    assert "compute-sanitizer does not check" in verdict.message


def test_a_plan_naming_an_unknown_size_is_rejected_before_compiling():
    task = tasks.get("relu")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0], "grid": ["cdiv(N, 256)"]}]}
    verdict = evaluate("relu", Candidate.from_source_and_plan(task.naive_source, plan))
    assert verdict.guard == "plan" and "unknown name 'N'" in verdict.message
    assert verdict.compile is None


def test_an_unknown_task_raises_with_the_known_names():
    with pytest.raises(tasks.UnknownTask, match="known tasks: .*softmax"):
        evaluate("softmaxx", naive("softmax"))


def test_malformed_candidates_say_which_field_is_wrong():
    with pytest.raises(CandidateError, match="launches"):
        Candidate.from_dict({"source": "x", "launches": []})
    with pytest.raises(CandidateError, match=r"launches\[0\].kernel"):
        Candidate.from_dict({"source": "x", "launches": [{"kernel": "1bad", "grid": [1], "block": [1]}]})
    with pytest.raises(CandidateError, match="tunable"):
        Candidate.from_dict(
            {
                "source": "x",
                "tunables": {"B": "big"},
                "launches": [{"kernel": "k", "grid": [1], "block": [1]}],
            }
        )


def test_the_content_hash_ignores_json_layout_but_not_content():
    a = Candidate.from_dict({"source": "s", "launches": [{"kernel": "k", "grid": 1, "block": [1]}]})
    b = Candidate.from_dict({"launches": [{"block": [1], "grid": 1, "kernel": "k"}], "source": "s"})
    c = Candidate.from_dict({"source": "s ", "launches": [{"kernel": "k", "grid": 1, "block": [1]}]})
    assert a.content_hash() == b.content_hash() != c.content_hash()


def test_the_command_line_reports_bad_input_in_one_line(tmp_path, capsys):
    assert cli(["evaluate", "--task", "nope", "--naive"]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err
    assert cli(["evaluate", "--task", "relu", str(tmp_path / "missing.cu")]) == 2
    assert "cannot read" in capsys.readouterr().err
    kernel = tmp_path / "k.cu"
    kernel.write_text(tasks.get("relu").naive_source)
    plan = tmp_path / "plan.json"
    plan.write_text("{not json")
    assert cli(["evaluate", "--task", "relu", str(kernel), "--plan", str(plan)]) == 2
    assert "not valid JSON: line 1" in capsys.readouterr().err


def test_the_command_line_writes_the_verdict_as_json(tmp_path, capsys):
    out = tmp_path / "verdict.json"
    assert cli(["evaluate", "--task", "relu", "--naive", "--json", str(out)]) == 1  # not run: no GPU
    data = json.loads(out.read_text())
    assert data["status"] == "incomplete" and data["compile"]["ok"]
    assert "needs a GPU host" in capsys.readouterr().out


def test_a_host_without_nvcc_is_an_error_of_the_host_not_a_rejection(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to find: no nvcc, no nvidia-smi
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path / "cache"))
    verdict = evaluate("relu", naive("relu"))
    assert verdict.status == "error" and verdict.guard is None
    assert "nvcc is not installed" in verdict.message


def test_an_expression_that_does_not_parse_is_a_candidate_error_naming_the_field():
    with pytest.raises(CandidateError, match=r"launches\[0\].grid: cannot parse"):
        Candidate.from_dict({"source": "x", "launches": [{"kernel": "k", "grid": ["cdiv(n,"], "block": [1]}]})
