"""The timed runs of the full gate: every run alike, verified after the fact.

A kernel can observe what happens around its own launch: the time since its last launch
(`%globaltimer`), state it keeps in `__device__` variables, the contents of its buffers.
One that computed honestly only after a long gap passed the old gate at 1.32x torch's
softmax, because a verified run was preceded by a synchronize and a copy of its inputs
to the host and the other runs were not. So here every run is the same sequence of
operations on the same buffers, and nothing the host decides is visible on the GPU
before the run's work is queued:

    refresh inputs from the run's seed -> poison outputs and scratch -> flush L2
    -> start event -> the plan's launches -> stop event
    -> copy the outputs to a slot (the same size of copy every run) -> count poison

Which runs are verified is decided after each run's launches are queued, by reservoir
sampling with the OS's randomness (a uniform choice of `spot_checks` of the timed runs),
and only changes the destination of that run's output copy. After the loop the
verified runs' inputs are regenerated from their seeds (the refresh is a pure function
of seed and index), their references computed on the host, and their copied outputs
checked with the gate's guards. Every run's outputs are also counted on the GPU for
poison left behind (a float32 word with all bits set, which no arithmetic on the
refreshed finite inputs writes). Then one full-size correctness check runs again on the
same buffers, after the long loop.

Why 8 of 30 is enough: a kernel that skips its work in m of the 30 runs escapes only if
all 8 verified runs fall among the 30 - m honest ones, with probability
C(30 - m, 8) / C(30, 8). Skipping in fewer than 15 runs cannot move the median below
the honest runs' own (it is then an order statistic of honest times), and at m = 15 the
escape probability is C(15, 8) / C(30, 8) = 0.11 %, smaller for every larger m; a run
that skips by writing nothing is caught in every run by the poison count.
"""

from __future__ import annotations

import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from .checks import GuardFailure, RunBuffers, check_canaries
from .drawn import verify_timed_runs
from .draws import launch, run_draws
from .gpu_compare import OnGpu, comparable, within_on_gpu

if TYPE_CHECKING:
    from .worker import Session


def reservoir_slot(rng: secrets.SystemRandom, index: int, slots: int) -> int | None:
    """Algorithm R: the slot that timed run `index` (from 0) overwrites, or None. After n
    runs the slots hold a uniformly random `slots`-subset of them."""
    if index < slots:
        return index
    j = rng.randrange(index + 1)
    return j if j < slots else None


def run_seed(base: int, index: int) -> int:
    """The refresh seed of timed run `index` (warm-ups included): from the session's base
    seed, so an operator can regenerate a run's inputs from the verdict's seeds."""
    return (base * 0x9E3779B1 + index * 0x85EBCA77 + 0x5BD1E995) % (1 << 62)


def input_seed(seed: int, position: int) -> int:
    """Each input gets its own stream, so two inputs of one shape never hold equal values
    (a kernel must not learn that A == B or Q == K during the timed runs)."""
    return (seed ^ (position * 0xD6E8FEB86659FD93)) % (1 << 63)


