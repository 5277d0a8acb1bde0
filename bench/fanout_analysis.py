"""Pure reductions for bench/fanout_gpu.py: a round's numbers, its GPU turns, two trees.

No Django here: the inputs are what bench/fanout_rows.py extracted (a run's rows as
JSON) and what bench/gpu_turns.py recorded (one dict per GPU turn).
"""

from __future__ import annotations

import statistics
from collections import defaultdict


def round_numbers(extracted: dict) -> dict:
    """Candidates per minute, the best time and when it was reached, from a run's rows.
    Times are seconds from the run's creation (the browser's Start, or the CLI's run)."""
    run = extracted["run"]
    wall = run["ended_s"]
    improved = extracted["best_improved"]
    final = next((b for b in reversed(improved) if b["time_ms"] == run["best_ms"]), None)
    measured = [n for n in extracted["nodes"] if n["status"]]
    return {
        "status": run["status"], "message": run["message"], "evaluations": run["evaluated"],
        "wall_s": wall, "candidates_per_minute": round(run["evaluated"] / wall * 60, 2) if wall else None,
        "root_ms": run["root_ms"], "best_ms": run["best_ms"], "best_node": run["best_node"],
        "best_found_at_evaluation": run["best_found_at"],
        "best_reached_s": final["s"] if final else None,
        "best_timeline": [[b["s"], b["time_ms"]] for b in improved],
        "first_result_s": min(extracted["evaluated_at_s"], default=None),
        "gpu_seconds": round(run["gpu_seconds"], 2),
        "nodes": {"measured": len(measured),
                  "full": sum(n["level"] == "full" for n in measured),
                  "screen": sum(n["level"] == "screen" for n in measured),
                  "duplicates": sum(n["duplicate_of"] is not None for n in measured),
                  "passed": sum(n["status"] == "passed" for n in measured),
                  "rejected": sum(n["status"] == "rejected" for n in measured),
                  "error": sum(n["status"] == "error" for n in measured)},
    }


def turn_check(turns: list[dict], t0: float) -> dict:
    """Whether two GPU turns on one device ever overlapped, and how busy the device was.

    A turn is [taken, released] as its holder saw it (inside the lock, so inside the
    lock's own window): sorted by when they were taken, a turn that starts before the
    latest release so far on its device overlaps an earlier one."""
    by_device: dict[str, list[dict]] = defaultdict(list)
    for turn in sorted(turns, key=lambda t: t["taken"]):
        by_device[turn["device"]].append(turn)
    overlaps, gaps = [], []
    for device_turns in by_device.values():
        latest = None
        for turn in device_turns:
            if latest is not None:
                gap = turn["taken"] - latest["released"]
                gaps.append(gap)
                if gap < 0:
                    overlaps.append({"device": turn["device"], "first": _short(latest, t0),
                                     "second": _short(turn, t0), "overlap_s": round(-gap, 4)})
            if latest is None or turn["released"] > latest["released"]:
                latest = turn
    held = [t["released"] - t["taken"] for t in turns]
    waited = [t["taken"] - t["asked"] for t in turns]
    span = (max(t["released"] for t in turns) - min(t["taken"] for t in turns)) if turns else 0.0
    return {
        "turns": len(turns), "devices": sorted(by_device), "processes": len({t["pid"] for t in turns}),
        "by_kind": {k: sum(t.get("kind") == k for t in turns) for k in ("evaluate", "screen")},
        "overlaps": len(overlaps), "overlapping": overlaps[:10],
        "most_at_once": most_at_once([(t["taken"], t["released"]) for t in turns]),
        "smallest_gap_s": round(min(gaps), 4) if gaps else None,
        "held_s": round(sum(held), 2), "held_share_of_span": round(sum(held) / span, 3) if span else None,
        "waited_s_total": round(sum(waited), 2), "waited_s_max": round(max(waited), 2) if waited else None,
        "turns_that_waited": sum(w > 0.05 for w in waited),
        "windows": [_short(t, t0) for t in turns],
    }


