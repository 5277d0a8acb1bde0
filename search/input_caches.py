"""The input caches a GPU worker keeps for a run's candidates, and their sweep once the
run can no longer ask for them (the Celery task `search.sweep_input_caches`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from search.models import Run

_RUN_FOLDER = re.compile(r"run-(\d+)")


def run_input_caches_sweep(*, root: Path) -> list[Path]:
    """Delete the input caches (measuring.run_gate_options: `<root>/<task>/run-<id>/`,
    several GB for a 1 GB task) of runs that can no longer ask for them: finished,
    stopped, failed or deleted. A running or paused run keeps its own. Runs where the
    files are (a GPU worker); returns the folders deleted."""
    if not root.is_dir():
        return []
    folders = [(f, int(m.group(1))) for task in root.iterdir() if task.is_dir()
               for f in task.iterdir() if f.is_dir() and (m := _RUN_FOLDER.fullmatch(f.name))]
    live = set(Run.objects.filter(pk__in=[pk for _, pk in folders],
                                  status__in=[Run.Status.RUNNING, Run.Status.PAUSED])
               .values_list("pk", flat=True))
    deleted = []
    for folder, pk in folders:
        if pk not in live:
            shutil.rmtree(folder, ignore_errors=True)
            deleted.append(folder)
    return deleted
