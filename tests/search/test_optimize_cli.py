"""`python -m search.engine optimize` on replayed (synthetic) measurements: progress lines,
the why-faster account, the summary and the trajectory JSON."""

from __future__ import annotations

import json

import pytest
from engine_fakes import FixedJudge, StepSource, write_recordings

from profiling.harness import tasks
from search.engine.__main__ import build_parser, fast_math_allowed, optimize
from search.engine.search import Search


def run_cli(tmp_path, *extra: str) -> tuple[int, list[str]]:
    recordings = write_recordings(tmp_path / "relu.json")
    args = build_parser().parse_args(["optimize", "--task", "relu", "--budget", "12", "--seed", "3",
                                      "--replay", str(recordings), *extra])
    lines: list[str] = []
    code = optimize(args, judge=FixedJudge(), fallback_judge=FixedJudge(), sources=[StepSource()],
                    out=lines.append)
    return code, lines


def test_optimize_prints_progress_the_why_account_and_a_summary(tmp_path):
    code, lines = run_cli(tmp_path)
    text = "\n".join(lines)

    assert code == 0
    assert lines[0].startswith("replaying measurements recorded on synthetic table")
    assert sum(line.startswith("[") for line in lines) == 12  # one line per evaluation
    assert "[  1/12] node 0 root: naive kernel (the task's)" in text
    assert "Why it is faster:" in text and "Step 1: node 0 ->" in text
    assert "vs the vendor (torch 2.11 relu" in text
    assert "candidates evaluated: 12" in text and "best found at evaluation" in text
    assert "replayed" in text


def test_optimize_writes_a_trajectory_that_resumes(tmp_path):
    out = tmp_path / "run.json"

    code, _ = run_cli(tmp_path, "--json", str(out))

    data = json.loads(out.read_text())
    assert code == 0
    assert data["summary"]["evaluations"] == 12 and data["summary"]["replayed"] is True
    assert data["summary"]["speedup_vs_vendor"] == pytest.approx(
        0.5059 / data["summary"]["best_time_ms"])
    assert data["why"][-1]["to"] == data["summary"]["best_id"]
    assert len(data["rows"]) == 12
    restored = Search.from_dict(data["search"], FixedJudge(), [StepSource()])
    assert restored.tree.best_id == data["summary"]["best_id"]


def test_plan_without_a_kernel_source_is_refused(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text("{}")

    with pytest.raises(SystemExit, match="--plan needs --from"):
        run_cli(tmp_path, "--plan", str(plan))


def test_optimize_starts_from_a_given_kernel_file(tmp_path):
    source = tmp_path / "mine.cu"
    source.write_text(tasks.get("relu").naive_source.replace("Naive", "My"))

    code, lines = run_cli(tmp_path, "--from", str(source))

    assert code == 0
    assert "[  1/12] node 0 root: starting kernel mine.cu" in "\n".join(lines)
    # not in the synthetic recordings: an honest error, and nothing to improve on
    assert "no recording for this candidate" in "\n".join(lines)


def test_fast_math_is_offered_only_where_the_tolerance_allows_it():
    assert not fast_math_allowed(tasks.get("relu"))  # exact: max(x, 0) is copied
    assert fast_math_allowed(tasks.get("softmax"))
