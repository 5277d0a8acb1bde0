"""The vendor calls of the admission tasks, as bench/transfer_tasks/vendor.py (its
docstring says how they are timed); torch is imported inside the functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Sizes = Mapping[str, int]


def _randn(device: str, *shape: int) -> Any:
    import torch

    return torch.randn(*shape, device=device, dtype=torch.float32)


def _column_stats(x: Any) -> Any:
    import torch

    std, mean = torch.std_mean(x, dim=0, correction=0)
    return mean, std


OPS: dict[str, tuple[Callable[..., tuple], Callable[..., Any]]] = {
    "column_stats": (lambda s, d: (_randn(d, s["N"], s["D"]),), _column_stats),
    "channels_last": (lambda s, d: (_randn(d, s["N"], s["C"], s["H"], s["W"]),),
                      lambda x: x.permute(0, 2, 3, 1).contiguous()),
    "running_max": (lambda s, d: (_randn(d, s["M"], s["N"]),), lambda x: _cummax(x)),
    "prelu": (lambda s, d: (_randn(d, s["N"], s["C"], s["H"], s["W"]), _randn(d, s["C"])),
              lambda x, a: _prelu(x, a)),
}


def _prelu(x: Any, slope: Any) -> Any:
    import torch

    return torch.nn.functional.prelu(x, slope)


def _cummax(x: Any) -> Any:
    import torch

    return torch.cummax(x, dim=1).values
