"""L1 checks judged in the reference child: nothing big crosses to the host (issue 32).

For a task whose L1 checks are judged in the reference child (spec.Task.l1_in_reference_child:
a torchtask), a full gate's L1 check runs as follows, once the child's references agreed
with the host's at every L0 shape (gpuref.GpuReferences.trusts_draws):

1. the worker draws the inputs into the candidate's buffers with the harness's kernel
   (draws.check_draws) and sums them twice: under the public key, to compare with the
   child's draws, and under a key drawn now from the OS, to see whether the launch
   changed them (as worker.Session.generate_on_gpu does for a cached seed);
2. the candidate runs, on poisoned outputs, under the launch bound, as in every check;
3. canaries and inputs are checked in the worker (the canary bytes and the keyed sums:
   nothing else is read back); the child draws the same inputs on its own GPU, the
   worker checks that their sums are its own, and the child computes its reference and
   allowance there; then the worker copies the outputs, on the GPU, into plain
   allocations the child opens by CUDA IPC (else reads them into memory-backed files),
   and the child compares (gpuref.GpuReferences.judge_drawn).

The timed runs' verified runs and the check after them go the same way
(verify_timed_runs, check_after_timing). The candidate never sees the child's inputs,
reference or allowance: they live in another process's CUDA context, made after the
launch, and what the child reads of the worker's is copied after the launch too.
Whatever fails (a canary, a changed input, an output out of its allowance, the child, a
checksum) is diagnosed on the host exactly as a check drawn on the GPU always was:
inputs and outputs read back, the child's reference (or the host's), and
checks.check_run names the guard and the element.
"""

from __future__ import annotations

import secrets
import time
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

import numpy as np

from .checks import GuardFailure, check_canaries
from .draws import check_draws, launch, run_draws
from .gpu_inputs import Drawn
from .inputs import Check, gpu_seed_reference

if TYPE_CHECKING:
    from .worker import Session

Result = tuple[GuardFailure | None, float, float]
# The GPU memory the reference child's work takes, in multiples of the task's tensors at
# its sizes: a float64 copy of the inputs and of the outputs, and the float32 run and
# float64 magnitudes of the allowance (build.py's GPU memory budget counts ~4 in all).
CHILD_FOOTPRINTS = 4
POISON = 0xFFFFFFFF  # a float32 output word the gate's poison left (buffers.POISON_BYTE four times)


def judged_in_child(session: Session, check: Check) -> bool:
    """Whether this check is drawn and judged in the reference child: an L1 check whose
    inputs the GPU draws, of a task that asks for it, in a full gate (not the screen's
    serving process), with no adversarial hook that needs the reference in the worker,
    and a child that has agreed with the host at every L0 shape. Handing the L0
    cross-checks to the child and waiting for them happens here, at the first L1 check."""
    s = session
    if not (s.task.l1_in_reference_child and s.generates_on_gpu(check) and s.resident is None
            and s.gpu_refs is not None and not s.options.get("adversary", {}).get("stale_reference")):
        return False
    s.submit_held_cross_checks()
    started = time.monotonic()
    s.gpu_refs.settle()
    s.add_seconds("reference_cross_checks_wait", started)
    return s.gpu_refs.trusts_draws


def check_in_child(session: Session, check: Check, buffers: dict, launches_for, *, counted: bool = True
                   ) -> Result:
    """Draw, launch and judge one check (the module's docstring); `launches_for(buffers)`
    resolves the candidate's plan on them. `counted`: told in the verdict's inputs line."""
    s = session
    started = time.monotonic()
    s.draw(check, buffers)
    public = s.public_checksum(buffers)
    key = secrets.randbits(64)
    drawn = Drawn(key, {t.name: s.input_checksum(buffers[t.name], key) for t in s.task.inputs})
    s.add_seconds("generate_inputs", started)
    s.poison_writable(buffers)
    s.launch(launches_for(buffers), check.sizes)
    return judge(s, check, buffers, drawn, public, counted=counted)


