"""The test suite keeps apart from the app's own state under var/ (issue 35, item 11).

A user who declares a task in the browser leaves `<name>.json` in var/tasks/; the suite
once read that folder, and a task it did not know joined every list parametrised over
the registry (31 tests failed on a clone that had been used). Here the suite gets a
var/ of its own, a temporary folder, and the app's is never read or written by a test.

pytest-django sets Django up before the top-level conftest is imported (its
pytest_load_initial_conftests runs first), so by then the settings already name the
checkout's var/ and the profiling app has already put var/tasks on OPTIML_TASK_PATH.
`isolate` moves all of it into the suite's folder; tests/conftest.py calls it from
pytest_configure, before any test module is collected (several parametrise over
tasks.all_tasks() at import). The database needs nothing from here: pytest-django tests
against a database of its own (test_<name> on PostgreSQL, in memory on SQLite). Nor does
the secret key, which the settings read as they are imported: tests/settings.py, the
suite's settings module, makes one for the run first.

Free of Django imports: the GPU host runs `pytest -p no:django tests/gpu tests/harness`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiling.harness import tasks

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Isolation:
    var_dir: Path  # the suite's own var/, a temporary folder
    task_dir: Path  # where the suite's declared tasks go, the only folder on the task path
    app_var_dir: Path  # the app's var/ (not the suite's): no test reads or writes it
    app_task_dir: Path  # where the app keeps the tasks declared in the browser


def isolate(var_dir: Path) -> Isolation:
    """Point this process, and every process it starts, at `var_dir` instead of the app's
    var/: the settings that name a place under it, OPTIML_VAR_DIR, and the task path."""
    settings = _django_settings()
    app_var_dir = (Path(settings.VAR_DIR) if settings
                   else Path(os.environ.get("OPTIML_VAR_DIR") or REPO / "var"))
    app_task_dir = (Path(settings.OPTIML_TASK_DIR) if settings
                    else Path(os.environ.get("OPTIML_TASK_DIR") or app_var_dir / "tasks"))
    task_dir = var_dir / "tasks"
    task_dir.mkdir(parents=True)
    # What the processes the tests start inherit (manage.py, a Celery worker, the gate's
    # subprocesses). The task path is the suite's folder alone: a user's own
    # OPTIML_TASK_PATH would add tasks to the parametrised lists just as var/tasks did.
    os.environ["OPTIML_VAR_DIR"] = str(var_dir)
    os.environ.pop("OPTIML_TASK_DIR", None)
    # The suite's settings module (tests/settings.py) makes a new key in each process that
    # imports it; a child inherits this one (OPTIML_SECRET_KEY) and reads the app's settings.
    if os.environ.get("DJANGO_SETTINGS_MODULE") == "tests.settings":
        os.environ["DJANGO_SETTINGS_MODULE"] = "optiml_web.settings"
    os.environ[tasks.TASK_PATH_VARIABLE] = str(task_dir)
    if settings is not None:
        _move_settings(settings, app_var_dir=app_var_dir, var_dir=var_dir)
        settings.OPTIML_TASK_DIR = task_dir  # also when OPTIML_TASK_DIR put it outside var/
    tasks._reset_for_tests()
    return Isolation(var_dir=var_dir, task_dir=task_dir, app_var_dir=app_var_dir, app_task_dir=app_task_dir)


def _django_settings() -> Any:
    """Django's settings when they are loaded (pytest-django did it); None without Django
    (`-p no:django`): then the settings, if anything loads them later, read OPTIML_VAR_DIR."""
    if "django.conf" not in sys.modules:
        return None
    from django.conf import settings

    return settings if settings.configured else None


def _move_settings(settings: Any, *, app_var_dir: Path, var_dir: Path) -> None:
    """Every setting that is a path under the app's var/ (the task folder, the work folder,
    the trained generation models, STATIC_ROOT, VAR_DIR itself) to the same place under
    `var_dir`; and the embedded Celery broker's folders (without Redis, messages are
    files under var/celery/, which the app's own worker reads)."""
    for name in [name for name in dir(settings) if name.isupper()]:
        value = getattr(settings, name)
        if isinstance(value, Path) and value.is_relative_to(app_var_dir):
            setattr(settings, name, var_dir / value.relative_to(app_var_dir))
    if settings.CELERY_BROKER_URL == "filesystem://":
        from optiml_web.env import celery_broker

        settings.CELERY_BROKER_URL, settings.CELERY_BROKER_TRANSPORT_OPTIONS = celery_broker("", var_dir)
