"""Live run views under load, on the embedded default (SQLite, no Redis).

    python bench/live.py --out bench/results/$(date +%F)-live.json [--viewers 200]

Starts the real ASGI app with daphne in one process and drives a run from another (as
the Celery worker would: the in-memory channel layer cannot carry its news, so the web
process's database watch does). Connects `--viewers` websocket clients by share link,
drops each once mid-run and reconnects it with its last sequence number, and measures:

- latency: an event's commit in the worker (its on_commit callback) -> the frame holding
  it received by a viewer, over every (viewer, live event) pair; events a viewer got on
  reconnecting are counted for loss but not for latency;
- lost and duplicated events per viewer once the run has finished, against the log.

The run's evaluations take `--interval` seconds each (far shorter than a real GPU
evaluation, so events come faster than in use) and are served by a bench-only evaluator
that answers every candidate with the naive relu kernel's real H200 verdict, re-addressed
to the candidate: the search content is beside the point here, only the event pipeline
is measured. Needs `websockets` (dev extra). Viewers, web process and worker share this
machine's CPUs: note its load when reading the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDING = REPO / "tests" / "fixtures" / "recorded" / "h200-relu-naive.json"
EVALUATOR = "bench-only: the naive relu H200 verdict for every candidate"


# -- the Django side (run in subprocesses: the bench's own loop stays free of Django) ---


def _django() -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")
    import django

    django.setup()


class NaiveVerdictForAll:
    """Bench only: every candidate gets the naive relu kernel's recorded H200 verdict,
    after `seconds` standing in for the GPU's time."""

    source = "recorded"

    def __init__(self, seconds: float) -> None:
        data = json.loads(RECORDING.read_text())
        self._gpu, self._verdict = data["gpu"], data["recorded"][0]["verdict"]
        self.seconds = seconds

    def gpu(self) -> str:
        return self._gpu

    def evaluate(self, task_name, candidate, options):
        from profiling.harness.verdict import Verdict

        time.sleep(self.seconds)
        verdict = {**json.loads(json.dumps(self._verdict)), "candidate_hash": candidate.content_hash()}
        return Verdict.from_dict(verdict), self.source


def setup(budget: int) -> None:
    _django()
    from django.core.management import call_command

    from profiling.harness import tasks as task_registry
    from search import services, sharing_services

    call_command("migrate", verbosity=0)
    relu = task_registry.get("relu")
    run = services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                              budget=budget)
    _, token = sharing_services.share_create(run=run)
    print(json.dumps({"run_id": run.pk, "token": token}))


def drive(run_id: int, interval: float, out: str) -> None:
    """Step the run like a worker, one evaluation a step, recording when each event commits."""
    _django()
    from search import broadcast, services

    committed: dict[int, tuple[float, str]] = {}
    nodes: dict[int, int] = {}  # seq -> the node a node_added / node_evaluated event is of
    sent = broadcast.event_committed

    def record(**event):
        committed[event["seq"]] = (time.time(), event["kind"])
        if event["kind"] in ("node_added", "node_evaluated"):
            nodes[event["seq"]] = event["data"]["id"]
        sent(**event)

    broadcast.event_committed = record
    evaluator = NaiveVerdictForAll(interval)
    run = services.run_drive(run_id=run_id, evaluator=evaluator)
    Path(out).write_text(json.dumps({"committed": committed, "nodes": nodes, "evaluated": run.evaluated,
                                     "last_seq": run.next_seq - 1}))


# -- the viewers ------------------------------------------------------------------------