def judge(session: Session, check: Check, buffers: dict, drawn: Drawn, public: str, *,
          counted: bool = True) -> Result:
    """After the launch: the worker's guards on the GPU, the values in the child; the host
    diagnoses anything either finds (or anything the child could not judge)."""
    s = session
    started = time.monotonic()
    guards = {name: b.guards() for name, b in buffers.items()}
    clean = all(check_canaries(name, *pair) is None for name, pair in guards.items()) and all(
        s.input_checksum(buffers[t.name], drawn.key) == drawn.sums[t.name] for t in s.task.inputs)
    judged = None
    if clean:
        judged = s.gpu_refs.judge_drawn(check_draws(s.task, check), check.sizes, public,
                                        lambda: staged_outputs(s.task, buffers))
    s.add_seconds("judged_in_child", started)
    if judged is not None:
        s.reference_has_poison |= judged.reference_has_poison
        if judged.within:
            if counted:
                s.tell_where_inputs_came_from("child")
            return None, 0.0, 0.0
    expected = judged.expected if judged is not None else None
    return diagnose(s, check, buffers, drawn, public, expected, counted=counted)


def diagnose(session: Session, check: Check, buffers: dict, drawn: Drawn, public: str, expected, *,
             counted: bool = True) -> Result:
    """The host's checks on a drawn check, as for any check drawn on the GPU: the inputs
    read back (drawn again when the launch changed them), the child's reference when it
    sent one, else the input cache's or the host's."""
    s = session
    inputs, inputs_after = s.inputs_after_launch(check, buffers, drawn)
    where = "gpu"
    if expected is None:
        started = time.monotonic()
        expected = gpu_seed_reference(s.task, check, inputs, public, s.options.get("input_cache"))
        s.add_seconds("seed_references", started)
        where = "cache" if expected.cached else "host"
    if counted:
        s.tell_where_inputs_came_from(where)
    s.reference_has_poison |= any(bool((expected[t.name].view("uint32") == POISON).any())
                                  for t in s.task.outputs if t.dtype == "float32")
    return s.check(s.read_back(buffers, inputs, expected, inputs_after), check.sizes)


class DeviceOutputs:
    """A candidate's outputs on the GPU as the reference child gets them
    (gpuref.OutputsOnGpu): by CUDA IPC from plain allocations (`shareable`), else read
    into the child's files. The worker's buffers in guarded ranges are VMM mappings,
    which CUDA's IPC handles do not cover: their outputs are copied into plain ones first
    (staged_outputs); the timed runs' snapshots are plain already."""

    def __init__(self, pointers: dict, shareable: bool) -> None:
        self.pointers, self.shareable = pointers, shareable

    def ipc_handles(self) -> dict[str, str] | None:
        from . import device

        if not self.shareable:
            return None
        try:
            return {name: bytes(device.cuda.mem_get_ipc_handle(pointer)).hex()
                    for name, pointer in self.pointers.items()}
        except device.cuda.Error:
            return None

    def read_into(self, arrays: dict) -> None:
        from . import device

        for name, array in arrays.items():
            if array.nbytes:
                device.cuda.memcpy_dtoh(array, self.pointers[name])


@contextmanager
def staged_outputs(task, buffers: dict):
    """The outputs in `buffers` copied (on the GPU, after the launch) into plain
    allocations the child may open; the buffers themselves, to be read into files, when
    the GPU has no room for the copies. Freed on leaving."""
    from . import device

    copies = {}
    try:
        for t in task.outputs:
            copies[t.name] = device.cuda.mem_alloc(max(1, buffers[t.name].nbytes))
            if buffers[t.name].nbytes:
                device.cuda.memcpy_dtod(copies[t.name], buffers[t.name].ptr, buffers[t.name].nbytes)
        outputs = DeviceOutputs(copies, shareable=True)
    except device.cuda.MemoryError:
        outputs = DeviceOutputs({t.name: buffers[t.name].ptr for t in task.outputs}, shareable=False)
    try:
        yield outputs
    finally:
        for allocation in copies.values():
            allocation.free()


