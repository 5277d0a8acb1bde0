"""A GPU worker's lease on the run node it measures, and the sweep that hands a dead
worker's node out again (profiling/leases.py says how leases work).

search.node_services.node_evaluate takes the node with a conditional update that stamps `started_at` (the
lease's token) and `lease_expires_at`, and renews the lease from a heartbeat thread while
it measures. A run's step hands out again every pending node whose lease ran out
(search.services._search_for); the beat wakes such runs every EXPIRED_LEASE_SWEEP_S
(optiml_web/celery.py; runs_with_expired_leases_wake), so that a run whose driver chain died with the worker
steps too. The new worker's evaluation_claim takes the dead one's Evaluation row over,
its lease having run out as well; the old worker's late result is refused twice over:
its claim's token and its lease's token are no longer the rows'.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from profiling.leases import Heartbeat, lease_expiry
from search.models import Run, RunNode


def node_lease_take(*, node: RunNode, worker: str) -> object | None:
    """Take the pending, unmeasured `node` for this worker unless another holds a live
    lease on it (a twin delivery of its message). Returns the lease's token (the
    `started_at` written), or None when it is not ours to measure now."""
    now = timezone.now()
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    taken = (RunNode.objects.filter(free, pk=node.pk, state="pending", result__isnull=True)
             .update(started_at=now, worker=worker[:200], lease_expires_at=lease_expiry(now)))
    return now if taken else None


def _mine(*, node: RunNode, lease: object):
    return RunNode.objects.filter(pk=node.pk, state="pending", result__isnull=True, started_at=lease)


def node_lease_renew(*, node: RunNode, lease: object) -> bool:
    """Move our lease on `node` on; False once it is not ours (measured, or handed out again)."""
    return bool(_mine(node=node, lease=lease).update(lease_expires_at=lease_expiry()))


def node_lease_drop(*, node: RunNode, lease: object) -> None:
    """Give our lease back: the node waits for its message again (another worker held its
    kernel's full gate). A lease taken over meanwhile is left to its holder."""
    _mine(node=node, lease=lease).update(started_at=None, worker="", lease_expires_at=None)


def node_heartbeat(*, node: RunNode, lease: object) -> Heartbeat:
    """The heartbeat of our lease on `node`, for as long as we measure it."""
    return Heartbeat(f"node {node.node_id} of run {node.run_id}",
                     lambda: node_lease_renew(node=node, lease=lease))


def runs_with_expired_leases() -> list[tuple[int, int]]:
    """(run id, drive token) of each running run with a pending node whose worker's lease
    ran out before its result was stored."""
    expired = RunNode.objects.filter(state="pending", result__isnull=True, run__status=Run.Status.RUNNING,
                                     lease_expires_at__lt=timezone.now())
    return list(Run.objects.filter(pk__in=expired.values("run_id")).values_list("pk", "drive_token"))


def runs_with_expired_leases_wake() -> list[int]:
    """Queue a step of each run with an expired lease (the beat, every
    EXPIRED_LEASE_SWEEP_S):
    a twin of its chain's waiting message, with the run's token, so whichever comes first
    steps (handing the node out again) and the other does nothing; a chain lost with the
    dead worker goes on from it. Returns the run ids woken."""
    from search.tasks import drive_run_enqueue  # tasks import services, which import this

    woken = []
    for run_id, token in runs_with_expired_leases():
        drive_run_enqueue(run_id=run_id, token=token)
        woken.append(run_id)
    return woken
