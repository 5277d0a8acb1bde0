"""KernelBench problems through the gate on a GPU: the first kernel without an LLM, then
what the skill cards propose for it, against the module in eager PyTorch (issues 31, 32).

KernelBench's operators are none of the lineages' tasks and none of the transfer suite's:
each skeleton card a problem gets is carried there from other tasks. Two phases:

    # here (no GPU): tasks, first kernels and the skills source's proposals
    python bench/kernelbench_skills.py prepare ../shared/kernelbench/level1 --dir .kernelbench \\
        --out bench/results/<date>-cpu-kernelbench-skills.json [--first N] [--last N]
    # on a GPU host (the prepared folder carried): vendor, first kernel, each proposal
    python bench/kernelbench_skills.py run --dir .kernelbench --out $OUT/kernelbench.json \\
        [--only a,b] [--no-sanitize] [--all-cards] [--deadline-s 540]

`prepare` saves each problem as a task (profiling/harness/torchtask: a `.torchtask` file
and its registry stub; they hold the module's source, so the folder stays out of git),
its first kernel (search/generation), and the candidates the skills source proposes for
it with the skeleton cards alone (OPTIML_SKILL_CARDS=skeletons): those admitted by
transfer, as a search gets them, and with `--all-cards` the rejected ones too, marked.
`run` times the module eager (bench/torchtask_vendor.py: TF32 off, L2 flushed, fresh
inputs), then puts the first kernel and each proposal through the gate, profile off; the
results are written after every problem, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profiling.harness.candidate import Candidate  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402

SKELETON = "skill:skeleton:"


def _numbered(folder: Path, first: int, last: int) -> list[Path]:
    files = [p for p in folder.glob("*.py") if p.stem.split("_")[0].isdigit()]
    files = [p for p in files if first <= int(p.stem.split("_")[0]) <= last]
    return sorted(files, key=lambda p: int(p.stem.split("_")[0]))


def lift_summary(candidate: Candidate) -> list[dict]:
    """Each launch's family, or why it does not lift (skeleton_source.lifted_launches)."""
    from lineage.engine.skeleton_source import lifted_launches
    from search.engine import forms

    rows = []
    for index, form in lifted_launches(candidate):
        if isinstance(form, forms.Form):
            rows.append({"launch": index, "family": form.family, "kernel": form.kernel})
        else:
            rows.append({"launch": index, "refused": str(form)[:300]})
    return rows


def proposals_for(name: str, candidate: Candidate, all_cards: bool) -> list[dict]:
    """What the skills source proposes for the first kernel, skeleton cards only: the
    admitted ones (a search's), and with `all_cards` the others, marked."""
    from lineage.engine import skeleton_cards, skeleton_source
    from lineage.engine.skills import kernel_key
    from search.engine.types import NodeContext

    context = NodeContext(task=name, candidate=candidate, measurement=None, diagnosis=None)
    cards = [c for c in skeleton_cards.recorded() if all_cards or skeleton_cards.in_library(c)]
    found = skeleton_source.proposals(cards, context, set(), kernel_key)
    return [{"source": p.source, "title": p.title, "admission": p.params.get("admission"),
             "family": p.params.get("family"), "lineages": p.params.get("lineages"),
             "candidate": {**p.candidate.plan_dict(), "source": p.candidate.source,
                           "compile_options": list(p.candidate.compile_options)}}
            for p in found if p.source.startswith(SKELETON)]


