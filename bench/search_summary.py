"""Re-derive a search results file's per-task answers by replaying its recordings.

    python bench/search_summary.py bench/results/2026-11-29-h200-search.json

Each task row of the file names the recording its search wrote on the GPU host. The
search is replayed over it (same seed, same sources, same fast-math setting as the CLI),
which reproduces the tree the GPU run grew, and the row's answer (best time, speedups,
the evaluation it was found at, the "why it is faster" account) is rewritten from the
replayed tree. Use it when the search's notion of its answer changes, as when screened
times stopped counting as a best. Counts and GPU time are left as measured. Nothing
here measures anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from search.engine.__main__ import fast_math_allowed  # noqa: E402
from search.engine.evaluators import ReplayEvaluator  # noqa: E402
from search.engine.explain import why_faster  # noqa: E402
from search.engine.judges import RuleJudge  # noqa: E402
from search.engine.rewrites import RewriteSource, all_rewrites  # noqa: E402
from search.engine.search import Search, SearchConfig, run_search  # noqa: E402
from search.engine.sources import TunableSource  # noqa: E402

COPY_CEILING_BYTES_PER_S = 4.25e12  # ../shared/GPU.md, torch copy_ of 4 GiB on the H200
ROOT = Path(__file__).resolve().parents[1]
# The rewrites the suite's H200 searches (results/2026-11-29-h200-search/) ran with: a replay of
# them must leave out the ones written since, or it asks for kernels that were never measured.
SUITE_REWRITES = tuple(r for r in all_rewrites() if r.name not in {"vectorize_rows", "online_softmax"})


def replay(recording: Path, seed: int = 0) -> Search:
    evaluator = ReplayEvaluator(recording)
    task = tasks.get(evaluator.task)
    budget = sum(1 for _ in json.loads(recording.read_text())["recorded"])
    judge = RuleJudge()
    search = Search(task.name, Candidate.from_source_and_plan(task.naive_source, task.naive_plan),
                    judge=judge, fallback_judge=judge,
                    sources=[TunableSource(), RewriteSource(SUITE_REWRITES)],
                    config=SearchConfig(budget=budget, seed=seed),
                    tolerance_allows_fast_math=fast_math_allowed(task))
    run_search(search, evaluator, budget=budget)
    if any(n.measurement is not None and n.measurement.status == "error" for n in search.tree.nodes.values()):
        raise SystemExit(f"{recording}: the replay asked for kernels that were not recorded")
    return search


def answer(search: Search) -> dict:
    task = tasks.get(search.task)
    summary, best = search.summary(), search.tree.best
    best_ms, moved = summary["best_time_ms"], task.bytes(task.sizes)
    return {
        "naive_ms": summary["root_time_ms"], "best_ms": best_ms, "best_spread_ms": summary["best_spread_ms"],
        "best_node": f"{best.proposal.source}: {best.proposal.title}",
        "best_path": [n.proposal.source for n in search.tree.path(best.id)[1:]],
        "best_vs_naive": summary["speedup_vs_root"],
        "vendor_ms": task.vendor.time_ms if task.vendor else None,
        "best_vs_vendor": task.vendor.time_ms / best_ms if task.vendor else None,
        "best_effective_gbs": moved / (best_ms * 1e-3) / 1e9,
        "best_share_of_copy_ceiling": moved / (best_ms * 1e-3) / COPY_CEILING_BYTES_PER_S,
        "best_found_at_evaluation": summary["best_found_at_evaluation"],
        "why": why_faster(search.tree),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    args = parser.parse_args()
    data = json.loads(args.results.read_text())
    for row in data["tasks"]:
        row.update(answer(replay(ROOT / row["recording"])))
    write_json_atomically(args.results, data, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
