"""A lineage as the rows the search tree's view draws (frontend/src/views/tree.js), pure:
each measured state is a node (its time, its status), the plain attempt is the root, and
each other state hangs under one state a forward step reached it from: on the path to
the expert, its predecessor on that path; elsewhere, the predecessor it gained the most
from. Rejected attempts hang, failed, under the state they started from. The path from
the plain attempt to the expert is the steps `path_to_expert` picks: at each state the
step with the largest speed-up among those that still lead to the expert."""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any

from .walker import Lineage, Transition


def path_to_expert(lineage: Lineage, expert: str) -> list[Transition]:
    """The forward steps from the plain attempt ("") to `expert` (the all-on state's key),
    greedy by speed-up among the steps from which the expert can still be reached; []
    when the walk did not connect them."""
    by_before: dict[str, list[Transition]] = defaultdict(list)
    for step in lineage.transitions:
        by_before[step.before].append(step)

    @cache
    def reaches(state: str) -> bool:
        return state == expert or any(reaches(t.after) for t in by_before.get(state, []))

    if not reaches(""):
        return []
    path, state = [], ""
    while state != expert:
        onward = [t for t in by_before[state] if reaches(t.after)]
        step = max(onward, key=lambda t: (t.speedup or 0.0, t.after))
        path.append(step)
        state = step.after
    return path


def lineage_rows(lineage: Lineage, expert: str) -> dict[str, Any]:
    """{rows, expert_id, path}: rows as the tree view's (id, parentId, state "done",
    status, time_ms, title, source, plus `flags_on`, the lineage state, and the step
    into it); `path`, the row ids from the plain attempt to the expert."""
    by_depth = sorted(lineage.states, key=lambda s: (s.count(",") + bool(s), s))  # flags on, then name
    ids = {state: index for index, state in enumerate(by_depth)}
    steps = path_to_expert(lineage, expert)
    on_path = {t.after: t for t in steps}
    into: dict[str, Transition] = {}
    for step in sorted(lineage.transitions, key=lambda t: -(t.speedup or 0.0)):
        if step.after in on_path:
            into[step.after] = on_path[step.after]
        elif step.after not in into and step.before in ids:
            into[step.after] = step
    rows = []
    for state, index in ids.items():
        record, step = lineage.states[state].measurement, into.get(state)
        parent = ids.get(step.before) if step else None
        if state != "" and parent is None:
            continue  # measured, but no accepted step reached it: not on the walk's graph
        into_it = ({"title": step.intent, "source": step.proposer, "speedup": step.speedup,
                    "metric_deltas": step.metric_deltas, "diff": step.source_diff,
                    "plan_diff": step.plan_diff}
                   if step else {"title": "the plain attempt", "source": "root", "speedup": None,
                                 "metric_deltas": {}, "diff": "", "plan_diff": ""})
        rows.append({"id": index, "parentId": parent, "state": "done", "flags_on": state or "(plain attempt)",
                     "status": record.get("status", ""), "guard": record.get("guard") or "",
                     "level": record.get("level", ""), "time_ms": record.get("time_ms"), **into_it})
    next_id = len(ids)
    for attempt in lineage.rejected:
        if attempt.start not in ids:
            continue
        rows.append({"id": next_id, "parentId": ids[attempt.start], "state": "done",
                     "flags_on": attempt.state,
                     "status": "rejected", "guard": attempt.guard or "", "level": "", "time_ms": None,
                     "title": f"{attempt.flag} off (rejected)", "source": attempt.proposer, "speedup": None,
                     "metric_deltas": {}, "diff": "", "plan_diff": "", "message": attempt.message,
                     "precondition": attempt.precondition})
        next_id += 1
    path = [ids[""]] + [ids[t.after] for t in steps] if "" in ids else []
    return {"rows": rows, "expert_id": ids.get(expert), "path": path}
