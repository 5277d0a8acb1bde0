"""Grid planes whose extent the kernel is never told: `int b = blockIdx.z;` launched on a
grid of Bt planes, Bt not among the kernel's arguments (a batched product as people
write it). The plane is bounded by the grid alone, which a skeleton that moves the
batch elsewhere (or unflattens it from one grid dimension) cannot see. The lift then
reads the kernel with one more parameter, `optiml_planes_z`, passed the grid's own
expression; the form keeps that argument (`Form.extra_args`) and every skeleton
launches with the kernel's arguments and these.
"""

from __future__ import annotations

import re
from typing import Any

from .reading import NotRead, plane_bounds

PARAM = "optiml_planes_{}"
_UNTOLD = "is a plane of the grid whose extent is not a size passed to the kernel"


def told(source: str, launch: dict[str, Any], params: list[str],
         error: NotRead) -> tuple[str, dict[str, Any], tuple[str, ...]] | None:
    """(source with the extents as parameters, the launch passing them, the new arguments),
    or None when `error` is not about an untold plane or the signature cannot be widened."""
    if _UNTOLD not in str(error):
        return None
    grid = [str(d) for d in launch.get("grid", [])]
    known = plane_bounds(grid, launch.get("args", []), params)
    # the dimensions the kernel reads as a plane (`int b = blockIdx.z;`, through a cast)
    missing = [(letter, dim) for letter, dim in zip("xyz", grid, strict=False)
               if letter != "x" and letter not in known
               and re.search(rf"=\s*(?:\(\s*[\w ]+\)\s*)?blockIdx\.{letter}\s*;", source)]
    if not missing:
        return None
    head = re.compile(rf"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                      rf"{re.escape(launch['kernel'])}\s*\()([^)]*)\)")
    match = head.search(source)
    if match is None or len(head.findall(source)) != 1:
        return None
    added = "".join(f", int {PARAM.format(letter)}" for letter, _ in missing)
    widened = source[:match.start()] + match.group(1) + match.group(2) + added + ")" + source[match.end():]
    extra = tuple(dim for _, dim in missing)
    return widened, {**launch, "args": [*launch.get("args", []), *extra]}, extra
