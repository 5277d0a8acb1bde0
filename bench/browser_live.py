"""Live run views in a real browser, on the embedded default (SQLite, no Redis).

    python bench/browser_live.py --out bench/results/$(date +%F)-browser-live.json

Two parts, each on a fresh database and one daphne process (`manage.py runserver
--noreload`, as `make start` runs it, so that it serves the built front end too):

- live rounds: Debian's Chromium (driven by bench/browser_live.mjs through playwright-core)
  opens the run's share link in `--pages` pages (one round per count, e.g. 1 then 10; one
  Chromium, each page a window of its own), and once all are live the run is driven from another process, as a
  worker would, by bench/live.py's driver (its bench-only evaluator answers every
  candidate with the naive relu H200 verdict after `--interval` seconds). Measured, per
  (page, evaluation): the evaluation's commit (the driver's on_commit callback) to the
  frame that draws its node evaluated: the first task after the rendering update (style,
  layout, paint) of the frame whose requestAnimationFrame callback changed the node's
  element (svg.tree g.node[data-id=N]) to its evaluated class, seen by a MutationObserver.
  Also broken down: commit -> websocket frame in the page -> element changed -> drawn.
- a run of `--nodes` synthetic nodes (rows written directly into the bench's database: a
  random tree, most passed, some failed, a few pending), opened in one page: its first
  draw from navigation start; then `--grow` new nodes committed one at a time (node_added,
  then node_evaluated, as the engine's events) and the redraw of each; then mouse-wheel
  zoom in and out over the tree (frame intervals and each frame's main-thread work); then
  the failed nodes unfolded (every node drawn) and the zoom again.

The page is instrumented from outside (an init script: MutationObserver, a wrapped
requestAnimationFrame and WebSocket); the app is unchanged. Page times are epoch ms from
performance.timeOrigin + performance.now(), the driver's are time.time(): the same clock
on this machine (each page's offset to Date.now(), which has 1 ms steps, is reported as
clock_skew_ms_abs_page_vs_date_now). Browser, web process and driver share this machine's
CPUs: read the numbers with its load.
Needs Chromium at /usr/bin/chromium, Node, and the built front end (`make frontend`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import live  # noqa: E402

REPO = live.REPO
SCRIPT = Path(__file__).with_name("browser_live.mjs")
CHROMIUM = "/usr/bin/chromium"
ME = [sys.executable, str(Path(__file__).resolve())]
FRAME_MS = 1000 / 60
TARGET_P95_MS = 250  # the issue's: an evaluation committed -> its node drawn
ZOOM_STEPS = 20  # wheel notches in (and one fewer out): bench/browser_live.mjs zoomFrames


# -- the Django side (subprocesses, as in bench/live.py) --------------------------------


def big_setup(nodes: int, seed: int) -> None:
    """A relu run whose tree has `nodes` synthetic nodes (RunNode rows, the rows the page
    loads), still running so that new events reach its viewers; and a share link."""
    live._django()
    from django.core.management import call_command

    from profiling.harness import tasks as task_registry
    from search import services, sharing_services
    from search.models import RunNode

    call_command("migrate", verbosity=0)
    relu = task_registry.get("relu")
    run = services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                              budget=nodes * 2)
    rows = synthetic_tree(nodes, random.Random(seed))
    RunNode.objects.bulk_create([RunNode(run=run, candidate_id=run.root_candidate_id, **row) for row in rows],
                                batch_size=500)
    run.evaluated = sum(1 for row in rows if row["state"] == "done")
    run.root_ms = rows[0]["time_ms"]
    best = min((row for row in rows if row["status"] == "passed"), key=lambda row: row["time_ms"])
    run.best_ms, run.best_node = best["time_ms"], best["node_id"]
    run.save()
    _, token = sharing_services.share_create(run=run)
    print(json.dumps({"run_id": run.pk, "token": token, "nodes": len(rows),
                      "failed": sum(1 for row in rows if row["status"] not in ("", "passed")),
                      "pending": sum(1 for row in rows if row["state"] == "pending")}))


def synthetic_tree(count: int, rng: random.Random) -> list[dict]:
    """A search-like tree: each node the child of a passed node (mostly a recent one, as
    MCTS exploits), 85% passed, 12% failed, the last few pending; visits as backpropagated."""
    rows = [{"node_id": 0, "parent_id": None, "state": "done", "source": "root", "title": "naive relu",
             "status": "passed", "time_ms": 0.806, "spread_ms": 0.004, "reward": 0.0}]
    passed = [0]
    for node_id in range(1, count):
        parent = rng.choice(passed[-40:]) if rng.random() < 0.7 else rng.choice(passed)
        pending = node_id >= count - 5
        roll = rng.random()
        status = "" if pending else "passed" if roll < 0.85 else "rejected" if roll < 0.97 else "error"
        time_ms = rows[parent]["time_ms"] * rng.uniform(0.85, 1.2) if status == "passed" else None
        rows.append({"node_id": node_id, "parent_id": parent, "state": "pending" if pending else "done",
                     "source": rng.choice(["tunable", "rewrite:float4", "rewrite:grid-stride", "llm:bench"]),
                     "title": f"synthetic candidate {node_id}", "status": status, "time_ms": time_ms,
                     "spread_ms": time_ms * 0.01 if time_ms else None,
                     "reward": None if pending else (0.806 / time_ms - 1 if time_ms else -1.0)})
        if status == "passed":
            passed.append(node_id)
    visits = [0 if row["state"] == "pending" else 1 for row in rows]
    for row in reversed(rows[1:]):
        visits[row["parent_id"]] += visits[row["node_id"]]
    for row in rows:
        row["visits"] = visits[row["node_id"]]
        row["value"] = (row["reward"] or 0.0) * row["visits"]
    return rows


def grow(run_id: int, count: int, spacing: float, seed: int, out: str) -> None:
    """Commit `count` new nodes one at a time, each a node_added (pending) then, `spacing`
    seconds later, a node_evaluated (passed) event, as a worker's steps would; write
    when each committed. Bench only: the events are appended through the services'
    own log writer (search.services._append), under the run's row lock."""
    live._django()
    from django.db import transaction

    from search import services
    from search.models import Run, RunNode

    rng = random.Random(seed)
    committed: dict[int, tuple[float, str]] = {}
    nodes: dict[int, int] = {}
    first = RunNode.objects.filter(run_id=run_id).order_by("-node_id").first().node_id + 1
    parents = list(RunNode.objects.filter(run_id=run_id, status="passed").values_list("node_id", flat=True))
    for node_id in range(first, first + count):
        parent = rng.choice(parents)
        row = {"id": node_id, "parent": parent, "depth": 1, "source": "tunable",
               "title": f"new node {node_id}", "state": "pending", "status": None, "time_ms": None,
               "spread_ms": None, "replayed": False, "prior": 0.1, "reward": None, "visits": 0,
               "value": 0.0, "evaluation": None}
        for kind in ("node_added", "node_evaluated"):
            with transaction.atomic():
                run = Run.objects.select_for_update().get(pk=run_id)
                if kind == "node_added":
                    RunNode.objects.create(run=run, node_id=node_id, parent_id=parent, state="pending",
                                           candidate_id=run.root_candidate_id, source=row["source"],
                                           title=row["title"])
                else:
                    row.update(state="done", status="passed", time_ms=0.8, spread_ms=0.008, reward=0.0075,
                               visits=1, value=0.0075, evaluation=run.evaluated + 1)
                    RunNode.objects.filter(run=run, node_id=node_id).update(
                        state="done", status="passed", time_ms=0.8, spread_ms=0.008, reward=0.0075, visits=1)
                    run.evaluated += 1
                event = services._append(run, kind, dict(row))
                run.save(update_fields=["next_seq", "evaluated"])
            committed[event.seq] = (time.time(), kind)
            nodes[event.seq] = node_id
            time.sleep(spacing)
    Path(out).write_text(json.dumps({"committed": committed, "nodes": nodes}))