def prepare(args) -> int:
    from profiling.harness import tasks
    from profiling.harness.torchtask.build import build_tasks
    from profiling.harness.torchtask.task import NotATask, save
    from search.generation.from_module import first_kernel
    from search.generation.lowering import NoKernel

    folder = Path(args.dir)
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    os.environ["OPTIML_SKILL_CARDS"] = "skeletons"
    files = _numbered(Path(args.problems), args.first, args.last)
    report = {"what": "KernelBench problems: first kernels without an LLM and the skeleton cards "
                      "the skills source proposes for them (no GPU)",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "problems": {}}
    if args.out and Path(args.out).exists():
        report["problems"] = json.loads(Path(args.out).read_text()).get("problems", {})
    work = Path(tempfile.mkdtemp(prefix="optiml-kernelbench-"))
    built = build_tasks(files)
    for described in built:
        if not isinstance(described, NotATask):
            save(described, folder / "tasks")
    tasks.add_directory(folder / "tasks")  # after the saves: the registry lists the folder once
    for path, described in zip(files, built, strict=True):
        row: dict = {}
        if isinstance(described, NotATask):
            row = {"task": False, "why": described.reason}
        else:
            found = first_kernel(described, work / path.stem)
            if isinstance(found, NoKernel):
                row = {"task": described.name, "first_kernel": None, "why": found.reason}
            else:
                first = Candidate.from_dict({**found.plan, "source": found.source})
                offered = proposals_for(described.name, first, args.all_cards)
                row = {"task": described.name, "first_kernel": found.family, "lift": lift_summary(first),
                       "proposals": [{k: v for k, v in p.items() if k != "candidate"} for p in offered]}
                (folder / f"{path.stem}.json").write_text(json.dumps(
                    {"problem": path.stem, "task": described.name, "family": found.family,
                     "first": {**found.plan, "source": found.source}, "proposals": offered}, indent=1))
        report["problems"][path.stem] = row
        print(path.stem, json.dumps({k: v for k, v in row.items() if k != "proposals"})[:240],
              [p["source"] for p in row.get("proposals", [])], flush=True)
        if args.out:
            write_json_atomically(args.out, report)
    rows = [r for r in report["problems"].values() if r.get("first_kernel")]
    report["summary"] = {
        "problems": len(report["problems"]), "first_kernels": len(rows),
        "lifted": sum(any("family" in launch for launch in r["lift"]) for r in rows),
        "with_an_admitted_card": sum(any(p["admission"] == "admitted" for p in r["proposals"]) for r in rows),
        "with_any_card": sum(bool(r["proposals"]) for r in rows)}
    if args.out:
        write_json_atomically(args.out, report)
    print(json.dumps(report["summary"]))
    return 0


def _gpu() -> dict:
    import subprocess

    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        name, driver = (s.strip() for s in line.split(","))
        return {"gpu": name, "driver": driver}
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return {"gpu": None, "driver": None}


def _verdict(task, candidate: Candidate, options) -> dict:
    from profiling.harness import gate

    started = time.monotonic()
    verdict = gate.evaluate_task(task, candidate, options)
    row = {"status": verdict.status, "stage": verdict.stage, "seconds": round(time.monotonic() - started, 1)}
    if verdict.timing is not None:
        row["median_ms"] = verdict.timing.median_ms
    if verdict.status != "passed":
        row["message"] = (verdict.message or "")[:400]
    return row


def run(args) -> int:
    import dataclasses

    from bench.torchtask_vendor import time_module
    from profiling.harness import tasks
    from profiling.harness.gate import GateOptions
    from profiling.harness.torchtask.task import TorchTask, to_task

    folder = Path(args.dir)
    tasks.add_directory(folder / "tasks")
    deadline = time.monotonic() + args.deadline_s
    report = {"what": "KernelBench problems on a GPU: eager PyTorch, the first kernel (no LLM) and the "
                      "skeleton cards' proposals for it, each through the gate (profile off)",
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), **_gpu(),
              "gate": {"sanitize": not args.no_sanitize, "profile": False}, "problems": {}}
    prepared = sorted(folder.glob("*.json"), key=lambda p: int(p.stem.split("_")[0]))
    only = set(args.only.split(",")) if args.only else None
    prepared = interleaved([p for p in prepared
                            if not only or p.stem in only or p.stem.split("_")[0] in only])
    report["compile_seconds"] = precompile(prepared, args.all_cards)
    for path in prepared:
        if time.monotonic() > deadline:
            report["stopped"] = f"deadline reached before {path.stem}"
            break
        entry = json.loads(path.read_text())
        saved = folder / "tasks" / f"{entry['task']}.torchtask"
        described = TorchTask.from_dict(json.loads(saved.read_text()))
        task = to_task(described)
        # one seed for the problem's candidates; with --input-cache the second reuses the
        # inputs and references the first drew (inputs.py's cache: files on the host's disk,
        # 6 GiB an array at KernelBench's largest sizes)
        work = Path(tempfile.mkdtemp(prefix="kb-gate-"))
        # gpu_inputs and gpu_references (the defaults, named so that they stay on): a torchtask's L1
        # checks are drawn on the GPU and judged in the reference child (drawn.py); without them its
        # L1 inputs and references at KernelBench's sizes go through the host, minutes a candidate
        options = GateOptions(profile=False, workdir=str(work), time_limit_s=args.gate_limit_s,
                              seed=args.seed, input_cache=str(work / "inputs") if args.input_cache else None,
                              gpu_inputs=True, gpu_references=True,
                              measure_comparisons=False)  # eager torch and the first kernel are timed here
        if args.no_sanitize:
            options = dataclasses.replace(options, sanitize=())
        row: dict = {"task": entry["task"]}
        try:
            namespace = {"__name__": "kernelbench_problem"}
            exec(compile(described.source, path.stem, "exec"), namespace)  # noqa: S102  (the module)
            samples = time_module(namespace, "eager")
            row["eager_ms"] = sorted(samples)[len(samples) // 2]
        except Exception as error:  # noqa: BLE001  (one problem's failure is its row)
            row["eager_error"] = f"{type(error).__name__}: {str(error)[:200]}"
        row["first"] = _verdict(task, Candidate.from_dict(entry["first"]), options)
        row["proposals"] = []
        for proposal in entry["proposals"]:
            if proposal["admission"] != "admitted" and not args.all_cards:
                continue
            if time.monotonic() > deadline:
                break
            measured = _verdict(task, Candidate.from_dict(proposal["candidate"]), options)
            row["proposals"].append({"source": proposal["source"], "admission": proposal["admission"],
                                     **measured})
        report["problems"][path.stem] = row
        print(path.stem, json.dumps(row)[:400], flush=True)
        write_json_atomically(args.out, report)
    report["summary"] = summary(report["problems"])
    write_json_atomically(args.out, report)
    print(json.dumps(report["summary"]))
    return 0


def interleaved(prepared: list[Path]) -> list[Path]:
    """One problem of each family in turn (products, rows, maps, windows), so that a run
    cut short by its deadline has measured some of every family."""
    families: dict[str, list[Path]] = {}
    for path in prepared:
        families.setdefault(json.loads(path.read_text()).get("family", ""), []).append(path)
    queues = list(families.values())
    order = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return order


def precompile(prepared: list[Path], all_cards: bool) -> float:
    """nvcc for every candidate at once, on the host's cores, into the compile cache the
    gate reads (compile.py): the gates then run one after another without compiling."""
    from concurrent.futures import ThreadPoolExecutor

    from profiling.harness.compile import compile_candidate

    candidates = []
    for path in prepared:
        entry = json.loads(path.read_text())
        candidates.append(entry["first"])
        candidates += [p["candidate"] for p in entry["proposals"]
                       if all_cards or p["admission"] == "admitted"]

    def one(candidate: dict) -> None:
        with contextlib.suppress(Exception):  # the gate reports it, in its own words
            compile_candidate(Candidate.from_dict(candidate))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 2)) as pool:
        list(pool.map(one, candidates))
    return round(time.monotonic() - started, 1)