def screener_starts(starts: list[dict], turns: list[dict], t0: float) -> list[dict]:
    """Each screener's start (its process makes a CUDA context and allocates before its
    first turn is taken): from the start to its own next turn, did another process hold
    a turn on the device? Its CUDA set-up may then have run beside that one's timing."""
    out = []
    for start in starts:
        own_next = min((t["taken"] for t in turns if t["pid"] == start["pid"] and t["taken"] >= start["at"]),
                       default=start["started"])
        beside = [t for t in turns if t["pid"] != start["pid"] and t["device"] == start["device"]
                  and t["taken"] < own_next and t["released"] > start["at"]]
        out.append({"worker": start["worker"], "at_s": round(start["at"] - t0, 3),
                    "own_turn_s": round(own_next - t0, 3),
                    "beside_turns_of": sorted({t["worker"] for t in beside})})
    return out


def _short(turn: dict, t0: float) -> dict:
    return {"worker": turn.get("worker"), "pid": turn["pid"], "kind": turn.get("kind"),
            "candidate": (turn.get("candidate") or "")[:12], "asked_s": round(turn["asked"] - t0, 3),
            "taken_s": round(turn["taken"] - t0, 3), "released_s": round(turn["released"] - t0, 3)}


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans [start, end] open at one instant (an end before a start at a tie)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def evaluation_spans_at_once(extracted: dict) -> int:
    """The most Evaluation rows claimed and not yet finished at once: these include the
    wait for the GPU's turn, so with two workers on one GPU they overlap by design."""
    return most_at_once([(e["claimed_s"], e["finished_s"]) for e in extracted["evaluations"]
                         if e["finished_s"] is not None])


def compare_trees(reference: dict, other: dict) -> dict:
    """Every candidate measured in both runs (by content hash): does the other run judge
    it as the reference did (status and guard), and how far apart are the times?"""
    ref = {n["candidate"]: n for n in reference["nodes"] if n["status"]}
    oth = {n["candidate"]: n for n in other["nodes"] if n["status"]}
    common = sorted(set(ref) & set(oth), key=lambda h: ref[h]["id"])
    disagree, same_level, cross_level = [], [], []
    for digest in common:
        a, b = ref[digest], oth[digest]
        if (a["status"], a["guard"] or "") != (b["status"], b["guard"] or ""):
            disagree.append({"candidate": digest[:12], "title": a["title"],
                             "reference": [a["status"], a["guard"], a["level"]],
                             "other": [b["status"], b["guard"], b["level"]]})
        elif a["time_ms"] and b["time_ms"]:
            diff = {"candidate": digest[:12], "title": a["title"], "levels": [a["level"], b["level"]],
                    "ms": [a["time_ms"], b["time_ms"]],
                    "rel_diff": round(abs(a["time_ms"] - b["time_ms"]) / min(a["time_ms"], b["time_ms"]), 4)}
            (same_level if a["level"] == b["level"] else cross_level).append(diff)
    parents_ref = _parent_hashes(reference["nodes"])
    parents_oth = _parent_hashes(other["nodes"])
    return {
        "reference_measured": len(ref), "other_measured": len(oth), "common": len(common),
        "same_parent": sum(parents_ref.get(h) == parents_oth.get(h) for h in common),
        "verdicts_agree": len(common) - len(disagree), "verdicts_disagree": disagree,
        "time_rel_diff_same_level": _spread(same_level), "time_rel_diff_full_vs_screen": _spread(cross_level),
        "largest_time_diffs": sorted(same_level + cross_level, key=lambda d: -d["rel_diff"])[:5],
        "same_best_candidate": _best(reference) == _best(other),
    }


def _parent_hashes(nodes: list[dict]) -> dict[str, str | None]:
    by_id = {n["id"]: n["candidate"] for n in nodes}
    return {n["candidate"]: by_id.get(n["parent"]) for n in nodes}


def _best(extracted: dict) -> str | None:
    best = extracted["run"]["best_node"]
    return next((n["candidate"] for n in extracted["nodes"] if n["id"] == best), None)


def _spread(diffs: list[dict]) -> dict:
    values = [d["rel_diff"] for d in diffs]
    if not values:
        return {"pairs": 0}
    return {"pairs": len(values), "median": round(statistics.median(values), 4), "max": max(values)}
