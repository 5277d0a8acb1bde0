"""`python -m search.engine optimize` on replayed (synthetic) measurements: progress lines,
the why-faster account, the summary and the trajectory JSON."""

from __future__ import annotations

import json

import pytest
from engine_fakes import FixedJudge, StepSource, write_recordings

from profiling.harness import tasks
from profiling.harness.gate import GateOptions
from profiling.harness.seeds import SEED_BITS
from search.engine.__main__ import build_parser, fast_math_allowed, optimize
from search.engine.evaluators import ReplayEvaluator
from search.engine.search import Search


def run_cli(tmp_path, *extra: str, dedupe: bool = False) -> tuple[int, list[str]]:
    """The CLI on the synthetic table, which times UNROLL and VEC variants as if relu's
    kernel read them; it does not, so each compiles to its BLOCK's binary: without
    --no-dedupe those are not evaluated (tests of dedupe below)."""
    recordings = write_recordings(tmp_path / "relu.json")
    args = build_parser().parse_args(["optimize", "--task", "relu", "--budget", "12", "--seed", "3",
                                      "--replay", str(recordings), *extra,
                                      *(() if dedupe else ("--no-dedupe",))])
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
    assert "vs the vendor" not in text  # a synthetic table is no H200: the recorded time is not its
    assert "candidates evaluated: 12" in text and "best found at evaluation" in text
    assert "replayed" in text


def test_optimize_writes_a_trajectory_that_resumes(tmp_path):
    out = tmp_path / "run.json"

    code, _ = run_cli(tmp_path, "--json", str(out))

    data = json.loads(out.read_text())
    assert code == 0
    assert data["summary"]["evaluations"] == 12 and data["summary"]["replayed"] is True
    assert data["summary"]["speedup_vs_vendor"] is None and data["summary"]["vendor_time_ms"] is None
    assert data["why"][-1]["to"] == data["summary"]["best_id"]
    assert len(data["rows"]) == 12
    restored = Search.from_dict(data["search"], FixedJudge(), [StepSource()])
    assert restored.tree.best_id == data["summary"]["best_id"]


def test_the_summary_compares_with_the_vendor_time_recorded_on_the_gpu_that_measured_the_best(tmp_path):
    out = tmp_path / "run.json"
    recordings = write_recordings(tmp_path / "relu.json")  # the synthetic table, as if an H200 measured it
    table = json.loads(recordings.read_text())
    table["gpu"] = "NVIDIA H200"
    for measurement in table["recorded"].values():
        measurement["gpu"] = "NVIDIA H200"
    recordings.write_text(json.dumps(table))
    args = build_parser().parse_args(["optimize", "--task", "relu", "--budget", "12", "--seed", "3",
                                      "--replay", str(recordings), "--json", str(out), "--no-dedupe"])
    lines: list[str] = []
    optimize(args, judge=FixedJudge(), fallback_judge=FixedJudge(), sources=[StepSource()], out=lines.append)

    summary = json.loads(out.read_text())["summary"]
    assert summary["speedup_vs_vendor"] == pytest.approx(0.5059 / summary["best_time_ms"])
    assert "recorded on the NVIDIA H200" in summary["vendor_source"]
    assert "vs the vendor (torch 2.11 relu" in "\n".join(lines)


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


def test_a_kernel_that_compiles_to_an_earlier_nodes_binary_is_not_evaluated(tmp_path):
    """Real nvcc: relu's naive kernel does not read UNROLL or VEC, so a variant that sets
    only those compiles to its parent's cubin, with the same launches."""
    out = tmp_path / "run.json"

    code, lines = run_cli(tmp_path, "--json", str(out), dedupe=True)

    data = json.loads(out.read_text())
    nodes = data["search"]["tree"]["nodes"]
    duplicates = [n for n in nodes if n["duplicate_of"] is not None]
    measured = [n for n in nodes if n["evaluation"] is not None]
    assert code == 0 and duplicates
    assert data["summary"]["evaluations"] == len(measured) < 12  # the search ran out of binaries
    assert len({n["binary"] for n in measured}) == len(measured)
    by_id = {n["id"]: n for n in nodes}
    for node in duplicates:
        twin = by_id[node["duplicate_of"]]
        assert twin["id"] < node["id"] and twin["binary"] == node["binary"]
        assert node["reused"] and node["evaluation"] is None and node["untried"] == []
        assert node["measurement"] == twin["measurement"]
        assert node["diagnosis"]["bottleneck"] == "duplicate"
        assert f"the same binary as node #{twin['id']}" in node["diagnosis"]["summary"]
    assert "[ reused] node 1 <- 0 tunable: UNROLL 1->2 -> " in "\n".join(lines)
    assert any(line.endswith("(same binary as node 0)") for line in lines)


