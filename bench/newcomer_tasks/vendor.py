"""The torch calls of the newcomer tasks, to time against: OPS[name] = (make, call), as
bench/transfer_tasks/vendor.py: make(sizes, device) returns the call's arguments (the
task's inputs in its order, standard normal, integer ids in range), call returns the
output. torch is imported inside the functions: the task registry imports this file on
hosts without torch (it defines no TASK). Tasks whose torch form is not one call that a
user would write (one_thread's rmsnorm over everything, frob's two passes) have one all
the same, the nearest a user writes."""

from __future__ import annotations


def _n(d, *shape):
    import torch

    return torch.randn(*shape, device=d, dtype=torch.float32)


def _torch():
    import torch
    import torch.nn.functional as F

    return torch, F


def _call(name):
    torch, F = _torch()
    return {
        "argmin": lambda x: x.argmin(dim=1).int(),
        "avgpool2d": lambda x: F.avg_pool2d(x, 2),
        "batchnorm": lambda x, m, v, w, b: F.batch_norm(x, m, v.abs(), w, b, training=False, eps=1e-5),
        "bias_relu": lambda x, b: torch.relu(x + b),
        "bmm": lambda a, b: torch.bmm(a, b),
        "btranspose": lambda x: x.transpose(1, 2).contiguous(),
        "chan_scale": lambda x, s: x * s[None, :, None],
        "col_mean": lambda a: a.mean(dim=0),
        "conv1d": lambda x, w: F.conv1d(x, w),
        "cosine": lambda a, b: F.cosine_similarity(a, b, dim=1, eps=1e-8),
        "embedding": lambda ids, table: F.embedding(ids, table),
        "frob": lambda x: x / torch.linalg.vector_norm(x),
        "gelu_helper": lambda x: F.gelu(x, approximate="tanh"),
        "huber": lambda p, t: F.huber_loss(p, t, delta=1.0),
        "l1sum": lambda x: x.abs().sum(),
        "l2norm": lambda x: x / (torch.linalg.vector_norm(x, dim=1, keepdim=True) + 1e-6),
        "layernorm_w": lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5),
        "leaky_scale": lambda x: F.leaky_relu(x, 0.01) * 2.0,
        "logsumexp": lambda x: torch.logsumexp(x, dim=1),
        "matmul_nt": lambda a, b: a @ b.t(),
        "maxpool1d": lambda x: F.max_pool1d(x[:, None, :], 4, 2, ceil_mode=True)[:, 0, :],
        "maxpool2d": lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True),
        "mean_all": lambda x: x.mean(),
        "mid_mean": lambda x: x.mean(dim=1),
        "one_thread": lambda x, g: F.rms_norm(x, (x.shape[-1],), g, eps=1e-6),
        "online_softmax": lambda x: torch.softmax(x, dim=1),
        "outer": lambda a, b: torch.outer(a, b),
        "powsqrt": lambda a, b: torch.hypot(a, b),
        "rowmax": lambda x: x.amax(dim=1),
        "rowsum_double": lambda x: x.sum(dim=1),
        "softmax_shared": lambda x: torch.softmax(x, dim=1),
        "softplus": lambda x: F.softplus(x),
        "tiled_matmul": lambda a, b: a @ b,
        "tril": lambda x: torch.tril(x),
    }[name]


_SHAPES = {
    "argmin": ("R", "C"), "avgpool2d": ("NC", "H", "W"), "bias_relu": ("M", "N"), "btranspose": ("B", "M",
        "N"),
    "col_mean": ("R", "C"), "frob": ("n",), "gelu_helper": ("n",), "l1sum": ("n",), "l2norm": ("R", "D"),
    "layernorm_w": ("R", "N"), "leaky_scale": ("R", "C"), "logsumexp": ("N", "D"), "maxpool1d": ("R", "L"),
    "maxpool2d": ("NC", "H", "W"), "mean_all": ("n",), "mid_mean": ("B", "R", "C"),
    "online_softmax": ("R", "C"), "rowmax": ("R", "C"), "rowsum_double": ("R", "C"),
    "softmax_shared": ("R", "C"), "softplus": ("n",), "tril": ("n", "n"),
}  # one input: its shape


def _make(name):
    if name in _SHAPES:
        return lambda s, d: (_n(d, *(s[k] for k in _SHAPES[name])),)
    torch, _ = _torch()
    return {
        "batchnorm": lambda s, d: (_n(d, s["N"], s["C"], s["H"], s["W"]), *(_n(d, s["C"]) for _ in range(4))),
        "bmm": lambda s, d: (_n(d, s["Bt"], s["M"], s["K"]), _n(d, s["Bt"], s["K"], s["N"])),
        "chan_scale": lambda s, d: (_n(d, s["N"], s["C"], s["HW"]), _n(d, s["C"])),
        "conv1d": lambda s, d: (_n(d, s["B"], s["Cin"], s["L"]), _n(d, s["Cout"], s["Cin"], s["K"])),
        "cosine": lambda s, d: (_n(d, s["N"], s["D"]), _n(d, s["N"], s["D"])),
        "embedding": lambda s, d: (torch.randint(0, s["V"], (s["n"],), device=d), _n(d, s["V"], s["D"])),
        "huber": lambda s, d: (_n(d, s["n"]), _n(d, s["n"])),
        "matmul_nt": lambda s, d: (_n(d, s["M"], s["K"]), _n(d, s["N"], s["K"])),
        "one_thread": lambda s, d: (_n(d, s["R"], s["D"]), _n(d, s["D"])),
        "outer": lambda s, d: (_n(d, s["M"]), _n(d, s["N"])),
        "powsqrt": lambda s, d: (_n(d, s["n"]), _n(d, s["n"])),
        "tiled_matmul": lambda s, d: (_n(d, s["M"], s["K"]), _n(d, s["K"], s["N"])),
    }[name]


NAMES = ("argmin", "avgpool2d", "batchnorm", "bias_relu", "bmm", "btranspose", "chan_scale", "col_mean",
            "conv1d",
         "cosine", "embedding", "frob", "gelu_helper", "huber", "l1sum", "l2norm", "layernorm_w",
             "leaky_scale",
         "logsumexp", "matmul_nt", "maxpool1d", "maxpool2d", "mean_all", "mid_mean", "one_thread",
         "online_softmax", "outer", "powsqrt", "rowmax", "rowsum_double", "softmax_shared", "softplus",
         "tiled_matmul", "tril")
OPS = {name: (lambda s, d, n=name: _make(n)(s, d), lambda *a, n=name: _call(n)(*a)) for name in NAMES}
