"""One run fanned out over GPU worker processes, on the real gate (issue 14).

    python bench/fanout_gpu.py --out $OUT/fanout.json --tasks relu,sgemm --layouts 1x1,1x2 \\
        --budget 16 [--cli relu] [--deadline 560]          # one H200: the dry run
    python bench/fanout_gpu.py --out $OUT/fanout.json --tasks relu,sgemm --layouts 1x1,2x1
                                                            # two H200s (4x1 for four)
    python bench/fanout_gpu.py --out /tmp/f.json --evaluator recorded --delay 1   # CPU only
    python bench/fanout_gpu.py --out /tmp/f.json --check   # migrate, start/stop workers

A layout GxW is G GPUs with W GPU worker processes on each (`celery -A optiml_web worker
--queues gpu --concurrency 1`, CUDA_VISIBLE_DEVICES = its GPU), beside one CPU worker
(`--queues celery`, the runs' steps and the compiles ahead) per two GPU workers, as
bench/fanout.py has it. Per task and layout: one run from the task's naive kernel with
`parallel` = G*W, the same search seed and budget, launched as the browser's Start does
(bench/fanout_rows.py). Each round has its own SQLite database and Celery filesystem
broker folder (the embedded default: DATABASE_URL and REDIS_URL unset), its own cold
nvcc cache and work folder, and the same server secret, so every round's run (the first
in its database) gets the same gate seed and inputs. The gate is the CLI's `--no-profile`
one with the screen on (the app's default) unless told otherwise. `--cli TASK` adds the
same search through `manage.py optimize` (issue 12's web-vs-CLI check).

Every worker runs under bench/gpu_turns.py, which records when each gate held its GPU's
turn; the report says per round whether two turns on one GPU ever overlapped, and for
every candidate measured both in the one-worker round and another, whether the two
verdicts agree (status and guard) and how far apart the times are.

On a device machine (Python 3.12, no Django there): the project's dependencies travel as
one archive, since the tree and the wheels together are over what a call carries:

    python3.12 -m pip install --no-index --no-deps --no-compile --target /tmp/s \
        .gpu-wheels/*.whl .gpu-wheels/web/*.whl && tar cJf .gpu-wheels/fanout/site.tar.xz -C /tmp/s .
    # carry .gpu-wheels/fanout; there: tar xJf .gpu-wheels/fanout/site.tar.xz -C /tmp/site,
    # PYTHONPATH=/tmp/site:$PWD, and --commit <the commit sent> (the copy's .git may be older)

`--evaluator recorded` (a CPU host): the suite's H200 recordings
(bench/results/2026-11-29-h200-search/rec-<task>.json) with `--delay` seconds per full
gate, each answer inside a GPU turn as the gate's are. A candidate without a recording
fails, as fanout.py says. The report goes to --out after every round.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fanout_analysis import (  # noqa: E402
    compare_trees,
    evaluation_spans_at_once,
    round_numbers,
    screener_starts,
    turn_check,
)
from gpu_turns import RECORDED_VARIABLE, TURNS_VARIABLE, read_turns  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RECORDINGS = REPO / "bench" / "results" / "2026-11-29-h200-search"
READY_TIMEOUT_S = 120  # a worker's start: Django, pycuda, the app's tasks
STOP_GRACE_S = 10  # then the worker's process group is killed (an evaluation may be under way)
EXTRACT_RESERVE_S = 25  # kept back from a round's limit: stop, extract, the next report


def main() -> int:
    args = _parser().parse_args()
    if args.merge:
        return _merge(args)
    started = time.time()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="fanout-gpu-"))
    env = _base_env(args)
    template = root / "template"
    _migrate(template, env)
    if args.check:
        return _check(root, template, env, args)
    report = _report_head(args, root)
    for task in args.tasks.split(","):
        plans = [("app", layout) for layout in args.layouts.split(",") if layout]
        plans += [("cli", "1x1")] if task in args.cli.split(",") else []
        for via, layout in plans:
            left = args.deadline - (time.time() - started)
            if left < args.min_round:
                report["rounds"].append({"task": task, "via": via, "layout": layout,
                                         "skipped": "no time left"})
                continue
            limit = min(args.round_limit, left - EXTRACT_RESERVE_S)
            try:
                report["rounds"].append(one_round(task, layout, via, root=root, template=template,
                                                  env=env, args=args, limit_s=limit))
            except Exception as error:  # the next round may still run: said in the report
                traceback.print_exc()
                report["rounds"].append({"task": task, "via": via, "layout": layout,
                                         "skipped": f"failed: {type(error).__name__}: {error}"})
            _finish_report(report, root)
            Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    _print_table(report)
    return 0


def one_round(task: str, layout: str, via: str, *, root: Path, template: Path, env: dict,
              args: argparse.Namespace, limit_s: float) -> dict:
    gpus, per_gpu = (int(n) for n in layout.split("x"))
    folder = root / f"{task}-{via}-{layout}"
    shutil.copytree(template, folder / "var")
    env = {**env, "OPTIML_VAR_DIR": str(folder / "var"), "OPTIML_CACHE_DIR": str(folder / "cache"),
           TURNS_VARIABLE: str(folder / "turns")}
    run_json = folder / "run.json"
    workers = []
    try:
        if via == "app":
            workers = _start_workers(folder, env, gpus=gpus, per_gpu=per_gpu)
            _bench_py(["fanout_rows.py", "launch", "--task", task, "--parallel", str(gpus * per_gpu),
                       "--budget", str(args.budget), "--seed", str(args.seed), "--limit", str(limit_s),
                       "--out", str(run_json), *(["--no-screen"] if args.no_screen else []),
                       *(["--profile"] if args.profile else [])], env, timeout=limit_s + 60)
        else:
            _cli_round(task, folder, env, args, limit_s)
    finally:
        _stop(workers)
        # A round's inputs and references (gigabytes for relu) are read by no later round.
        shutil.rmtree(folder / "var" / "work" / "inputs", ignore_errors=True)
    if via == "cli":
        _bench_py(["fanout_rows.py", "extract", "--out", str(run_json)], env, timeout=60)
    extracted = json.loads(run_json.read_text())
    t0 = extracted["run"]["created"]
    turns = read_turns(folder / "turns")
    return {"task": task, "via": via, "layout": layout, "gpus": gpus, "workers_per_gpu": per_gpu,
            "gpu_workers": gpus * per_gpu if via == "app" else 0,
            "cpu_workers": _cpu_workers_for(gpus * per_gpu) if via == "app" else 0,
            "parallel": extracted["run"]["parallel"], "limit_s": round(limit_s),
            "stopped_at_limit": extracted.get("launch", {}).get("stopped_at_limit", False),
            **round_numbers(extracted),
            "gpu_turns": turn_check(turns, t0),
            "screener_starts": screener_starts(read_turns(folder / "turns", "screener"), turns, t0),
            "evaluation_spans_most_at_once": evaluation_spans_at_once(extracted),
            "log_errors": _log_errors(folder), "app_setup": extracted["setup"], "tree": extracted["nodes"],
            "folder": str(folder)}


def _log_errors(folder: Path) -> list[str]:
    """The error lines of the round's worker (or CLI) logs, the first few: a round whose
    numbers look wrong says here why. Only the workers' own logs: the gate's folders hold
    compute-sanitizer logs whose every "ERROR SUMMARY: 0 errors" is no error."""
    paths = sorted((folder / "logs").glob("*.log")) + sorted(folder.glob("cli.log"))
    lines = [f"{path.name}: {line.strip()[:300]}" for path in paths
             for line in path.read_text(errors="replace").splitlines()
             if "ERROR/" in line or "Traceback" in line or "CommandError" in line]
    return lines[:10] + ([f"... {len(lines) - 10} more"] if len(lines) > 10 else [])


def _cli_round(task: str, folder: Path, env: dict, args: argparse.Namespace, limit_s: float) -> None:
    """The same search through `manage.py optimize`, driven in one process (no workers)."""
    command = [sys.executable, str(REPO / "bench" / "gpu_turns.py"), "manage", "optimize", "--task", task,
               "--budget", str(args.budget), "--seed", str(args.seed),
               "--json", str(folder / "trajectory.json"), *([] if args.profile else ["--no-profile"])]
    if args.no_screen:
        raise SystemExit("--cli has no --no-screen: manage.py optimize always screens (OPTIML_SCREEN)")
    with (folder / "cli.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env={**env, "OPTIML_BENCH_WORKER": "cli"},
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            _stop([process])  # what it stored so far is still read


def _start_workers(folder: Path, env: dict, *, gpus: int, per_gpu: int) -> list[subprocess.Popen]:
    logs = folder / "logs"
    logs.mkdir(parents=True)
    cpus = _cpu_workers_for(gpus * per_gpu)
    workers = [_worker(env, "celery", f"cpu{i}", logs) for i in range(cpus)]
    workers += [_worker(env, "gpu", f"gpu{i}", logs, device=str(i // per_gpu)) for i in range(gpus * per_gpu)]
    deadline = time.time() + READY_TIMEOUT_S
    while time.time() < deadline:
        ready = [p for p in logs.glob("*.log") if " ready." in p.read_text(errors="replace")]
        if len(ready) == len(workers):
            return workers
        if any(w.poll() is not None for w in workers):
            break
        time.sleep(0.5)
    _stop(workers)
    raise RuntimeError(f"the workers did not all start: see {logs}")


def _cpu_workers_for(gpu_workers: int) -> int:
    """One CPU worker per two GPU workers (bench/fanout.py, cpu_workers_for)."""
    return max(1, gpu_workers // 2)


def _worker(env: dict, queues: str, name: str, logs: Path, device: str | None = None) -> subprocess.Popen:
    env = {**env, "OPTIML_BENCH_WORKER": name, **({"CUDA_VISIBLE_DEVICES": device} if device else {})}
    command = [sys.executable, str(REPO / "bench" / "gpu_turns.py"), "celery", "-A", "optiml_web", "worker",
               "--queues", queues, "--concurrency", "1", "--loglevel", "INFO", "--hostname", f"{name}@%h",
               "--without-mingle", "--without-gossip"]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=(logs / f"{name}.log").open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _stop(processes: list[subprocess.Popen]) -> None:
    """A warm shutdown first; then each process group (the pool's child, a gate's
    subprocess) is killed, since an evaluation under way would hold the stop for minutes."""
    for process in processes:
        if process.poll() is None:
            process.terminate()  # the main process only: it stops its pool child itself
    deadline = time.time() + STOP_GRACE_S
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.1, deadline - time.time()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever of its group is left
        process.wait()


def _bench_py(argv: list[str], env: dict, *, timeout: float) -> None:
    subprocess.run([sys.executable, str(REPO / "bench" / argv[0]), *argv[1:]], cwd=REPO, env=env,
                   check=True, timeout=timeout)


def _base_env(args: argparse.Namespace) -> dict:
    """The embedded default: no DATABASE_URL, no REDIS_URL, no OPTIML_* but ours. One
    secret for every round, made now: each round's first run then has the same gate seed."""
    drop = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIML_") and k not in drop
           and not k.startswith(drop)}
    env.update({"OPTIML_SECRET_KEY": secrets.token_urlsafe(50), "PYTHONUNBUFFERED": "1",
                "OPTIML_LOG_LEVEL": "INFO"})
    if args.evaluator == "recorded":
        task = args.tasks.split(",")[0]
        env.update({"OPTIML_EVALUATOR": f"recorded:{RECORDINGS / f'rec-{task}.json'}?sleep={args.delay}",
                    RECORDED_VARIABLE: "1"})
        if "," in args.tasks:
            raise SystemExit("--evaluator recorded takes one task (one recording file)")
    return env


