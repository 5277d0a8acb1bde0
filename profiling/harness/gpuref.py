"""Reference outputs computed on the GPU, in a process of their own, for the spot checks.

A full gate of self_attention spent 15-20 s of its ~20 s on the H200 computing the
float64 references (and error allowances) of its 8 verified timed runs on the host CPU
(bench/results/2026-12-04-h200-transfer/). On the GPU they take milliseconds: the gate
went from 23.1 s to 6.6 s, sgemm's from 7.3 s to 6.6 s
(bench/results/2026-12-04-h200-gpu-references/run-3.json). Tasks whose
reference is written against the array API (spec.Task.reference_on_gpu: the same lines
run in numpy and in torch) get them there, under three rules:

- **Not in the candidate's process.** The reference runs in a child of the worker with
  its own CUDA context (torch's), so the candidate's kernels, which run in the worker's
  context, cannot address its memory: a kernel cannot leave an answer where the
  reference will be read, nor change it after. The child gets data only, as files: the
  inputs as the worker read them back and, to judge a verified run (`within`), the
  outputs the worker copied back; it runs none of the candidate's code.
- **Cross-checked against the host first.** Before the GPU's references decide anything
  they are compared with the host's (numpy, float64) on the first seed of every L0 shape
  and on one L1 seed: each output within 1/16 of what a candidate is allowed to err
  (CROSS_CHECK_SHARE), each allowance within 1 % of the host's. One disagreement, a
  child that fails or is slow, or no torch or GPU, and the session uses the host for
  everything, saying why (`describe()`, kept in the verdict's environment).
- **Only when nothing is timed.** The cross-checks run beside the worker's correctness
  checks (a thread here hides the child's start, torch's import and a CUDA context,
  behind them), and the worker waits for all of them (`settle`) before its timed runs;
  the verification after the loop waits for each answer. So the child's kernels never
  share the GPU with a measurement.

    python -m profiling.harness.gpuref_child --serve <channel fd>    (started by GpuReferences)

The child reads one request per line on stdin: {"task", "sizes", "dir", "judge"}; the
inputs are `dir/<name>.npy`; it writes `dir/ref-<output>.npy` (and `dir/allowed-<output>.npy`
for a task with an allowance) and answers {"type": "result", "status": "ok"} on its
channel. With "judge" (GpuReferences.within) the candidate's outputs come too
(`dir/candidate-<output>.npy`), and when every element is within its allowance the child
answers {"within": true} and writes nothing: a verified run that passes moves only its
inputs and outputs, one way.

For a task whose L1 checks are judged here (spec.Task.l1_in_reference_child: a torchtask)
no input travels at all: the request carries the worker's draws instead ("draw": a list of
draws.Draw, and "harness_cubin"), and the child draws the same inputs on its own GPU with
the harness's own kernel, answering with their checksum ("checksum"), which the worker
compares with its own draws' before it believes the answer (`judge_drawn`); the child
keeps that reference and allowance ("keep") for the next request ({"judge_kept"}), which
brings the candidate's outputs: the child opens them on the GPU by CUDA IPC
("outputs_ipc": a copy the worker made after the launch, or a timed run's snapshot), else
they are read into memory-backed files (/dev/shm when it has room) that the child maps. Such a
session trusts the child once its references agreed with the host's at every L0 shape:
at KernelBench's L1 sizes the host's float64 forward takes minutes (`trusts_draws`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from .draws import Draw
from .inputs import Expected
from .sandbox import PersistentChild
from .spec import Task

Arrays = dict[str, np.ndarray]

# How far the GPU's reference may be from the host's, as a share of what a candidate may
# err by (its tolerance or allowance). Both are float64 computations rounded to fp32, so
# they agree to an ulp or two; a reduced-precision path (TF32, fp16) would not.
CROSS_CHECK_SHARE = 1.0 / 16
# How far the GPU's allowance may be from the host's, relative: it is a bound built from
# magnitudes, which an fp32 matmul on either side gets to ~1e-6.
ALLOWANCE_RTOL = 1e-2
# One request's limit: milliseconds of GPU work and a few hundred MB of files, plus the
# child's start (torch's import and a CUDA context) on the first.
REQUEST_LIMIT_S = 120.0
# A candidate's output in a request's folder (a task's tensors are C identifiers: no clash).
OUTPUT_PREFIX = "candidate-"
# Where the child computes: "cuda" on a GPU host; tests on a machine without one set
# "cpu" to exercise the same process and files with torch's CPU build.
DEVICE_ENV = "OPTIML_REFERENCE_DEVICE"
# Where a drawn check's files go (the outputs for the child to map, or its reference and
# allowance sent back): memory, when it has room for them (a container's /dev/shm may be
# 64 MB); else the session's folder.
MEMORY_DIR = Path("/dev/shm")
MEMORY_PREFIX = "optiml-refmem-"  # then the session's process id, a dash, mkdtemp's letters


# The child's status when it cannot open the outputs by CUDA IPC (the worker sends files).
TRANSPORT = "transport"


class OutputsOnGpu(Protocol):
    """A candidate's outputs where the worker keeps them after the launch (drawn.py)."""

    def ipc_handles(self) -> dict[str, str] | None:
        """Each output's CUDA IPC handle (hex), or None where they cannot be shared."""

    def read_into(self, arrays: Arrays) -> None:
        """Copy each output from the GPU into the array of its name."""


