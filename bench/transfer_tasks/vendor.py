"""The vendor calls of the transfer tasks: what a user writes in torch, to time against.

OPS[name] = (make_inputs, call): make_inputs(sizes, device) returns the call's
arguments: the task's inputs as torch tensors, in the order of the task's `inputs`,
drawn from a standard normal, then any plain number the call takes as a user passes it
(groupnorm's count of groups); call(*arguments) returns the output, or a tuple of them
in the order of the task's `outputs`.
Time them as bench/vendor.py times the suite's (TF32 off, L2 flushed, fresh inputs,
median of many runs).

torch is imported inside the functions, never at import time: the task registry imports
every .py file of this directory (OPTIML_TASK_PATH) on hosts that have no torch, and
this module defines no TASK, so it is loaded and skipped there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Sizes = Mapping[str, int]


def _randn(device: str, *shape: int) -> Any:
    import torch

    return torch.randn(*shape, device=device, dtype=torch.float32)


def _silu_mul(x: Any) -> Any:
    import torch.nn.functional as F

    gate, value = x.chunk(2, dim=-1)
    return F.silu(gate) * value


def _rotary(x: Any, cos: Any, sin: Any) -> Any:
    import torch

    first, second = x.chunk(2, dim=-1)  # (S, H, D/2) each
    c, s = cos[:, None, :], sin[:, None, :]  # (S, 1, D/2): the same rotation for every head
    return torch.cat([first * c - second * s, second * c + first * s], dim=-1)


def _add_rmsnorm(x: Any, r: Any, w: Any) -> tuple[Any, Any]:
    import torch.nn.functional as F

    h = x + r
    return h, F.rms_norm(h, (h.shape[-1],), w, eps=1e-6)


def _groupnorm(x: Any, gamma: Any, beta: Any, groups: int) -> Any:
    import torch.nn.functional as F

    return F.group_norm(x, groups, gamma, beta, eps=1e-5)


def _groupnorm_inputs(sizes: Sizes, device: str = "cuda") -> tuple:
    c = sizes["C"]
    return _randn(device, *_nchw(sizes)), _randn(device, c), _randn(device, c), sizes["G"]


def _var_mean(x: Any) -> tuple[Any, Any]:
    import torch

    return torch.var_mean(x, dim=1, unbiased=False)


def _mse_loss(a: Any, b: Any) -> Any:
    import torch.nn.functional as F

    return F.mse_loss(a, b)  # a 0-d tensor; the task's output is its value, shape (1,)


def _gemv(a: Any, x: Any) -> Any:
    import torch

    return torch.mv(a, x)


def _addmm_gelu(a: Any, b: Any, bias: Any) -> Any:
    import torch
    import torch.nn.functional as F

    return F.gelu(torch.addmm(bias, a, b))  # approximate="none": the erf GELU


def _conv1x1(x: Any, w: Any, bias: Any) -> Any:
    import torch.nn.functional as F

    return F.conv2d(x, w[:, :, None, None], bias)


def _depthwise3x3(x: Any, w: Any) -> Any:
    import torch.nn.functional as F

    return F.conv2d(x, w[:, None, :, :], padding=1, groups=x.shape[1])


def _upsample2x(x: Any) -> Any:
    import torch.nn.functional as F

    return F.interpolate(x, scale_factor=2, mode="nearest")


def _where(cond: Any, a: Any, b: Any) -> Any:
    import torch

    return torch.where(cond > 0, a, b)


def _tensors(*shapes: Callable[[Sizes], tuple[int, ...]]) -> Callable[[Sizes, str], tuple]:
    """make_inputs drawing one tensor per shape, each a function of the sizes."""

    def make_inputs(sizes: Sizes, device: str = "cuda") -> tuple:
        return tuple(_randn(device, *shape(sizes)) for shape in shapes)

    return make_inputs


def _nchw(s: Sizes) -> tuple[int, ...]:
    return s["N"], s["C"], s["H"], s["W"]


OPS: dict[str, tuple[Callable[[Sizes, str], tuple], Callable[..., Any]]] = {
    "silu_mul": (_tensors(lambda s: (s["M"], 2 * s["D"])), _silu_mul),
    "rotary": (
        _tensors(
            lambda s: (s["S"], s["H"], s["D"]),
            lambda s: (s["S"], s["D"] // 2),
            lambda s: (s["S"], s["D"] // 2),
        ),
        _rotary,
    ),
    "add_rmsnorm": (
        _tensors(lambda s: (s["M"], s["N"]), lambda s: (s["M"], s["N"]), lambda s: (s["N"],)),
        _add_rmsnorm,
    ),
    "groupnorm": (_groupnorm_inputs, _groupnorm),
    "var_mean": (_tensors(lambda s: (s["M"], s["N"])), _var_mean),
    "mse_loss": (_tensors(lambda s: (s["n"],), lambda s: (s["n"],)), _mse_loss),
    "gemv": (_tensors(lambda s: (s["M"], s["K"]), lambda s: (s["K"],)), _gemv),
    "addmm_gelu": (
        _tensors(lambda s: (s["M"], s["K"]), lambda s: (s["K"], s["N"]), lambda s: (s["N"],)),
        _addmm_gelu,
    ),
    "conv1x1": (
        _tensors(_nchw, lambda s: (s["K"], s["C"]), lambda s: (s["K"],)),
        _conv1x1,
    ),
    "depthwise3x3": (_tensors(_nchw, lambda s: (s["C"], 3, 3)), _depthwise3x3),
    "upsample2x": (_tensors(_nchw), _upsample2x),
    "where": (_tensors(lambda s: (s["n"],), lambda s: (s["n"],), lambda s: (s["n"],)), _where),
}
