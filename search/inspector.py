"""Reads for the node inspector: one node with its evidence, diffs and roofline.

Everything comes from rows already stored: the node (RunNode), its kernel (Candidate),
and the verdict the gate gave it (kept in the node's measurement, which is also what an
imported run has; the Evaluation row otherwise). A node only the screen measured has the
screen's verdict there (correctness records and time, no profile, no .ncu-rep) and no
Evaluation row: it says so in its `level`. What is shown may come from an imported file;
what is served from this host's disk (the .ncu-rep) comes only from an Evaluation row.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from django.conf import settings

from profiling.harness import profile
from profiling.harness.ceilings import ceilings_for
from profiling.models import Candidate, Evaluation
from search.engine.evaluators import screened_faster_note
from search.models import Run, RunNode

LEVEL_LABELS = {"full": "full gate", "screen": "screened (not profiled)"}
REPORT_SUFFIX = ".ncu-rep"  # what the gate's profile step writes (profiling/harness/gate.py)


def node_row(node: RunNode) -> dict[str, Any]:
    """The flat {id, parentId} row the browser stratifies into a tree."""
    return {"id": node.node_id, "parentId": node.parent_id, "state": node.state,
            "source": node.source, "title": node.title, "status": node.status,
            "guard": node.guard, "level": node.level, "time_ms": node.time_ms, "spread_ms": node.spread_ms,
            "reward": node.reward, "visits": node.visits, "value": node.value, "prior": node.prior}


def skill_card_url(node: RunNode) -> str | None:
    """A node a skill card made ("skill:<card id>") links to its card, in the library its
    run used (params.card_version.library: "default" or "team:<id>"); search knows the
    convention, not the lineage app."""
    if not node.source.startswith("skill:"):
        return None
    url = f"/api/skills/{node.source.removeprefix('skill:')}/"
    library = (((node.detail or {}).get("params") or {}).get("card_version") or {}).get("library", "")
    team = library.removeprefix("team:") if library.startswith("team:") else ""
    return f"{url}?team={team}" if team.isdigit() else url


def node_detail(*, run: Run, node: RunNode, url: str) -> dict[str, Any]:
    """Everything the inspector shows. `source` here is the kernel's CUDA source; who
    proposed the node (the row's `source`) is `proposer`. `url` is the node's own API
    address, under which its .ncu-rep is served when there is one."""
    detail = node.detail or {}
    measurement = dict(detail.get("measurement") or {})
    verdict = measurement.pop("verdict", None) or (node.evaluation.verdict if node.evaluation else None) or {}
    profile = verdict.get("profile") or {}
    return {
        **node_row(node),
        "proposer": node.source,
        "skill_card_url": skill_card_url(node),
        "rationale": node.rationale,
        "diff": node.diff,
        "diff_vs_root": kernel_diff(run.root_candidate, node.candidate, to_label=f"node {node.node_id}"),
        "source": node.candidate.source,
        "plan": node.candidate.plan,
        "candidate_hash": node.candidate.content_hash,
        "families": detail.get("families", []),
        "params": detail.get("params", {}),
        "evaluation_index": detail.get("evaluation_index"),
        "reused": detail.get("reused", False),
        "duplicate_of": detail.get("duplicate_of"),
        "level_label": LEVEL_LABELS.get(node.level, ""),
        "promoted_from_screen": measurement.get("screen"),
        # A node only the screen measured, faster than the run's best: why it is not the best.
        "screen_note": screened_faster_note(node.time_ms, run.best_ms)
        if node.level == "screen" and node.status == "passed" else None,
        "measurement": measurement or None,
        "diagnosis": detail.get("diagnosis"),
        "judge_error": detail.get("judge_error"),
        "deltas_vs_parent": detail.get("deltas_vs_parent", {}),
        "deltas_vs_root": detail.get("deltas_vs_root", {}),
        "reward_terms": detail.get("reward_terms", {}),
        "compile": _compile(verdict.get("compile")),
        "correctness": verdict.get("correctness") or [],
        "timing": verdict.get("timing"),
        # Where the verified timed runs' references were computed (profiling/harness/gpuref.py);
        # empty for verdicts from before it was recorded, and on the host.
        "references": (verdict.get("environment") or {}).get("references") or None,
        # Where the correctness checks' inputs were drawn (profiling/harness/inputs.py:
        # generated_on_gpu); empty for verdicts from before it was recorded.
        "inputs": (verdict.get("environment") or {}).get("inputs") or None,
        "profile": ({key: profile.get(key) for key in ("metrics", "bottleneck", "evidence")}
                    if profile else None),
        "roofline": roofline(run=run, node=node, verdict=verdict),
        "ncu_report_url": f"{url}ncu-report/" if ncu_report_path(run=run, node=node) else None,
    }


def kernel_diff(before: Candidate, after: Candidate, *, to_label: str) -> str:
    """Unified diff of source and launch plan, as one text each."""
    return source_plan_diff(before.source, before.plan, after.source, after.plan,
                            from_label="node 0 (root)", to_label=to_label)


def source_plan_diff(before_source: str, before_plan: Any, after_source: str, after_plan: Any, *,
                     from_label: str, to_label: str) -> str:
    """Unified diff of two kernels, each its source then its launch plan (sorted JSON)."""
    return "".join(difflib.unified_diff(_kernel_lines(before_source, before_plan),
                                        _kernel_lines(after_source, after_plan),
                                        fromfile=from_label, tofile=to_label))


def _kernel_lines(source: str, plan: Any) -> list[str]:
    text = json.dumps(plan, indent=2, sort_keys=True)
    return f"{source.rstrip()}\n\n// launch plan\n{text}\n".splitlines(keepends=True)


def _compile(compiled: dict | None) -> dict | None:
    if not compiled:
        return None
    # The cubin's path on the worker means nothing in a browser.
    return {key: compiled.get(key) for key in ("ok", "seconds", "cached", "kernels", "errors", "log")}


def roofline(*, run: Run, node: RunNode, verdict: dict) -> dict[str, Any]:
    """Where the node sits under the ceilings of the GPU that measured it: the task's
    useful FLOPs and bytes (the gate's formulas, at the full size) over the node's median
    time, against that GPU's datasheet peaks (profiling.harness.ceilings, the table the
    physics floor reads: one source of ceilings per GPU, so no honest kernel shows over
    100 %). No ceilings for a GPU the table does not know."""
    timing = verdict.get("timing") or {}
    flops = timing.get("flops") or run.task.flops or None
    moved = timing.get("bytes") or run.task.bytes or None
    seconds = node.time_ms / 1e3 if node.time_ms else None
    metrics = (verdict.get("profile") or {}).get("metrics") or {}
    gpu = (verdict.get("environment") or {}).get("gpu") or ""
    peaks = ceilings_for(gpu) if gpu else None
    compute = peaks.fp32_core_flops_per_s if peaks else None
    return {
        "flops": flops, "bytes": moved, "time_ms": node.time_ms, "gpu": gpu or None,
        "intensity": flops / moved if flops and moved else None,  # FLOP per byte
        "achieved_flops_per_s": flops / seconds if flops and seconds else None,
        "achieved_bytes_per_s": moved / seconds if moved and seconds else None,
        "dram_bytes_measured": metrics.get("dram_bytes"),  # what ncu counted, if profiled
        # L1, L2 and DRAM from the node's own counters and ceilings, if it was profiled
        # with them (profile.hierarchical_roofline)
        "measured": profile.hierarchical_roofline(metrics) if metrics else None,
        "ceilings": {"dram_bytes_per_s": peaks.dram_bytes_per_s, "fp32_flops_per_s": compute,
                     "ridge_intensity": compute / peaks.dram_bytes_per_s,
                     "source": f"{peaks.source} (fp32 on the CUDA cores)"} if peaks and compute else None,
    }


def ncu_report_path(*, run: Run, node: RunNode) -> Path | None:
    """The node's Nsight Compute report: the file that our gate's verdict, stored on the
    node's own Evaluation row, names. Never a path from the node's `detail`: an imported
    trajectory writes that, and could name any file (other people's kernels, logs and
    reports live in the same OPTIML_WORKDIR). So an imported node, a screened one (the
    screen never profiles) and a recorded verdict (measured on another host) have none;
    and even the gate's path is served only as a .ncu-rep inside OPTIML_WORKDIR."""
    evaluation = node.evaluation
    if run.imported or node.level == "screen" or evaluation is None:
        return None
    if (evaluation.source != Evaluation.Source.GATE or evaluation.candidate_id != node.candidate_id
            or evaluation.task_id != run.task_id):
        return None
    named = ((evaluation.verdict or {}).get("profile") or {}).get("report_path")
    if not isinstance(named, str) or not named or "\x00" in named:
        return None
    workdir = Path(settings.OPTIML_WORKDIR).resolve()
    path = Path(named).resolve()
    if path.suffix != REPORT_SUFFIX or not path.is_relative_to(workdir) or not path.is_file():
        return None
    return path
