"""Skeleton cards on operators the product never saw, without a search: each transfer
task's naive kernel is lifted to its family form, every skeleton card of that family
(induced from the suite's recorded lineages, none of them these tasks) is instantiated
with the task's own math, and the naive kernel and each instantiation go through the
full gate (profile off), the vendor (torch) timed in the same run, on a GPU host.

    python bench/skeleton_transfer.py --out $OUT/skeleton-transfer.json [--tasks gemv,where]
    python bench/skeleton_transfer.py --admission --transfer $OUT/skeleton-transfer.json \
        --out bench/results/<date>-<gpu>-skeleton-admission.json \
        [--cards skeleton:a,skeleton:b --merge bench/results/<earlier>-skeleton-admission.json]

`--tasks` may name the admission tasks of bench/admission_tasks/ (tried only to admit
cards whose layout no transfer task has). `--merge` keeps the earlier file's other cards.

With --admission it runs the cards' admission trials instead (skeleton_cards.admit): each
card on the plain kernel (all flags off) of each task whose lineage it was induced from,
that lineage left out of its expectation; `--transfer FILE` (a run without --admission)
adds each card's trials on the transfer tasks of its family. skeleton_cards.recorded()
reads the newest such file under bench/results and gives each card its status.
`--readmit FILE --out NEW` judges an earlier file's trials again under today's rule
(skeleton_cards.ADMISSION_RULE), no GPU needed: the same measurements, a new file.

It measures what the cards carry by themselves (the first step of a search that takes
them); bench/transfer_suite.py measures the searches, skills on and off.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.transfer_suite import ADMISSION_DIR, TASK_DIR, TASKS, time_vendor  # noqa: E402
from lineage.engine import skeleton_cards  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.gate import GateOptions, evaluate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402
from profiling.harness.verdict import PASSED  # noqa: E402
from search.engine import forms  # noqa: E402
from search.engine.forms import skeletons  # noqa: E402

SEED = 20261206


def gate(name: str, candidate: Candidate, cache: Path, sanitize: tuple[str, ...] | None = None) -> dict:
    # the vendor is timed by this script in the same run (time_vendor), the naive kernel
    # through this same gate: the gate's own comparison measurement would repeat both
    options = GateOptions(profile=False, seed=SEED, input_cache=str(cache), measure_comparisons=False,
                          **({} if sanitize is None else {"sanitize": sanitize}))
    verdict = evaluate(name, candidate, options)
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


def admission_trials(cards: list[dict], cache: Path, transfer: dict, write, gpu: str | None = None) -> dict:
    """Each card on the plain kernel (all flags off) of each task whose lineage it was
    induced from, that lineage left out of its expectation; and, from `transfer` (a run of
    this script without --admission: the same gate, naive kernel then skeleton), each
    card's trials on the transfer tasks of its family. `write` is called after each card."""
    from lineage.engine import experts

    starts: dict[str, tuple[Candidate, dict]] = {}  # task -> (plain kernel, its gate), once
    admitted = {}
    for card in cards:
        trials = []
        for name in card["tasks"]:
            if name not in starts:
                plain = experts.load_any(name).written_candidate(frozenset())
                starts[name] = plain, gate(name, plain, cache, sanitize=())  # the expert's own code
            plain, before = starts[name]
            form = forms.lift(plain.source, plain.plan_dict())
            emitted = (skeletons.by_name(card["skeleton"]).emit(form, plain.plan_dict(), tasks.get(name))
                       if isinstance(form, forms.Form) else form.reason)
            if isinstance(emitted, str):
                trials.append({"task": name, "passed": False, "speedup": None, "why": emitted})
                continue
            after = gate(name, Candidate.from_dict({**emitted.plan, "source": emitted.source}), cache)
            trials.append(_trial(name, before, after, "plain state (its own lineage left out)", gpu))
        for name, row in transfer.get("tasks", {}).items():
            if card["id"] in row.get("cards", {}) and "status" in row["cards"][card["id"]]:
                trials.append(_trial(name, row["naive"], row["cards"][card["id"]],
                                     "naive kernel (a transfer task: no lineage)", gpu))
        admitted[card["id"]] = skeleton_cards.admit(card, trials)
        write(admitted)
    return admitted


