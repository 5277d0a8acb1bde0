"""The torch calls of the third newcomer audit's tasks, to time against: OPS[name] =
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

    return {
        "argmin_mid": lambda x: x.argmin(dim=1).int(),
        "cumsum_exclusive": lambda x: torch.cumsum(x, dim=1) - x,
        "cumsum_reverse": lambda x: torch.cumsum(x.flip(1), dim=1).flip(1),
        "diag_matmul": lambda d, b: torch.diag(d) @ b,
        "hardsigmoid": lambda x: F.hardsigmoid(x),
        "hinge_loss": lambda p, t: torch.clamp(1 - p * t, min=0).mean().reshape(1),
        "instance_norm": lambda x: F.instance_norm(x, eps=1e-5),
        "l1_normalize": lambda x: x / x.abs().sum(dim=1, keepdim=True),
        "masked_cumsum": lambda x, m: torch.cumsum(x * m, dim=1),
        "matvec_t": lambda a, x: a.t() @ x,
        "softsign": lambda x: F.softsign(x),
        "triu_matmul": lambda a, b: torch.triu(a @ b),
    }[name]


_SHAPES = {
    "argmin_mid": ("B", "R", "C"), "cumsum_exclusive": ("R", "N"), "cumsum_reverse": ("R", "N"),
    "hardsigmoid": ("R", "C"), "instance_norm": ("N", "C", "H", "W"), "l1_normalize": ("R", "C"),
    "softsign": ("n",),
}  # one input: its shape


def _make(name):
    if name in _SHAPES:
        return lambda s, d: (_n(d, *(s[k] for k in _SHAPES[name])),)
    return {
        "diag_matmul": lambda s, d: (_n(d, s["N"]), _n(d, s["N"], s["M"])),
        "hinge_loss": lambda s, d: (_n(d, s["n"]), _n(d, s["n"]).sign()),
        "masked_cumsum": lambda s, d: (_n(d, s["R"], s["N"]), (_n(d, s["R"], s["N"]) > 0).float()),
        "matvec_t": lambda s, d: (_n(d, s["K"], s["M"]), _n(d, s["K"])),
        "triu_matmul": lambda s, d: (_n(d, s["n"], s["n"]).triu(), _n(d, s["n"], s["n"]).triu()),
    }[name]


NAMES = ("argmin_mid", "cumsum_exclusive", "cumsum_reverse", "diag_matmul", "hardsigmoid", "hinge_loss",
         "instance_norm", "l1_normalize", "masked_cumsum", "matvec_t", "softsign", "triu_matmul")
OPS = {name: (lambda s, d, n=name: _make(n)(s, d), lambda *a, n=name: _call(n)(*a)) for name in NAMES}
