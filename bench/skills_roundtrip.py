"""The skill cards' roundtrip on a GPU host (KLineage part 2's protocol, issue 10):
from each expert's plain attempt (all flags off, as plain CUDA), a search whose only
proposal source is the skill cards (no LLM, no rewrites, no tunables) must reach at least
SHARE of the expert's speed within the budget.

    python bench/skills_roundtrip.py --out bench/results/$(date +%F)-h200-roundtrip.json \\
        --record-dir bench/results/$(date +%F)-h200-roundtrip [--tasks relu,softmax] [--budget 60]

Per task: the search (`python -m search.engine optimize --from <plain attempt> --sources
lineage.engine.skills.SkillSource --judge rules`, its recording and trajectory beside the
JSON), the expert's time from its recorded lineage (bench/results/*-h200-lineages*/, the
full gate), the best time the search's full gate passed, and whether that is a
reproduction: best_ms <= expert_ms / SHARE. The cards are the ones induced from this
tree's recordings (skills.recorded_cards), as the source uses them. `--rehearse` runs the
same searches here, without a GPU, over the recorded lineages' states
(lineage_replay.py): a lower bound, said so in the JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lineage.engine import experts  # noqa: E402
from lineage.engine.walker import Lineage  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SHARE = 0.9  # of the expert's speed: the paper's "expert-level latency" allowance
SKILLS = "lineage.engine.skills.SkillSource"


def recorded_expert_ms(task: str, results: Path = RESULTS) -> float | None:
    """The expert's full-gate time in its newest recorded lineage (None: none recorded)."""
    for path in sorted(results.glob(f"*-h200-lineages*/lineage-{task}.json"), reverse=True):
        lineage = Lineage.from_dict(json.loads(path.read_text()))
        expert = experts.load(task)
        top = lineage.states.get(",".join(sorted(expert.all_on())))
        if top and top.measurement.get("status") == "passed" and top.measurement.get("level") == "full":
            return top.measurement.get("time_ms")
    return None


def roundtrip_verdict(best_ms: float | None, expert_ms: float | None, share: float = SHARE) -> dict:
    """Whether the search reproduced the expert: its best at least `share` of the expert's
    speed (best_ms <= expert_ms / share). Unknown when either time is missing."""
    if not best_ms or not expert_ms:
        return {"reproduced": None, "share_of_expert_speed": None}
    speed = expert_ms / best_ms
    return {"reproduced": speed >= share, "share_of_expert_speed": speed}


MAX_DEPTH = 12  # steps below the root: the deepest expert has nine optimizations


def search_argv(name: str, source: Path, plan: Path, budget: int, work: Path, record_dir: Path,
                extra: list[str] = ()) -> list[str]:
    """The search's command line: skills alone, the rule judge, from the plain attempt."""
    return ["optimize", "--task", name, "--from", str(source), "--plan", str(plan),
            "--budget", str(budget), "--judge", "rules", "--sources", SKILLS,
            "--max-depth", str(MAX_DEPTH), "--workdir", str(work / "gate"),
            "--record", str(record_dir / f"rec-{name}.json"),
            "--json", str(record_dir / f"trajectory-{name}.json"), *extra]


def run_task(name: str, args: argparse.Namespace) -> dict:
    from search.engine.__main__ import build_parser, optimize

    expert = experts.load(name)
    plain = expert.written_candidate(frozenset())  # as a person would have written it
    record_dir, work = Path(args.record_dir), Path(args.workdir) / name
    work.mkdir(parents=True, exist_ok=True)
    source, plan = work / "plain.cu", work / "plan.json"
    source.write_text(plain.source)
    plan.write_text(json.dumps(plain.plan_dict()))
    extra = ["--no-profile"] if args.no_profile else []
    if args.time_limit:
        extra += ["--time-limit", str(args.time_limit)]
    argv = search_argv(name, source, plan, args.budget, work, record_dir, extra)
    evaluator = None
    if args.rehearse:  # the lineage's recorded states, no GPU (lineage_replay.py)
        from lineage.engine.lineage_replay import LineageReplay

        evaluator = LineageReplay(expert, newest_lineage(name))
    optimize(build_parser().parse_args(argv), evaluator=evaluator,
             out=lambda line: print(line, flush=True))
    trajectory = json.loads((record_dir / f"trajectory-{name}.json").read_text())
    summary = trajectory["summary"]
    expert_ms = recorded_expert_ms(name)
    best_ms = summary["best_time_ms"]
    if args.rehearse:  # the lineage's states were screened: the best at any level
        best_ms = min((r["time_ms"] for r in trajectory["rows"]
                       if r["status"] == "passed" and r["time_ms"]), default=None)
    return {"task": name, "argv": ["python", "-m", "search.engine", *argv],
            "plain_ms": summary["root_time_ms"], "best_ms": best_ms,
            "expert_ms": expert_ms, **roundtrip_verdict(best_ms, expert_ms),
            "evaluations": summary["evaluations"],
            "gpu_minutes": summary.get("evaluation_seconds", 0) / 60,
            "path": best_path(trajectory["rows"])}


def newest_lineage(task: str, results: Path = RESULTS) -> Lineage:
    path = sorted(results.glob(f"*-h200-lineages*/lineage-{task}.json"))[-1]
    return Lineage.from_dict(json.loads(path.read_text()))


def best_path(rows: list[dict]) -> list[str]:
    """The titles from the root to the fastest passed node, the cards that made it."""
    by_id = {r["id"]: r for r in rows}
    passed = [r for r in rows if r["status"] == "passed" and r["time_ms"]]
    if not passed:
        return []
    node, path = min(passed, key=lambda r: r["time_ms"]), []
    while node is not None:
        path.append(f"{node['source']}: {node['title']}")
        node = by_id.get(node["parent"])
    return path[::-1]


REHEARSAL = " (REHEARSAL: the recorded lineages' states replayed, no GPU)"


def _gpu_facts() -> dict:
    from bench.suite import gpu_facts  # torch: on the GPU host only

    return gpu_facts()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(experts.tasks_with_experts()))
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--workdir", default=tempfile.mkdtemp(prefix="optiml-roundtrip-"))
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--no-profile", action="store_true", help="the full gate without Nsight Compute")
    parser.add_argument("--time-limit", type=float, help="minutes per task's search")
    parser.add_argument("--rehearse", action="store_true",
                        help="no GPU: serve the recorded lineages' states (lineage_replay.py); "
                             "a lower bound, as any candidate outside the lattice is an error")
    args = parser.parse_args()
    Path(args.record_dir).mkdir(parents=True, exist_ok=True)
    result = {"what": f"the skill cards' roundtrip: skills only from each expert's plain attempt, "
                      f"budget {args.budget}, reproduced at {SHARE:.0%} of the expert's speed"
                      + (REHEARSAL if args.rehearse else ""),
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": {} if args.rehearse else _gpu_facts(), "tasks": {}}
    from lineage.engine.skills import recorded_cards

    recorded_cards()  # induced once, before any search's time limit starts
    for name in args.tasks.split(","):
        try:
            result["tasks"][name] = run_task(name, args)
        except Exception as error:  # one task failing must not lose the others
            result["tasks"][name] = {"error": f"{type(error).__name__}: {error}"}
        done = [t for t in result["tasks"].values() if t.get("reproduced") is not None]
        result["reproduced"] = f"{sum(t['reproduced'] for t in done)} of {len(done)}"
        write_json_atomically(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