def _migrate(template: Path, env: dict) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO, check=True,
                   env={**env, "OPTIML_VAR_DIR": str(template)}, timeout=300)


def _check(root: Path, template: Path, env: dict, args: argparse.Namespace) -> int:
    """Migrate, start one layout's workers, see them ready, stop them."""
    folder = root / "check"
    shutil.copytree(template, folder / "var")
    env = {**env, "OPTIML_VAR_DIR": str(folder / "var"), TURNS_VARIABLE: str(folder / "turns")}
    gpus, per_gpu = (int(n) for n in args.layouts.split(",")[-1].split("x"))
    began = time.time()
    workers = _start_workers(folder, env, gpus=gpus, per_gpu=per_gpu)
    ready_s = time.time() - began
    _stop(workers)
    result = {"check": "ok", "workers": len(workers), "ready_s": round(ready_s, 1), "folder": str(root)}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


def _report_head(args: argparse.Namespace, root: Path) -> dict:
    return {
        "what": "one search run fanned out over GPU worker processes on the real gate (issue 14): "
                "per task and layout (GPUs x worker processes per GPU) candidates per minute, the best "
                "time and when, whether two GPU turns ever overlapped, and whether the verdicts match "
                "the one-worker round's",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "git": {"commit": args.commit} if args.commit else _git(),
        "setup": {"tasks": args.tasks.split(","), "layouts": args.layouts.split(","), "root": "naive",
                  "budget": args.budget, "seed": args.seed, "screen": not args.no_screen,
                  "gate": f"GateOptions(profile={args.profile}): the CLI's "
                          + ("default" if args.profile else "--no-profile"),
                  "evaluator": args.evaluator if args.evaluator == "gate"
                  else f"recorded, {args.delay} s delay",
                  "database": "SQLite, one per round",
                  "broker": "Celery's filesystem transport, one per round",
                  "cpu_workers": "one per two GPU workers", "gate_seed": "the same in every round",
                  "nvcc_cache": "cold per round", "turns": "bench/gpu_turns.py"},
        "gpus": 0, "workers_per_gpu": [], "rounds": [], "comparisons": [], "work_folder": str(root),
    }


