"""The web app's side of a bench/fanout_gpu.py round: launch one run, wait, read its rows.

    OPTIML_VAR_DIR=<round>/var python bench/fanout_rows.py launch --task relu --parallel 2 \\
        --budget 16 --seed 0 --limit 300 --out <round>/run.json
    OPTIML_VAR_DIR=<round>/var python bench/fanout_rows.py extract --out <round>/run.json

Each round has a database of its own (OPTIML_VAR_DIR), so this runs as a process of its
own per round, as the web app would: `launch` creates the run as the browser's "Start"
does (services.run_create, then the first step queued for the CPU worker), waits until
the run ends or `--limit` seconds have passed (then stops it, as a person would), and
writes what `extract` writes. `extract` reads the run that is there (the CLI's too):
the run's row, every node's row, the events and the Evaluation rows, with times in
seconds from the run's creation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.2


def launch(*, task: str, parallel: int, budget: int, seed: int, screen: bool, profile: bool,
           limit_s: float) -> dict:
    from django.db import transaction

    from profiling.harness import tasks as task_registry
    from profiling.harness.gate import GateOptions
    from search import control_services, services
    from search.models import Run
    from search.tasks import drive_run_enqueue

    spec = task_registry.get(task)
    began = time.time()
    with transaction.atomic():
        run = services.run_create(task_name=task, source=spec.naive_source, plan=spec.naive_plan,
                                  budget=budget, seed=seed, parallel=parallel, screen=screen,
                                  gate_options=GateOptions(profile=profile))
        drive_run_enqueue(run_id=run.pk, token=run.drive_token)
    timed_out = False
    while Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists():
        if time.time() - began > limit_s:
            control_services.run_control(run_id=run.pk, action="stop")
            timed_out = True
            break
        time.sleep(POLL_S)
    return {"launched_at": began, "seen_ended_at": time.time(), "stopped_at_limit": timed_out}


def extract() -> dict:
    from profiling.models import Evaluation
    from search.models import Run, RunEvent, RunNode

    run = Run.objects.select_related("task").order_by("-pk").first()
    if run is None:
        return {"run": None}
    t0 = run.created.timestamp()
    events = [{"seq": e.seq, "kind": e.kind, "s": round(e.created.timestamp() - t0, 3), "data": e.data}
              for e in RunEvent.objects.filter(run=run).order_by("seq")]
    ended = [e["s"] for e in events if e["kind"] in ("run_finished", "run_status")]
    nodes = [_node(row) for row in RunNode.objects.filter(run=run).select_related("candidate")
             .order_by("node_id")]
    evaluations = [{"candidate": ev.candidate.content_hash, "status": ev.status, "guard": ev.guard,
                    "median_ms": ev.median_ms, "source": ev.source,
                    "claimed_s": round(ev.claimed_at.timestamp() - t0, 3),
                    "finished_s": round(ev.finished_at.timestamp() - t0, 3) if ev.finished_at else None}
                   for ev in Evaluation.objects.select_related("candidate").order_by("claimed_at")]
    return {
        "run": {"id": run.pk, "task": run.task.name, "status": run.status, "message": run.message,
                "budget": run.budget, "seed": run.seed, "parallel": run.parallel, "screen": run.screen,
                "gate_options": run.gate_options, "evaluated": run.evaluated, "root_ms": run.root_ms,
                "best_ms": run.best_ms, "best_node": run.best_node, "best_found_at": run.best_found_at,
                "gpu_seconds": run.gpu_seconds, "created": t0, "ended_s": ended[-1] if ended else None},
        "nodes": nodes,
        "best_improved": [{"s": e["s"], "node": e["data"].get("id"), "time_ms": e["data"].get("time_ms"),
                           "evaluation": e["data"].get("evaluation")}
                          for e in events if e["kind"] == "best_improved"],
        "evaluated_at_s": [e["s"] for e in events if e["kind"] == "node_evaluated"],
        "evaluations": evaluations,
        "setup": _setup(),
    }


def _node(row) -> dict:
    engine = row.engine or {}
    verdict = (engine.get("measurement") or {}).get("verdict") or {}
    return {"id": row.node_id, "parent": row.parent_id, "candidate": row.candidate.content_hash,
            "binary": row.binary, "source": row.source, "title": row.title, "state": row.state,
            "status": row.status, "guard": row.guard, "level": row.level, "time_ms": row.time_ms,
            "spread_ms": row.spread_ms, "evaluation": engine.get("evaluation"),
            "duplicate_of": engine.get("duplicate_of"), "gate_seconds": verdict.get("seconds"),
            "stage_seconds": verdict.get("stage_seconds") if row.level == "full" else None}


def _setup() -> dict:
    """What the app ran on, read from its settings (not from what the bench meant to set)."""
    from django.conf import settings

    return {"database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
            "broker": settings.CELERY_BROKER_URL.split("://")[0],
            "evaluator": settings.OPTIML_EVALUATOR.split(":")[0],
            "screen_setting": settings.OPTIML_SCREEN,
            "compile_ahead": settings.OPTIML_COMPILE_AHEAD}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["launch", "extract"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--task")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-screen", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--limit", type=float, default=300.0)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")
    import django

    django.setup()
    launched = {}
    if args.what == "launch":
        launched = launch(task=args.task, parallel=args.parallel, budget=args.budget, seed=args.seed,
                          screen=not args.no_screen, profile=args.profile, limit_s=args.limit)
    Path(args.out).write_text(json.dumps({**extract(), "launch": launched}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
