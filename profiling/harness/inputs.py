"""Seeded inputs and their reference outputs, optionally kept on disk between candidates.

A search evaluates many candidates of one task on the same seeds. Computing a 1 GB
input and its reference on the host costs seconds per seed, the same for every
candidate, so a search may name a cache directory: the first worker to need a
(task, sizes, seed, distribution) writes it, later workers map it read-only. Candidates
still run in their own processes and never see the reference: it is only ever on the
host, and read after the candidate's launch has finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import HARNESS_VERSION
from .spec import Task

Arrays = dict[str, np.ndarray]


def make_inputs(task: Task, sizes: dict, seed: int, distribution: str) -> Arrays:
    rng = np.random.default_rng(seed)
    return {t.name: t.make(rng, sizes, distribution) for t in task.inputs}


def reference_outputs(task: Task, inputs: Arrays, sizes: dict) -> Arrays:
    # On copies: a reference that modified its inputs must not change what the
    # candidate is compared against.
    outputs = task.reference({k: np.array(v, copy=True) for k, v in inputs.items()}, sizes)
    return {t.name: np.asarray(outputs[t.name]).astype(t.numpy_dtype(), copy=False)
            .reshape(t.resolve_shape(sizes)) for t in task.outputs}


def inputs_and_reference(task: Task, sizes: dict, seed: int, distribution: str,
                         cache_dir: str | None) -> tuple[Arrays, Arrays]:
    if not cache_dir:
        inputs = make_inputs(task, sizes, seed, distribution)
        return inputs, reference_outputs(task, inputs, sizes)
    entry = Path(cache_dir) / _key(task, sizes, seed, distribution)
    if not (entry / "done").exists():
        _write_entry(entry, task, sizes, seed, distribution)
    load = lambda name: np.load(entry / f"{name}.npy", mmap_mode="r")  # noqa: E731
    return ({t.name: load(t.name) for t in task.inputs},
            {t.name: load(t.name) for t in task.outputs})


def _key(task: Task, sizes: dict, seed: int, distribution: str) -> str:
    material = json.dumps([HARNESS_VERSION, task.name, sorted(sizes.items()), seed, distribution])
    return f"{task.name}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def _write_entry(entry: Path, task: Task, sizes: dict, seed: int, distribution: str) -> None:
    """Build in a temporary directory and publish with one rename: readers see all or nothing."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".inputs-"))
    try:
        inputs = make_inputs(task, sizes, seed, distribution)
        for name, values in {**inputs, **reference_outputs(task, inputs, sizes)}.items():
            np.save(staging / f"{name}.npy", values)
        (staging / "done").write_text("")
        os.rename(staging, entry)
    except OSError:
        if not (entry / "done").exists():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
