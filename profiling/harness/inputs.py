"""Seeded inputs and their reference outputs, optionally kept on disk between candidates.

A search evaluates many candidates of one task on the same seeds. Computing a 1 GB
input and its reference on the host costs seconds per seed, the same for every
candidate, so a search may name a cache directory: the first worker to need a
(task, sizes, seed, distribution) writes it, later workers map it read-only. Candidates
still run in their own processes and never see the reference: it is only ever on the
host, and read after the candidate's launch has finished. A task's allowance (how far
each output element may be from the reference, spec.Task.allowance) depends on the data
alone, so it is kept with the reference too (Expected.allowed).

A full gate's L1 inputs are generated on the GPU instead (`generated_on_gpu`): the
harness's own kernel draws them from the check's seed into the candidate's buffers in
milliseconds. Only their reference and allowance are kept here (`gpu_seed_reference`),
under the draws' checksum: an entry is used only for draws that hash the same. The first
candidate of a search reads the draws back to compute them; a later one finds them and
reads nothing back before its launch (worker.Session.generate_on_gpu).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import HARNESS_VERSION

# The GPU's draws (draws.py), named here as before for the callers of this module.
from .draws import GPU_DISTRIBUTIONS, generated_on_gpu, gpu_like_values  # noqa: F401
from .spec import Task

Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Check:
    """One correctness run of the gate: a level, a size assignment, a seed."""

    level: str
    shape_index: int
    sizes: dict
    seed: int
    distribution: str


def check_plan(task: Task, levels: list[str], l1_sizes: dict, seeds: dict[str, int],
               base_seed: int) -> list[Check]:
    """Every correctness run, in the order the worker makes them: each level's shapes (L0:
    the task's edge cases, L1: the timed size), `seeds[level]` seeds each, distributions
    alternating, seeds derived from the base seed so that a failure can be replayed."""
    plan = []
    for level in levels:
        shapes = list(task.l0_sizes) if level == "L0" else [l1_sizes]
        for shape_index, sizes in enumerate(shapes):
            for seed_index in range(seeds[level]):
                plan.append(Check(level, shape_index, dict(sizes), base_seed * 1000 + shape_index * 100
                                  + seed_index, task.distributions[seed_index % len(task.distributions)]))
    return plan


def cached_gpu_seed_reference(task: Task, check: Check, checksum: str,
                              cache_dir: str | None) -> Expected | None:
    """The reference and allowance kept in `cache_dir` for inputs generated on the GPU
    for this (task, sizes, seed, distribution), when they were computed from inputs with
    this `checksum` (the worker's sum of them, on the GPU); None when there is none."""
    if not cache_dir:
        return None
    entry = _gpu_entry(task, check, cache_dir)
    if not (entry / "done").exists() or (entry / "checksum").read_text() != checksum:
        return None
    return Expected({t.name: np.load(entry / f"{t.name}.npy", mmap_mode="r") for t in task.outputs},
                    _load_allowed(task, entry), cached=True)


def gpu_seed_reference(task: Task, check: Check, inputs: Arrays, checksum: str,
                       cache_dir: str | None, *,
                       elsewhere: Callable[[Arrays, dict], Expected | None] | None = None) -> Expected:
    """The reference and allowance for one check's inputs generated on the GPU: the
    cached ones (above), else from `elsewhere` when it gives them (the reference child,
    gpuref.py, once cross-checked) or computed here; published in `cache_dir` with one
    rename, under `checksum`, for the next candidate."""
    found = cached_gpu_seed_reference(task, check, checksum, cache_dir)
    if found is not None:
        return found
    computed = elsewhere(inputs, check.sizes) if elsewhere is not None else None
    if computed is not None:
        reference, allowed = dict(computed), computed.allowed
        if allowed is None:
            allowed = allowance_of(task, inputs, reference, check.sizes)
    else:
        reference = reference_outputs(task, inputs, check.sizes)
        allowed = allowance_of(task, inputs, reference, check.sizes)
    if cache_dir:
        _publish(_gpu_entry(task, check, cache_dir), task, reference, allowed, checksum=checksum)
    return Expected(reference, allowed, computed_elsewhere=computed is not None)


def _gpu_entry(task: Task, check: Check, cache_dir: str) -> Path:
    return Path(cache_dir) / f"{_key(task, check.sizes, check.seed, check.distribution)}-gpu"


def prepare(task: Task, checks: list[Check], cache_dir: str, *, workers: int | None = None) -> int:
    """Build the cache entries these checks will read, several at once in worker
    processes (generating a 1 GB input and its reference is single-threaded numpy, and
    a GPU host has cores to spare); returns how many were built. The worker then finds
    them done, exactly as if it had built them itself, one after another."""
    missing = {_key(task, c.sizes, c.seed, c.distribution): c for c in checks
               if not (Path(cache_dir) / _key(task, c.sizes, c.seed, c.distribution) / "done").exists()}
    if not missing:
        return 0
    workers = max(1, min(len(missing), workers or os.cpu_count() or 1, 8))
    if workers == 1:
        for key, c in missing.items():
            _write_entry(Path(cache_dir) / key, task, c.sizes, c.seed, c.distribution)
        return len(missing)
    # One process per entry (`python -m profiling.harness.inputs`), `workers` at a time:
    # a fresh interpreter, nothing inherited from a threaded caller and no main module
    # re-imported, as multiprocessing's start methods would do.
    from .confine import worker_env  # what a GPU worker's children get: no secrets

    env = worker_env({"PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]))})

    def build(key: str, c: Check) -> None:
        argv = [sys.executable, "-m", "profiling.harness.inputs", str(Path(cache_dir) / key), task.name,
                json.dumps(c.sizes), str(c.seed), c.distribution]
        finished = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if finished.returncode != 0:
            raise RuntimeError(f"building inputs for {task.name} {c.sizes} seed {c.seed} failed: "
                               f"{finished.stderr.strip()[-800:]}")

    with ThreadPoolExecutor(workers, thread_name_prefix="optiml-inputs") as pool:
        for done in [pool.submit(build, key, c) for key, c in missing.items()]:
            done.result()  # an error building one is raised here, as it would be in the worker
    return len(missing)


class Expected(dict):
    """The reference outputs (name -> array) and `allowed`: the task's allowance for them
    (name -> how far each element may be off), when it was worked out with them; None
    when the task has none or the comparison works it out itself (no cache)."""

    def __init__(self, reference: Arrays, allowed: dict | None = None, *, cached: bool = False,
                 computed_elsewhere: bool = False) -> None:
        super().__init__(reference)
        self.allowed = allowed
        self.cached = cached  # read from an input cache's entry (gpu_seed_reference)
        self.computed_elsewhere = computed_elsewhere  # by the reference child (gpu_seed_reference)


def make_inputs(task: Task, sizes: dict, seed: int, distribution: str) -> Arrays:
    rng = np.random.default_rng(seed)
    return {t.name: t.make(rng, sizes, distribution) for t in task.inputs}


def reference_outputs(task: Task, inputs: Arrays, sizes: dict) -> Arrays:
    # On copies: a reference that modified its inputs must not change what the
    # candidate is compared against.
    outputs = task.reference({k: np.array(v, copy=True) for k, v in inputs.items()}, sizes)
    return {t.name: np.asarray(outputs[t.name]).astype(t.numpy_dtype(), copy=False)
            .reshape(t.resolve_shape(sizes)) for t in task.outputs}


def allowance_of(task: Task, inputs: Arrays, reference: Arrays, sizes: dict) -> dict[str, np.ndarray] | None:
    """The task's allowance for these inputs and reference, as arrays to keep; None when
    the task has none."""
    if task.allowance is None:
        return None
    allowed = task.allowance(inputs, reference, sizes)
    return {t.name: np.asarray(allowed[t.name], dtype=np.float64) for t in task.outputs}


def inputs_and_reference(task: Task, sizes: dict, seed: int, distribution: str,
                         cache_dir: str | None) -> tuple[Arrays, Expected]:
    if not cache_dir:
        inputs = make_inputs(task, sizes, seed, distribution)
        return inputs, Expected(reference_outputs(task, inputs, sizes))
    entry = Path(cache_dir) / _key(task, sizes, seed, distribution)
    if not (entry / "done").exists():
        _write_entry(entry, task, sizes, seed, distribution)
    load = lambda name: np.load(entry / f"{name}.npy", mmap_mode="r")  # noqa: E731
    return ({t.name: load(t.name) for t in task.inputs},
            Expected({t.name: load(t.name) for t in task.outputs}, _load_allowed(task, entry)))


def _load_allowed(task: Task, entry: Path) -> dict[str, np.ndarray] | None:
    """The allowance kept in the entry; None (worked out by the comparison) when the task
    has none, or the entry was written without it."""
    files = {t.name: entry / f"{ALLOWED}{t.name}.npy" for t in task.outputs}
    if task.allowance is None or not all(f.exists() for f in files.values()):
        return None
    return {name: np.load(f, mmap_mode="r") for name, f in files.items()}


def _save_expected(folder: Path, task: Task, reference: Arrays, allowed: dict | None) -> None:
    for name, values in reference.items():
        np.save(folder / f"{name}.npy", values)
    for name, values in (allowed or {}).items():
        np.save(folder / f"{ALLOWED}{name}.npy", values)


# The file prefix of an output's allowance in a cache entry (never a tensor's name: those
# are C identifiers).
ALLOWED = "allowed-"


# A verified timed run's reference is kept in the cache only while its inputs and outputs
# are this small: beyond it, hashing and storing them costs about what recomputing does
# (relu's and reduce_sum's 1.7 GB inputs have references a numpy pass computes), and 30
# runs' outputs would fill the disk.
RUN_REFERENCE_MAX_BYTES = 512 << 20


def run_reference(task: Task, inputs: Arrays, sizes: dict, cache_dir: str | None,
                  elsewhere: Callable[[Arrays, dict], Expected | None] | None = None) -> Expected:
    """The reference outputs for one timed run's inputs (and the task's allowance for
    them): from `elsewhere` when it gives them (the GPU: gpuref.py, milliseconds, so not
    worth a cache), else computed here and kept in `cache_dir` between the candidates of
    a search (their run seeds, from one base seed, repeat).

    The key is a SHA-256 of the inputs themselves, as downloaded after the run's refresh,
    not only of the seed: an entry is only ever used for the exact inputs it was computed
    from, whatever wrote the buffers. Entries are published with one rename.
    """
    computed = elsewhere(inputs, sizes) if elsewhere is not None else None
    if computed is not None:
        return computed
    total = sum(a.nbytes for a in inputs.values()) + sum(t.nbytes(sizes) for t in task.outputs)
    if not cache_dir or total > RUN_REFERENCE_MAX_BYTES:
        return Expected(reference_outputs(task, inputs, sizes))
    digest = hashlib.sha256(json.dumps([HARNESS_VERSION, task.name, sorted(sizes.items())]).encode())
    for name in sorted(inputs):
        array = np.ascontiguousarray(inputs[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    entry = Path(cache_dir) / "runs" / f"{task.name}-{digest.hexdigest()[:32]}"
    if (entry / "done").exists():
        return Expected({t.name: np.load(entry / f"{t.name}.npy") for t in task.outputs},
                        _load_allowed(task, entry))
    reference = reference_outputs(task, inputs, sizes)
    allowed = allowance_of(task, inputs, reference, sizes)
    _publish(entry, task, reference, allowed)
    return Expected(reference, allowed)


def _publish(entry: Path, task: Task, reference: Arrays, allowed: dict | None, *,
             checksum: str | None = None) -> None:
    """Write a reference (and allowance, and the checksum of the inputs it is for) as a
    cache entry: built in a temporary directory and published with one rename, so
    readers see all or nothing. Nothing when it exists; an error is not the caller's
    (another worker published it first, or the disk is full: the caller has computed it)."""
    if (entry / "done").exists():
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".publish-"))
    try:
        _save_expected(staging, task, reference, allowed)
        if checksum is not None:
            (staging / "checksum").write_text(checksum)
        (staging / "done").write_text("")
        os.rename(staging, entry)
    except OSError:
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _key(task: Task, sizes: dict, seed: int, distribution: str) -> str:
    material = json.dumps([HARNESS_VERSION, task.name, sorted(sizes.items()), seed, distribution])
    return f"{task.name}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def _write_entry(entry: Path, task: Task, sizes: dict, seed: int, distribution: str) -> None:
    """Build in a temporary directory and publish with one rename: readers see all or nothing."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".inputs-"))
    try:
        inputs = make_inputs(task, sizes, seed, distribution)
        reference = reference_outputs(task, inputs, sizes)
        for name, values in inputs.items():
            np.save(staging / f"{name}.npy", values)
        _save_expected(staging, task, reference, allowance_of(task, inputs, reference, sizes))
        (staging / "done").write_text("")
        os.rename(staging, entry)
    except OSError:
        if not (entry / "done").exists():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _main(argv: list[str]) -> int:
    """python -m profiling.harness.inputs ENTRY TASK SIZES_JSON SEED DISTRIBUTION (prepare's)."""
    from . import tasks

    entry, task_name, sizes, seed, distribution = argv[1:6]
    _write_entry(Path(entry), tasks.get(task_name), json.loads(sizes), int(seed), distribution)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
