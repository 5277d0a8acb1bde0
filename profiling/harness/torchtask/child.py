"""The host's reference process: a KernelBench module run on the CPU, in a child of its own.

The module is untrusted code. The gate's worker and the task builder never run it
themselves: they hand this child data as files and read data back, as gpuref.py does
with its GPU child (sandbox.PersistentChild: one child for many requests, killed and
restarted when it dies or hangs; in the caller's process group, so that it goes when
the caller is killed with its group, and its stdin's EOF ends it when the caller exits).

    python -m profiling.harness.torchtask.child --serve <channel fd>   (started by HostModule)

A request is one JSON line: {"source", "sizes", "dir", "inputs": [file names],
"module_dtypes", "weights": {parameter: file name} or null (the module's own),
"compute": "float64" | "float32", "output_dtypes": [...] or null (kept in the compute
dtype), "own_seed": null or a seed (then the inputs are get_inputs()'s own draw),
"perturb_buffers"}. The child writes `dir/out<i>.npy` for each output and answers
{"type": "result", "status": "ok", "outputs": n}, or "error" with a message.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import traceback
from pathlib import Path

import numpy as np

from ..sandbox import Channel, PersistentChild

# One request's limit: a float64 forward at a problem's full size on the host's cores
# (minutes for the largest convolutions), plus the child's start (torch's import).
REQUEST_LIMIT_S = 600.0
PACKAGE_ROOT = Path(__file__).resolve().parents[3]


class HostModule:
    """The caller's handle on the child; `shared()` gives this process's one."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="optiml-torchref-"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p)}
        self.child = PersistentChild([sys.executable, "-m", "profiling.harness.torchtask.child", "--serve"],
                                     log_path=self.dir / "child.log", env=env, own_group=False)
        self.lock = threading.Lock()

    def run(self, source: str, sizes: dict, inputs: list[np.ndarray], *, compute: str = "float64",
            weights: dict[str, np.ndarray] | None = None, module_dtypes: list[str] | None = None,
            output_dtypes: list[str] | None = None, own_seed: int | None = None,
            perturb_buffers: bool = False, time_limit_s: float = REQUEST_LIMIT_S) -> list[np.ndarray]:
        """The module's outputs on these inputs; raises ModuleError with the module's own
        error (or the child's death) in its message."""
        with self.lock:
            folder = Path(tempfile.mkdtemp(dir=self.dir, prefix="r-"))
            try:
                names = []
                for index, values in enumerate(inputs):
                    np.save(folder / f"in{index}.npy", np.ascontiguousarray(values))
                    names.append(f"in{index}.npy")
                files = None
                if weights is not None:
                    files = {}
                    for index, (name, values) in enumerate(weights.items()):
                        np.save(folder / f"w{index}.npy", np.ascontiguousarray(values))
                        files[name] = f"w{index}.npy"
                request = {"source": source, "sizes": dict(sizes), "dir": str(folder), "inputs": names,
                           "module_dtypes": module_dtypes, "weights": files, "compute": compute,
                           "output_dtypes": output_dtypes, "own_seed": own_seed,
                           "perturb_buffers": perturb_buffers}
                result = self.child.request(request, time_limit_s=time_limit_s)
                answer = result.last("result")
                if answer is None:
                    why = "it timed out" if result.timed_out else f"it died: {result.log_tail[-300:].strip()}"
                    raise ModuleError(f"the reference process gave no answer: {why}")
                if answer.get("status") != "ok":
                    raise ModuleError(str(answer.get("message")))
                return [np.load(folder / f"out{i}.npy") for i in range(int(answer["outputs"]))]
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        self.child.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ModuleError(RuntimeError):
    """The module failed in the reference process; the message is its error."""


_shared: HostModule | None = None
_shared_lock = threading.Lock()


def shared() -> HostModule:
    """This process's reference child, started on first use and ended at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = HostModule()
            atexit.register(_shared.close)
        return _shared


# -- the child -------------------------------------------------------------------------
def _answer(runners: dict, request: dict, torch) -> int:
    from .runner import ModuleRunner

    key = hashlib.sha256(request["source"].encode()).hexdigest()
    if key not in runners:
        runners.clear()  # one module at a time: a batch builds its problems in turn
        runners[key] = ModuleRunner(request["source"])
    runner, folder, sizes = runners[key], Path(request["dir"]), request["sizes"]
    compute = getattr(torch, request["compute"])
    if request.get("own_seed") is not None:
        tensors = runner.own_inputs(sizes, int(request["own_seed"]), "cpu")
    else:
        tensors = [torch.from_numpy(np.load(folder / name)) for name in request["inputs"]]
    weights = request.get("weights")
    if weights is not None:
        weights = {name: torch.from_numpy(np.load(folder / file)) for name, file in weights.items()}
    outputs = runner.run(sizes, tensors, weights, compute=compute, device="cpu",
                         module_dtypes=request.get("module_dtypes"),
                         perturb_buffers=bool(request.get("perturb_buffers")))
    dtypes = request.get("output_dtypes")
    if dtypes is not None and len(dtypes) != len(outputs):
        raise ValueError(f"forward gives {len(outputs)} outputs here, the task has {len(dtypes)}")
    for index, out in enumerate(outputs):
        if dtypes is not None:
            out = out.to(getattr(torch, dtypes[index]))
        np.save(folder / f"out{index}.npy", out.detach().cpu().numpy())
    return len(outputs)


def serve(channel: Channel) -> int:
    """One request per stdin line, until EOF (the caller closed it, or died)."""
    import torch

    runners: dict = {}
    for line in sys.stdin:
        try:
            count = _answer(runners, json.loads(line), torch)
            channel.send("result", status="ok", outputs=count)
        except BaseException as error:  # noqa: BLE001  (the module's failure is the answer)
            where = traceback.extract_tb(error.__traceback__)
            at = next((f" (line {f.lineno})" for f in reversed(where) if f.filename == "<module>"), "")
            message = (str(error).splitlines() or [""])[0][:300]
            channel.send("result", status="error", message=f"{type(error).__name__}: {message}{at}")
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        sys.exit(serve(Channel(int(sys.argv[2]))))
    sys.exit("usage: python -m profiling.harness.torchtask.child --serve <channel fd>")