class Viewer:
    def __init__(self, url: str, origin: str, drop_after_s: float, away_s: float) -> None:
        self.url, self.origin = url, origin
        self.drop_after_s, self.away_s = drop_after_s, away_s
        self.received: dict[int, list[float]] = {}  # seq -> receive times (more than one: a duplicate)
        self.live: dict[int, float] = {}  # seq -> receive time, for events streamed after synced
        self.frame_times: list[float] = []
        self.last_seq = 0
        self.finished = asyncio.Event()
        self.synced_once = asyncio.Event()

    async def watch(self, started: asyncio.Event) -> None:
        import websockets

        dropped = False
        while not self.finished.is_set():
            url = f"{self.url}&after={self.last_seq}"
            async with websockets.connect(url, origin=self.origin, max_size=None) as ws:
                synced = False
                drop_at = None
                while not self.finished.is_set():
                    if not dropped and drop_at is None and started.is_set():
                        drop_at = time.monotonic() + self.drop_after_s
                    timeout = max(0.01, drop_at - time.monotonic()) if drop_at and not dropped else 1.0
                    try:
                        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                    except TimeoutError:
                        if drop_at and not dropped and time.monotonic() >= drop_at:
                            dropped = True
                            break  # leave; come back after away_s with the last seq
                        continue
                    now = time.time()
                    if frame["type"] == "synced":
                        synced = True
                        self.synced_once.set()
                        continue
                    self.frame_times.append(now)
                    for event in frame["data"]:
                        self.received.setdefault(event["seq"], []).append(now)
                        if synced:
                            self.live.setdefault(event["seq"], now)
                        self.last_seq = max(self.last_seq, event["seq"])
                        if event["kind"] == "run_finished":
                            self.finished.set()
            if not self.finished.is_set():
                await asyncio.sleep(self.away_s)


