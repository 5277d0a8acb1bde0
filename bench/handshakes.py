"""How fast one web process lets live viewers in: websocket handshakes of a run's page,
one at a time and all at once (issue 34: at load, connects queued behind each other).

    DATABASE_URL=postgres://... REDIS_URL=redis://... \\
        python bench/handshakes.py --out bench/results/<date>-cpu-handshakes/after.json \\
        [--burst 200] [--sequential 40] [--rounds 3]

The server is the image's (docker/Dockerfile's CMD, `python -m optiml_web.daphne`,
OPTIML_DEBUG=false) over PostgreSQL and the Redis channel layer, as bench/live_load.py
serves it (its helpers are used here). Two kinds of viewer open `ws/runs/<id>/`:
a visitor by the run's share link, and its signed-in creator (session cookie: the
session and user are read at the handshake, and the socket joins its user's group).
For each kind it measures, from opening the TCP connection to the `synced` frame:

- sequential: `--sequential` handshakes one after another (the cost of one, unloaded);
- burst: `--burst` viewers that all connect at once, `--rounds` times: each one's time
  to synced, and the wall time until all were in (handshakes per second).

Viewers and server share this machine's CPUs: the numbers are of the whole machine, and
its load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.live import REPO, percentile, stop  # noqa: E402  (the repository on the path first)
from bench.live_load import app_env, machine, serve, server_command, spread  # noqa: E402

ME = [sys.executable, str(Path(__file__).resolve())]


def setup() -> None:
    """(In a subprocess, Django set up.) Migrate; a relu run created by `viewer`, its share
    link, and a signed-in session of `viewer`: printed as JSON."""
    from bench.live import _django

    _django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from profiling.harness import tasks as task_registry
    from search import services, sharing_services

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("viewer", password=None)
    relu = task_registry.get("relu")
    run = services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                              budget=10, user=user)
    _, token = sharing_services.share_create(run=run, user=user)
    client = Client()
    client.force_login(user)
    print(json.dumps({"run_id": run.pk, "token": token, "session": client.cookies["sessionid"].value}))


async def handshake(url: str, origin: str, cookie: str | None) -> float:
    """Milliseconds from opening the connection to the run's `synced` frame; then closes."""
    import websockets

    headers = {"Cookie": f"sessionid={cookie}"} if cookie else None
    opened = time.monotonic()
    async with websockets.connect(url, origin=origin, additional_headers=headers, max_size=None,
                                  ping_interval=None, open_timeout=120) as ws:
        async for raw in ws:
            if json.loads(raw)["type"] == "synced":
                return (time.monotonic() - opened) * 1e3
    raise RuntimeError(f"closed before synced: {ws.close_code} {ws.close_reason}")


async def burst(url: str, origin: str, cookie: str | None, viewers: int) -> dict:
    began = time.monotonic()
    results = await asyncio.gather(*(handshake(url, origin, cookie) for _ in range(viewers)),
                                   return_exceptions=True)
    wall = time.monotonic() - began
    times = [r for r in results if isinstance(r, float)]
    failures = [f"{type(r).__name__}: {r}"[:200] for r in results if not isinstance(r, float)]
    return {"viewers": viewers, "all_in_s": round(wall, 2), "handshakes_per_s": round(len(times) / wall, 1),
            "connect_to_synced_ms": spread(times), "failed": len(failures), "failed_sample": failures[:5]}


async def measure(args, port: int, run: dict) -> dict:
    origin = f"http://127.0.0.1:{port}"
    kinds = {"share_link_visitor": (f"ws://127.0.0.1:{port}/ws/runs/{run['run_id']}/?share={run['token']}",
                                    None),
             "signed_in_creator": (f"ws://127.0.0.1:{port}/ws/runs/{run['run_id']}/?progress=1",
                                   run["session"])}
    results = {}
    for kind, (url, cookie) in kinds.items():
        await handshake(url, origin, cookie)  # warm: the first handshake imports and connects
        sequential = [await handshake(url, origin, cookie) for _ in range(args.sequential)]
        bursts = [await burst(url, origin, cookie, args.burst) for _ in range(args.rounds)]
        results[kind] = {"sequential_ms": spread(sequential), "bursts": bursts,
                         "burst_handshakes_per_s_median": sorted(b["handshakes_per_s"] for b in bursts)[
                             len(bursts) // 2],
                         "burst_p95_ms_median": percentile([b["connect_to_synced_ms"].get("p95", 0)
                                                            for b in bursts], 50)}
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--burst", type=int, default=200, help="viewers connecting at once")
    parser.add_argument("--rounds", type=int, default=3, help="bursts per kind of viewer")
    parser.add_argument("--sequential", type=int, default=40, help="handshakes one after another")
    parser.add_argument("--server-option", action="append", default=[],
                        help="an option added to the Dockerfile's server command (an experiment's)")
    parser.add_argument("--label", default="", help="what the tree measured was (before/after a change)")
    args = parser.parse_args(argv)

    var = Path(tempfile.mkdtemp(prefix="optiml-handshakes-"))
    env = app_env(var)
    made = subprocess.run([*ME, "_setup"], env=env, check=True, capture_output=True, text=True, cwd=REPO)
    run = json.loads(made.stdout.strip().splitlines()[-1])
    log = var / "daphne.log"
    load_before = os.getloadavg()
    web, port = serve(env, log, args.server_option)
    try:
        results = asyncio.run(measure(args, port, run))
    finally:
        stop(web)
    errors = [line for line in log.read_text(errors="replace").splitlines()
              if any(word in line for word in ("Traceback", "ERROR", "Exception", "Error"))]
    result = {
        "command": " ".join(["python", "bench/handshakes.py", *(sys.argv[1:] if argv is None else argv)]),
        "label": args.label,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": "CPU only: these are CPU numbers (viewers, daphne, PostgreSQL and Redis on one machine)",
        "machine": machine(),
        "server": " ".join(["python", *server_command(8000, args.server_option)[1:]]) + ", one process",
        "result": results,
        "server_error_lines": len(errors), "server_error_sample": errors[:10],
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["_setup"]:
        setup()
    else:
        main()
