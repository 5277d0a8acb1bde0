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

    python -m profiling.harness.gpuref --serve <channel fd>    (started by GpuReferences)

The child reads one request per line on stdin: {"task", "sizes", "dir", "judge"}; the
inputs are `dir/<name>.npy`; it writes `dir/ref-<output>.npy` (and `dir/allowed-<output>.npy`
for a task with an allowance) and answers {"type": "result", "status": "ok"} on its
channel. With "judge" (GpuReferences.within) the candidate's outputs come too
(`dir/candidate-<output>.npy`), and when every element is within its allowance the child
answers {"within": true} and writes nothing: a verified run that passes moves only its
inputs and outputs, one way.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .inputs import Expected
from .sandbox import Channel, PersistentChild
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

    def __init__(self, task: Task, workdir: str | None = None) -> None:
        self.task = task
        self.dir = Path(tempfile.mkdtemp(prefix="optiml-ref-", dir=workdir))
        self.child = PersistentChild([sys.executable, "-m", "profiling.harness.gpuref", "--serve"],
                                     log_path=self.dir / "child.log", env=dict(os.environ),
                                     own_group=False)
        self.lock = threading.Lock()  # one request at a time (the checks run in threads)
        self.failed: str | None = None  # why the host is used, once it is
        self.checked: list[str] = []  # what the cross-checks covered, for describe()
        self.checked_l1 = False
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
        """Whether the spot checks may take the GPU's references: cross-checked at L1 and
        nothing has gone wrong."""
        return self.failed is None and self.checked_l1

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
        with self.lock:
            if self.failed is not None:
                return None
            started = time.monotonic()
            request_dir = Path(tempfile.mkdtemp(dir=self.dir, prefix="r-"))
            try:
                for name, values in inputs.items():
                    np.save(request_dir / f"{name}.npy", np.ascontiguousarray(values))
                for name, values in (outputs or {}).items():
                    np.save(request_dir / f"{OUTPUT_PREFIX}{name}.npy", np.ascontiguousarray(values))
                result = self.child.request({"task": self.task.name, "sizes": dict(sizes),
                                             "dir": str(request_dir), "judge": outputs is not None},
                                            time_limit_s=REQUEST_LIMIT_S)
                answer = result.last("result")
                if answer is None or answer.get("status") != "ok":
                    why = (answer or {}).get("message") or (
                        "it timed out" if result.timed_out else f"it died: {result.log_tail[-300:].strip()}")
                    self.failed = f"the reference process failed: {why}"
                    return None
                self.device = str(answer.get("device", ""))
                if answer.get("within") is True:
                    return True
                return _read_expected(self.task, request_dir)
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


def _read_expected(task: Task, folder: Path) -> Expected:
    reference = {t.name: np.load(folder / f"ref-{t.name}.npy") for t in task.outputs}
    allowed = None
    if task.allowance is not None:
        allowed = {t.name: np.load(folder / f"allowed-{t.name}.npy") for t in task.outputs}
    return Expected(reference, allowed)


# -- the child -------------------------------------------------------------------------
def _all_within(task: Task, folder: Path, reference, allowed, device) -> bool:
    """Whether every element of the candidate's outputs in `folder` is within its
    allowance of the reference: check_within's test (|actual - expected| <= allowed, in
    float64, so NaN is never within), on the GPU."""
    import torch

    for t in task.outputs:
        actual = torch.from_numpy(np.load(folder / f"{OUTPUT_PREFIX}{t.name}.npy")).to(device)
        error = (actual.to(torch.float64) - reference[t.name].to(torch.float64)).abs()
        bound = allowed[t.name]
        bound = bound.to(torch.float64) if torch.is_tensor(bound) else float(bound)
        if not bool((error <= bound).all()):
            return False
    return True


def serve(channel: Channel) -> int:
    """One request per stdin line, until EOF (the worker closed it, or died)."""
    import torch

    from . import tasks

    device = torch.device(os.environ.get(DEVICE_ENV) or "cuda")
    # float64 throughout; and the fp32 matmuls of an allowance's magnitudes must not
    # quietly become TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    torch.zeros(1, device=device)  # the CUDA context now, while the worker checks at L0
    where = f"torch {torch.__version__} on {name}"
    for line in sys.stdin:
        try:
            request = json.loads(line)
            task = tasks.get(request["task"])
            if not task.reference_on_gpu:
                raise ValueError(f"task {task.name} has no reference written for the GPU")
            folder, sizes = Path(request["dir"]), request["sizes"]
            inputs = {t.name: torch.from_numpy(np.load(folder / f"{t.name}.npy")).to(device)
                      for t in task.inputs}
            with torch.no_grad():
                outputs = task.reference(inputs, sizes)
                reference = {t.name: outputs[t.name].to(getattr(torch, t.dtype)).reshape(
                    t.resolve_shape(sizes)) for t in task.outputs}
                allowed = task.allowance(inputs, reference, sizes) if task.allowance else {}
                within = bool(request.get("judge")) and _all_within(task, folder, reference, allowed, device)
            for t in task.outputs if not within else ():
                np.save(folder / f"ref-{t.name}.npy", reference[t.name].cpu().numpy())
                if t.name in allowed:
                    values = allowed[t.name]
                    values = values.to(torch.float64) if torch.is_tensor(values) else torch.tensor(
                        float(values), dtype=torch.float64)
                    np.save(folder / f"allowed-{t.name}.npy",
                            np.broadcast_to(values.cpu().numpy(), t.resolve_shape(sizes)))
            del inputs, outputs, reference, allowed
            if device.type == "cuda":  # hand the memory back: the candidate's gate needs it
                torch.cuda.empty_cache()
            channel.send("result", status="ok", device=where, within=within)
        except Exception as error:  # an answer, never a silent death: the worker falls back
            channel.send("result", status="error", message=f"{type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        sys.exit(serve(Channel(int(sys.argv[2]))))
    sys.exit("usage: python -m profiling.harness.gpuref --serve <channel fd>")
