"""The vendor references (torch / cuBLAS / cuDNN, TF32 off) for each suite task.

Timed exactly as the gate times a candidate: CUDA events around the call, a 256 MB
write to flush the L2 before each run, fresh inputs every run, median of many runs.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

L2_FLUSH_BYTES = 256 * 1024 * 1024


def _inputs(name: str, s: dict, device: str = "cuda") -> tuple:
    randn = lambda *shape: torch.randn(*shape, device=device, dtype=torch.float32)  # noqa: E731
    if name in ("relu", "reduce_sum"):
        return (randn(s["n"]),)
    if name == "softmax":
        return (randn(s["M"], s["N"]),)
    if name == "layernorm":
        return randn(s["M"], s["N"]), randn(s["N"]), randn(s["N"])
    if name == "cross_entropy":
        return randn(s["B"], s["C"]), torch.randint(0, s["C"], (s["B"],), device=device)
    if name == "maxpool3d":
        return (randn(s["N"], s["C"], s["D"], s["H"], s["W"]),)
    if name == "sgemm":
        return randn(s["M"], s["K"]), randn(s["K"], s["N"])
    if name == "self_attention":
        return tuple(randn(s["B"], s["H"], s["S"], s["D"]) for _ in range(3))
    if name == "conv2d":
        return randn(s["N"], s["C"], s["H"], s["W"]), randn(s["K"], s["C"], 3, 3), randn(s["K"])
    if name in ("topk", "transpose", "cumsum"):
        return (randn(s["M"], s["N"]),)
    raise KeyError(name)


OPS = {
    "relu": lambda x: torch.relu(x),
    "reduce_sum": lambda x: x.sum(),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "layernorm": lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5),
    "cross_entropy": lambda logits, labels: F.cross_entropy(logits, labels, reduction="none"),
    "maxpool3d": lambda x: F.max_pool3d(x, kernel_size=3, stride=2, padding=1),
    "sgemm": lambda a, b: a @ b,
    "self_attention": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    "conv2d": lambda x, w, b: F.conv2d(x, w, b, padding=1),
    "topk": lambda x: torch.topk(x, 64, dim=-1),
    "transpose": lambda x: x.t().contiguous(),  # a family task (lineage/family_experts/)
    "cumsum": lambda x: torch.cumsum(x, dim=1),  # a family task
}
# tasks with no recorded vendor time
WHAT = {"transpose": "torch 2.x x.t().contiguous()", "cumsum": "torch 2.x torch.cumsum(x, dim=1)"}


def time_vendor(name: str, sizes: dict, runs: int = 30, warmup: int = 3) -> list[float]:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    op, samples = OPS[name], []
    for i in range(warmup + runs):
        args = _inputs(name, sizes)  # fresh values every run, as the gate does
        flush.fill_(float(i))
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        op(*args)
        stop.record()
        stop.synchronize()
        if i >= warmup:
            samples.append(start.elapsed_time(stop))
        del args
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)
