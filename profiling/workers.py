"""Which GPU workers are there now: each says so by a heartbeat (issue 35).

Celery workers do not register anywhere, and a worker on a host without a GPU takes the
`gpu` queue too (`make start` runs one worker on both queues), so an evaluation handed
out there may meet no GPU at all. A worker that takes the `gpu` queue on a host with a
GPU starts a heartbeat when it is ready (optiml_web/celery.py): a GpuWorker row whose
`last_beat` it moves on every GPU_WORKER_BEAT_S, and which it deletes when it shuts down
cleanly. A worker killed outright stops beating: it counts as gone once its last beat is
GPU_WORKER_LIVE_BEATS beats old. A run measured by the gate waits, queued, while no GPU
worker is live (search.gpu_queue).
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from profiling.leases import Heartbeat
from profiling.models import GpuWorker

logger = logging.getLogger(__name__)

# How often a GPU worker's heartbeat says it is there, in seconds. A queued run's driver
# looks every 5 s (search.services.IDLE_STEP_DELAY_S), so a worker that starts is seen
# within a few seconds of its first beat, which it sends at once.
GPU_WORKER_BEAT_S = 15.0
# A worker whose last beat is older than this many beats is taken to be gone: one or two
# missed beats (a busy database) do not make its runs queue.
GPU_WORKER_LIVE_BEATS = 3


def gpu_worker_beat(*, hostname: str, gpu: str) -> GpuWorker:
    """Say that the GPU worker `hostname` (Celery's) is there now, with its GPU's name."""
    now = timezone.now()
    worker, created = GpuWorker.objects.get_or_create(
        hostname=hostname[:200], defaults={"gpu": gpu[:200], "started": now, "last_beat": now})
    if not created:
        GpuWorker.objects.filter(pk=worker.pk).update(gpu=gpu[:200], last_beat=now)
    return worker


def gpu_worker_gone(*, hostname: str) -> None:
    """The worker `hostname` shuts down: it is not there from now on."""
    GpuWorker.objects.filter(hostname=hostname[:200]).delete()


def gpu_workers_live():
    """The GPU workers whose last beat is recent enough (GPU_WORKER_LIVE_BEATS)."""
    cutoff = timezone.now() - timedelta(seconds=GPU_WORKER_BEAT_S * GPU_WORKER_LIVE_BEATS)
    return GpuWorker.objects.filter(last_beat__gte=cutoff)


def gpu_worker_live() -> bool:
    return gpu_workers_live().exists()


def gpu_worker_heartbeat(*, hostname: str, gpu: str, every_s: float = GPU_WORKER_BEAT_S) -> Heartbeat:
    """The heartbeat of a GPU worker process, for as long as it runs: it beats once now
    (a queued run need not wait a whole beat), then every `every_s` from its own thread."""

    def beat() -> bool:
        gpu_worker_beat(hostname=hostname, gpu=gpu)
        return True  # nobody takes a worker's presence over: keep beating

    def first_beat() -> None:
        try:
            beat()
        finally:
            connection.close()

    # The first beat in a thread of its own, as the later ones: this runs in the worker's
    # main process, which forks pool processes later too, and a child must not inherit
    # (and share) a database connection of the main thread's.
    thread = threading.Thread(target=first_beat, name=f"first-beat-{hostname}")
    thread.start()
    thread.join()
    return Heartbeat(f"GPU worker {hostname}", beat, every_s=every_s)
