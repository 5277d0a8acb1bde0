"""Viewers of one live run over Redis, as production serves them (issue 34's evidence).

    DATABASE_URL=postgres://... REDIS_URL=redis://... \\
        python bench/live_load.py --out bench/results/<date>-cpu-live-load/live-load.json \\
        [--viewers 200] [--duration 300] [--gap 60]

The app's ASGI application is served as the image serves it (docker/Dockerfile's CMD:
`python -m optiml_web.daphne`, OPTIML_DEBUG=false) over PostgreSQL (DATABASE_URL, which
this bench migrates: give it a database of its own) and Redis (REDIS_URL: the channel
layer as production configures it, optiml_web.env.channel_layers). `--viewers` real
websocket clients (the `websockets` package, in this process) open the run by its share
link and stay for `--duration` seconds, while a worker process steps the run in bursts
of `--steps` evaluations with `--gap` seconds of silence after each (a real run is
silent 7-70 s per full gate), then stops the run. It reports:

- cuts: closes nobody asked for (a viewer reconnects after one with its last seq, as the
  browser does, so that loss is still counted against the whole log);
- per viewer, every event of the run's log received exactly once (none lost, none twice);
- latency from an event's commit in the worker (its on_commit announcement) to the frame
  holding it received by a viewer, over every (viewer, live event) pair;
- this process's event-loop lag (how late a 100 ms sleep wakes up): the load
  generator's own share of the latency, since viewers, server, database and Redis share
  the machine's CPUs;
- the machine (CPU, cores, memory, Python, redis-server, PostgreSQL, package versions)
  and the server's log lines that name an error.

bench/live.py measures the embedded default (SQLite, no Redis); its helpers are used here.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.metadata
import json
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.live import (  # noqa: E402  (the repository on the path first, as a script)
    RECORDING,
    REPO,
    NaiveVerdictForAll,
    create_run,
    free_port,
    percentile,
    stop,
    wait_for_port,
)

ME = [sys.executable, str(Path(__file__).resolve())]
PACKAGES = ("Django", "channels", "channels-redis", "redis", "daphne", "Twisted", "autobahn", "asgiref",
            "websockets", "psycopg", "djangorestframework")
LAG_PROBE_S = 0.1  # the event-loop lag probe's sleep


# -- the worker side: a Django process that steps the run in bursts ------------------------


def publish(run_id: int, duration_s: float, gap_s: float, steps: int, interval_s: float, out: str) -> None:
    """Step run `run_id` `steps` evaluations at a time, then stay silent `gap_s` (less
    where `duration_s` ends sooner), until `duration_s` has passed; then stop the run (its
    last event). Writes each event's
    commit time (when its announcement left for the channel layer) to `out`."""
    from bench.live import _django

    _django()
    from search import broadcast, control_services, services
    from search.models import Run

    committed: dict[int, tuple[float, str]] = {}
    send_one, send_all = broadcast.event_committed, broadcast._send_all

    def one(**event):
        committed[event["seq"]] = (time.time(), event["kind"])
        send_one(**event)

    def several(run_id, messages):
        now = time.time()
        committed.update({message["seq"]: (now, message["kind"]) for message in messages})
        send_all(run_id, messages)

    broadcast.event_committed, broadcast._send_all = one, several
    from django.db import transaction

    evaluator = NaiveVerdictForAll(interval_s)
    began, bursts = time.monotonic(), []
    while (started := time.monotonic() - began) < duration_s:
        for _ in range(steps):
            services.run_step(run_id=run_id, evaluator=evaluator)
        bursts.append([round(started, 2), round(time.monotonic() - began, 2)])
        time.sleep(max(0.0, min(gap_s, duration_s - (time.monotonic() - began))))
    with transaction.atomic():
        control_services.run_set_status(run_id=run_id, status=Run.Status.STOPPED)
    run = Run.objects.get(pk=run_id)
    Path(out).write_text(json.dumps({"committed": committed, "last_seq": run.next_seq - 1,
                                     "evaluated": run.evaluated, "bursts_s": bursts}))


# -- the viewers ---------------------------------------------------------------------------


class Viewer:
    """One browser tab: connects with the last seq it holds, reads frames, and after a
    close it did not ask for (a cut) connects again at once, as the page does."""

    def __init__(self, url: str, origin: str) -> None:
        self.url, self.origin = url, origin
        self.received: dict[int, list[float]] = {}  # seq -> receive times (two or more: a duplicate)
        self.live: dict[int, float] = {}  # seq -> receive time, for events streamed after synced
        self.last_seq = 0
        self.cuts: list[dict] = []
        self.failed_connects: list[str] = []
        self.connect_ms: list[float] = []  # from opening the socket to its `synced`, per connection
        self.synced_once = asyncio.Event()
        self.leaving = False
        self._socket = None

    async def watch(self) -> None:
        import websockets

        while not self.leaving:
            try:
                # No client pings and a patient handshake: a browser sends no pings (it
                # answers the server's) and waits for the server to answer its upgrade.
                opened = time.monotonic()
                async with websockets.connect(f"{self.url}&after={self.last_seq}", origin=self.origin,
                                              max_size=None, ping_interval=None, open_timeout=120) as ws:
                    self._socket = ws
                    await self._read(ws, opened)
            except websockets.ConnectionClosed as closed:
                if not self.leaving:
                    self.cuts.append({"at": time.time(), "code": closed.rcvd.code if closed.rcvd else None,
                                      "reason": closed.rcvd.reason if closed.rcvd else "no close frame"})
            except (OSError, websockets.InvalidHandshake, TimeoutError) as error:
                self.failed_connects.append(f"{type(error).__name__}: {error}"[:200])
                await asyncio.sleep(1.0)
            finally:
                self._socket = None

    async def _read(self, ws, opened: float) -> None:
        synced = False
        async for raw in ws:
            now = time.time()
            frame = json.loads(raw)
            if frame["type"] == "synced":
                synced = True
                self.connect_ms.append((time.monotonic() - opened) * 1e3)
                self.synced_once.set()
            elif frame["type"] == "events":
                for event in frame["data"]:
                    self.received.setdefault(event["seq"], []).append(now)
                    if synced:
                        self.live.setdefault(event["seq"], now)
                    self.last_seq = max(self.last_seq, event["seq"])
        if not self.leaving:  # the server closed cleanly without being asked: a cut too
            self.cuts.append({"at": time.time(), "code": ws.close_code, "reason": ws.close_reason or ""})

    async def leave(self) -> None:
        self.leaving = True
        if self._socket is not None:
            await self._socket.close()


async def lag_probe(lags: list[float], loads: list[float], done: asyncio.Event) -> None:
    """This process's event-loop lag every LAG_PROBE_S, and the machine's 1-minute load
    average every 50 probes (other jobs on the machine show there)."""
    while not done.is_set():
        before = time.monotonic()
        await asyncio.sleep(LAG_PROBE_S)
        lags.append((time.monotonic() - before - LAG_PROBE_S) * 1e3)
        if len(lags) % 50 == 1:
            loads.append(os.getloadavg()[0])


async def watch(args, port: int, run: dict, env: dict[str, str], log: Path) -> tuple[list[Viewer], dict]:
    base = f"ws://127.0.0.1:{port}/ws/runs/{run['run_id']}/?share={run['token']}"
    viewers = [Viewer(base, f"http://127.0.0.1:{port}") for _ in range(args.viewers)]
    lags: list[float] = []
    loads: list[float] = []
    done = asyncio.Event()
    probe = asyncio.create_task(lag_probe(lags, loads, done))
    tasks = [asyncio.create_task(viewer.watch()) for viewer in viewers]
    connecting = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(v.synced_once.wait() for v in viewers)), 120)
    all_synced_s = time.monotonic() - connecting
    worker = await asyncio.create_subprocess_exec(
        *ME, "_publish", str(run["run_id"]), str(args.duration), str(args.gap), str(args.steps),
        str(args.interval), str(log), env=env, cwd=REPO)
    if await worker.wait() != 0:
        raise RuntimeError("the worker process failed")
    last_seq = json.loads(log.read_text())["last_seq"]
    deadline = time.monotonic() + args.settle
    while time.monotonic() < deadline and any(v.last_seq < last_seq for v in viewers):
        await asyncio.sleep(0.1)
    await asyncio.gather(*(viewer.leave() for viewer in viewers))
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    done.set()
    await probe
    return viewers, {"all_synced_s": round(all_synced_s, 2), "loop_lag_ms": spread(lags),
                     "load_average_1_min_while_watched": {"min": min(loads), "max": max(loads),
                                                          "samples": len(loads)}}


# -- the server and its environment --------------------------------------------------------


def app_env(var: Path) -> dict[str, str]:
    """Production's settings (OPTIML_DEBUG=false, PostgreSQL, Redis), the bench's own
    secret key and var folder; the recording as evaluator, so that nothing needs a GPU."""
    for name in ("DATABASE_URL", "REDIS_URL"):
        if not os.environ.get(name):
            raise SystemExit(f"{name} is required: the bench measures the production set-up")
    env = dict(os.environ)
    env.update(OPTIML_VAR_DIR=str(var), OPTIML_DEBUG="false", OPTIML_SECRET_KEY=secrets.token_urlsafe(50),
               OPTIML_ALLOWED_HOSTS="127.0.0.1,localhost", OPTIML_LOG_LEVEL="WARNING",
               OPTIML_COMPILE_AHEAD="false", OPTIML_EVALUATOR=f"recorded:{RECORDING}",
               DJANGO_SETTINGS_MODULE="optiml_web.settings")
    return env


DOCKERFILE = REPO / "docker" / "Dockerfile"


def server_command(port: int, extra: list[str] = (), dockerfile: Path = DOCKERFILE) -> list[str]:
    """docker/Dockerfile's CMD, read from it (so that the bench serves as the image does),
    bound to 127.0.0.1:`port`, run by this Python, with `extra` options (an experiment's)
    before the application's path."""
    text = dockerfile.read_text().replace("\\\n", " ")  # continuation lines joined
    lines = [line for line in text.splitlines() if line.startswith("CMD ")]
    command = json.loads(lines[-1].removeprefix("CMD "))
    for option, value in (("--bind", "127.0.0.1"), ("--port", str(port))):
        command[command.index(option) + 1] = value
    command = [*command[:-1], *extra, command[-1]]
    return [sys.executable, *command[1:]] if command[0] == "python" else command


def serve(env: dict[str, str], log: Path, extra: list[str] = ()) -> tuple[subprocess.Popen, int]:
    """The web process as docker/Dockerfile's CMD runs it, on a free port; its output to `log`."""
    port = free_port()
    command = server_command(port, extra)
    with log.open("w") as output:
        web = subprocess.Popen(command, env=env, cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port)
    except BaseException:
        stop(web)
        raise
    return web, port


def run_once(args) -> dict:
    var = Path(tempfile.mkdtemp(prefix="optiml-live-load-"))
    env = app_env(var)
    run = create_run(env, budget=10_000)
    server_log = var / "daphne.log"
    web, port = serve(env, server_log, args.server_option)
    commits = var / "commits.json"
    load_before = os.getloadavg()
    try:
        viewers, client = asyncio.run(watch(args, port, run, env, commits))
    finally:
        stop(web)
    result = summarize(viewers, json.loads(commits.read_text()))
    errors = [line for line in server_log.read_text(errors="replace").splitlines()
              if any(word in line for word in ("Traceback", "ERROR", "Exception", "Error"))]
    return {**result, "client": client, "server_error_lines": len(errors), "server_error_sample": errors[:10],
            "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()}}


# -- the numbers ---------------------------------------------------------------------------


def summarize(viewers: list[Viewer], log: dict) -> dict:
    committed = {int(seq): (at, kind) for seq, (at, kind) in log["committed"].items()}
    everything = set(range(1, log["last_seq"] + 1))
    latencies = [(viewer.live[seq] - at) * 1e3 for viewer in viewers
                 for seq, (at, _) in committed.items() if seq in viewer.live]
    lost = [len(everything - set(viewer.received)) for viewer in viewers]
    twice = [sum(len(times) - 1 for times in viewer.received.values()) for viewer in viewers]
    cuts = [cut for viewer in viewers for cut in viewer.cuts]
    return {
        "viewers": len(viewers), "events_in_log": log["last_seq"],
        "events_published_while_watched": len(committed),
        "evaluations": log["evaluated"], "bursts_s_from_start": log["bursts_s"],
        "cuts": len(cuts), "cut_sample": cuts[:10],
        "failed_connects": sum(len(viewer.failed_connects) for viewer in viewers),
        "failed_connect_sample": [f for viewer in viewers for f in viewer.failed_connects][:10],
        "connect_to_synced_ms": spread([ms for viewer in viewers for ms in viewer.connect_ms]),
        "viewers_with_every_event_exactly_once": sum(1 for n, d in zip(lost, twice, strict=True)
                                                     if not n and not d),
        "events_lost": sum(lost), "events_duplicated": sum(twice),
        "latency_ms_commit_to_received": spread(latencies),
    }


def spread(values: list[float]) -> dict:
    if not values:
        return {"samples": 0}
    return {"samples": len(values), "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1), "p99": round(percentile(values, 99), 1),
            "max": round(max(values), 1)}


def machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    model = models[0] if models else platform.processor()
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total_kb = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal")), 0)
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(total_kb / 2**20, 1),
            "platform": platform.platform(), "python": platform.python_version(),
            "redis_server": _version(["redis-server", "--version"]),
            "postgresql": _version(["psql", "--version"]),
            "packages": {name: _package(name) for name in PACKAGES}}


def _version(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "not found"


def _package(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds the viewers watch")
    parser.add_argument("--gap", type=float, default=60.0, help="seconds of silence after each burst")
    parser.add_argument("--steps", type=int, default=4, help="evaluations in each burst")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds each evaluation takes")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds the viewers may take to receive the last event before they leave")
    parser.add_argument("--server-option", action="append", default=[],
                        help="an option added to the Dockerfile's server command (an experiment's)")
    args = parser.parse_args(argv)

    result = {
        "command": " ".join(["python", "bench/live_load.py", *(sys.argv[1:] if argv is None else argv)]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {"server": " ".join(["python", *server_command(8000, args.server_option)[1:]])
                     + " (docker/Dockerfile's CMD, "
                               "bound to 127.0.0.1 and a free port), one process",
                     "OPTIML_DEBUG": "false", "database": "PostgreSQL (DATABASE_URL)",
                     "channel_layer": "Redis (REDIS_URL), optiml_web.env.channel_layers",
                     "duration_s": args.duration, "gap_s": args.gap, "steps_per_burst": args.steps,
                     "evaluation_s": args.interval, "evaluator": "bench-only: the naive relu H200 verdict "
                     "for every candidate (bench/live.py)",
                     "OPTIML_LIVE_COALESCE_S": float(os.environ.get("OPTIML_LIVE_COALESCE_S") or 0.2)},
        "result": run_once(args),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["result"], indent=1))
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["_publish"]:
        run_id, duration, gap, steps, interval, out = sys.argv[2:8]
        publish(int(run_id), float(duration), float(gap), int(steps), float(interval), out)
    else:
        main()