@dataclass(frozen=True)
class Judged:
    """The child's answer on a drawn check: `within` (every output within its allowance),
    whether its reference holds the poison pattern (timing.py's unwritten count cannot
    then decide), and when not within, its reference and allowance for the host to name
    the guard (`expected`)."""

    within: bool
    reference_has_poison: bool
    expected: Expected | None = None


class GpuReferences:
    """The worker's handle on the reference child, started on first use.

        refs = GpuReferences(task)
        refs.submit_cross_check("L0", inputs, sizes, host_expected)  # at L0, on one L1 seed
        refs.settle()                                    # before anything is timed
        judged = refs.within(inputs, outputs, sizes)     # a verified run: True, or the
                                                         # reference to diagnose; None: host
        expected = refs.expected(inputs, sizes)          # a reference alone; None: host
        refs.describe(); refs.close()
    """

    def __init__(self, task: Task, workdir: str | None = None, *, harness_cubin: str | None = None) -> None:
        self.task = task
        self.harness_cubin = harness_cubin  # the harness's kernels, for a drawn check's draws
        self.dir = Path(tempfile.mkdtemp(prefix="optiml-ref-", dir=workdir))
        self.child = PersistentChild([sys.executable, "-m", "profiling.harness.gpuref_child", "--serve"],
                                     log_path=self.dir / "child.log", env=dict(os.environ),
                                     own_group=False)
        self.lock = threading.Lock()  # one request at a time (the checks run in threads)
        self.failed: str | None = None  # why the host is used, once it is
        self.checked: list[str] = []  # what the cross-checks covered, for describe()
        self.checked_l1 = False
        self.drawn = 0  # drawn checks whose draws the child made as the worker did
        self._memory: Path | None = None  # this session's folder in MEMORY_DIR, made on first use
        self.ipc_failed: str | None = None  # why the child cannot open the worker's outputs by CUDA IPC
        self.moved: Counter[str] = Counter()  # how a drawn check's outputs reached the child
        self.device = ""
        self.requests = 0
        self.seconds = 0.0
        self._pending: list[Future] = []
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="optiml-refcheck")

    def submit_cross_check(self, level: str, inputs: Arrays, sizes: dict, host: Expected) -> None:
        """cross_check in the background: the worker goes on with its checks meanwhile."""
        self._pending.append(self._thread.submit(self._cross_check_safely, level, inputs, sizes, host))

    def settle(self) -> None:
        """Wait for every cross-check submitted: nothing of this child runs after this
        returns, until the next request."""
        for future in self._pending:
            future.result()
        self._pending.clear()

    def _cross_check_safely(self, level: str, inputs: Arrays, sizes: dict, host: Expected) -> None:
        try:
            self.cross_check(level, inputs, sizes, host)
        except Exception as error:  # noqa: BLE001  (any failure means: the host decides)
            self.failed = f"the cross-check at {level} {sizes} failed: {type(error).__name__}: {error}"

    @property
    def usable(self) -> bool:
        """Whether the spot checks may take the GPU's references: cross-checked at L1 (or,
        for a drawn session, judging its L1 checks) and nothing has gone wrong."""
        return self.failed is None and (self.checked_l1 or self.drawn > 0)

    @property
    def trusts_draws(self) -> bool:
        """Whether a drawn L1 check may be judged here: the task asks for it, the child
        has the harness's kernels, nothing went wrong, and every L0 shape's reference
        agreed with the host's (a gate without L0 checks never gets here)."""
        agreed = sum(c.startswith("L0 ") for c in self.checked)
        return (self.task.l1_in_reference_child and self.harness_cubin is not None and self.failed is None
                and agreed >= len(self.task.l0_sizes) > 0)

    def cross_check(self, level: str, inputs: Arrays, sizes: dict, host: Expected) -> None:
        """Compare the GPU's reference for these inputs with the host's; on any
        disagreement (or failure) the GPU is not used again in this session."""
        if self.failed is not None:
            return
        gpu = self._compute(inputs, sizes)
        if gpu is None:
            return
        wrong = disagreement(self.task, gpu, host)
        if wrong is not None:
            self.failed = f"the GPU's reference disagreed with the host's at {level} {sizes}: {wrong}"
            return
        self.checked.append(f"{level} {sizes}")
        self.checked_l1 |= level == "L1"

    def expected(self, inputs: Arrays, sizes: dict) -> Expected | None:
        """The GPU's reference (and allowance) for one timed run's inputs; None when the
        host must compute it (not cross-checked at L1 yet, or the GPU path failed)."""
        self.settle()
        if not self.usable:
            return None
        return self._compute(inputs, sizes)

    def within(self, inputs: Arrays, outputs: Arrays, sizes: dict) -> bool | Expected | None:
        """One verified timed run's outputs judged in the child, for a task with an
        allowance (what check_within accepts: every |output - reference| <= allowed, NaN
        never): True when all are within; else the child's reference and allowance, for
        the host to diagnose as it would its own (so the guard and the element are named
        as ever); None when the host must compute everything. Only the inputs and the
        outputs travel: the reference and allowance stay on the GPU unless needed."""
        self.settle()
        if not self.usable or self.task.allowance is None:
            return None
        return self._compute(inputs, sizes, outputs)

    def _compute(self, inputs: Arrays, sizes: dict, outputs: Arrays | None = None) -> bool | Expected | None:
        def write(folder: Path) -> None:
            for name, values in inputs.items():
                np.save(folder / f"{name}.npy", np.ascontiguousarray(values))
            for name, values in (outputs or {}).items():
                np.save(folder / f"{OUTPUT_PREFIX}{name}.npy", np.ascontiguousarray(values))

        def read(answer: dict, folder: Path) -> bool | Expected:
            return True if answer.get("within") is True else _read_expected(self.task, folder)

        return self._ask({"sizes": dict(sizes), "judge": outputs is not None}, write, read)

    def judge_drawn(self, draws: list[Draw], sizes: dict, checksum: str,
                    stage: Callable[[], AbstractContextManager[OutputsOnGpu]],
                    what: str = "L1") -> Judged | None:
        """A drawn check (an L1 check, or a timed run: `what`) judged here, in two requests:
        the child draws `draws` itself and keeps its reference and allowance for them;
        then `stage()` gives the candidate's outputs (staged only now, so that their copy
        never sits on the GPU beside the child's float64 work) and the child compares
        them, opened by CUDA IPC where they allow it, else mapped from memory-backed files
        they are read into. None when the worker must judge it itself: not trusted yet,
        the child failed, or its draws' checksum is not the worker's `checksum` (then
        never again)."""
        self.settle()
        if not self.trusts_draws:
            return None

        def kept(answer: dict, folder: Path) -> bool | None:
            if answer.get("checksum") != checksum:
                self.failed = (f"the reference process drew other inputs than the worker for {what} {sizes}: "
                               f"checksums {answer.get('checksum')} against {checksum}")
                return None
            return bool(answer.get("poison"))

        poison = self._ask({"sizes": dict(sizes), "draw": [d.to_dict() for d in draws],
                            "harness_cubin": self.harness_cubin, "keep": True}, lambda folder: None, kept)
        if poison is None or poison is TRANSPORT:
            return None
        with stage() as outputs:
            judged = self._judge_kept(sizes, outputs, poison)
            if judged is TRANSPORT:  # the child could not open them by CUDA IPC: files from now on
                judged = self._judge_kept(sizes, outputs, poison)
        return None if judged is TRANSPORT else judged

    def _judge_kept(self, sizes: dict, outputs: OutputsOnGpu, poison: bool):
        """The candidate's outputs against the reference the child kept (judge_drawn)."""
        handles = None if self.ipc_failed else outputs.ipc_handles()
        # room for the outputs' files, or the reference and float64 allowance sent back
        room = 3 * sum(t.nbytes(sizes) for t in self.task.outputs)

        def write(folder: Path) -> None:
            if handles:
                return
            arrays = {t.name: np.lib.format.open_memmap(folder / f"{OUTPUT_PREFIX}{t.name}.npy", mode="w+",
                                                        dtype=t.numpy_dtype(), shape=t.resolve_shape(sizes))
                      for t in self.task.outputs}
            outputs.read_into(arrays)
            for array in arrays.values():
                array.flush()

        def read(answer: dict, folder: Path) -> Judged:
            self.drawn += 1
            self.moved["CUDA IPC" if handles else "memory-backed files"] += 1
            within = answer.get("within") is True
            return Judged(within, poison, None if within else _read_expected(self.task, folder))

        return self._ask({"sizes": dict(sizes), "judge_kept": True, "outputs_ipc": handles}, write, read,
                         parent=self._memory_dir(room))

    def _memory_dir(self, nbytes: int) -> Path:
        """This session's folder in memory (MEMORY_DIR) when it has room for `nbytes`,
        else its folder on disk. Named after this process, so that a later session
        removes what a killed one left (_remove_orphans)."""
        try:
            stat = os.statvfs(MEMORY_DIR)
        except OSError:
            return self.dir
        if stat.f_bavail * stat.f_frsize < nbytes:
            return self.dir
        if self._memory is None:
            _remove_orphans()
            self._memory = Path(tempfile.mkdtemp(prefix=f"{MEMORY_PREFIX}{os.getpid()}-", dir=MEMORY_DIR))
        return self._memory

    def _ask(self, request: dict, write: Callable[[Path], None], read: Callable[[dict, Path], object],
             parent: Path | None = None):
        """One request in a folder of its own: `write` fills it, the child answers, `read`
        makes the answer of it; None (and the host from then on) when anything fails."""
        with self.lock:
            if self.failed is not None:
                return None
            started = time.monotonic()
            request_dir = Path(tempfile.mkdtemp(dir=parent or self.dir, prefix="r-"))
            try:
                write(request_dir)
                result = self.child.request({"task": self.task.name, "dir": str(request_dir), **request},
                                            time_limit_s=REQUEST_LIMIT_S)
                answer = result.last("result")
                if answer is not None and answer.get("status") == TRANSPORT:
                    self.ipc_failed = str(answer.get("message"))
                    return TRANSPORT
                if answer is None or answer.get("status") != "ok":
                    why = (answer or {}).get("message") or (
                        "it timed out" if result.timed_out else f"it died: {result.log_tail[-300:].strip()}")
                    self.failed = f"the reference process failed: {why}"
                    return None
                self.device = str(answer.get("device", ""))
                return read(answer, request_dir)
            except (OSError, ValueError) as error:
                self.failed = f"the reference files: {error}"
                return None
            finally:
                shutil.rmtree(request_dir, ignore_errors=True)
                self.requests += 1
                self.seconds += time.monotonic() - started

    def describe(self) -> str:
        """Where this session's spot-check references came from, for the verdict."""
        if self.failed is not None:
            return f"host ({self.failed})"
        if self.drawn:
            moved = ", ".join(f"{how} for {count}" for how, count in self.moved.items())
            moved += f" (no CUDA IPC: {self.ipc_failed})" if self.ipc_failed else ""
            return (f"gpu ({self.device}, in its own process; agreed with the host's at "
                    f"{'; '.join(self.checked)}; {self.drawn} check(s) judged there on inputs it drew "
                    "itself, their checksums the worker's draws'; the candidate's outputs came by "
                    f"{moved}; not cross-checked with the host at L1)")
        if not self.checked_l1:
            return "host (the GPU's references were not cross-checked at L1)"
        return (f"gpu ({self.device}, in its own process; agreed with the host's at "
                f"{'; '.join(self.checked)})")

    def warm(self) -> None:
        """Start the child now: torch's import and its CUDA context then overlap the
        worker's L0 checks instead of delaying the first request."""
        self.child.start()

    def close(self) -> None:
        self._thread.shutdown(wait=True, cancel_futures=True)
        if self.requests:
            self.child.close()  # EOF: it leaves on its own
        else:
            self.child.kill()  # never asked (a candidate rejected at L0): not waited for
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._memory is not None:
            shutil.rmtree(self._memory, ignore_errors=True)


