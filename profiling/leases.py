"""Leases on work a worker has claimed: how a dead worker's evaluation is taken over.

A worker that claims an evaluation (an Evaluation row, profiling.services.evaluation_claim;
a run's node, search.node_services.node_evaluate) writes when its lease runs out, and while it
works a heartbeat thread moves that on every OPTIML_EVALUATION_HEARTBEAT_S. Its renewal is
a conditional update on the claim's token (the row's `claimed_at`, the node's `started_at`):
once another worker took the claim over, the old one's renewals and its result change
nothing. A lease that ran out (OPTIML_EVALUATION_LEASE_S after the last heartbeat) belongs
to a worker that died however it died, since nothing but that worker's process renews it:
the next claimant takes it over at once, rather than after the gate's time limit plus a
grace (the broker alone gives a killed worker's message back after its visibility timeout,
an hour).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from profiling.models import Evaluation

logger = logging.getLogger(__name__)


def lease_expiry(now: datetime | None = None) -> datetime:
    """When a lease taken or renewed now runs out."""
    return (now or timezone.now()) + timedelta(seconds=settings.OPTIML_EVALUATION_LEASE_S)


class Heartbeat:
    """A thread that calls `renew` every `every_s` (default OPTIML_EVALUATION_HEARTBEAT_S)
    while the block runs, the first time one interval in: the claim itself wrote the first
    expiry. `renew` returns whether the claim is still ours; once it is not (taken over),
    the thread stops renewing and says so once. Its own database connection, closed when
    it stops. A failed renewal (a database hiccup) is logged and the next one tries again."""

    def __init__(self, name: str, renew: Callable[[], bool], every_s: float | None = None) -> None:
        self.name, self.renew = name, renew
        self.every_s = settings.OPTIML_EVALUATION_HEARTBEAT_S if every_s is None else every_s
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{name}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.every_s):
                try:
                    if not self.renew():
                        self.lost = True
                        logger.warning("%s: the claim is no longer this worker's (taken over, or ended "
                                       "elsewhere); what it does now is refused", self.name)
                        return
                except Exception:
                    logger.warning("%s: lease not renewed", self.name, exc_info=True)
                    close_old_connections()
        finally:
            connection.close()


def evaluation_lease_renew(evaluation: Evaluation) -> bool:
    """Move the lease of our claim on `evaluation` on; False when the claim is no longer
    ours (finished, or taken over: `claimed_at` is the claim's token)."""
    return bool(Evaluation.objects.filter(pk=evaluation.pk, status=Evaluation.Status.RUNNING,
                                          claimed_at=evaluation.claimed_at)
                .update(lease_expires_at=lease_expiry()))


def evaluation_heartbeat(evaluation: Evaluation) -> Heartbeat:
    """The heartbeat of our claim on `evaluation`, for as long as the gate runs it."""
    return Heartbeat(f"evaluation {evaluation.pk}", lambda: evaluation_lease_renew(evaluation))
