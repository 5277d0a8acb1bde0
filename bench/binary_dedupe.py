"""What binary dedupe saves on the committed H200 searches (issue 12), without a GPU.

    python bench/binary_dedupe.py --out bench/results/$(date +%F)-binary-dedupe.json \\
        [--recordings bench/results/2026-11-29-h200-search]

Each task's suite search (bench/results/2026-11-29-h200-search/rec-<task>.json, the
screen's and the full gate's verdicts) is replayed as CI replays it (same seed, sources
and budget: the same tree), and every node's binary is read from its verdict
(search/engine/binaries.py: the cubin's SHA-256 and every launch resolved at every size
the gate runs). Per task:

- `repeats`: evaluations whose binary an earlier node had already run;
- `saved`: evaluations a search that refines each binary once would not have spent on
  those repeats and the subtrees below them (what dedupe frees for other kernels);
- `compiled_ahead`: the same search replayed as the web path runs it, through
  run_search's `binary_of`: each asked kernel compiled here first (real nvcc, its cubin
  hashed: binaries.compiled_binary) and told to the search (Search.tell_binary) before it
  is evaluated: `caught` duplicates (nodes done from their twin's measurement) were done
  without an evaluation; the evaluations they freed went to kernels the recording does
  not hold (`new_kernels`: the replay cannot measure them, the GPU would), so its best
  is at most the recorded one's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.search_summary import SUITE_REWRITES  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from search.engine.__main__ import fast_math_allowed  # noqa: E402
from search.engine.binaries import compiled_binary, measured_binary  # noqa: E402
from search.engine.evaluators import ReplayEvaluator  # noqa: E402
from search.engine.judges import RuleJudge  # noqa: E402
from search.engine.rewrites import RewriteSource  # noqa: E402
from search.engine.search import Search, SearchConfig, run_search  # noqa: E402
from search.engine.sources import TunableSource  # noqa: E402

RECORDINGS = REPO / "bench" / "results" / "2026-11-29-h200-search"


def suite_search(task_name: str, budget: int, *,
                 binary_sizes: list[dict[str, int]] | None = None) -> Search:
    """The search CI replays for this task: its suite sources, seed 0, this budget."""
    task = tasks.get(task_name)
    judge = RuleJudge()
    return Search(task_name, Candidate.from_source_and_plan(task.naive_source, task.naive_plan),
                  judge=judge, fallback_judge=judge,
                  sources=[TunableSource(), RewriteSource(SUITE_REWRITES)],
                  config=SearchConfig(budget=budget, seed=0),
                  tolerance_allows_fast_math=fast_math_allowed(task), binary_sizes=binary_sizes)


def replayed(task_name: str, recordings: Path) -> tuple[Search, int]:
    evaluator = ReplayEvaluator(recordings / f"rec-{task_name}.json")
    budget = len(evaluator._recorded)
    return run_search(suite_search(task_name, budget), evaluator, budget=budget), budget


def one_task(task_name: str, recordings: Path) -> dict:
    task = tasks.get(task_name)
    sizes = [*task.l0_sizes, task.sizes]
    search, budget = replayed(task_name, recordings)
    measured = [n for n in search.tree.nodes.values() if n.done and not n.reused]
    first: dict[str, int] = {}
    repeats: set[int] = set()
    no_key = 0
    for node in sorted(measured, key=lambda n: n.evaluation):
        key = measured_binary(node.proposal.candidate, node.measurement, sizes)
        if key is None:
            no_key += 1
            continue
        if first.setdefault(key, node.id) != node.id:
            repeats.add(node.id)
    below = {n.id for n in measured if any(a.id in repeats for a in search.tree.path(n.id))}
    ahead = compiled_ahead(task_name, recordings, budget)
    best = search.tree.best.measurement.time_ms if search.tree.best else None
    return {
        "task": task_name, "evaluations": len(measured), "budget": budget,
        "without_a_binary": no_key, "repeats": len(repeats), "saved": len(below),
        "saved_share": round(len(below) / len(measured), 3) if measured else None,
        "recorded_best_ms": best, "compiled_ahead": ahead,
    }


def compiled_ahead(task_name: str, recordings: Path, budget: int) -> dict:
    """The replay with each asked kernel compiled here before it is evaluated
    (run_search's `binary_of`, as the command line runs it)."""
    task = tasks.get(task_name)
    sizes = [*task.l0_sizes, task.sizes]
    compiled = 0

    def binary_of(candidate: Candidate) -> str | None:
        nonlocal compiled
        compiled += 1
        return compiled_binary(candidate, sizes)

    evaluator = ReplayEvaluator(recordings / f"rec-{task_name}.json")
    search = run_search(suite_search(task_name, budget, binary_sizes=sizes), evaluator,
                        budget=budget, binary_of=binary_of)
    done = [n for n in search.tree.nodes.values() if n.done]
    # Done from a twin's measurement, no evaluation spent (Search.tell_binary); a node
    # evaluated and only then found to repeat a binary has duplicate_of too, but was not caught.
    caught = [n for n in done if n.duplicate_of is not None and n.reused]
    new = [n for n in done if not n.reused and n.measurement.status == "error"
           and "no recorded" in (n.measurement.message or "")]
    return {"evaluations": search.evaluations, "compiled": compiled, "caught": len(caught),
            "new_kernels": len(new),
            "best_ms": search.tree.best.measurement.time_ms if search.tree.best else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--recordings", type=Path, default=RECORDINGS)
    args = parser.parse_args()
    names = sorted(p.name.removeprefix("rec-").removesuffix(".json")
                   for p in args.recordings.glob("rec-*.json"))
    rows = []
    for name in names:
        rows.append(one_task(name, args.recordings))
        print(json.dumps(rows[-1]), flush=True)
    report = {
        "what": "binary dedupe over the committed H200 suite searches, replayed (issue 12): evaluations "
                "that repeated another node's binary, and those spent below such repeats",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "recordings": str(args.recordings.relative_to(REPO) if args.recordings.is_relative_to(REPO)
                          else args.recordings),
        "gpu": "NVIDIA H200 (the recordings'; this replay needs none)",
        "tasks": rows,
        "total": {"evaluations": sum(r["evaluations"] for r in rows),
                  "repeats": sum(r["repeats"] for r in rows), "saved": sum(r["saved"] for r in rows)},
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
