"""Skeleton cards on operators the product never saw, without a search: each transfer
task's naive kernel is lifted to its family form, every skeleton card of that family
(induced from the suite's recorded lineages, none of them these tasks) is instantiated
with the task's own math, and the naive kernel and each instantiation go through the
full gate (profile off), the vendor (torch) timed in the same run, on a GPU host.

    python bench/skeleton_transfer.py --out $OUT/skeleton-transfer.json [--tasks gemv,where]
    python bench/skeleton_transfer.py --admission --out bench/results/<date>-<gpu>-skeleton-admission.json

With --admission it runs the cards' admission trials instead (skeleton_cards.admit): each
card on the plain kernel (all flags off) of each task whose lineage it was induced from,
that lineage left out of its expectation, and on the naive kernel of each transfer task
of its family; skeleton_cards.recorded() reads the newest such file under bench/results
and gives each card its status.

It measures what the cards carry by themselves (the first step of a search that takes
them); bench/transfer_suite.py measures the searches, skills on and off.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.transfer_suite import TASK_DIR, TASKS, time_vendor  # noqa: E402
from lineage.engine import skeleton_cards  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from profiling.harness.verdict import PASSED  # noqa: E402
from search.engine import forms  # noqa: E402
from search.engine.forms import skeletons  # noqa: E402

SEED = 20261206


def gate(name: str, candidate: Candidate, cache: Path) -> dict:
    verdict = evaluate(name, candidate, GateOptions(profile=False, seed=SEED, input_cache=str(cache)))
    return {"status": verdict.status, "guard": verdict.guard, "message": verdict.message[:300],
            "median_ms": verdict.timing.median_ms if verdict.timing else None,
            "seconds": round(verdict.seconds, 2)}


def run_task(name: str, cards: list[dict], cache: Path) -> dict:
    task = tasks.get(name)
    form = forms.lift(task.naive_source, task.naive_plan)
    row = {"task": name, "family": getattr(form, "family", None),
           "refused": getattr(form, "reason", None), "naive": gate(name, Candidate.from_source_and_plan(
               task.naive_source, task.naive_plan), cache), "cards": {}, "vendor_ms": None}
    if isinstance(form, forms.Refusal):
        row["vendor_ms"] = statistics.median(time_vendor(name, task.sizes))
        return row
    for card in (c for c in cards if c["family"] == form.family):
        emitted = skeletons.by_name(card["skeleton"]).emit(form, task.naive_plan, task)
        if isinstance(emitted, str):
            row["cards"][card["id"]] = {"not_applied": emitted}
            continue
        verdict = gate(name, Candidate.from_dict({**emitted.plan, "source": emitted.source}), cache)
        naive_ms, ms = row["naive"]["median_ms"], verdict["median_ms"]
        row["cards"][card["id"]] = {**verdict, "from": card["tasks"],
                                    "vs_naive": naive_ms / ms if naive_ms and ms else None}
    row["vendor_ms"] = vendor = statistics.median(time_vendor(name, task.sizes))
    for verdict in row["cards"].values():
        if verdict.get("median_ms"):
            verdict["vs_vendor"] = vendor / verdict["median_ms"]
    return row


def admission_trials(cards: list[dict], cache: Path, transfer: list[str]) -> dict:
    """Each card on the plain kernel (all flags off) of each task whose lineage it was
    induced from (that lineage left out of its expectation), and on the naive kernel of
    each transfer task that lifts to its family (a task no lineage comes from)."""
    from lineage.engine import experts

    starts = []
    for name in sorted({t for card in cards for t in card["tasks"]}):
        plain = experts.load(name).written_candidate(frozenset())
        starts.append((name, plain))
    for name in transfer:
        task = tasks.get(name)
        starts.append((name, Candidate.from_source_and_plan(task.naive_source, task.naive_plan)))
    admitted = {}
    for card in cards:
        trials = []
        for name, start in starts:
            form = forms.lift(start.source, start.plan_dict())
            own = name in card["tasks"]
            if not own and getattr(form, "family", None) != card["family"]:
                continue  # a transfer task of another family
            emitted = (skeletons.by_name(card["skeleton"]).emit(form, start.plan_dict(), tasks.get(name))
                       if isinstance(form, forms.Form) else form.reason)
            if isinstance(emitted, str):
                trials.append({"task": name, "passed": False, "speedup": None, "why": emitted})
                continue
            before = gate(name, start, cache)
            after = gate(name, Candidate.from_dict({**emitted.plan, "source": emitted.source}), cache)
            speedup = (before["median_ms"] / after["median_ms"]
                       if before["median_ms"] and after["median_ms"] else None)
            trials.append({"task": name, "passed": after["status"] == PASSED, "speedup": speedup,
                           "start_ms": before["median_ms"], "skeleton_ms": after["median_ms"],
                           "guard": after["guard"], "message": after["message"] if after["guard"] else "",
                           "start": "plain state" if own else "naive kernel (transfer task)"})
        admitted[card["id"]] = skeleton_cards.admit(card, trials)
    return admitted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--out", required=True)
    parser.add_argument("--admission", action="store_true", help="the cards' admission trials")
    args = parser.parse_args()
    tasks.add_directory(TASK_DIR)
    from bench.suite import gpu_facts

    cards = list(skeleton_cards.recorded())
    what = "skeleton cards instantiated on the transfer tasks' naive kernels, full gate, no search"
    result = {"what": what,
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": gpu_facts() if shutil.which("nvidia-smi") else {"gpu": None},
              "cards": {c["id"]: c["tasks"] for c in cards}, "tasks": {}}
    cache = Path(tempfile.mkdtemp(prefix="optiml-skeleton-transfer-"))
    if args.admission:
        result["what"] = "skeleton cards' admission trials: each on its source tasks' plain kernels"
        result["admission"] = admission_trials(cards, cache, args.tasks.split(","))
        write_json_atomically(args.out, result)
        return 0
    for name in args.tasks.split(","):
        try:
            result["tasks"][name] = run_task(name, cards, cache)
        except Exception as error:  # one task failing must not lose the others
            result["tasks"][name] = {"task": name, "error": f"{type(error).__name__}: {error}"}
        write_json_atomically(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