class TimedRuns:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.sizes = session.l1_sizes
        self.warmup = session.options["warmup_runs"]
        self.runs = session.options["timing_runs"]
        self.slots = min(max(0, int(session.options.get("spot_checks", 8))), self.runs)
        self.choice = secrets.SystemRandom()

    # -- inputs ------------------------------------------------------------------------
    def refresh_inputs(self, buffers: dict, seed: int) -> None:
        """Fresh inputs for one run, by the harness's kernels (draws.run_draws)."""
        s = self.s
        try:
            draws = run_draws(s.task, self.sizes, seed)
        except ValueError as error:
            from .worker import Rejection

            raise Rejection("internal", str(error)) from None
        for d in draws:
            launch(s.harness_module, d, buffers[d.name].ptr, s.gpu.stream)

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> tuple[list[float], GuardFailure | None, list[int]]:
        """(timed samples in ms, the first failure among the checks after the loop, the
        verified runs' indices)."""
        from . import device

        s = self.s
        started = time.monotonic()
        buffers = s.allocate(self.sizes, extra_bytes=self.snapshot_bytes())
        outputs = [t.name for t in s.task.outputs]
        # One copy target per verified slot, and a sink for the runs not kept: every run's
        # copy is the same size, only its destination differs.
        slots = [{n: device.cuda.mem_alloc(max(1, buffers[n].nbytes)) for n in outputs}
                 for _ in range(self.slots + 1)]
        sink = slots.pop()
        kept: list[int | None] = [None] * self.slots
        total = self.warmup + self.runs
        counts = device.cuda.mem_alloc(4 * total)
        device.cuda.memset_d32(counts, 0, total)
        counted = [t.name for t in s.task.outputs if t.dtype == "float32"]
        try:
            launches = device.resolve_plan(s.gpu, s.module, s.candidate, self.sizes, buffers)
            start, stop = device.cuda.Event(), device.cuda.Event()
            samples: list[float] = []
            s.stage("timing", sizes=self.sizes, runs=self.runs)
            bound = total * (s.launch_bound_s(self.sizes) + 1.0)
            s.channel.send("bound", limit_s=bound,
                           bound=f"{total} timed runs of the plan at {self.sizes} ({bound:.0f} s: "
                                 f"{s.bound_reason()}, plus 1 s a run)")
            for i in range(total):
                self.refresh_inputs(buffers, run_seed(s.base_seed, i))
                s.poison_writable(buffers)
                s.gpu.flush_l2()
                start.record(s.gpu.stream)
                device.launch_all(launches, s.gpu.stream)
                stop.record(s.gpu.stream)
                slot = reservoir_slot(self.choice, i - self.warmup, self.slots) \
                    if i >= self.warmup else None
                target = sink if slot is None else slots[slot]
                for name in outputs:
                    buffers[name].copy_to_async(target[name], s.gpu.stream)
                for name in counted:
                    device.count_poison_async(s.harness_module, s.gpu, buffers[name], counts, i)
                if slot is not None:
                    kept[slot] = i
                stop.synchronize()
                if i >= self.warmup:
                    samples.append(start.time_till(stop))
            s.gpu.synchronize()
            s.seconds["timed_runs"] = time.monotonic() - started
            started = time.monotonic()
            s.channel.send("bound", limit_s=None)
            # The gate may start the sanitizers on this message (gate._EarlySanitizers).
            s.stage("verify timed runs", verified=len([k for k in kept if k is not None]),
                    base_seed=s.base_seed)
            failure = self.poison_left(counts, total) or self.canaries(buffers) \
                or self.verify_all(buffers, slots, kept, sink)
            s.seconds["verify_timed_runs"] = time.monotonic() - started
            if failure is None and self.slots:  # the screen verifies none: its survivors
                started = time.monotonic()      # get the full gate
                failure = s.check_after_timing(buffers, launches)
                s.seconds["check_after_timing"] = time.monotonic() - started
            return samples, failure, sorted(k - self.warmup for k in kept if k is not None)
        finally:
            counts.free()
            for target in (*slots, sink):
                for allocation in target.values():
                    allocation.free()
            for b in buffers.values():
                b.free()

    def snapshot_bytes(self) -> int:
        outputs = sum(int(np.prod(t.resolve_shape(self.sizes), dtype=np.int64)) * t.numpy_dtype().itemsize
                      for t in self.s.task.outputs)
        return (self.slots + 1) * outputs

    def poison_left(self, counts, total: int) -> GuardFailure | None:
        from . import device

        if self.s.reference_has_poison:
            return None  # an honest output may hold the pattern: the verified runs decide
        per_run = np.zeros(total, np.uint32)
        device.cuda.memcpy_dtoh(per_run, counts)
        timed = per_run[self.warmup:]
        bad = np.flatnonzero(timed)
        if bad.size:
            return GuardFailure("output_unwritten",
                                f"{bad.size} of {self.runs} timed runs left outputs unwritten "
                                f"(run {int(bad[0])}: {int(timed[bad[0]])} elements still poisoned)")
        return None

    def canaries(self, buffers: dict) -> GuardFailure | None:
        for name, b in buffers.items():
            failure = check_canaries(name, *b.guards())
            if failure is not None:
                return failure
        return None

    def verify_all(self, buffers: dict, slots: list[dict], kept: list[int | None],
                   sink: dict) -> GuardFailure | None:
        """The verified runs, read back one by one from the GPU and checked on the host in
        parallel: references and comparisons are numpy, which releases the GIL, and
        on a 1 GB task they, not the GPU, are what verification costs. For a session whose
        L1 checks were judged in the reference child, each run is judged there first
        (drawn.verify_timed_run), and only one it does not pass comes to the host. Where
        the outputs can be compared on the GPU (gpu_compare.py) only the inputs come to
        the host, for the references; the outputs only when the GPU does not pass them."""
        chosen = [(slot, index) for slot, index in enumerate(kept) if index is not None]
        s = self.s
        snapshots = dict(enumerate(slots))
        if s.last_l1_in_child:  # judged in the reference child, as its L1 checks were
            chosen, snapshots = verify_timed_runs(s, buffers, slots, sink, chosen)
        elif s.gpu_refs is None and comparable(s):
            return self.verify_on_gpu(buffers, snapshots, chosen)
        runs = [(index, self.read_run(buffers, snapshots[slot], index)) for slot, index in chosen]
        if not runs:
            return None
        with ThreadPoolExecutor(max_workers=self.parallel_checks(len(runs))) as pool:
            failures = list(pool.map(lambda run: self.check_run(*run), runs))
        return next((f for f in failures if f is not None), None)

    def verify_on_gpu(self, buffers: dict, snapshots: dict, chosen: list[tuple[int, int]]
                      ) -> GuardFailure | None:
        """The verified runs' references computed on the host (in parallel, as many at
        once as the host holds), their outputs compared where they were copied, on the
        GPU, and read back only for the host's guards when the GPU does not pass them."""
        s = self.s
        batch = max(1, self.parallel_checks(len(chosen)))
        for start in range(0, len(chosen), batch):
            part = [(slot, index, self.read_inputs(buffers, index))
                    for slot, index in chosen[start:start + batch]]
            with ThreadPoolExecutor(max_workers=len(part)) as pool:
                references = list(pool.map(lambda run: s.run_reference(run[2], self.sizes), part))
            for (slot, index, inputs), reference in zip(part, references, strict=True):
                copies = {t.name: OnGpu(int(snapshots[slot][t.name]), buffers[t.name].nbytes)
                          for t in s.task.outputs}
                if within_on_gpu(s, copies, reference) is not None:
                    continue
                outputs = self.read_outputs(buffers, snapshots[slot])
                failure = self.judge_run(index, inputs, outputs, reference)
                if failure is not None:
                    return failure
        return None

    def parallel_checks(self, wanted: int) -> int:
        """As many at once as the host's cores and memory allow (each holds its inputs,
        outputs and a float64 reference)."""
        per_check = 4 * sum(t.nbytes(self.sizes) for t in self.s.task.all_tensors()) + 1
        try:
            memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            memory = 8 << 30
        return max(1, min(wanted, os.cpu_count() or 1, int(memory // 2 // per_check)))

    def read_run(self, buffers: dict, snapshot: dict, index: int) -> tuple[dict, dict]:
        """Timed run `index`: its inputs regenerated from its seed into the input buffers,
        its outputs as copied right after it ran."""
        return self.read_inputs(buffers, index), self.read_outputs(buffers, snapshot)

    def read_inputs(self, buffers: dict, index: int) -> dict:
        """Timed run `index`'s inputs, regenerated from its seed into the input buffers."""
        s = self.s
        self.refresh_inputs(buffers, run_seed(s.base_seed, index))
        s.gpu.synchronize()
        return {t.name: buffers[t.name].download() for t in s.task.inputs}

    def read_outputs(self, buffers: dict, snapshot: dict) -> dict:
        """A timed run's outputs as copied right after it ran (or read back already:
        drawn.verify_timed_runs)."""
        from . import device

        outputs = {}
        for t in self.s.task.outputs:
            if isinstance(snapshot[t.name], np.ndarray):
                outputs[t.name] = snapshot[t.name]
                continue
            out = np.empty(buffers[t.name].shape, buffers[t.name].dtype)
            if out.nbytes:
                device.cuda.memcpy_dtoh(out, snapshot[t.name])
            outputs[t.name] = out
        return outputs

    def check_run(self, index: int, arrays: tuple[dict, dict]) -> GuardFailure | None:
        inputs, outputs = arrays
        s = self.s
        # A task with an allowance may be judged in the GPU's reference process
        # (gpuref.py): a run within it passes there; one that is not comes back with the
        # reference computed there, and is diagnosed here like any other.
        judged = s.gpu_refs.within(inputs, outputs, self.sizes) if s.gpu_refs is not None else None
        if judged is True:
            return None
        reference = judged if judged is not None else s.run_reference(inputs, self.sizes)
        return self.judge_run(index, inputs, outputs, reference)

    def judge_run(self, index: int, inputs: dict, outputs: dict, reference) -> GuardFailure | None:
        """The host's guards on one verified run."""
        run = RunBuffers(inputs_before=inputs, inputs_after=inputs, outputs=outputs,
                         reference=reference, guards={})
        failure = self.s.check(run, self.sizes)[0]
        if failure is None:
            return None
        return GuardFailure(failure.guard, f"timed run {index - self.warmup}: {failure.message}")
