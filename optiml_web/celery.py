"""The Celery app "optiml": configured from Django settings (CELERY_*), tasks autodiscovered.

Start a worker with `celery -A optiml_web worker -Q gpu,celery`. Evaluations go to the
`gpu` queue, so a GPU host runs a worker on `gpu` alone, one process per GPU
(CUDA_VISIBLE_DEVICES, --concurrency 1), and CPU hosts take the rest: the runs' steps,
which only ask and tell, on `celery`.

A worker may die at any moment (SIGKILL, the OOM killer, a host lost). Messages are
acknowledged late (settings: CELERY_TASK_ACKS_LATE), so the one it was running goes back
to the queue, and running it again costs nothing (claims and drive tokens). How it goes
back is configured here; tests/web/test_crash_safety.py kills workers to check it.
"""

import logging
import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_ready, worker_shutdown
from celery.utils.log import get_multiprocessing_logger

from optiml_web.env import env_int
from optiml_web.log_redaction import RedactShareTokens

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")

app = Celery("optiml")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = {
    "profiling.evaluate_candidate": {"queue": "gpu"},
    # A run's step only asks and tells (on a CPU worker, the default queue); each of its
    # candidates is an evaluation message of its own, on the GPU workers.
    "search.evaluate_node": {"queue": "gpu"},
    # A run's input caches are files on the GPU host that ran it.
    "search.sweep_input_caches": {"queue": "gpu"},
    # A lineage walk measures every state it visits through the gate.
    "lineage.walk_expert": {"queue": "gpu"},
}
# When only the pool's child process dies (killed, out of memory) the main process sees
# it. By default it then acknowledges the message as failed, and a run's driver chain is
# gone until the beat notices; rejected instead, the message is queued again at once.
# (A kernel cannot kill the child this way over and over: the gate runs it in a process of
# its own.)
app.conf.task_reject_on_worker_lost = True
# How often the beat looks for evaluations whose worker's lease ran out (search/leases.py):
# with the default 30 s lease (OPTIML_EVALUATION_LEASE_S), a dead worker's node is handed
# out again 30 to 40 s after its last heartbeat, well within a minute.
EXPIRED_LEASE_SWEEP_S = 10.0
# Runs whose driver chain was lost get a new one (search/control_services.py, run_restart_stalled);
# `scripts/serve` runs the beat inside its one worker.
app.conf.beat_schedule = {
    "wake-runs-with-expired-leases": {"task": "search.wake_runs_with_expired_leases",
                                      "schedule": EXPIRED_LEASE_SWEEP_S},
    "restart-stalled-runs": {"task": "search.restart_stalled_runs", "schedule": 60.0},
    "sweep-input-caches": {"task": "search.sweep_input_caches", "schedule": 600.0},
    # Writing jobs whose worker died end failed (search/writing_jobs.py).
    "fail-stale-writing-jobs": {"task": "search.fail_stale_writing_jobs", "schedule": 60.0},
}

# Redis keeps the messages a worker holds unacknowledged aside, and gives one back to the
# queue once it has been out for the visibility timeout: that is how the message of a
# worker killed as a whole comes back. It must be longer than any message is held: an
# evaluation's retry waits 900 s and then runs for up to 900 s, so kombu's default hour.
# The crash test shortens it. Live workers look for such messages every tenth of it (at
# most 100 s, kombu's default pace; at least every second).
REDIS_VISIBILITY_S = env_int("OPTIML_BROKER_VISIBILITY_S", 3600)


@app.on_after_configure.connect
def _redis_redelivery(sender: Celery, **kwargs) -> None:
    if not str(sender.conf.broker_url or "").startswith(("redis://", "rediss://")):
        return
    sweep_s = max(1, min(100, REDIS_VISIBILITY_S // 10))
    sender.conf.broker_transport_options = {
        "visibility_timeout": REDIS_VISIBILITY_S,
        "unacked_restore_interval": sweep_s,
        "unacked_restore_throttle": 1,  # the interval alone sets the pace
        # A worker killed during a sweep leaves its lock behind, and nobody sweeps until it
        # expires (kombu: 300 s). A sweep takes milliseconds; two at once restore nothing twice.
        "unacked_mutex_expire": min(300, 5 * sweep_s),
        **(sender.conf.broker_transport_options or {}),
    }
    # kombu's Redis transport pops a message from the queue before it records it as
    # unacknowledged (kombu#305): a worker killed in between loses it, and only the beat's
    # restart of stalled runs brings that run back. A worker that fetches only when a pool
    # process is free opens that gap only while it is idle, never while a step is running
    # (a message waiting for its countdown would otherwise let it fetch one more).
    sender.conf.worker_disable_prefetch = True



@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_tokens(logger: logging.Logger, **kwargs) -> None:
    """A worker or the beat replaces the root logger's handlers (settings.LOGGING's, which
    keep share and invitation tokens out: optiml_web/log_redaction.py) with Celery's own,
    and gives the task logger and billiard's pool logger handlers of their own: each gets
    the same filter. What a task prints reaches the root logger (worker_redirect_stdouts)."""
    loggers = [logger] if logger is not logging.getLogger() else [logger, get_multiprocessing_logger()]
    for each in loggers:
        for handler in each.handlers:
            if not any(isinstance(f, RedactShareTokens) for f in handler.filters):
                handler.addFilter(RedactShareTokens())


# A worker that takes the `gpu` queue on a host with a GPU says so by a heartbeat while it
# runs (profiling/workers.py): a run measured by the gate waits, queued, while none does.
_gpu_worker_heartbeat: list = []


def _consumed_queues(consumer) -> set[str]:
    queues = getattr(getattr(consumer, "task_consumer", None), "queues", None)
    if queues is None:
        queues = consumer.app.amqp.queues.consume_from.values()
    return {queue.name for queue in queues}


@worker_ready.connect
def _gpu_worker_start(sender, **kwargs) -> None:
    from profiling.harness import gate
    from profiling.workers import gpu_worker_heartbeat

    if "gpu" not in _consumed_queues(sender):
        return
    gpu = gate.gpu_name()
    if gpu is None:
        logging.getLogger(__name__).warning(
            "this worker takes the gpu queue on a host without a GPU: runs measured by the gate "
            "wait, queued for a GPU worker, until one with a GPU starts")
        return
    heartbeat = gpu_worker_heartbeat(hostname=sender.hostname, gpu=gpu)
    _gpu_worker_heartbeat.append((sender.hostname, heartbeat.__enter__()))


@worker_shutdown.connect
def _gpu_worker_stop(**kwargs) -> None:
    from profiling.workers import gpu_worker_gone

    while _gpu_worker_heartbeat:
        hostname, heartbeat = _gpu_worker_heartbeat.pop()
        heartbeat.__exit__(None, None, None)
        gpu_worker_gone(hostname=hostname)


app.autodiscover_tasks()