def _merge(args: argparse.Namespace) -> int:
    """One report from several (calls on one kind of machine: a round that did not fit in
    one call ran in the next); the comparisons are made again over all their rounds."""
    reports = [json.loads(Path(path).read_text()) for path in args.merge]
    merged = {**reports[0], "rounds": [r for report in reports for r in report["rounds"]],
              "calls": [{key: report[key] for key in ("command", "date", "machine", "work_folder")}
                        for report in reports]}
    for key in ("command", "date", "work_folder"):
        merged.pop(key, None)
    _finish_report(merged, Path("."))
    Path(args.out).write_text(json.dumps(merged, indent=1) + "\n")
    _print_table(merged)
    return 0


def _finish_report(report: dict, root: Path) -> None:
    rounds = [r for r in report["rounds"] if "skipped" not in r]
    report["gpus"] = max((r["gpus"] for r in rounds if r["via"] == "app"), default=0)
    report["workers_per_gpu"] = sorted({r["workers_per_gpu"] for r in rounds if r["via"] == "app"})
    report["overlaps_found"] = any(r["gpu_turns"]["overlaps"] for r in rounds)
    report["comparisons"] = []
    for reference in (r for r in rounds if r["via"] == "app" and r["layout"] == "1x1"):
        base = reference["candidates_per_minute"] or 0
        for other in (r for r in rounds if r["task"] == reference["task"] and r is not reference):
            compared = compare_trees(_as_extracted(reference), _as_extracted(other))
            report["comparisons"].append({
                "task": reference["task"], "reference": "app 1x1",
                "other": f"{other['via']} {other['layout']}",
                "candidates_per_minute": [base, other["candidates_per_minute"]],
                "rate_ratio": round((other["candidates_per_minute"] or 0) / base, 3) if base else None,
                "best_ms": [reference["best_ms"], other["best_ms"]],
                "best_reached_s": [reference["best_reached_s"], other["best_reached_s"]], **compared})
    report["web_vs_cli"] = [
        {"task": c["task"], "app_best_ms": c["best_ms"][0], "cli_best_ms": c["best_ms"][1],
         "cli_over_app_best": round(c["best_ms"][1] / c["best_ms"][0], 4) if all(c["best_ms"]) else None,
         "same_best_candidate": c["same_best_candidate"],
         "candidates_per_minute_app_cli": c["candidates_per_minute"],
         "verdicts_agree": c["verdicts_agree"], "common": c["common"]}
        for c in report["comparisons"] if c["other"].startswith("cli")]


