"""Summarise search recordings made on a GPU host into one results file.

    python bench/search_summary.py --out bench/results/2026-11-29-h200-search.json \
        bench/results/2026-11-29-h200-search/rec-*.json

Each recording is what `python -m search.engine optimize ... --record FILE` measured,
in evaluation order (the order the search asked). Nothing here measures anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from search.engine.evaluators import ReplayEvaluator  # noqa: E402
from search.engine.judges import RuleJudge  # noqa: E402
from search.engine.rewrites import RewriteSource  # noqa: E402
from search.engine.search import Search, SearchConfig, run_search  # noqa: E402
from search.engine.sources import TunableSource  # noqa: E402

COPY_CEILING_BYTES_PER_S = 4.25e12  # ../shared/GPU.md, torch copy_ of 4 GiB on the H200


def summarise(path: Path, seed: int) -> dict:
    """Replay the search over its own recording (same seed, same proposals) to recover the
    order of evaluations, then read times and GPU seconds off the recorded verdicts."""
    data = json.loads(path.read_text())
    task = tasks.get(data["task"])
    judge = RuleJudge()
    search = Search(task.name, Candidate.from_source_and_plan(task.naive_source, task.naive_plan),
                    judge=judge, fallback_judge=judge, sources=[TunableSource(), RewriteSource()],
                    config=SearchConfig(budget=len(data["recorded"]), seed=seed))
    run_search(search, ReplayEvaluator(path), budget=len(data["recorded"]))
    summary = search.summary()
    if any(not n.passed for n in search.tree.nodes.values()):
        raise SystemExit(f"{path}: the replay asked for kernels that were not recorded")
    seconds = sum(m["verdict"].get("seconds", 0.0) for m in data["recorded"].values())
    best_ms, moved = summary["best_time_ms"], task.bytes(task.sizes)
    return {
        "task": task.name, "recording": str(path), "gpu": data["gpu"], "seed": seed,
        "candidates_evaluated": summary["evaluations"],
        "naive_ms": summary["root_time_ms"], "best_ms": best_ms,
        "best_spread_ms": summary["best_spread_ms"],
        "best_node": search.tree.best.proposal.source + ": " + search.tree.best.proposal.title,
        "best_vs_naive": summary["speedup_vs_root"],
        "vendor_ms": task.vendor.time_ms if task.vendor else None,
        "best_vs_vendor": task.vendor.time_ms / best_ms if task.vendor else None,
        "best_effective_gbs": moved / (best_ms * 1e-3) / 1e9,
        "best_share_of_copy_ceiling": moved / (best_ms * 1e-3) / COPY_CEILING_BYTES_PER_S,
        "best_found_at_evaluation": summary["best_found_at_evaluation"],
        "gpu_minutes": seconds / 60,
        "candidates_per_gpu_minute": summary["evaluations"] / (seconds / 60),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--note", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("recordings", nargs="+", type=Path)
    args = parser.parse_args()
    result = {"what": "searches from each task's naive kernel, rule judge, no LLM",
              "note": args.note, "tasks": [summarise(p, args.seed) for p in args.recordings]}
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
