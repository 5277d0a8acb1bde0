"""The reference child of gpuref.py: references (and judgements) computed with torch on
the GPU, in a process of its own that holds none of the candidate's code or memory.

    python -m profiling.harness.gpuref_child --serve <channel fd>   (started by gpuref.GpuReferences)

One request per stdin line (gpuref.py's docstring says what a request holds), one answer
per request on the channel; a failure is an answer ({"status": "error"}), never a silent
death, so the worker falls back to the host.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from .draws import ChildDraws, Draw, checksum_text
from .gpuref import DEVICE_ENV, OUTPUT_PREFIX, TRANSPORT
from .sandbox import Channel
from .spec import Task

# Elements compared at a time: bounds the float64 temporaries of a comparison at
# KernelBench's L1 sizes (1.6e9 elements) to a gigabyte or so beside the reference.
JUDGE_CHUNK = 1 << 26


def _all_within(task: Task, actual: dict, reference, allowed, device) -> bool:
    """Whether every element of the candidate's outputs (`actual`: each a flat numpy array
    mapped from its file, or a flat tensor on the GPU) is within its allowance of the
    reference: check_within's test (|actual - expected| <= allowed, in float64, so NaN is
    never within), on the GPU, a chunk at a time."""
    import torch

    for t in task.outputs:
        expected = reference[t.name].reshape(-1)
        bound = allowed[t.name]
        if torch.is_tensor(bound) and bound.numel() > 1:
            bound = bound.to(torch.float64).broadcast_to(reference[t.name].shape).reshape(-1)
        elif torch.is_tensor(bound):
            bound = float(bound)
        values = actual[t.name]
        for start in range(0, expected.numel(), JUDGE_CHUNK):
            part = slice(start, start + JUDGE_CHUNK)
            chunk = values[part] if torch.is_tensor(values) else torch.from_numpy(values[part]).to(device)
            error = (chunk.to(torch.float64) - expected[part].to(torch.float64)).abs()
            if not bool((error <= (bound[part] if torch.is_tensor(bound) else bound)).all()):
                return False
    return True


def _outputs_from_files(task: Task, folder: Path) -> dict:
    return {t.name: np.load(folder / f"{OUTPUT_PREFIX}{t.name}.npy", mmap_mode="c").reshape(-1)
            for t in task.outputs}


class _Interface:
    """A device pointer as torch reads one (__cuda_array_interface__, version 2)."""

    def __init__(self, pointer: int, count: int, dtype: np.dtype) -> None:
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": np.dtype(dtype).str,
                                         "data": (pointer, True), "strides": None, "version": 2}


def _outputs_by_ipc(task: Task, handles: dict, sizes: dict, torch, device, draws: ChildDraws):
    """(each output as a flat tensor over the worker's memory, the opened handles to close
    once judged). A failure to open them is a TransportError: the worker sends files."""
    if device.type != "cuda":
        raise TransportError("the reference process computes on the CPU: no CUDA IPC")
    opened = {}
    try:
        cuda = draws.driver()
        for t in task.outputs:
            opened[t.name] = cuda.IPCMemoryHandle(bytearray.fromhex(handles[t.name]))
        tensors = {}
        for t in task.outputs:
            count = int(np.prod(t.resolve_shape(sizes), dtype=np.int64))
            tensors[t.name] = torch.as_tensor(_Interface(int(opened[t.name]), count, t.numpy_dtype()),
                                              device=device)
    except Exception as error:
        _close(opened)
        raise TransportError(f"{type(error).__name__}: {error}") from error
    return tensors, opened


class TransportError(RuntimeError):
    """The candidate's outputs could not be opened by CUDA IPC (answered as TRANSPORT)."""


def _holds_poison(task: Task, reference) -> bool:
    """Whether a float32 output of the reference holds the poison pattern (all bits set)."""
    import torch

    return any(bool((reference[t.name].view(torch.int32) == -1).any()) for t in task.outputs
               if t.dtype == "float32")


def serve(channel: Channel) -> int:
    """One request per stdin line, until EOF (the worker closed it, or died)."""
    import torch

    device = torch.device(os.environ.get(DEVICE_ENV) or "cuda")
    # float64 throughout; and the fp32 matmuls of an allowance's magnitudes must not
    # quietly become TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    torch.zeros(1, device=device)  # the CUDA context now, while the worker checks at L0
    where = f"torch {torch.__version__} on {name}"
    draws = ChildDraws(torch, device)
    try:
        _serve_requests(channel, torch, device, where, draws)
    finally:
        draws.close()
    return 0


