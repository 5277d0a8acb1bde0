"""Reads for optimisation runs."""

from __future__ import annotations

from search.models import Run, RunEvent, RunNode


def run_nodes(*, run: Run) -> list[RunNode]:
    return list(RunNode.objects.filter(run=run).order_by("node_id"))


def run_events_after(*, run: Run, seq: int) -> list[RunEvent]:
    """Everything a client that has seen up to `seq` missed, in order."""
    return list(RunEvent.objects.filter(run=run, seq__gt=seq).order_by("seq"))


def run_trajectory(*, run: Run) -> dict:
    """The whole run as JSON: what the search did, node by node, for export and sharing."""
    return {
        "run": {"id": run.pk, "task": run.task.name, "status": run.status, "judge": run.judge,
                "sources": run.sources, "budget": run.budget, "seed": run.seed,
                "evaluated": run.evaluated, "root_ms": run.root_ms, "best_ms": run.best_ms,
                "best_node": run.best_node, "best_found_at": run.best_found_at,
                "speedup": run.speedup, "vendor_ms": run.task.vendor_ms,
                "gpu_seconds": run.gpu_seconds},
        "nodes": [
            {"id": n.node_id, "parentId": n.parent_id, "state": n.state, "source": n.source,
             "title": n.title, "rationale": n.rationale, "diff": n.diff, "status": n.status,
             "guard": n.guard, "time_ms": n.time_ms, "spread_ms": n.spread_ms, "reward": n.reward,
             "visits": n.visits, "value": n.value, "prior": n.prior,
             "candidate_hash": n.candidate.content_hash, **n.detail}
            for n in run_nodes(run=run)
        ],
        "state": run.state,
    }