def _trial(name: str, before: dict, after: dict, start: str, gpu: str | None = None) -> dict:
    speedup = before["median_ms"] / after["median_ms"] if before["median_ms"] and after["median_ms"] else None
    return {"task": name, "passed": after["status"] == PASSED, "speedup": speedup, "start": start,
            "start_ms": before["median_ms"], "skeleton_ms": after["median_ms"], "guard": after["guard"],
            "message": after["message"] if after["guard"] else "", "floor_ms": floor_ms(name, gpu)}


def floor_ms(name: str, gpu: str | None) -> float | None:
    """The task's physics floor at its L1 sizes on `gpu` (datasheet peaks, ceilings.py)."""
    from profiling.harness.ceilings import ceilings_for, physics_floor_ms

    ceilings = ceilings_for(gpu or "")
    if ceilings is None:
        return None
    task = tasks.get(name)
    return physics_floor_ms(task.bytes(task.sizes), task.flops(task.sizes), "fp32", ceilings)[0]


def readmit(path: str, out: str) -> None:
    """The admission of an earlier file's trials again under today's rule (the same
    measurements; each trial given its task's floor on the file's GPU)."""
    earlier = json.loads(Path(path).read_text())
    gpu = earlier.get("environment", {}).get("gpu")
    cards = {c["id"]: c for c in skeleton_cards.recorded()}
    admission = {}
    for card_id, before in earlier["admission"].items():
        if card_id not in cards:
            continue
        judged = ("expected_without_it", "expected_here", "reproduced")
        trials = [{k: v for k, v in t.items() if k not in judged}
                  for t in before["trials"]]
        for trial in trials:
            trial.setdefault("floor_ms", floor_ms(trial["task"], gpu) if trial.get("start_ms") else None)
        admission[card_id] = skeleton_cards.admit(cards[card_id], trials)
    write_json_atomically(out, {**earlier, "readmitted_from": path,
                                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                                "command": shlex.join(["python", *sys.argv]), "admission": admission})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--out", required=True)
    parser.add_argument("--admission", action="store_true", help="the cards' admission trials")
    parser.add_argument("--transfer", help="with --admission: a run of this script whose trials count")
    parser.add_argument("--cards", help="with --admission: only these card ids (comma-separated)")
    parser.add_argument("--merge", help="with --admission: an earlier admission file (its other cards kept)")
    parser.add_argument("--readmit", help="an earlier admission file: its trials judged again today")
    args = parser.parse_args()
    from lineage.engine import experts

    tasks.add_directory(TASK_DIR)
    tasks.add_directory(ADMISSION_DIR)
    tasks.add_directory(experts.FAMILY_TASKS_DIR)  # the family experts' tasks (a card's sources)
    if args.readmit:
        readmit(args.readmit, args.out)
        return 0
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
        transfer = json.loads(Path(args.transfer).read_text()) if args.transfer else {}
        result["transfer_trials_from"] = args.transfer

        earlier = json.loads(Path(args.merge).read_text()).get("admission", {}) if args.merge else {}
        result["merged_from"] = args.merge

        def write(admitted: dict) -> None:  # this run's cards replace the earlier file's
            write_json_atomically(args.out, {**result, "admission": {**earlier, **admitted}})

        chosen = [c for c in cards if not args.cards or c["id"] in args.cards.split(",")]
        admission_trials(chosen, cache, transfer, write, result["environment"].get("gpu"))
        return 0
    each_task(args.tasks.split(","), lambda name: run_task(name, cards, cache), result, args.out)
    return 0


def each_task(names: list[str], run, result: dict, out: str) -> None:
    """run(name) for each task into result["tasks"], the file rewritten after each one;
    one task failing must not lose the others (its error is kept in its place)."""
    for name in names:
        try:
            result["tasks"][name] = run(name)
        except Exception as error:
            result["tasks"][name] = {"task": name, "error": f"{type(error).__name__}: {error}"}
        write_json_atomically(out, result)


if __name__ == "__main__":
    sys.exit(main())
