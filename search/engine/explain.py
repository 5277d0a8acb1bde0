"""Why the best kernel is faster: the path root -> best, one step at a time.

Each step says what the judge read in the parent's profile (diagnosis and evidence),
what was changed (who proposed it, and why), the time before and after with its spread,
and the profile metrics that moved most. Numbers come from the measurements in the tree;
replayed ones are labelled as such.
"""

from __future__ import annotations

import math
from typing import Any

from .tree import Node, Tree
from .types import Measurement

TOP_METRICS = 4  # metric deltas shown per step: enough to explain, few enough to read


def why_faster(tree: Tree, *, top: int = TOP_METRICS) -> list[dict[str, Any]]:
    """One dict per step on the path from the root to the best node; [] if the root is best."""
    best = tree.best
    if best is None or best.id == tree.root_id:
        return []
    path = tree.path(best.id)
    return [_step(index, parent, child, top) for index, (parent, child)
            in enumerate(zip(path, path[1:], strict=False), start=1)]


def _step(index: int, parent: Node, child: Node, top: int) -> dict[str, Any]:
    before, after = parent.measurement, child.measurement
    assert before is not None and after is not None  # a best path holds only measured nodes
    diagnosis = parent.diagnosis
    return {
        "step": index, "from": parent.id, "to": child.id,
        "diagnosis": None if diagnosis is None else {
            "bottleneck": diagnosis.bottleneck, "summary": diagnosis.summary,
            "evidence": list(diagnosis.evidence), "source": diagnosis.source},
        "change": {"source": child.proposal.source, "title": child.proposal.title,
                   "rationale": child.proposal.rationale,
                   "families": list(child.proposal.families)},
        "time_before_ms": before.time_ms, "spread_before_ms": before.spread_ms,
        "time_after_ms": after.time_ms, "spread_after_ms": after.spread_ms,
        "speedup": (before.time_ms / after.time_ms
                    if before.time_ms and after.time_ms else None),
        "reward": child.reward, "reward_terms": dict(child.reward_terms),
        "metric_deltas": top_deltas(before, after, child.deltas_vs_parent, top),
        "replayed": before.replayed or after.replayed,
    }


def top_deltas(before: Measurement, after: Measurement, ratios: dict[str, float],
               top: int) -> list[dict[str, Any]]:
    """The metrics whose after/before ratio is farthest from 1 (by |ln ratio|)."""
    def size(item: tuple[str, float]) -> float:
        return math.inf if item[1] <= 0 else abs(math.log(item[1]))

    moved = sorted((item for item in ratios.items() if item[0] != "time"),
                   key=lambda item: (-size(item), item[0]))
    return [{"metric": key, "before": _value(before, key), "after": _value(after, key),
             "ratio": ratio} for key, ratio in moved[:top] if ratio != 1.0]


def _value(measurement: Measurement, key: str) -> float | None:
    if key == "registers":
        return measurement.registers
    return measurement.metrics.get(key)


def render_why(tree: Tree) -> str:
    """The account as text, for the command line."""
    steps = why_faster(tree)
    root, best = tree.root, tree.best
    if not steps or best is None:
        return "Why it is faster: no candidate beat the starting kernel."
    replayed = " (replayed recordings, not measured now)" if any(s["replayed"] for s in steps) else ""
    lines = [f"Why it is faster: {_time(root.measurement)} -> {_time(best.measurement)} ms, "
             f"{root.measurement.time_ms / best.measurement.time_ms:.2f}x in {len(steps)} "
             f"step{'s' if len(steps) > 1 else ''}{replayed}"]
    for step in steps:
        lines += _render_step(step, tree[step["from"]].measurement, tree[step["to"]].measurement)
    return "\n".join(lines)


def _render_step(step: dict[str, Any], before: Measurement, after: Measurement) -> list[str]:
    lines = ["", f"Step {step['step']}: node {step['from']} -> node {step['to']}"]
    diagnosis = step["diagnosis"]
    if diagnosis:
        lines.append(f"  diagnosis ({diagnosis['source']}): {diagnosis['summary']}")
        lines += [f"    - {line}" for line in diagnosis["evidence"]]
    change = step["change"]
    lines.append(f"  change ({change['source']}): {change['title']}")
    if change["rationale"]:
        lines.append(f"    why: {change['rationale']}")
    speedup = step["speedup"]
    verdict = (f"{speedup:.2f}x faster" if speedup and speedup >= 1
               else f"{1 / speedup:.2f}x slower" if speedup else "n/a")
    lines.append(f"  time: {_time(before)} ms -> {_time(after)} ms ({verdict}); "
                 f"reward {step['reward']:+.3f}")
    for delta in step["metric_deltas"]:
        lines.append(f"    {delta['metric']}: {_number(delta['before'])} -> "
                     f"{_number(delta['after'])} (x{delta['ratio']:.2f})")
    return lines


def _time(measurement: Measurement | None) -> str:
    if measurement is None or measurement.time_ms is None:
        return "?"
    spread = f" ± {measurement.spread_ms:.4f}" if measurement.spread_ms is not None else ""
    return f"{measurement.time_ms:.4f}{spread}"


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"


def why_it_ended(tree: Tree, *, evaluations: int, budget: int, exhausted: bool) -> str:
    """One sentence on how a search ended, for the run's header and list: what it found,
    or why it found nothing (the reason a person would otherwise dig out of node #0)."""
    done = [node for node in tree.nodes.values() if node.done and node.measurement is not None]
    how = "every proposal was tried" if exhausted else f"budget spent ({evaluations} of {budget} evaluations)"
    if not any(node.passed for node in done):
        root = tree.root.measurement
        if root is not None and (root.verdict or {}).get("status") == "incomplete":
            return ("no GPU host: the kernels compiled, but no GPU here could run them "
                    f"(see node #0: {root.message})").strip()
        guards = {node.measurement.guard for node in done}
        if guards == {"compile"}:
            return f"every candidate failed to compile (see node #{tree.root_id}); {how}"
        first = f"{root.status}: {root.message}" if root is not None else "not measured"
        return f"no candidate passed the gate (see node #{tree.root_id}, {first}); {how}"
    best = tree.best
    if best is None or best.id == tree.root_id:
        return f"no candidate beat the starting kernel; {how}"
    speedup = tree.root.measurement.time_ms / best.measurement.time_ms if tree.root.passed else None
    faster = f" ({speedup:.2f}x the starting kernel)" if speedup else ""
    return f"best: node #{best.id}{faster}; {how}"