def test_no_dedupe_evaluates_every_kernel_as_searches_recorded_before_dedupe_did(tmp_path):
    out = tmp_path / "run.json"

    run_cli(tmp_path, "--json", str(out))

    data = json.loads(out.read_text())
    assert data["summary"]["evaluations"] == 12
    assert all(n["duplicate_of"] is None for n in data["search"]["tree"]["nodes"])


def test_fast_math_is_offered_only_where_the_tolerance_allows_it():
    assert not fast_math_allowed(tasks.get("relu"))  # exact: max(x, 0) is copied
    assert fast_math_allowed(tasks.get("softmax"))


# -- two seeds: the search's (--seed) and the gate's (--gate-seed) ----------------------------


def run_cli_on_the_gate(tmp_path, monkeypatch, *extra: str) -> tuple[list[GateOptions], list[str], dict]:
    """optimize as on a GPU host, its gate stood in for by the synthetic recordings (this
    host has none): returns the options the CLI built its gate with, its lines, its JSON."""
    import search.engine.__main__ as cli
    from profiling.harness import gate

    tmp_path.mkdir(exist_ok=True)
    recordings = write_recordings(tmp_path / "relu.json")
    made: list[GateOptions] = []

    class GateOfRecordings(ReplayEvaluator):
        def __init__(self, options: GateOptions) -> None:
            made.append(options)
            super().__init__(recordings)

    monkeypatch.setattr(gate, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(cli, "GateEvaluator", GateOfRecordings)
    out = tmp_path / "run.json"
    args = build_parser().parse_args(["optimize", "--task", "relu", "--budget", "12", "--no-screen",
                                      "--workdir", str(tmp_path / "work"), "--json", str(out), *extra])
    lines: list[str] = []
    assert optimize(args, judge=FixedJudge(), fallback_judge=FixedJudge(), sources=[StepSource()],
                    out=lines.append) == 0
    return made, lines, json.loads(out.read_text())


def test_the_gate_seed_is_its_own_option_and_the_search_seed_only_steers_the_search(tmp_path, monkeypatch):
    made, lines, data = run_cli_on_the_gate(tmp_path, monkeypatch, "--seed", "3", "--gate-seed", "99")

    assert [options.seed for options in made] == [99]
    assert data["gate_seed"] == 99 and data["search"]["config"]["seed"] == 3
    assert any(line.startswith("gate seed 99:") for line in lines)


def test_without_a_gate_seed_a_random_one_is_drawn_printed_and_recorded_and_the_tree_is_the_same(
        tmp_path, monkeypatch):
    first, first_lines, first_data = run_cli_on_the_gate(tmp_path / "a", monkeypatch, "--seed", "3")
    again, _, again_data = run_cli_on_the_gate(tmp_path / "b", monkeypatch, "--seed", "3")

    seeds = {first[0].seed, again[0].seed}
    assert len(seeds) == 2 and all(0 <= seed < 2**SEED_BITS for seed in seeds)
    assert first_data["gate_seed"] == first[0].seed
    assert any(f"--gate-seed {first[0].seed}" in line for line in first_lines)
    assert first_data["rows"] == again_data["rows"]  # --seed alone decides the tree


@pytest.mark.parametrize("value", ["-1", str(2**SEED_BITS)])
def test_a_gate_seed_outside_the_workers_range_is_refused(value):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["optimize", "--task", "relu", "--gate-seed", value])


def test_sources_are_named_short_or_by_dotted_path():
    from search.engine.__main__ import _make_sources

    named = _make_sources(["skills", "rewrites", "tunables"])
    assert [type(s).__name__ for s in named] == ["SkillSource", "RewriteSource", "TunableSource"]
    (dotted,) = _make_sources(["search.engine.sources.TunableSource"])
    assert type(dotted).__name__ == "TunableSource"
    assert build_parser().parse_args(["optimize", "--task", "relu"]).sources == "tunables,rewrites,skills"
    for wrong, said in (("skill", "not one of tunables, rewrites, skills"), ("no.such.Source", "No module")):
        with pytest.raises(SystemExit, match=said):
            _make_sources([wrong])


def test_a_benchmark_that_times_the_vendor_itself_can_leave_the_gates_comparisons_off(tmp_path):
    from search.engine.__main__ import gate_options

    base = ["optimize", "--task", "relu"]
    on = gate_options(build_parser().parse_args(base), gate_seed=1, workdir=tmp_path)
    off = gate_options(build_parser().parse_args([*base, "--no-comparisons"]), gate_seed=1, workdir=tmp_path)
    assert on.measure_comparisons is True and off.measure_comparisons is False
    assert on.identity() == off.identity()  # what is compared with, not how the kernel is checked