def _as_extracted(round_: dict) -> dict:
    return {"nodes": round_["tree"], "run": {"best_node": round_["best_node"]}}


def _machine() -> dict:
    gpus = []
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "host": platform.node(),
            "gpus": gpus, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _git() -> dict:
    """HEAD where the bench runs; a device machine's copy of the tree may carry an older
    .git than the tree it was sent, so the caller passes --commit there."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except OSError:
        head = ""
    return {"commit": head or None}


def _print_table(report: dict) -> None:
    print(f"{'task':8} {'via':4} {'layout':6} {'evals':>5} {'wall_s':>7} {'cand/min':>8} {'best_ms':>9} "
          f"{'best@s':>7} {'turns':>5} {'overlaps':>8} {'evals@once':>10}")
    for r in report["rounds"]:
        if "skipped" in r:
            print(f"{r['task']:8} {r['via']:4} {r['layout']:6} skipped: {r['skipped']}")
            continue
        print(f"{r['task']:8} {r['via']:4} {r['layout']:6} {r['evaluations']:>5} {r['wall_s'] or 0:>7.1f} "
              f"{r['candidates_per_minute'] or 0:>8.2f} {r['best_ms'] or 0:>9.4f} "
              f"{r['best_reached_s'] or 0:>7.1f} "
              f"{r['gpu_turns']['turns']:>5} {r['gpu_turns']['overlaps']:>8} "
              f"{r['evaluation_spans_most_at_once']:>10}")
    for c in report["comparisons"]:
        print(f"{c['task']}: {c['reference']} vs {c['other']}: {c['common']} common candidates, "
              f"{c['verdicts_agree']} agree, {len(c['verdicts_disagree'])} disagree; same-level time diff "
              f"{c['time_rel_diff_same_level']}; candidates/min ratio {c['rate_ratio']}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", default="relu,sgemm")
    parser.add_argument("--layouts", default="1x1,1x2", help="GPUsxworkers-per-GPU, comma-separated; the "
                        "first 1x1 is the reference the others are compared with")
    parser.add_argument("--budget", type=int, default=16, help="evaluations per run")
    parser.add_argument("--seed", type=int, default=0, help="the search's seed")
    parser.add_argument("--cli", default="", help="tasks to search through manage.py optimize too")
    parser.add_argument("--no-screen", action="store_true")
    parser.add_argument("--profile", action="store_true", help="ncu in the full gate (off: --no-profile)")
    parser.add_argument("--evaluator", choices=["gate", "recorded"], default="gate")
    parser.add_argument("--delay", type=float, default=1.0, help="recorded: seconds per full gate")
    parser.add_argument("--deadline", type=float, default=560.0, help="seconds for all rounds")
    parser.add_argument("--round-limit", type=float, default=300.0, help="seconds for one round")
    parser.add_argument("--min-round", type=float, default=60.0, help="start no round with less left")
    parser.add_argument("--workdir", help="default: a new folder under the temporary folder")
    parser.add_argument("--commit", help="the commit the tree was sent from (recorded as given)")
    parser.add_argument("--merge", nargs="+", metavar="REPORT", help="merge these reports into --out")
    parser.add_argument("--check", action="store_true",
                        help="migrate, start and stop the last layout's workers")
    return parser


if __name__ == "__main__":
    sys.exit(main())
