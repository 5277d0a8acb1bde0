"""The torch calls of the second newcomer audit's tasks, to time against: OPS[name] =
(make, call), as bench/newcomer_tasks/vendor.py: make(sizes, device) returns the call's
arguments (the task's inputs in its order), call returns the output. torch is imported
inside the functions, so the task registry can import this file on hosts without torch."""

from __future__ import annotations


def _n(d, *shape):
    import torch

    return torch.randn(*shape, device=d, dtype=torch.float32)


def _call(name):
    import torch
    import torch.nn.functional as F

    laplace = torch.tensor([[0.0, -1.0, 0.0], [-1.0, 4.0, -1.0], [0.0, -1.0, 0.0]])
    return {
        "argmax_ties": lambda x: x.argmax(dim=1).int(),
        "avgpool1d": lambda x: F.avg_pool1d(x[:, None, :], 3, 2)[:, 0, :],
        "bmv": lambda a, x: torch.bmm(a, x[:, :, None])[:, :, 0],
        "col_min": lambda x: x.amin(dim=0),
        "cumprod": lambda x: torch.cumprod(x, dim=1),
        "dot": lambda a, b: torch.dot(a, b).reshape(1),
        "elu": lambda x: F.elu(x),
        "glu": lambda x: F.glu(x, dim=-1),
        "hardswish": lambda x: F.hardswish(x),
        "kl_div": lambda p, t: F.kl_div(p, t, reduction="sum", log_target=True).reshape(1),
        "log_softmax": lambda x: torch.log_softmax(x, dim=1),
        "matmul_tn": lambda a, b: a.t() @ b,
        "mid_max": lambda x: x.amax(dim=1),
        "rms_rows": lambda x: torch.sqrt(x.pow(2).mean(dim=1) + 1e-6),
        "stencil5": lambda x: F.conv2d(x[None, None], laplace.to(x.device)[None, None], padding=1)[0, 0],
        "to_heads": lambda x: x.transpose(1, 2).contiguous(),
    }[name]


_SHAPES = {
    "argmax_ties": ("R", "C"), "col_min": ("R", "C"), "elu": ("R", "C"), "hardswish": ("n",),
    "log_softmax": ("R", "C"), "mid_max": ("B", "R", "C"), "rms_rows": ("R", "C"), "stencil5": ("H", "W"),
    "to_heads": ("B", "S", "H", "D"), "avgpool1d": ("R", "L"),
}  # one input: its shape


def _make(name):
    if name in _SHAPES:
        return lambda s, d: (_n(d, *(s[k] for k in _SHAPES[name])),)
    return {
        "bmv": lambda s, d: (_n(d, s["Bt"], s["M"], s["K"]), _n(d, s["Bt"], s["K"])),
        "cumprod": lambda s, d: (1.0 + 0.05 * _n(d, s["M"], s["N"]),),
        "dot": lambda s, d: (_n(d, s["n"]), _n(d, s["n"])),
        "glu": lambda s, d: (_n(d, s["R"], 2 * s["C"]),),
        "kl_div": lambda s, d: (_n(d, s["n"]), _n(d, s["n"])),
        "matmul_tn": lambda s, d: (_n(d, s["K"], s["M"]), _n(d, s["K"], s["N"])),
    }[name]


NAMES = ("argmax_ties", "avgpool1d", "bmv", "col_min", "cumprod", "dot", "elu", "glu", "hardswish", "kl_div",
         "log_softmax", "matmul_tn", "mid_max", "rms_rows", "stencil5", "to_heads")
OPS = {name: (lambda s, d, n=name: _make(n)(s, d), lambda *a, n=name: _call(n)(*a)) for name in NAMES}
