"""The small tasks of the CPU skeleton tests, by name, for the gate's subprocesses (which
find a task by name in the registry: test_skeletons_gate.py puts a file per task there
that imports this module). Nothing here may call the registry at import: a task file is
imported while the registry loads, under its lock."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))  # the CPU tests' kernels

import forms_kernels  # noqa: E402
import test_forms_contraction as contraction  # noqa: E402
import test_forms_implicit_gemm as implicit  # noqa: E402


def small_tasks() -> dict:
    found = [k.task for k in vars(forms_kernels).values() if isinstance(k, forms_kernels.Kernel) and k.task]
    found += [contraction.LINEAR_TASK, contraction._bmm_task(contraction.BMM_PLANE, contraction.PLANE_PLAN),
              implicit.STRIDED_TASK, implicit.TRANSPOSED_TASK]
    return {task.name: task for task in found}


def task_named(name: str):
    return small_tasks()[name]
