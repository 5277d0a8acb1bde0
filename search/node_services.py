"""Writes for one node of a run: compile it, measure it, keep the result on its row.

The run's driver (search.services.run_dispatch) hands each asked node to the workers:
node_compile on a CPU worker keeps the node's binary (a node running a smaller id's
binary is that node's duplicate, never measured), node_evaluate on a GPU worker measures
it under a lease (search/leases.py), and node_result_store keeps what it measured until
the run's next step tells the search (search.services._step_tell). A stored result, and
a duplicate found, wake the run's driver chain (search.tasks.drive_run_enqueue; the tasks
import this module, so the functions import them where they call them). A run stepped
in one process (services.run_step) uses node_binary_ensure and node_result_store too.
"""

from __future__ import annotations

from profiling.evaluators import Evaluator
from profiling.serialization import json_safe
from search import broadcast, demo_runs
from search.leases import node_heartbeat, node_lease_drop, node_lease_take
from search.measuring import Measured, candidate_binary, candidate_measure, run_gate_options, screening_for
from search.models import Run, RunNode


def node_compile(*, run_id: int, node_id: int, best_full_ms: float | None) -> str:
    """Compile one asked node of a run (the Celery task `search.compile_node`, on a CPU
    worker) and keep its binary on its row; then queue its evaluation, unless a node with
    a smaller id runs the same binary: then it is that node's duplicate, which the run's
    next step (woken now) completes from that node's measurement without an evaluation.
    Returns "evaluate", "duplicate", or "known" (nothing to do: a repeated message)."""
    from search.tasks import drive_run_enqueue, evaluate_node_enqueue

    binary = node_binary_ensure(run_id=run_id, node_id=node_id)
    if binary is None:
        return "known"
    if binary and RunNode.objects.filter(run_id=run_id, binary=binary, node_id__lt=node_id).exists():
        token = Run.objects.filter(pk=run_id).values_list("drive_token", flat=True).first()
        if token is not None:
            drive_run_enqueue(run_id=run_id, token=token)
        return "duplicate"
    run = Run.objects.get(pk=run_id)
    evaluate_node_enqueue(run=run, node_id=node_id, best_full_ms=best_full_ms)
    return "evaluate"


def node_binary_ensure(*, run_id: int, node_id: int) -> str | None:
    """The binary of a pending node without a result, compiled now if it was not yet
    (measuring.candidate_binary; "" when it cannot be told); None when the node is done or
    measured already, or its run is not running."""
    row = (RunNode.objects.select_related("run__task", "candidate")
           .filter(run_id=run_id, node_id=node_id, state="pending", result__isnull=True).first())
    if row is None or row.run.status != Run.Status.RUNNING:
        return None
    if row.binary is None:
        binary = candidate_binary(run=row.run, candidate=row.candidate.to_harness())
        RunNode.objects.filter(pk=row.pk, binary__isnull=True).update(binary=binary)
        row.binary = RunNode.objects.filter(pk=row.pk).values_list("binary", flat=True).first()
    return row.binary


def node_evaluate(*, run_id: int, node_id: int, best_full_ms: float | None,
                  evaluator: Evaluator | None = None, worker: str = "") -> str:
    """Measure one asked node of a run (the Celery task `search.evaluate_node`, on a GPU
    worker) and keep the result on its row for the run's next step, which it then wakes.
    Returns what happened: "stored", "known" (a result or the node's measurement was there
    already: a repeated message), "idle" (the run is not running: a resume hands the node
    out again), "held" (another worker holds this kernel's full gate, or measures this node
    under a live lease: look again later). While it measures, the worker renews its lease
    on the node (search/leases.py): one whose lease ran out is taken to be dead, the node
    is handed out again, and what it measures late is not stored.
    `worker` (Celery's hostname) is kept on the row while it measures, for the operator;
    the run's viewers see only how many are being measured (selectors.run_pace)."""
    from search.tasks import drive_run_enqueue

    row = (RunNode.objects.select_related("run__task", "candidate")
           .filter(run_id=run_id, node_id=node_id).first())
    if row is None or row.state != "pending" or row.result is not None:
        return "known"
    run = row.run
    if run.status != Run.Status.RUNNING:
        return "idle"
    started = node_lease_take(node=row, worker=worker)
    if started is None:  # another delivery measures it under a live lease: look again later
        return "held"
    broadcast.progress_after_commit(run_id=run_id)  # one more of its evaluations is being measured
    evaluator = evaluator or demo_runs.evaluator_for_run(run)
    screens = screening_for(run=run, evaluator=evaluator)
    screening = best_full_ms is not None and screens
    options = run_gate_options(run=run, screening=screens)
    with node_heartbeat(node=row, lease=started):
        measured = candidate_measure(run=run, candidate=row.candidate.to_harness(), options=options,
                                     evaluator=evaluator, best_full_ms=best_full_ms if screening else None)
    if measured is None:
        node_lease_drop(node=row, lease=started)  # back to waiting: its message comes again
        return "held"
    if not node_result_store(run_id=run_id, node_id=node_id, measured=measured, lease=started):
        return "known"  # stored already, or our lease was taken over: the other worker's stands
    broadcast.progress_after_commit(run_id=run_id)  # measured: no longer being measured
    # Wake the run: a twin of the chain's waiting message (same token), so whichever
    # comes first steps and the other does nothing.
    token = Run.objects.filter(pk=run_id).values_list("drive_token", flat=True).first()
    if token is not None:
        drive_run_enqueue(run_id=run_id, token=token)
    return "stored"


def node_result_store(*, run_id: int, node_id: int, measured: Measured, lease: object = None) -> bool:
    """Keep what an evaluation measured on the node's row until the run's next step tells
    the search. A repeated result (a message delivered twice) changes nothing: the first
    one stays. `lease`: the token of the worker's lease (the `started_at` it took the node
    with), when it measured under one: a worker whose lease ran out and whose node was
    handed out again (presumed dead) stores nothing. Returns whether this one was stored."""
    _hash, measurement, evaluation = measured
    rows = RunNode.objects.filter(run_id=run_id, node_id=node_id, state="pending", result__isnull=True)
    if lease is not None:
        rows = rows.filter(started_at=lease)
    return bool(rows.update(result=json_safe(measurement.to_dict()), evaluation=evaluation,
                            lease_expires_at=None))