def disagreement(task: Task, gpu: Expected, host: Expected) -> str | None:
    """Why the GPU's reference is not the host's, or None when they agree."""
    for t in task.outputs:
        g, h = np.asarray(gpu[t.name]), np.asarray(host[t.name])
        if g.shape != h.shape or g.dtype != h.dtype:
            return f"{t.name}: {g.dtype}{list(g.shape)} against {h.dtype}{list(h.shape)}"
        if not np.issubdtype(h.dtype, np.floating):
            if not np.array_equal(g, h):
                return f"{t.name}: {int(np.count_nonzero(g != h))} elements differ"
            continue
        allowed = _allowed(task, t.name, h, host)
        error = np.abs(g.astype(np.float64) - h.astype(np.float64))
        both_nan = np.isnan(g) & np.isnan(h)
        bad = ~((error <= CROSS_CHECK_SHARE * allowed) | both_nan)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"{t.name}: {int(np.count_nonzero(bad))} elements differ by more than "
                    f"{CROSS_CHECK_SHARE:.3g} of the allowance; first at {first}: "
                    f"{g[first].item()!r} against {h[first].item()!r}")
        if task.allowance is not None and host.allowed is not None:
            ga, ha = gpu.allowed[t.name] if gpu.allowed else None, np.asarray(host.allowed[t.name])
            if ga is None or not np.allclose(np.asarray(ga), ha, rtol=ALLOWANCE_RTOL, atol=0.0):
                return f"{t.name}: the allowances differ by more than {ALLOWANCE_RTOL:.0%}"
    return None


def _allowed(task: Task, name: str, reference: np.ndarray, host: Expected) -> np.ndarray:
    """What a candidate may err by at each element of one output."""
    if task.allowance is not None:
        if host.allowed is None:
            raise ValueError("a task with an allowance needs the host's allowance to cross-check")
        return np.asarray(host.allowed[name], dtype=np.float64)
    tol = task.tolerance_for(next(t.dtype for t in task.outputs if t.name == name))
    return tol.atol + tol.rtol * np.abs(reference.astype(np.float64))


def _remove_orphans() -> None:
    """Memory folders of reference sessions whose process is gone (a worker killed at its
    time limit leaves its folder: gigabytes of memory at KernelBench's sizes)."""
    for folder in MEMORY_DIR.glob(f"{MEMORY_PREFIX}*-*"):
        pid = folder.name.removeprefix(MEMORY_PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def _read_expected(task: Task, folder: Path) -> Expected:
    reference = {t.name: np.load(folder / f"ref-{t.name}.npy") for t in task.outputs}
    allowed = None
    if task.allowance is not None:
        allowed = {t.name: np.load(folder / f"allowed-{t.name}.npy") for t in task.outputs}
    return Expected(reference, allowed)