def _serve_requests(channel: Channel, torch, device, where: str, draws: ChildDraws) -> None:
    kept: dict = {}  # a drawn check's reference and allowance, between its two requests
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if request.get("judge_kept"):
                within = _judge_kept(request, kept, torch, device, draws)
                channel.send("result", status="ok", device=where, within=within)
            else:
                kept.clear()
                within, checksum, poison = _answer(request, kept, torch, device, draws)
                channel.send("result", status="ok", device=where, within=within, checksum=checksum,
                             poison=poison)
        except TransportError as error:  # the worker sends the outputs as files instead
            channel.send("result", status=TRANSPORT, message=str(error))
        except Exception as error:  # an answer, never a silent death: the worker falls back
            kept.clear()
            channel.send("result", status="error", message=f"{type(error).__name__}: {error}")
        finally:
            if device.type == "cuda":  # hand the memory back: the candidate's gate needs it
                torch.cuda.empty_cache()


def _answer(request: dict, kept: dict, torch, device, draws: ChildDraws) -> tuple[bool, str | None, bool]:
    """One request: (within, the draws' checksum for a drawn one, whether the reference
    holds the poison pattern). A drawn one ("keep") keeps its reference and allowance in
    `kept` for the request that judges the outputs against them (_judge_kept). Its other
    tensors are gone when it returns or raises, so that the next request's (gigabytes at
    KernelBench's sizes) never sit beside them."""
    from . import tasks

    task = tasks.get(request["task"])
    if not task.reference_on_gpu:
        raise ValueError(f"task {task.name} has no reference written for the GPU")
    folder, sizes = Path(request["dir"]), request["sizes"]
    checksum = None
    if request.get("draw"):  # a drawn check: the worker's draws, made again here
        inputs, sums = draws.make([Draw.from_dict(d) for d in request["draw"]], request["harness_cubin"])
        checksum = checksum_text(sums)
    else:
        inputs = {t.name: torch.from_numpy(np.load(folder / f"{t.name}.npy")).to(device) for t in task.inputs}
    with torch.no_grad():
        outputs = task.reference(inputs, sizes)
        reference = {t.name: outputs[t.name].to(getattr(torch, t.dtype)).reshape(t.resolve_shape(sizes))
                     for t in task.outputs}
        del outputs
        allowed = task.allowance(inputs, reference, sizes) if task.allowance else {}
        del inputs
        poison = checksum is not None and _holds_poison(task, reference)
        if request.get("keep"):
            kept.update(task=task, sizes=sizes, reference=reference, allowed=allowed)
            return False, checksum, poison
        within = bool(request.get("judge")) and _judge(task, request, folder, reference, allowed,
                                                       torch, device, draws)
    if not within:
        _send_back(task, folder, reference, allowed, sizes, torch)
    return within, checksum, poison


def _judge_kept(request: dict, kept: dict, torch, device, draws: ChildDraws) -> bool:
    """The candidate's outputs against the reference kept by the request before; kept
    again only when the outputs could not be opened (the worker sends files next)."""
    if not kept:
        raise ValueError("no drawn reference kept to judge against")
    task, sizes, reference, allowed = kept["task"], kept["sizes"], kept["reference"], kept["allowed"]
    folder = Path(request["dir"])
    with torch.no_grad():
        within = _judge(task, request, folder, reference, allowed, torch, device, draws)
    kept.clear()
    if not within:
        _send_back(task, folder, reference, allowed, sizes, torch)
    return within


def _send_back(task: Task, folder: Path, reference, allowed, sizes: dict, torch) -> None:
    """The reference and allowance as files, for the worker to name what is wrong."""
    for t in task.outputs:
        np.save(folder / f"ref-{t.name}.npy", reference[t.name].cpu().numpy())
        if t.name in allowed:
            values = allowed[t.name]
            values = values.to(torch.float64) if torch.is_tensor(values) else torch.tensor(
                float(values), dtype=torch.float64)
            shape = t.resolve_shape(sizes)
            np.save(folder / f"allowed-{t.name}.npy", np.broadcast_to(values.cpu().numpy(), shape))


def _judge(task: Task, request: dict, folder: Path, reference, allowed, torch, device, draws) -> bool:
    """The candidate's outputs against the reference: opened by CUDA IPC when the request
    names handles (closed again before the answer), else from the request's files."""
    if not request.get("outputs_ipc"):
        return _all_within(task, _outputs_from_files(task, folder), reference, allowed, device)
    actual, opened = _outputs_by_ipc(task, request["outputs_ipc"], request["sizes"], torch, device, draws)
    try:
        return _all_within(task, actual, reference, allowed, device)
    finally:
        del actual
        torch.cuda.synchronize(device)
        _close(opened)


def _close(opened: dict) -> None:
    """Unmap the worker's outputs (pycuda's IPCMemoryHandle.close; else its collection)."""
    for handle in opened.values():
        close = getattr(handle, "close", None)
        if close is not None:
            close()
    opened.clear()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        sys.exit(serve(Channel(int(sys.argv[2]))))
    sys.exit("usage: python -m profiling.harness.gpuref_child --serve <channel fd>")
