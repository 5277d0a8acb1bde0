"""The skill cards on kernels they were not learned from (issue 10's transfer benchmark),
on a GPU host: from each task's naive kernel (written before and apart from the experts),
a search with skills + rewrites + tunables, no LLM, the vendor timed in the same run.

    python bench/skills_transfer.py --out bench/results/$(date +%F)-h200-transfer.json \\
        --record-dir bench/results/$(date +%F)-h200-transfer [--tasks relu,softmax] \\
        [--budget 100] [--leave-own-out] [--time-limit MINUTES]

With `--leave-own-out`, each task's search uses cards induced without its own lineage
(and without its expert's probes): nothing of that task's expert is in what it knows.
The cards reach the search through OPTIML_SKILL_CARDS (a cards file per task, beside
the recordings), as any deployment would give them.

Per task: the naive time, the best full-gate time, the vendor's (bench/vendor.py), the
expert's (its recorded lineage), best against both, evaluations, and the best's path,
which says whether it went through the task's own lineage (the root's `lineage:<task>`
entry, offered only while that lineage is in the cards): reuse, not transfer. Over the suite:
the geometric mean against the vendor (target >= 1.2x with every lineage in) and how
many tasks reach 0.7 of the expert's speed (target: 5 of 10 with each own lineage out).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import hashlib
import json
import math
import os
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.skills_roundtrip import MAX_DEPTH, best_path, recorded_expert_ms  # noqa: E402
from lineage.engine import cards, experts, probes  # noqa: E402
from lineage.engine.walker import Lineage  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SOURCES = ("search.engine.sources.TunableSource,search.engine.rewrites.RewriteSource,"
           "lineage.engine.skills.SkillSource")
EXPERT_SHARE = 0.7  # of the expert's speed, the leave-own-out target


def cards_without(task: str | None, results: Path = RESULTS) -> list[dict]:
    """The cards induced from the recorded lineages and probes, the task's own left out
    (None: none left out)."""
    lineages = [Lineage.from_dict(json.loads(Path(p).read_text()))
                for p in sorted(glob.glob(str(results / "*-h200-lineages*" / "lineage-*.json")))]
    found: dict[str, list] = {}
    for path in sorted(glob.glob(str(results / "*-h200-probes" / "probes-*.json"))):
        name, _gpu, items = probes.from_dict(json.loads(Path(path).read_text()))
        if name != task:
            found.setdefault(name, []).extend(items)
    kept = [lineage for lineage in lineages if lineage.task != task]
    return [card.to_dict() for card in cards.induce(kept, found)]


def cards_file(name: str, args: argparse.Namespace) -> Path:
    """The cards file the task's search reads (OPTIML_SKILL_CARDS), in the work folder
    (tens of MB: not a result to commit; the result keeps its digest): one for every task
    with all lineages in, one per task without its own. Copied from --cards-from (induced
    earlier, on a CPU, by --induce-only) or induced here (about half a minute each)."""
    left_out = name if args.leave_own_out else None
    path = Path(args.workdir) / (f"cards-without-{name}.json" if left_out else "cards-all.json")
    if path.exists():
        return path
    if args.cards_from:
        given = json.loads((Path(args.cards_from) / path.name).read_text())
        if given.get("format") != cards.CARDS_FORMAT or given.get("left_out") != left_out:
            raise ValueError(f"{args.cards_from}/{path.name}: not the cards this run needs "
                             f"(left out: {given.get('left_out')!r}, wanted {left_out!r})")
        write_json_atomically(path, given)
        return path
    write_json_atomically(path, {"format": cards.CARDS_FORMAT, "left_out": left_out,
                                 "cards": cards_without(left_out)})
    return path


def cards_facts(path: Path) -> dict:
    """What the result keeps of a cards file: what was left out, the cards, the digest."""
    data = json.loads(path.read_text())
    return {"left_out": data["left_out"], "cards": sorted(c["id"] for c in data["cards"]),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def suite_summary(rows: dict[str, dict]) -> dict:
    """The geometric mean of best against the vendor, and the tasks at 0.7 of the expert."""
    speeds = [r["vs_vendor"] for r in rows.values() if r.get("vs_vendor")]
    at_share = sorted(t for t, r in rows.items() if (r.get("share_of_expert_speed") or 0) >= EXPERT_SHARE)
    return {"tasks": len(rows), "measured": len(speeds),
            "geomean_vs_vendor": math.exp(sum(map(math.log, speeds)) / len(speeds)) if speeds else None,
            f"at_{EXPERT_SHARE}_of_expert": at_share,
            "through_own_lineage": sorted(t for t, r in rows.items() if r.get("through_own_lineage"))}


def run_task(name: str, args: argparse.Namespace) -> dict:
    from bench.vendor import median, time_vendor  # torch: GPU hosts only
    from search.engine.__main__ import build_parser, optimize

    task = tasks.get(name)
    record_dir, work = Path(args.record_dir), Path(args.workdir) / name
    work.mkdir(parents=True, exist_ok=True)
    source, plan = work / "naive.cu", work / "plan.json"
    source.write_text(task.naive_source)
    plan.write_text(json.dumps(task.naive_plan))
    cards_path = cards_file(name, args)
    os.environ["OPTIML_SKILL_CARDS"] = str(cards_path)
    # the skeleton cards too: a card whose only source is this task is not proposed, and
    # the others cite (and expect from) the other tasks' lineages only
    os.environ["OPTIML_SKILLS_LEAVE_OUT_OWN"] = "1" if args.leave_own_out else "0"
    argv = ["optimize", "--task", name, "--from", str(source), "--plan", str(plan),
            "--budget", str(args.budget), "--judge", "rules", "--sources", SOURCES,
            "--max-depth", str(MAX_DEPTH), "--workdir", str(work / "gate"),
            "--record", str(record_dir / f"rec-{name}.json"),
            "--json", str(record_dir / f"trajectory-{name}.json")]
    if args.no_profile:
        argv.append("--no-profile")
    if args.time_limit:
        argv += ["--time-limit", str(args.time_limit)]
    optimize(build_parser().parse_args(argv), out=lambda line: print(line, flush=True))
    trajectory = json.loads((record_dir / f"trajectory-{name}.json").read_text())
    summary, path = trajectory["summary"], best_path(trajectory["rows"])
    vendor_ms = median(time_vendor(name, task.sizes))
    best_ms, expert_ms = summary["best_time_ms"], recorded_expert_ms(name)
    return {"task": name, "argv": ["python", "-m", "search.engine", *argv],
            "naive_ms": summary["root_time_ms"], "best_ms": best_ms, "vendor_ms": vendor_ms,
            "expert_ms": expert_ms, "vs_vendor": vendor_ms / best_ms if best_ms else None,
            "share_of_expert_speed": expert_ms / best_ms if best_ms and expert_ms else None,
            "evaluations": summary["evaluations"],
            "gpu_minutes": summary.get("evaluation_seconds", 0) / 60, "path": path,
            # whether the best went through the task's own lineage (skills.SkillSource's
            # entry at the root): reuse of that lineage, not transfer of a card
            "through_own_lineage": any(step.startswith("lineage:") for step in path),
            "cards": cards_facts(cards_path)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(experts.tasks_with_experts()))
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--leave-own-out", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--time-limit", type=float, help="minutes per task's search")
    parser.add_argument("--workdir", default=tempfile.mkdtemp(prefix="optiml-transfer-"))
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cards-from", help="a folder of cards-<task>.json (--induce-only wrote)")
    parser.add_argument("--induce-only", action="store_true",
                        help="write the tasks' cards files into --workdir and stop (no GPU)")
    args = parser.parse_args()
    Path(args.record_dir).mkdir(parents=True, exist_ok=True)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.induce_only:
        for name in args.tasks.split(","):
            print(cards_file(name, args), flush=True)
        return 0
    from bench.suite import gpu_facts

    result = {"what": f"skills + rewrites + tunables from the naive kernels, no LLM, budget {args.budget}"
                      + (", each task's own lineage left out of the cards" if args.leave_own_out else ""),
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": gpu_facts(), "tasks": {}}
    for name in args.tasks.split(","):
        try:
            result["tasks"][name] = run_task(name, args)
        except Exception as error:  # one task failing must not lose the others
            result["tasks"][name] = {"error": f"{type(error).__name__}: {error}"}
        result["suite"] = suite_summary(result["tasks"])
        write_json_atomically(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