async def watch_all(args, count: int, port: int, run: dict, drive_command: list[str],
                    env: dict[str, str]) -> tuple[list[Viewer], float]:
    base = f"ws://127.0.0.1:{port}/ws/runs/{run['run_id']}/?share={run['token']}"
    rng = random.Random(args.seed)
    expected_s = args.interval * args.budget
    viewers = [Viewer(base, f"http://127.0.0.1:{port}", rng.uniform(0.2, 0.7) * expected_s, args.away)
               for _ in range(count)]
    started = asyncio.Event()
    tasks = [asyncio.create_task(viewer.watch(started)) for viewer in viewers]
    await asyncio.wait_for(asyncio.gather(*(v.synced_once.wait() for v in viewers)), 120)
    began = time.monotonic()
    worker = await asyncio.create_subprocess_exec(*drive_command, env=env, cwd=REPO)
    started.set()
    await worker.wait()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return viewers, time.monotonic() - began


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"daphne did not listen on port {port}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--viewers", type=int, default=200, help="viewers of the load round")
    parser.add_argument("--latency-viewers", type=int, default=5,
                        help="viewers of the latency round, run first (0: skip it)")
    parser.add_argument("--budget", type=int, default=60, help="evaluations in each round's run")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds each evaluation takes (a real one on the GPU: 5 s to minutes)")
    parser.add_argument("--away", type=float, default=0.5, help="seconds a dropped viewer stays away")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rounds = {}
    for name, viewers in (("latency", args.latency_viewers), ("load", args.viewers)):
        if viewers > 0:
            load_before = os.getloadavg()
            rounds[name] = {**one_round(args, viewers),
                            "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()}}
            print(name, json.dumps(rounds[name], indent=1), flush=True)
    result = {
        "command": " ".join(["python", "bench/live.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {**live_settings(), "budget": args.budget, "interval_s": args.interval,
                     "away_s": args.away, "evaluator": EVALUATOR},
        "rounds": rounds,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


def live_settings() -> dict:
    return {"embedded_default": "SQLite, InMemoryChannelLayer, no Redis; one daphne "
                                "process; the run driven from another process",
            "OPTIML_LIVE_POLL_S": float(os.environ.get("OPTIML_LIVE_POLL_S") or 0.1),
            "OPTIML_LIVE_COALESCE_S": float(os.environ.get("OPTIML_LIVE_COALESCE_S") or 0.2)}


def one_round(args, viewers: int) -> dict:
    var = Path(tempfile.mkdtemp(prefix="optiml-live-bench-"))
    env = app_env(var)
    run = create_run(env, args.budget)
    web, port = serve(env)
    commits = var / "commits.json"
    try:
        watched, took = asyncio.run(watch_all(args, viewers, port, run,
                                              drive_command(run["run_id"], args.interval, commits), env))
    finally:
        stop(web)
    return summarize(watched, json.loads(commits.read_text()), took)


# -- the embedded default's processes (bench/browser_live.py uses these too) -----------


ME = [sys.executable, str(Path(__file__).resolve())]


def app_env(var: Path) -> dict[str, str]:
    """The environment of the web process and the worker: the embedded default (SQLite
    in `var`, no Redis, so the in-memory channel layer), DEBUG, the bench's recording."""
    env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL")}
    env.update(OPTIML_VAR_DIR=str(var), OPTIML_DEBUG="true", OPTIML_LOG_LEVEL="WARNING",
               OPTIML_EVALUATOR=f"recorded:{RECORDING}", DJANGO_SETTINGS_MODULE="optiml_web.settings")
    return env


def create_run(env: dict[str, str], budget: int) -> dict:
    """Migrate the bench's database and make a relu run and a share link: {run_id, token}."""
    made = subprocess.run([*ME, "_setup", str(budget)], env=env, check=True, capture_output=True,
                          text=True, cwd=REPO)
    return json.loads(made.stdout.strip().splitlines()[-1])


def drive_command(run_id: int, interval: float, out: Path) -> list[str]:
    """The worker's command: drive the run to its end, writing commit times to `out`."""
    return [*ME, "_drive", str(run_id), str(interval), str(out)]


def serve(env: dict[str, str], *, pages: bool = False) -> tuple[subprocess.Popen, int]:
    """One daphne process on a free port, listening once this returns. `pages`: through
    `manage.py runserver --noreload` (daphne's runserver, as `make start` runs it), which
    also serves the front end's files under DEBUG; else daphne itself, websockets and API."""
    port = free_port()
    if pages:
        command = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    else:
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                   "optiml_web.asgi:application"]
    web = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
    except BaseException:
        stop(web)
        raise
    return web, port


def stop(web: subprocess.Popen) -> None:
    web.terminate()
    try:
        web.wait(timeout=30)
    except subprocess.TimeoutExpired:
        web.kill()
        web.wait()


def summarize(viewers: list[Viewer], log: dict, took: float) -> dict:
    committed = {int(seq): (at, kind) for seq, (at, kind) in log["committed"].items()}
    everything = set(range(1, log["last_seq"] + 1))
    latencies = [(viewer.live[seq] - at) * 1e3 for viewer in viewers
                 for seq, (at, _) in committed.items() if seq in viewer.live]
    evaluated = [(viewer.live[seq] - at) * 1e3 for viewer in viewers
                 for seq, (at, kind) in committed.items() if seq in viewer.live and kind == "node_evaluated"]
    lost = sum(len(everything - set(viewer.received)) for viewer in viewers)
    duplicates = sum(len(times) - 1 for viewer in viewers for times in viewer.received.values())
    per_second = [max(sum(1 for t in viewer.frame_times if start <= t < start + 1)
                      for start in viewer.frame_times) for viewer in viewers if viewer.frame_times]
    return {
        "events_in_log": log["last_seq"], "events_committed_during_watch": len(committed),
        "evaluations": log["evaluated"], "viewers": len(viewers),
        "reconnects": sum(1 for viewer in viewers if viewer.drop_after_s), "seconds": round(took, 2),
        "latency_ms_evaluation_committed_to_received": spread(evaluated),
        "latency_ms_any_event_committed_to_received": spread(latencies),
        "lost_events_after_resync": lost, "duplicate_events": duplicates,
        "most_frames_in_one_second_per_viewer": max(per_second),
    }


def spread(values: list[float]) -> dict:
    return {"samples": len(values), "p50": round(statistics.median(values), 1),
            "p95": round(percentile(values, 95), 1), "p99": round(percentile(values, 99), 1),
            "max": round(max(values), 1)}


def machine() -> dict:
    return {"host": platform.node(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version}


if __name__ == "__main__":
    if sys.argv[1:2] == ["_setup"]:
        setup(int(sys.argv[2]))
    elif sys.argv[1:2] == ["_drive"]:
        drive(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(main())