def verify_timed_runs(session: Session, buffers: dict, slots: list[dict], sink: dict,
                      chosen: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], dict[int, dict]]:
    """The verified timed runs of a session whose L1 checks were judged in the child,
    judged there too; returns the (slot, run) it did not pass, for the host, and the
    snapshots as read back (by slot).

    The child opens the snapshots where they are when the GPU has room for its work
    beside them (CHILD_FOOTPRINTS). Else they are read back to the host first and their
    GPU copies freed: the standard gate keeps nine output snapshots, and at KernelBench's
    sizes (6.4 GB an output) they and the child's float64 forward do not fit one GPU
    together (`slots` and `sink` are emptied); each then goes back to the GPU, one at a
    time, in a plain allocation the child opens."""
    from . import device
    from .timing import run_seed

    s = session
    if s.gpu.free_bytes() >= CHILD_FOOTPRINTS * s.task.footprint_bytes(s.l1_sizes):
        left = [(slot, index) for slot, index in chosen
                if not verify_timed_run(s, buffers, slots[slot], run_seed(s.base_seed, index), on_gpu=True)]
        return left, dict(enumerate(slots))
    on_host = {slot: {name: device.download(allocation, buffers[name].dtype, buffers[name].shape)
                      for name, allocation in slots[slot].items()} for slot, _ in chosen}
    for target in (*slots, sink):
        for allocation in target.values():
            allocation.free()
        target.clear()
    left = [(slot, index) for slot, index in chosen
            if not verify_timed_run(s, buffers, on_host[slot], run_seed(s.base_seed, index))]
    return left, on_host


def verify_timed_run(session: Session, buffers: dict, outputs: dict, seed: int, *,
                     on_gpu: bool = False) -> bool:
    """One verified timed run judged in the child: its inputs drawn again from its
    refresh seed, here into the input buffers for their sum and there for the reference,
    its `outputs` (its snapshot `on_gpu`, else on the host, put back on the GPU for the
    child). True when within its allowance; False when the host must judge it
    (timing.TimedRuns.check_run)."""
    s = session
    draws = run_draws(s.task, s.l1_sizes, seed)
    for d in draws:
        launch(s.harness_module, d, buffers[d.name].ptr, s.gpu.stream)
    s.gpu.synchronize()

    def stage():
        if on_gpu:
            return nullcontext(DeviceOutputs(dict(outputs), shareable=True))
        return uploaded_outputs(outputs)

    judged = s.gpu_refs.judge_drawn(draws, s.l1_sizes, s.public_checksum(buffers), stage, what="a timed run")
    return judged is not None and judged.within


@contextmanager
def uploaded_outputs(arrays: dict):
    """Outputs kept on the host, in plain GPU allocations the child may open; read into
    its files from the host when the GPU has no room for them. Freed on leaving."""
    from . import device

    copies = {}
    try:
        for name, array in arrays.items():
            copies[name] = device.cuda.mem_alloc(max(1, array.nbytes))
            if array.nbytes:
                device.cuda.memcpy_htod(copies[name], np.ascontiguousarray(array))
        outputs = DeviceOutputs(copies, shareable=True)
    except device.cuda.MemoryError:
        outputs = HostArrays(arrays)
    try:
        yield outputs
    finally:
        for allocation in copies.values():
            allocation.free()


class HostArrays:
    """Outputs on the host, for the child's files only (gpuref.OutputsOnGpu)."""

    def __init__(self, arrays: dict) -> None:
        self.arrays = arrays

    def ipc_handles(self) -> None:
        return None

    def read_into(self, arrays: dict) -> None:
        for name, array in arrays.items():
            array[...] = self.arrays[name]


def check_after_timing(session: Session, check: Check, buffers: dict, launches) -> GuardFailure | None:
    """The check after the timed runs, on their buffers, for a session whose L1 checks
    were judged in the child: the last L1 seed drawn again into them, judged there."""
    failure = check_in_child(session, check, buffers, lambda _: launches, counted=False)[0]
    if failure is None:
        return None
    return GuardFailure(failure.guard, f"after the timed runs, on the same buffers, L1 seed "
                                       f"{check.seed}: {failure.message}")
