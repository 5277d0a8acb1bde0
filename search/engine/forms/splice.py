"""Plans of several launches (a naive attention: scores, a row softmax, the weighted sum):
each launch's kernel lifted on its own, and a skeleton's kernel put back in its place.

    per_launch(source, plan) -> [(index, Form | Refusal), ...]
    splice(source, plan, index, form, emitted) -> (source, plan) | str

`lift` reads one kernel (or a zeroing launch and one kernel); a plan of several launches
is read here one launch at a time, each as a plan of its own with the plan's scratch and
tunables (with a launch before it that zeroes what it accumulates into, or that leaves
the partials it adds in scratch, a full reduction's two launches: `first_launch`). A
skeleton emitted for launch i replaces that kernel's definition in the source (the
file's directives and helper functions stay as they are; the partials' kernel goes,
which the skeleton defines again) and that launch (with the launch before it) in the
plan (by the skeleton's launches: a full reduction's zeroing launch and its kernel). A
tunable the skeleton sets that the other launches also read at another value (BLOCK) is
renamed in the new launch and its kernel (BLOCK_1), unless the kernel's own math reads
it; a kernel launched twice is not replaced (the other launch would change with it).
"""

from __future__ import annotations

import re
from typing import Any

from ..rewrites.syntax import find_kernels, parse, text
from .lift import lift
from .skeleton_base import Emitted
from .types import Form, Refusal


def per_launch(source: str, plan: dict[str, Any]) -> list[tuple[int, Form | Refusal]]:
    launches = plan.get("launches") or []
    return [(index, lift(source, sub_plan(plan, index, source))) for index in range(len(launches))]


def sub_plan(plan: dict[str, Any], index: int, source: str | None = None) -> dict[str, Any]:
    """Launch `index` as a plan of its own: what a skeleton is emitted from; given the
    source, with the launch before it where that launch zeroes what this one accumulates
    into (first_launch)."""
    first = index if source is None else first_launch(source, plan, index)
    return {**plan, "launches": plan["launches"][first:index + 1]}


def first_launch(source: str, plan: dict[str, Any], index: int) -> int:
    """`index - 1` where the two launches lift as one form: launch index - 1 a one-thread
    launch on one argument of launch `index` (a zeroing launch and the atomics after it),
    or one that leaves partials in a scratch buffer launch `index` reads (a reduction in
    two launches, two_pass.py); else `index`."""
    launches = plan.get("launches") or []
    if index == 0:
        return index
    before, this = launches[index - 1], launches[index]
    one_thread = all([str(d).strip() for d in before.get(field, [])] == ["1"] for field in ("grid", "block"))
    zeroing = one_thread and len(before.get("args", [])) == 1 and before["args"][0] in this.get("args", [])
    scratch = {s.get("name") for s in plan.get("scratch", [])}
    partials = any(a in scratch and a in this.get("args", []) for a in before.get("args", []))
    if not zeroing and not partials:
        return index
    paired = lift(source, {**plan, "launches": [before, this]})
    return index - 1 if isinstance(paired, Form) else index


def splice(source: str, plan: dict[str, Any], index: int, form: Form,
           emitted: Emitted) -> tuple[str, dict[str, Any]] | str:
    """The whole candidate with launch `index` scheduled as `emitted`, or why it cannot be."""
    launches = list(plan.get("launches") or [])
    name = launches[index].get("kernel")
    first = first_launch(source, plan, index)  # a zeroing launch the skeleton's launches replace too
    if sum(1 for launch in launches if launch.get("kernel") == name) > 1:
        return f"{name} is launched more than once: replacing it would change the other launches"
    kernels = {k.name: k for k in find_kernels(parse(source))}
    if name not in kernels:
        return f"no kernel named {name!r}"
    new_text = emitted.source
    if form.helpers and new_text.startswith(form.helpers):
        new_text = new_text[len(form.helpers):].lstrip("\n")  # the file keeps its own
    source, kernels = _without_replaced(source, launches, first, index, new_text)
    taken = {k for k in kernels if k != name}
    if any(k.name in taken for k in find_kernels(parse(new_text))):
        return "the skeleton's kernels take a name another kernel of the file has"
    new_launches = [dict(launch) for launch in emitted.plan.get("launches", [])]
    tunables = dict(plan.get("tunables", {}))
    own_text = text(kernels[name].definition)
    for key, value in emitted.plan.get("tunables", {}).items():
        if tunables.get(key, value) == value:
            tunables[key] = value
            continue
        if re.search(rf"\b{re.escape(key)}\b", own_text):
            return (f"the kernel's own code reads the tunable {key}, which the other launches read "
                    f"at {tunables[key]}")
        renamed = f"{key}_{index}"
        new_text = re.sub(rf"\b{re.escape(key)}\b", renamed, new_text)
        new_launches = [_renamed(launch, key, renamed) for launch in new_launches]
        tunables[renamed] = value
    definition = kernels[name].definition
    if definition.parent is not None and definition.parent.type == "linkage_specification":
        definition = definition.parent  # `extern "C" __global__ void f(...) {...}`: all of it
    data = source.encode()
    spliced = (data[:definition.start_byte] + b"\n" + new_text.strip().encode()
               + data[definition.end_byte:]).decode()
    scratch = list(plan.get("scratch", []))
    scratch += [s for s in emitted.plan.get("scratch", []) if s not in scratch]
    return spliced, {**plan, "launches": [*launches[:first], *new_launches, *launches[index + 1:]],
                     "scratch": scratch, "tunables": tunables}


def _without_replaced(source: str, launches: list[dict[str, Any]], first: int, index: int,
                      new_text: str) -> tuple[str, dict]:
    """The source without the kernels of launches first..index - 1 that the skeleton
    defines again (a two-pass reduction's first kernel, whose name the skeleton's kernel
    keeps) and no other launch runs; and the source's kernels then."""
    others = {launch.get("kernel") for k, launch in enumerate(launches) if not first <= k <= index}
    defined = {k.name for k in find_kernels(parse(new_text))}
    for launch in launches[first:index]:
        kernel = {k.name: k for k in find_kernels(parse(source))}.get(launch.get("kernel"))
        if kernel is None or kernel.name in others or kernel.name not in defined:
            continue
        definition = kernel.definition
        if definition.parent is not None and definition.parent.type == "linkage_specification":
            definition = definition.parent
        data = source.encode()
        source = (data[:definition.start_byte] + data[definition.end_byte:]).decode()
    return source, {k.name: k for k in find_kernels(parse(source))}


def _renamed(launch: dict[str, Any], key: str, renamed: str) -> dict[str, Any]:
    def swap(value: Any) -> Any:
        return re.sub(rf"\b{re.escape(key)}\b", renamed, value) if isinstance(value, str) else value

    return {**launch, **{field: [swap(v) for v in launch[field]] for field in ("grid", "block", "args")
                         if isinstance(launch.get(field), list)},
            **({"shared_bytes": swap(launch["shared_bytes"])} if "shared_bytes" in launch else {})}
