"""Candidates per minute of one run with 1, 2 and 4 GPU worker processes (issue 12).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/fanout.py --out bench/results/$(date +%F)-fanout.json [--workers 1,2,4] \\
        [--budget 40] [--delay 3]

Everything is real but the GPU: PostgreSQL, Redis as the broker, `celery -A optiml_web
worker` processes as a deployment runs them: CPU workers (`--queues celery
--concurrency 1`, the runs' steps and the compiles ahead; one per two GPU workers) and N
GPU workers (`--queues gpu --concurrency 1`,
each with its own CUDA_VISIBLE_DEVICES, the evaluations). The evaluator is the recorded
one (`OPTIML_EVALUATOR=recorded:<file>?sleep=<delay>`): real H200 verdicts of relu
kernels, each candidate compiled ahead on the CPU worker with real nvcc (a cold cubin
cache per round), each evaluation taking `--delay` seconds first as the gate would on a GPU (an
H200 candidate takes ~18 s; shorter here so that the benchmark takes minutes; the step's
own cost is then a larger share than it would be). A kernel without a recording is a
failed evaluation after the same delay, as a kernel the gate rejects would be.

Per worker count, one relu run from its naive kernel with `parallel` = N, the same seed
and budget, the screen off: wall time from the run's launch to its finish, evaluations,
candidates per minute, the speed-up over one worker against the ideal N, and the most
evaluations that were ever under way at once (from the Evaluation rows' claim and
finish times).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RECORDINGS = [REPO / "tests" / "fixtures" / "recorded" / "h200-relu-search.json",
              REPO / "tests" / "fixtures" / "recorded" / "schema-h200.json"]
# The suite's H200 search recordings (the engine's format, screen and full gate), per task.
SUITE = REPO / "bench" / "results" / "2026-11-29-h200-search"
REDIS_DB = 14
TARGET_SHARE_AT_4 = 0.8  # of the ideal speed-up, the issue's


def _merged(folder: Path, task: str) -> Path:
    if task != "relu":
        return SUITE / f"rec-{task}.json"
    merged = {"gpu": "NVIDIA H200", "recorded": []}
    for path in RECORDINGS:
        merged["recorded"] += json.loads(path.read_text())["recorded"]
    out = folder / "recordings.json"
    out.write_text(json.dumps(merged))
    return out


def _redis_url() -> str:
    parts = urlsplit(os.environ["REDIS_URL"])
    return urlunsplit(parts._replace(path=f"/{REDIS_DB}"))


def _worker(env: dict, queues: str, name: str, log: Path, device: str | None = None) -> subprocess.Popen:
    env = {**env, **({"CUDA_VISIBLE_DEVICES": device} if device is not None else {})}
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "optiml_web", "worker", "--queues", queues,
         "--concurrency", "1", "--loglevel", "INFO", "--hostname", f"{name}@%h",
         "--without-mingle", "--without-gossip"],
        cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def one_round(workers: int, *, task: str, budget: int, delay: float, screen: bool, folder: Path,
              env: dict) -> dict:
    import redis
    from django.db import transaction

    from optiml_web.celery import app
    from profiling.harness import tasks as task_registry
    from profiling.harness.gate import GateOptions
    from profiling.models import Evaluation
    from search import services
    from search.models import Run
    from search.tasks import drive_run_enqueue

    redis.Redis.from_url(_redis_url()).flushdb()
    Evaluation.objects.all().delete()  # each round measures its kernels afresh
    logs = folder / f"workers-{workers}"
    logs.mkdir(exist_ok=True)
    # Each round compiles its kernels afresh (a cold cubin cache of its own), as a new
    # search's kernels are: the CPU worker's compiles run ahead of the GPU workers.
    env = {**env, "OPTIML_CACHE_DIR": str(folder / f"cache-{workers}")}
    cpus = cpu_workers_for(workers)
    processes = [_worker(env, "celery", f"cpu{i}", logs / f"cpu{i}.log") for i in range(cpus)]
    processes += [_worker(env, "gpu", f"gpu{i}", logs / f"gpu{i}.log", device=str(i)) for i in range(workers)]
    try:
        _wait_for_workers(app, cpus + workers)
        spec = task_registry.get(task)
        began = time.time()
        with transaction.atomic():
            run = services.run_create(task_name=task, source=spec.naive_source, plan=spec.naive_plan,
                                      budget=budget, parallel=workers, screen=screen,
                                      gate_options=GateOptions(seeds=2, profile=False))
            drive_run_enqueue(run_id=run.pk, token=run.drive_token)
        while Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists():
            if time.time() - began > budget * delay * 3 + 120:
                raise RuntimeError(f"run {run.pk} did not finish in time")
            time.sleep(0.2)
        took = time.time() - began
    finally:
        _stop(processes)
    run.refresh_from_db()
    spans = list(Evaluation.objects.filter(finished_at__isnull=False)
                 .values_list("claimed_at", "finished_at"))
    return {"workers": workers, "cpu_workers": cpus, "parallel": workers, "status": run.status,
            "evaluations": run.evaluated,
            "wall_s": round(took, 2), "candidates_per_minute": round(run.evaluated / took * 60, 2),
            "most_at_once": _most_at_once(spans), "best_ms": run.best_ms, "message": run.message}


def cpu_workers_for(gpu_workers: int) -> int:
    """CPU worker processes beside N GPU workers: one per two GPUs. Each candidate is
    compiled on a CPU worker first (about a second of nvcc here), so one CPU process
    cannot keep four GPU workers busy at a few seconds per evaluation."""
    return max(1, gpu_workers // 2)


def _most_at_once(spans) -> int:
    edges = sorted([(start.timestamp(), 1) for start, _ in spans]
                   + [(end.timestamp(), -1) for _, end in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _wait_for_workers(app, count: int) -> None:
    deadline = time.time() + 60
    while time.time() < deadline:
        replies = app.control.ping(timeout=1.0) or []
        if len(replies) >= count:
            return
    raise RuntimeError(f"only {len(replies)} of {count} workers answered")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--task", default="relu", help="relu (the fixtures' recordings) or a suite "
                        "task (bench/results/2026-11-29-h200-search/rec-<task>.json)")
    parser.add_argument("--screen", action="store_true", help="screen candidates first, as the "
                        "suite's recordings were made (each screen takes the delay too)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")) or \
            not os.environ.get("REDIS_URL", "").startswith("redis://"):
        parser.error("set DATABASE_URL (PostgreSQL) and REDIS_URL (Redis): the workers share them")
    os.environ["REDIS_URL"] = _redis_url()  # the bench's own Redis database, emptied per round
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")
    folder = Path(tempfile.mkdtemp(prefix="fanout-"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPTIML_")}
    env.update({"OPTIML_VAR_DIR": str(folder / "var"),
                "OPTIML_EVALUATOR": f"recorded:{_merged(folder, args.task)}?sleep={args.delay}",
                "OPTIML_SCREEN": "true" if args.screen else "false"})
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    rounds = [one_round(int(n), task=args.task, budget=args.budget, delay=args.delay, screen=args.screen,
                        folder=folder, env=env) for n in args.workers.split(",")]
    base = rounds[0]["candidates_per_minute"] / rounds[0]["workers"]
    for item in rounds:
        item["speedup"] = round(item["candidates_per_minute"] / base, 2)
        item["share_of_ideal"] = round(item["speedup"] / item["workers"], 3)
    at_4 = next((r["share_of_ideal"] for r in rounds if r["workers"] == 4), None)
    report = {
        "what": "one run's candidates per minute with N GPU worker processes (issue 12): real Celery "
                "workers, PostgreSQL and Redis; the recorded H200 verdicts with a per-candidate delay",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "host": platform.node()},
        "setup": {"task": args.task, "root": "naive", "budget": args.budget, "delay_s": args.delay,
                  "seed": 0, "screen": args.screen, "cpu_workers": "one per two GPU workers",
                  "evaluator": f"recorded ({_merged(folder, args.task).name})"},
        "rounds": rounds,
        "target": {"share_of_ideal_at_4": TARGET_SHARE_AT_4, "measured": at_4,
                   "met": at_4 is not None and at_4 >= TARGET_SHARE_AT_4},
        "logs": str(folder),
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(rounds, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