def summary(problems: dict) -> dict:
    """KernelBench's fast_p against eager: correct (passed the gate) and faster than eager
    by more than p; for the first kernels alone and with the best passing proposal."""
    import math

    def best(row: dict, with_cards: bool) -> float | None:
        times = [row["first"].get("median_ms")] if row["first"]["status"] == "passed" else []
        if with_cards:
            times += [p.get("median_ms") for p in row["proposals"] if p["status"] == "passed"]
        times = [t for t in times if t]
        return min(times) if times else None

    out = {"problems": len(problems)}
    for label, with_cards in (("first_kernels", False), ("with_cards", True)):
        speed = [row["eager_ms"] / b for row in problems.values()
                 if row.get("eager_ms") and (b := best(row, with_cards))]
        geomean = round(math.exp(sum(map(math.log, speed)) / len(speed)), 3) if speed else None
        out[label] = {"correct": len(speed), "fast_1": sum(s > 1.0 for s in speed),
                      "fast_0.8": sum(s >= 0.8 for s in speed), "geomean_of_correct": geomean}
    out["a_card_made_it_faster"] = sum(
        1 for row in problems.values()
        if any(p["status"] == "passed" and p.get("median_ms") and row["first"].get("median_ms")
               and p["median_ms"] < row["first"]["median_ms"] for p in row["proposals"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="phase", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("problems")
    p.add_argument("--dir", required=True)
    p.add_argument("--out")
    p.add_argument("--first", type=int, default=1)
    p.add_argument("--last", type=int, default=10**6)
    p.add_argument("--all-cards", action="store_true", help="also the cards not admitted by transfer")
    r = sub.add_parser("run")
    r.add_argument("--dir", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--only", help="problems by stem or number, comma-separated")
    r.add_argument("--no-sanitize", action="store_true", help="the gate without compute-sanitizer")
    r.add_argument("--all-cards", action="store_true", help="also proposals of cards not admitted")
    r.add_argument("--deadline-s", type=float, default=540.0, help="start no problem after this")
    r.add_argument("--gate-limit-s", type=float, default=120.0, help="each gate's time limit")
    r.add_argument("--seed", type=int, default=20261206, help="the gates' base seed (recorded)")
    r.add_argument("--input-cache", action="store_true",
                   help="keep a problem's inputs on disk for its next gate")
    args = parser.parse_args()
    return prepare(args) if args.phase == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
