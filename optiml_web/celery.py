"""The Celery app "optiml": configured from Django settings (CELERY_*), tasks autodiscovered.

Start a worker with `celery -A optiml_web worker -Q gpu,celery`. Evaluations go to the
`gpu` queue, so a GPU host runs a worker on `gpu` alone, one process per GPU, and CPU
hosts take the rest.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optiml_web.settings")

app = Celery("optiml")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = {
    "profiling.evaluate_candidate": {"queue": "gpu"},
    # A run's search evaluates its candidates in-process, so it runs where the GPU is.
    "search.drive_run": {"queue": "gpu"},
}
# Runs whose driver chain was lost get a new one (search/services.py, run_restart_stalled);
# `scripts/serve` runs the beat inside its one worker.
app.conf.beat_schedule = {
    "restart-stalled-runs": {"task": "search.restart_stalled_runs", "schedule": 60.0},
}
app.autodiscover_tasks()
