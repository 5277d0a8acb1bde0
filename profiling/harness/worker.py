"""The child process: one candidate, one fresh CUDA context, a verdict on the channel.

    python -m profiling.harness.worker request.json <channel fd>

Run only by sandbox.run_isolated. Stages are announced on the channel as they start, so
that if this process hangs or dies the parent can say where.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import HARNESS_VERSION, comparisons, expr, tasks
from .candidate import Candidate
from .ceilings import Ceilings, ceilings_for, physics_floor_ms, summarize
from .checks import GUARD_BYTES, GuardFailure, RunBuffers, check_canaries, check_run
from .drawn import check_after_timing as check_after_timing_in_child
from .drawn import check_in_child, judged_in_child
from .faults import classify_exception
from .gpu_compare import check_on_gpu
from .gpu_inputs import Drawn, GpuInputs  # noqa: F401  (Drawn: named here as before)
from .guard_layout import describe_canaries_only, footprint
from .inputs import (
    Check,
    Expected,
    allowance_of,
    check_plan,
    inputs_and_reference,
    reference_outputs,
    run_reference,
)
from .sandbox import Channel
from .seeds import SEED_BITS
from .spec import Task
from .timing import TimedRuns
from .verdict import CheckRecord, TimingReport

if TYPE_CHECKING:  # pycuda is imported only where a GPU is
    from .device import SeedOnGpu

# One execution of a plan may take this many times the task's naive kernel at the same
# scale (or, for a task without one, this many times its physics floor) before the
# parent stops it: generous, since a slow candidate is a verdict, not an attack, but
# seconds instead of the whole time limit. Never less than LAUNCH_MIN_S (a first launch
# loads its module). Under compute-sanitizer kernels run 10-100x slower.
LAUNCH_NAIVE_FACTOR = 50
LAUNCH_FLOOR_FACTOR = 2000
LAUNCH_MIN_S = 2.0
SANITIZER_SLOWDOWN = 100


RESIDENT_CHANGED = ("a seed kept on the GPU for the screen's comparisons changed while this "
                    "candidate ran: it wrote outside its own buffers")


class Rejection(Exception):
    def __init__(self, guard: str, message: str):
        super().__init__(message)
        self.guard, self.message = guard, message


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "--serve":
        return serve(Channel(int(argv[2])))
    request = json.loads(Path(argv[1]).read_text())
    channel = Channel(int(argv[2]) if len(argv) > 2 else -1)
    try:
        import pycuda.driver as cuda  # noqa: F401  (fail early and clearly without pycuda)
    except ImportError as error:
        channel.send("result", status="error", guard="internal", message=f"pycuda: {error}")
        return 1
    session = Session(request, channel)
    run_session(session, channel)
    session.close()
    return 0


def run_session(session: Session, channel: Channel) -> bool:
    """Run one request and send its result; False when the CUDA context may be unusable
    (a fault, a device error): its process must not serve another candidate."""
    try:
        session.run()
        return True
    except Rejection as rejection:
        channel.send("result", status="rejected", guard=rejection.guard, message=rejection.message,
                     **session.partial())
        return True
    except Exception as error:  # a CUDA fault surfaces as pycuda's exception on sync
        guard, message = classify_exception(error, guard_regions=session.guard_regions is not None)
        channel.send("result", status="rejected" if guard != "internal" else "error",
                     guard=guard, message=message, **session.partial(),
                     traceback=traceback.format_exc()[-3000:] if guard == "internal" else "")
        return False


def serve(channel: Channel) -> int:
    """The screen's long-lived worker: one CUDA context, one request per stdin line.

    Each candidate gets its own module and freshly allocated, canaried, poisoned
    buffers, as in a one-shot run. What it shares with earlier candidates is the
    context, so after any CUDA error the process answers and exits, and the parent
    starts a clean one for the next candidate. Nothing here decides what a search keeps:
    a screened candidate that looks faster is judged again by the full gate in a fresh
    process (search/engine/evaluators.py, ScreeningEvaluator).
    """
    try:
        from . import device
    except ImportError as error:
        for _ in sys.stdin:
            channel.send("result", status="error", guard="internal", message=f"pycuda: {error}")
        return 1
    gpu = device.Gpu()
    resident = device.ResidentSeeds()
    try:
        for line in sys.stdin:
            session = Session(json.loads(line), channel, gpu=gpu, resident=resident)
            if not run_session(session, channel):
                break
            # A rejected candidate may still have written over the seeds the next one
            # is checked against: those are dropped, and uploaded again when needed.
            if session.harness_module is not None:
                resident.verify(session.harness_module, gpu)
    finally:
        resident.clear()
        gpu.close()
    return 0


class Session(GpuInputs):
    def __init__(self, request: dict, channel: Channel, gpu=None, resident=None):
        self.request, self.channel = request, channel
        # A serving process's L1 inputs and references kept on the GPU (device.ResidentSeeds):
        # the screen's L1 check copies and compares there. None: everything on the host.
        self.resident = resident
        self.task: Task = tasks.get(request["task"])
        self.candidate = Candidate.from_dict(request["candidate"])
        self.options = request["options"]
        self.l1_sizes = self.options.get("l1_sizes") or self.task.sizes
        self.records: list[CheckRecord] = []
        self.timing: TimingReport | None = None
        self.environment: dict = {}
        self.gpu = gpu  # given: a serving process's context, shared and kept open
        self.owns_gpu = gpu is None
        seed = self.options.get("seed")
        self.base_seed = int(seed) if seed is not None else secrets.randbits(SEED_BITS)
        self.verified_runs: list[int] = []
        self.harness_module = None
        # Whether an L1 reference output holds the poison pattern itself (then a poison
        # count cannot tell an unwritten element from a written one: timing.py).
        self.reference_has_poison = False
        # (check, inputs, reference, the resident seed it read or None): inputs are None for
        # a resident seed drawn on the GPU, read back from it only if needed
        self.last_l1: tuple[Check, dict | None, dict, SeedOnGpu | None] | None = None
        self.last_l1_in_child = False  # the last L1 check was judged in the reference child (drawn.py)
        self.seconds: dict[str, float] = {}  # wall time of this worker's stages
        self.sanitizing = self.options.get("mode") == "sanitize"
        # The spot checks' references on the GPU, in a process of their own (gpuref.py):
        # started in run() for a task that allows it, when timed runs will be verified.
        self.gpu_refs = None
        self.cross_checked: set[tuple[str, int]] = set()  # (level, shape) compared so far
        self.held_cross_checks: list[tuple] = []  # L0's, until the first L1 one
        self.generated: list[str] = []  # per L1 seed drawn on the GPU: where its reference came from
        # The allocator of the candidate's buffers in guarded ranges (buffers.GuardedRanges),
        # or None: canaries only (no VMM, turned off, or exact sizes for the sanitizers)
        self.guard_regions = None
        # What this GPU's times are compared with (comparisons.py): read from the cache in
        # run(), never measured here (this process runs the candidate); None until then.
        self.comparison: comparisons.Comparison | None = None
        self.comparison_key: comparisons.ComparisonKey | None = None

    def partial(self) -> dict:
        return {"comparison": {**self.comparison.to_dict(), "key_fields": self.comparison_key.to_dict()}
                if self.comparison and self.comparison_key else {},
                "correctness": [asdict(r) for r in self.records],
                "timing": asdict(self.timing) if self.timing else None,
                "environment": self.environment,
                "seeds": {"base_seed": self.base_seed, "verified_runs": self.verified_runs},
                "stage_seconds": self.seconds}

    def close(self) -> None:
        """Pop the context: pycuda aborts the process at exit if one is left current."""
        if self.gpu is not None and self.owns_gpu:
            self.gpu.close()

    def add_seconds(self, stage: str, started: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.monotonic() - started

    def stage(self, name: str, **detail) -> None:
        self.channel.send("stage", stage=name, **detail)

    def run(self) -> None:
        from . import device

        self.stage("init")
        if self.gpu is None:
            self.gpu = device.Gpu()
        self.environment = {**self.gpu.environment(), "harness_version": HARNESS_VERSION,
                            "buffers": self.choose_buffers()}
        self.read_comparison()
        self.module = device.cuda.module_from_file(self.request["cubin"])
        self.harness_module = device.cuda.module_from_file(self.request["harness_cubin"])
        if self.options.get("mode") == "profile":
            self.profile_once()
            return
        self.start_gpu_references()
        try:
            started = time.monotonic()
            for check in self.check_plan():
                self.check_once(check)
            self.seconds["correctness"] = time.monotonic() - started
            if self.gpu_refs is not None:  # the reference child is idle before anything is timed
                started = time.monotonic()
                self.gpu_refs.settle()
                self.seconds["reference_cross_checks_wait"] = time.monotonic() - started
            if self.options.get("timing_runs", 0) > 0 and not self.sanitizing:
                self.time_runs()
        finally:
            self.stop_gpu_references()
        if self.resident is not None and self.resident.verify(self.harness_module, self.gpu):
            raise Rejection("out_of_bounds_write", RESIDENT_CHANGED)
        self.channel.send("result", status="passed", guard=None, message="", **self.partial())

    def read_comparison(self) -> None:
        """This GPU's comparison from the cache (comparisons.comparison_for), or "not
        measured": the gate measures a miss after this process, never beside a candidate."""
        self.comparison_key = comparisons.key_here(self.gpu.environment(), self.task.name, self.l1_sizes)
        self.comparison = comparisons.comparison_for(
            self.task, self.comparison_key, cache=comparisons.ComparisonCache.default(), measurer=None)

    # -- buffers ---------------------------------------------------------------------
    def buffer_specs(self, sizes: dict) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        names = {**sizes, **self.candidate.tunables}
        specs = [(t.name, t.numpy_dtype(), t.resolve_shape(sizes)) for t in self.task.all_tensors()]
        for s in self.candidate.scratch:
            specs.append((s.name, np.dtype(s.dtype), (expr.evaluate_int(s.count, names),)))
        return specs

    def choose_buffers(self) -> str:
        """Set where the candidate's buffers go, for checked and timed runs alike, and say
        so in the verdict: guarded ranges when the device has them and the request does not
        turn them off (a cost measurement's baseline: bench/guard_regions.py)."""
        if self.sanitizing:
            return "exact-size allocations, no canaries: compute-sanitizer's memcheck watches their bounds"
        if not self.options.get("guard_regions", True):
            return describe_canaries_only("guard regions turned off by the request")
        self.guard_regions = self.gpu.ranges
        return self.gpu.buffers_evidence

    def require_memory(self, sizes: dict, extra_bytes: int = 0) -> None:
        """Refuse sizes the GPU cannot hold before anything is generated on the host."""
        granularity = self.guard_regions.granularity if self.guard_regions is not None else None
        needed = extra_bytes + sum(footprint(int(np.prod(shape, dtype=np.int64)) * dt.itemsize, granularity)
                                   for _, dt, shape in self.buffer_specs(sizes))
        free = self.gpu.free_bytes()
        if needed > free:
            raise Rejection("resources", f"needs {needed / 2**30:.2f} GiB of device memory at "
                                         f"sizes {sizes}, but only {free / 2**30:.2f} GiB are free")

    def allocate(self, sizes: dict, extra_bytes: int = 0) -> dict:
        from . import device

        self.require_memory(sizes, extra_bytes)
        guard = 0 if self.sanitizing else GUARD_BYTES
        buffers: dict = {}
        try:
            for name, dt, shape in self.buffer_specs(sizes):
                buffers[name] = device.Buffer(name, dt, shape, guard_bytes=guard, ranges=self.guard_regions)
        except Exception:  # a guarded range is not collected with its object: give back those made
            for made in buffers.values():
                made.free()
            raise
        return buffers

    def launch_bound_s(self, sizes: dict) -> float:
        """How long one execution of the plan at `sizes` may take (see LAUNCH_*)."""
        task, naive = self.task, comparisons.naive_for_bound(self.task, self.comparison)
        if naive is not None:
            scale = max(_ratio(task.bytes(sizes), task.bytes(naive.sizes)),
                        _ratio(task.flops(sizes), task.flops(naive.sizes)))
            bound = LAUNCH_NAIVE_FACTOR * naive.ms * 1e-3 * scale
        else:
            floor_ms, _ = physics_floor_ms(float(task.bytes(sizes)), float(task.flops(sizes)),
                                           task.math, self.ceilings())
            bound = LAUNCH_FLOOR_FACTOR * floor_ms * 1e-3
        bound = max(LAUNCH_MIN_S, bound)
        return bound * SANITIZER_SLOWDOWN if self.sanitizing else bound

    def launch(self, launches, sizes: dict) -> None:
        """The plan's launches, waited for under the parent's bound for one execution."""
        from . import device

        bound = self.launch_bound_s(sizes)
        # A "bound" message sets the parent's deadline for the next message (sandbox.py);
        # the next one lifts it. Stage messages stay what a verdict reports.
        self.channel.send("bound", limit_s=bound,
                          bound=f"one execution of the plan at {sizes} ({bound:.1f} s: "
                                f"{self.bound_reason()})")
        device.launch_all(launches, self.gpu.stream)
        self.gpu.synchronize()
        self.channel.send("bound", limit_s=None)

    def bound_reason(self) -> str:
        naive = comparisons.naive_for_bound(self.task, self.comparison)
        if naive is not None:
            return (f"{LAUNCH_NAIVE_FACTOR}x the naive kernel's {naive.why}, scaled to these sizes, "
                    f"at least {LAUNCH_MIN_S:.0f} s")
        return f"{LAUNCH_FLOOR_FACTOR}x the physics floor, at least {LAUNCH_MIN_S:.0f} s"

    def ceilings(self) -> Ceilings:
        """The GPU's ceilings for the physics floor: the datasheet's, or measured now
        (cached per GPU and driver) for a GPU without an entry: the floor fails closed."""
        known = ceilings_for(self.gpu.name)
        if known is not None:
            return known
        from . import measure

        return measure.measured_ceilings(self.gpu, self.harness_module)

    def reference(self, inputs: dict[str, np.ndarray], sizes: dict) -> dict[str, np.ndarray]:
        return reference_outputs(self.task, inputs, sizes)

    def run_reference(self, inputs: dict[str, np.ndarray], sizes: dict) -> dict[str, np.ndarray]:
        """A verified timed run's reference: from the GPU once its references agreed with
        the host's (gpuref.py); else on the host, where with a fixed seed (a search) the
        same runs' inputs recur for every candidate, so they are cached (inputs.run_reference)."""
        cache = self.options.get("input_cache") if self.options.get("seed") is not None else None
        elsewhere = self.gpu_refs.expected if self.gpu_refs is not None else None
        return run_reference(self.task, inputs, sizes, cache, elsewhere)

    # -- references on the GPU (gpuref.py) --------------------------------------------
    def start_gpu_references(self) -> None:
        """The reference child, where timed runs will be verified, or (a torchtask) where
        its L1 checks will be judged there (drawn.py), timed or not."""
        l1 = "L1" in self.options["levels"]
        verifies = self.options.get("timing_runs", 0) > 0 and self.options.get("spot_checks", 8) > 0 and l1
        judges = self.task.l1_in_reference_child and bool(self.options.get("gpu_inputs")) and l1
        if not (self.task.reference_on_gpu and self.options.get("gpu_references") and (verifies or judges)
                and not self.sanitizing and self.resident is None):
            return
        from .gpuref import GpuReferences

        self.gpu_refs = GpuReferences(self.task, harness_cubin=self.request.get("harness_cubin"))
        self.gpu_refs.warm()

    def cross_check_reference(self, check: Check, inputs: dict, reference: Expected) -> Expected:
        """The first seed of each L0 shape and the first L1 seed: the GPU's reference
        against the host's, before the GPU's may stand in for it. Returns the reference
        with the allowance worked out for the cross-check, so the comparison reuses it.

        The child starts with the checks (GpuReferences.warm), but the L0 ones are held
        (small arrays) and handed to it with the first L1 one: a candidate rejected at L0
        has asked it nothing, so it is killed, not waited for (its start, torch's import
        and a CUDA context, takes ~2 s on the H200)."""
        key = (check.level, check.shape_index)
        if self.gpu_refs is None or key in self.cross_checked:
            return reference
        self.cross_checked.add(key)
        if reference.allowed is None and self.task.allowance is not None:
            reference = Expected(reference, allowance_of(self.task, inputs, reference, check.sizes))
        self.held_cross_checks.append((check.level, inputs, check.sizes, reference))
        if check.level != "L0":
            self.submit_held_cross_checks()
        return reference

    def submit_held_cross_checks(self) -> None:
        for held in self.held_cross_checks:
            self.gpu_refs.submit_cross_check(*held)
        self.held_cross_checks.clear()

    def will_cross_check(self, check: Check) -> bool:
        return self.gpu_refs is not None and (check.level, check.shape_index) not in self.cross_checked

    def stop_gpu_references(self) -> None:
        if self.gpu_refs is None:
            return
        self.environment["references"] = self.gpu_refs.describe()
        self.seconds["gpu_references"] = self.gpu_refs.seconds
        self.gpu_refs.close()
        self.gpu_refs = None

    def read_back(self, buffers: dict, inputs_before: dict, reference: dict,
                  inputs_after: dict | None = None) -> RunBuffers:
        """What the guards look at after a launch (`inputs_after`: already read back)."""
        return RunBuffers(
            inputs_before=inputs_before,
            inputs_after=(inputs_after if inputs_after is not None
                          else {t.name: buffers[t.name].download() for t in self.task.inputs}),
            outputs={t.name: buffers[t.name].download() for t in self.task.outputs},
            reference=reference,
            guards={name: b.guards() for name, b in buffers.items()},
        )

    def check(self, run: RunBuffers, sizes: dict) -> tuple[GuardFailure | None, float, float]:
        return check_run(run, self.task.tolerance_for, sizes, self.task.comparison())

    def poison_writable(self, buffers: dict) -> None:
        if self.sanitizing:
            # initcheck counts a memset as a write, so under it outputs and scratch stay
            # as allocated: a kernel that reads one before writing it (a running max kept
            # in the output, which NaN poison cannot reveal: fmaxf ignores NaN) is seen.
            return
        writable = [t.name for t in self.task.outputs] + [s.name for s in self.candidate.scratch]
        for name in writable:
            buffers[name].poison(self.gpu.stream)

    # -- correctness -------------------------------------------------------------------
    def check_plan(self) -> list[Check]:
        levels = self.options["levels"]
        return check_plan(self.task, levels, self.l1_sizes, {
            level: self.options.get(f"{level.lower()}_seeds") or self.options["seeds"] for level in levels},
            self.base_seed)

    def check_once(self, check: Check) -> None:
        from . import device

        level, sizes, seed, distribution = check.level, check.sizes, check.seed, check.distribution
        self.stage("correctness", level=level, sizes=sizes, seed=seed)
        self.require_memory(sizes)
        in_child = judged_in_child(self, check)
        buffers = self.allocate(sizes)
        try:
            if in_child:
                def plan(on: dict):
                    return device.resolve_plan(self.gpu, self.module, self.candidate, sizes, on)

                failure, max_abs, max_rel = check_in_child(self, check, buffers, plan)
                if level == "L1":  # kept for the check after the timed runs, drawn again then
                    self.last_l1, self.last_l1_in_child = (check, None, {}, None), True
            else:
                failure, max_abs, max_rel = self.check_here(check, buffers)
        finally:
            for b in buffers.values():
                b.free()
        record = CheckRecord(level=level, sizes=dict(sizes), seed=seed, distribution=distribution,
                             passed=failure is None, guard=failure.guard if failure else None,
                             detail=failure.message if failure else "",
                             max_abs_error=max_abs, max_rel_error=max_rel)
        self.records.append(record)
        # Sent as it is made, so a verdict the parent has to write itself (a timeout, a
        # crash) still shows the checks that passed before it.
        self.channel.send("check", **asdict(record))
        if failure:
            raise Rejection(failure.guard, f"{level} {sizes} seed {seed} ({distribution}): "
                                           f"{failure.message}")

    def check_here(self, check: Check, buffers: dict) -> tuple[GuardFailure | None, float, float]:
        """One check judged in this process: inputs from the host (or drawn on the GPU here),
        the reference from the host, the input cache or the reference child, compared by
        check_run (or on the GPU against a screen's resident seed)."""
        from . import device

        level, sizes, seed, distribution = check.level, check.sizes, check.seed, check.distribution
        seed_on_gpu, drawn = None, None
        if self.generates_on_gpu(check) and self.resident is not None:
            inputs = None  # on the GPU only (resident_inputs reads them back if needed)
            seed_on_gpu, reference = self.resident_seed_drawn(check, buffers)
        elif self.generates_on_gpu(check):
            inputs, reference, drawn = self.generate_on_gpu(check, buffers)
        else:
            inputs, reference = inputs_and_reference(self.task, sizes, seed, distribution,
                                                     self.options.get("input_cache"))
        if inputs is not None:
            reference = self.cross_check_reference(check, inputs, reference)
        if self.options.get("adversary", {}).get("stale_reference"):
            self.leave_reference_in_outputs(buffers, reference)
        if self.resident is not None and level == "L1" and seed_on_gpu is None:
            seed_on_gpu = self.resident.get((self.task.name, tuple(sorted(sizes.items())), seed),
                                            inputs, reference, self.harness_module, self.gpu)
        for t in self.task.inputs:
            if seed_on_gpu is not None:
                buffers[t.name].copy_from(seed_on_gpu.inputs[t.name])
            elif not self.generates_on_gpu(check):
                buffers[t.name].upload(inputs[t.name])
        self.poison_writable(buffers)
        launches = device.resolve_plan(self.gpu, self.module, self.candidate, sizes, buffers)
        self.launch(launches, sizes)
        inputs_after = None
        if drawn is not None:
            inputs, inputs_after = self.inputs_after_launch(check, buffers, drawn)
        if level == "L1":
            # kept for the check after the timed runs (one seed's arrays, not all)
            self.last_l1, self.last_l1_in_child = (check, inputs, reference, seed_on_gpu), False
            self.reference_has_poison |= any(
                t.dtype == "float32" and bool((reference[t.name].view(np.uint32) == 0xFFFFFFFF).any())
                for t in self.task.outputs)
        if seed_on_gpu is None:
            # Inputs drawn on the GPU come back as one array when their keyed checksums
            # show them unchanged (inputs_after_launch): then the outputs may pass there.
            passed = check_on_gpu(self, buffers, inputs_after is not None and inputs_after is inputs,
                                  reference)
            if passed is not None:
                return None, *passed
            failure, max_abs, max_rel = self.check(
                self.read_back(buffers, inputs, reference, inputs_after), sizes)
        else:
            failure, max_abs, max_rel = self.check_resident(buffers, seed_on_gpu, inputs,
                                                            reference, sizes)
        return failure, max_abs, max_rel

    def check_resident(self, buffers: dict, seed_on_gpu: SeedOnGpu, inputs: dict | None, reference: dict,
                       sizes: dict) -> tuple[GuardFailure | None, float, float]:
        """The screen's L1 check, compared on the GPU against the seed kept there.

        Inputs are compared bit for bit with their untouched copies, and float32 outputs
        of tasks with the default comparison against the reference, by the harness's own
        kernels; only what those find (or a task's custom comparison) brings outputs to
        the host, where check_run names the guard and the element, as in a one-shot run.
        """
        from . import device

        guards = {name: b.guards() for name, b in buffers.items()}
        mutated = [t.name for t in self.task.inputs
                   if device.count_differences(self.harness_module, self.gpu, buffers[t.name],
                                               seed_on_gpu.inputs[t.name])]
        canaries_ok = all(check_canaries(name, *pair) is None for name, pair in guards.items())
        elementwise = self.task.comparison() is None and all(t.dtype == "float32" for t in self.task.outputs)
        if canaries_ok and not mutated and elementwise:
            worst_abs = worst_rel = 0.0
            clean = True
            for t in self.task.outputs:
                tol = self.task.tolerance_for(t.dtype)
                unwritten, bad, max_abs, max_rel = device.compare_f32(
                    self.harness_module, self.gpu, buffers[t.name], seed_on_gpu.reference[t.name],
                    tol.atol, tol.rtol)
                clean = clean and not unwritten and not bad
                worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
            if clean:
                return None, worst_abs, worst_rel
        if inputs is None:
            inputs = self.resident_inputs(seed_on_gpu, sizes)
        run = RunBuffers(
            inputs_before={name: inputs[name] for name in mutated},
            inputs_after={name: buffers[name].download() for name in mutated},
            outputs={t.name: buffers[t.name].download() for t in self.task.outputs},
            reference=reference, guards=guards, compare_inputs=inputs)
        return self.check(run, sizes)

    def leave_reference_in_outputs(self, buffers: dict, reference: dict) -> None:
        """Adversarial test hook: put the right answer in the output buffers before the
        launch, as a GPU-side reference left in freed memory the outputs were then
        allocated from would, so a kernel that writes nothing would pass without the
        poison."""
        for name, values in reference.items():
            buffers[name].upload(np.ascontiguousarray(values))

    # -- timing (timing.py) ---------------------------------------------------------------
    def time_runs(self) -> None:
        timed = TimedRuns(self)
        samples, failure, self.verified_runs = timed.run()
        self.finish_timing(samples, self.l1_sizes, failure, len(self.verified_runs))

    def check_after_timing(self, buffers: dict, launches) -> GuardFailure | None:
        """One full-size correctness check on the timed runs' own buffers, after the loop:
        a kernel that keeps state cannot behave only while it is young."""
        if self.last_l1 is None:
            return None
        check, inputs, reference, seed_on_gpu = self.last_l1
        if self.last_l1_in_child:
            return check_after_timing_in_child(self, check, buffers, launches)
        sizes = check.sizes
        if inputs is None:
            inputs = self.resident_inputs(seed_on_gpu, sizes)
        for t in self.task.inputs:
            buffers[t.name].upload(inputs[t.name])
        self.poison_writable(buffers)
        self.launch(launches, sizes)
        failure = self.check(self.read_back(buffers, inputs, reference), sizes)[0]
        if failure is None:
            return None
        return GuardFailure(failure.guard, f"after the timed runs, on the same buffers, L1 seed "
                                           f"{check.seed}: {failure.message}")

    def finish_timing(self, samples: list[float], sizes: dict, failure, verified: int) -> None:
        stats = summarize(samples)
        moved, flops = float(self.task.bytes(sizes)), float(self.task.flops(sizes))
        floor_ms, reason = physics_floor_ms(moved, flops, self.task.math, self.ceilings())
        self.timing = TimingReport(
            runs=stats.runs, median_ms=stats.median, mean_ms=stats.mean, stdev_ms=stats.stdev,
            min_ms=stats.min, max_ms=stats.max, p10_ms=stats.p10, p90_ms=stats.p90,
            floor_ms=floor_ms, floor_reason=reason, bytes=moved, flops=flops,
            spot_checks=verified)
        # The floor is checked before the verified runs are reported: a kernel that skips
        # its work when timed is named for the impossible time, its clearest symptom.
        if stats.median < floor_ms:
            raise Rejection("physics_floor", f"median {stats.median:.4f} ms is below the "
                                             f"{floor_ms:.4f} ms floor: {reason}")
        if failure is not None:
            raise Rejection("timed_output", f"a timed run with fresh inputs was wrong: "
                                            f"[{failure.guard}] {failure.message}")

    # -- profiling ---------------------------------------------------------------------
    def profile_once(self) -> None:
        """One launch of the plan on fresh inputs, for ncu to observe."""
        from . import device

        sizes = self.l1_sizes
        buffers = self.allocate(sizes)
        launches = device.resolve_plan(self.gpu, self.module, self.candidate, sizes, buffers)
        TimedRuns(self).refresh_inputs(buffers, secrets.randbits(62))
        self.poison_writable(buffers)
        self.gpu.synchronize()
        device.launch_all(launches, self.gpu.stream)
        self.gpu.synchronize()
        self.channel.send("result", status="profiled", guard=None, message="", **self.partial())


def _ratio(part: float, whole: float) -> float:
    return float(part) / float(whole) if whole else 0.0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