# -- the bench --------------------------------------------------------------------------


def browse(config: dict, on_ready, timeout_s: float) -> dict:
    """Run bench/browser_live.mjs with `config`; call `on_ready()` when it says READY (the
    page(s) are live); return its RESULT."""
    browser = subprocess.Popen(["node", str(SCRIPT), json.dumps({"chromium": CHROMIUM, **config})], cwd=REPO,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in browser.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    transcript, result = [], None
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if line == "READY":
                on_ready()
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
            else:
                transcript.append(line)
                print("  browser:", line[:300], flush=True)
        browser.wait(timeout=60)
    finally:
        if browser.poll() is None:
            browser.kill()
            browser.wait()
    if browser.returncode != 0 or result is None:
        raise RuntimeError("the browser script failed:\n" + "\n".join(transcript[-40:]))
    return result


def live_round(args, pages: int) -> dict:
    var = Path(tempfile.mkdtemp(prefix="optiml-browser-bench-"))
    env = live.app_env(var)
    run = live.create_run(env, args.budget)
    web, port = live.serve(env, pages=True)
    commits = var / "commits.json"
    drive = live.drive_command(run["run_id"], args.interval, commits)
    driver: list[subprocess.Popen] = []
    config = {"mode": "live", "url": f"http://127.0.0.1:{port}/share/{run['token']}/", "pages": pages}
    began = time.monotonic()
    try:
        seen = browse(config, lambda: driver.append(subprocess.Popen(drive, env=env, cwd=REPO)),
                      timeout_s=args.budget * args.interval * 4 + 120)
    finally:
        log = finish(driver, web, var, commits)
    return summarize_live(seen, log, pages, time.monotonic() - began)


def finish(workers: list[subprocess.Popen], web: subprocess.Popen, var: Path, commits: Path) -> dict:
    """Wait for the worker, stop the web process, read the commit log, remove the round's
    folder (its database)."""
    try:
        for process in workers:
            if process.wait(timeout=120) != 0:
                raise RuntimeError(f"{process.args[2]} failed ({process.returncode})")
        return json.loads(commits.read_text())
    finally:
        live.stop(web)
        shutil.rmtree(var, ignore_errors=True)


def summarize_live(seen: dict, log: dict, pages: int, took: float) -> dict:
    committed = {int(seq): (at * 1e3, kind) for seq, (at, kind) in log["committed"].items()}
    node_of = {int(seq): node for seq, node in log["nodes"].items()}
    stages: dict[str, list[float]] = {name: [] for name in (
        "committed_to_drawn", "committed_to_websocket", "websocket_to_element_changed",
        "element_changed_to_drawn", "render_callback", "added_committed_to_drawn")}
    missing = 0
    for page in seen["pages"]:
        for seq, (at, kind) in committed.items():
            if kind not in ("node_evaluated", "node_added"):
                continue
            node = page["nodes"].get(str(node_of[seq]), {})
            arrived = page["ws"].get(str(seq))
            if kind == "node_added":
                if node.get("added") and node["added"][1] is not None:
                    stages["added_committed_to_drawn"].append(node["added"][1] - at)
                continue
            done = node.get("done")
            if not done or done[1] is None or arrived is None:
                missing += 1
                continue
            dom, drawn, render = done
            stages["committed_to_drawn"].append(drawn - at)
            stages["committed_to_websocket"].append(arrived - at)
            stages["websocket_to_element_changed"].append(dom - arrived)
            stages["element_changed_to_drawn"].append(drawn - dom)
            if render is not None:
                stages["render_callback"].append(render)
    evaluations = sum(1 for _, kind in committed.values() if kind == "node_evaluated")
    return {
        "pages": pages, "evaluations": evaluations, "events_in_log": log["last_seq"],
        "seconds": round(took, 1), "samples_expected": evaluations * pages, "evaluations_not_drawn": missing,
        "latency_ms_evaluation_committed_to_drawn": spread(stages.pop("committed_to_drawn")),
        "breakdown_ms": {name: spread(values) for name, values in stages.items()},
        **page_facts(seen["pages"]), "page_errors": seen["page_errors"],
    }


def page_facts(pages: list[dict]) -> dict:
    """What the instrument itself cost, and whether the page's clock agreed with Date.now()."""
    skew = [abs(ms) for page in pages for ms in page["skew_ms"]]
    observer = [ms for page in pages for ms, _ in page["observer_ms"]]
    return {"instrument_observer_callback_ms": spread(observer),
            "clock_skew_ms_abs_page_vs_date_now": spread(skew),
            "drawn_elements_at_end": [page["drawn_elements"] for page in pages]}


def big_round(args) -> dict:
    var = Path(tempfile.mkdtemp(prefix="optiml-browser-bench-big-"))
    env = live.app_env(var)
    made = subprocess.run([*ME, "_big", str(args.nodes), str(args.seed)], env=env, check=True,
                          capture_output=True, text=True, cwd=REPO)
    run = json.loads(made.stdout.strip().splitlines()[-1])
    web, port = live.serve(env, pages=True)
    commits = var / "grown.json"
    grow = [*ME, "_grow", str(run["run_id"]), str(args.grow), str(args.grow_spacing), str(args.seed),
            str(commits)]
    grower: list[subprocess.Popen] = []
    config = {"mode": "big", "url": f"http://127.0.0.1:{port}/share/{run['token']}/",
              "expect": list(range(run["nodes"], run["nodes"] + args.grow)), "zoom_steps": ZOOM_STEPS}
    try:
        seen = browse(config, lambda: grower.append(subprocess.Popen(grow, env=env, cwd=REPO)), timeout_s=600)
    finally:
        log = finish(grower, web, var, commits)
    return summarize_big(seen, log, run)


def summarize_big(seen: dict, log: dict, run: dict) -> dict:
    grown = seen["grown"]
    committed = {int(seq): (at * 1e3, kind) for seq, (at, kind) in log["committed"].items()}
    node_of = {int(seq): node for seq, node in log["nodes"].items()}
    stages: dict[str, list[float]] = {name: [] for name in (
        "committed_to_drawn", "websocket_to_drawn", "render_callback", "added_committed_to_drawn",
        "added_websocket_to_drawn")}
    for seq, (at, kind) in committed.items():
        node = grown["nodes"][str(node_of[seq])]
        arrived = grown["ws"][str(seq)]
        if kind == "node_added":
            stages["added_committed_to_drawn"].append(node["added"][1] - at)
            stages["added_websocket_to_drawn"].append(node["added"][1] - arrived)
        else:
            dom, drawn, render = node["done"]
            stages["committed_to_drawn"].append(drawn - at)
            stages["websocket_to_drawn"].append(drawn - arrived)
            if render is not None:
                stages["render_callback"].append(render)
    return {
        "synthetic_run": {"nodes": run["nodes"], "failed": run["failed"], "pending": run["pending"]},
        "first_draw_ms_from_navigation": rounded(seen["first_draw"]),
        "redraw_after_one_new_node_ms": {"new_nodes": len(node_of) // 2,
                                         **{name: with_values(values) for name, values in stages.items()}},
        "zoom_failed_folded": frames(seen["zoom_failed_folded"]),
        "unfold_failed_ms": rounded(seen["unfold_failed"]),
        "zoom_all_drawn": frames(seen["zoom_all_drawn"]),
        **page_facts([grown]), "page_errors": seen["page_errors"],
    }


def rounded(facts: dict) -> dict:
    return {key: round(value, 1) if isinstance(value, float) else value for key, value in facts.items()}


def frames(zoom: dict) -> dict:
    intervals, work = zoom["interval_ms"], zoom["work_ms"]
    return {"frames": zoom["frames"], "wheel_notches_in_out": [ZOOM_STEPS, ZOOM_STEPS - 1],
            "scale_from_to": [zoom["scales"][0], max(zoom["scales"]), zoom["scales"][-1]],
            "frames_per_second": round(len(intervals) / sum(intervals) * 1e3, 1),
            "frame_interval_ms": spread(intervals),
            "frames_longer_than_a_60hz_frame": sum(1 for ms in intervals if ms > FRAME_MS * 1.5),
            "frame_main_thread_work_ms": spread(work),
            "wheel_event_to_drawn_ms": spread(zoom["wheel_to_drawn_ms"]),
            "wheel_handled_to_drawn_ms": spread(zoom["wheel_handled_to_drawn_ms"])}


def spread(values: list[float]) -> dict | None:
    return live.spread(values) if values else None


def with_values(values: list[float]) -> dict | None:
    """The spread and, as few samples' p95 is their max, every sample (in commit order)."""
    return {**live.spread(values), "values": [round(value, 1) for value in values]} if values else None


def machine() -> dict:
    chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    playwright = REPO / "frontend" / "node_modules" / "playwright-core" / "package.json"
    return {**live.machine(), "chromium": chromium, "node": node,
            "playwright_core": json.loads(playwright.read_text())["version"]}


def check_ready() -> None:
    if not Path(CHROMIUM).exists() or shutil.which("node") is None:
        sys.exit(f"needs Chromium at {CHROMIUM} and Node.js")
    if not (REPO / "frontend" / "dist" / "assets" / "main.js").is_file():
        sys.exit("needs the built front end: run `make frontend`")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--pages", default="1,10",
                        help="pages of each live round (one Chromium, a window each)")
    parser.add_argument("--budget", type=int, default=60, help="evaluations in each live round's run")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds each evaluation takes (a real one on the GPU: 5 s to minutes)")
    parser.add_argument("--nodes", type=int, default=5000, help="nodes of the synthetic run (0: skip it)")
    parser.add_argument("--grow", type=int, default=10, help="nodes added to it one at a time")
    parser.add_argument("--grow-spacing", type=float, default=0.6, help="seconds between its events")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    check_ready()

    load = {"before": os.getloadavg()}
    rounds = {}
    for pages in (int(count) for count in args.pages.split(",") if count.strip()):
        load_before = os.getloadavg()
        name = f"{pages}_pages"
        rounds[name] = live_round(args, pages)
        rounds[name]["load_average_1_5_15_min"] = {"before": load_before, "after": os.getloadavg()}
        print(f"{pages} page(s):", json.dumps(rounds[name], indent=1), flush=True)
    big = None
    if args.nodes > 0:
        load_before = os.getloadavg()
        big = big_round(args)
        big["load_average_1_5_15_min"] = {"before": load_before, "after": os.getloadavg()}
        print("big:", json.dumps(big, indent=1), flush=True)
    load["after"] = os.getloadavg()
    p95s = [r["latency_ms_evaluation_committed_to_drawn"]["p95"] for r in rounds.values()]
    result = {
        "command": " ".join(["python", "bench/browser_live.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {**live.live_settings(), "web_process": "manage.py runserver --noreload (daphne), DEBUG",
                     "browser": "one headless Chromium (playwright-core), each page in a context (window) "
                                "of its own, viewport 1440x1000",
                     "viewers_by": "share link", "budget": args.budget, "interval_s": args.interval,
                     "evaluator": live.EVALUATOR, "synthetic_nodes": args.nodes, "grow": args.grow,
                     "grow_spacing_s": args.grow_spacing, "seed": args.seed},
        "definitions": {
            "committed": "time.time() in the process that wrote the event, once its transaction committed "
                         "(live rounds: bench/live.py's driver, in the on_commit callback)",
            "drawn": "the first task after the rendering update (style, layout, paint) of the frame whose "
                     "requestAnimationFrame callback changed the node's element to its evaluated class "
                     "(for a render outside a frame: after the next frame's)",
            "render_callback": "the app's requestAnimationFrame callback (render()) that changed the element",
            "frame_main_thread_work": "a frame's begin time to the first task after its rendering update",
        },
        "target": {"p95_ms_committed_to_drawn": TARGET_P95_MS, "judged_on": "the live rounds",
                   "met": all(p95 <= TARGET_P95_MS for p95 in p95s) if p95s else None,
                   "tree_at_scale_p95_ms": big["redraw_after_one_new_node_ms"]["committed_to_drawn"]["p95"]
                   if big else None},
        "live_rounds": rounds,
        "tree_at_scale": big,
        "load_average_1_5_15_min": load,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_big"]:
        big_setup(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:2] == ["_grow"]:
        grow(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(main())
