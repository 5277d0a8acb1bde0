"""What the LLM judge asks, and the strict reading of what it answers.

Prompts carry the numbers (source, launch plan, ptxas resources, ncu metrics), never
our conclusions alone, so the model can disagree with the rules. Replies are JSON
objects; anything outside the schema is a MalformedReply, which the judge retries.
"""

from __future__ import annotations

import json
from typing import Any

from profiling.harness.spec import Task, TensorSpec

from ..types import FAMILIES, Diagnosis, NodeContext
from .rules import BOTTLENECKS

SYSTEM = (
    "You are a CUDA performance engineer. You judge kernels measured on an NVIDIA H200 "
    "(sm_90, 132 SMs, 4.8 TB/s HBM3e) from their Nsight Compute metrics. Time comes from "
    "CUDA events; ncu metrics explain it. Reply with one JSON object and nothing else."
)

WRITER = (
    "You are a CUDA performance engineer. You write kernels for an NVIDIA H200 (sm_90, "
    "132 SMs, 4.8 TB/s HBM3e) that a strict gate checks for correctness against a "
    "reference and then times. Reply with one JSON object and nothing else."
)

FAMILY_HELP = (
    "vectorize: wider loads/stores (float4); coalesce: contiguous accesses across a warp; "
    "grid_stride: fewer, longer-lived threads; tile: reuse through shared memory or "
    "registers; unroll: instruction-level parallelism; occupancy: more resident warps "
    "(block size, registers, shared memory); parallelism: more threads or blocks for the "
    "work; warp_reduce: shuffles instead of shared-memory trees; restrict: const "
    "__restrict__ pointers; launch_bounds: register budget matched to the block size; "
    "fast_math: cheaper transcendentals; fusion: fewer launches and DRAM round trips"
)

CANDIDATE_RULES = (
    "A candidate is CUDA source plus a launch plan. Kernels must be extern \"C\". The plan "
    "is {\"launches\": [{\"kernel\", \"grid\", \"block\", \"args\", \"shared_bytes\"}], "
    "\"scratch\": [{\"name\", \"dtype\", \"count\"}], \"compile_options\": [...], "
    "\"tunables\": {NAME: int}}; grid, block and shared_bytes are expressions over the "
    "task's sizes and the tunables (cdiv(a, b) rounds up); each tunable is also defined "
    "for nvcc as -DNAME=value. Keep the kernel's results identical within the task's "
    "tolerance: every output element written, inputs never modified."
)


class MalformedReply(ValueError):
    """The reply is not the JSON object we asked for; the message says what is wrong."""


def diagnose_messages(context: NodeContext) -> list[dict[str, str]]:
    facts = _facts(context)
    ask = {
        "bottleneck": f"one of {list(BOTTLENECKS)}",
        "summary": "one or two plain sentences",
        "evidence": ["each line cites a metric, its value and the threshold you compare it to"],
        "wants": f"families that would help, best first, a subset of {list(FAMILIES)}",
    }
    prompt = (f"Diagnose this kernel's bottleneck.\n\n{facts}\n\nFamilies: {FAMILY_HELP}.\n\n"
              f"Answer with JSON of this shape: {json.dumps(ask)}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def propose_messages(context: NodeContext, diagnosis: Diagnosis, k: int) -> list[dict[str, str]]:
    facts = _facts(context)
    shape = {"proposals": [{
        "title": "short imperative title", "rationale": "why this addresses the diagnosis",
        "families": f"subset of {list(FAMILIES)}", "source": "the FULL new CUDA source",
        "plan": "optional: the FULL new launch plan, when it changes",
        "confidence": "optional: 0..1, how likely this is faster",
    }]}
    tried = "; ".join(context.history) or "nothing yet"
    fast_math = "allowed" if context.tolerance_allows_fast_math else "NOT allowed"
    prompt = (
        f"Propose up to {k} changes to this kernel, best first, each a complete new "
        f"candidate.\n\n{facts}\n\nDiagnosis: {json.dumps(diagnosis.to_dict())}\n"
        f"Already tried on this path: {tried}\nFast math: {fast_math} by the tolerance.\n\n"
        f"{CANDIDATE_RULES}\n\nFamilies: {FAMILY_HELP}.\n\n"
        f"Answer with JSON of this shape: {json.dumps(shape)}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def write_messages(task: Task, intent: str) -> list[dict[str, str]]:
    """Ask for a first kernel from the user's words and the task's contract."""
    shape = {"title": "short title", "rationale": "the approach in two or three sentences",
             "source": "the FULL CUDA source", "plan": "the FULL launch plan"}
    prompt = (
        f"Write a fast, correct CUDA kernel for this task, as the user describes it.\n\n"
        f"The user's intent: {intent.strip()}\n\n{task_facts(task)}\n\n{CANDIDATE_RULES}\n\n"
        f"Answer with JSON of this shape: {json.dumps(shape)}"
    )
    return [{"role": "system", "content": WRITER}, {"role": "user", "content": prompt}]


def task_facts(task: Task) -> str:
    """The contract a kernel must meet: tensors, sizes, tolerance; never a reference's code."""
    def tensors(specs: tuple[TensorSpec, ...]) -> str:
        return ", ".join(f"{t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]" for t in specs)

    tolerances = {t.dtype: task.tolerance_for(t.dtype) for t in task.outputs}
    return "\n".join([
        f"Task: {task.name}: {task.description}",
        f"Inputs (read-only): {tensors(task.inputs)}",
        f"Outputs (every element must be written): {tensors(task.outputs)}",
        f"Timed sizes: {json.dumps(task.sizes)}; also checked at small odd sizes such as "
        f"{json.dumps(task.l0_sizes[0]) if task.l0_sizes else 'none'}",
        "Tolerance: " + "; ".join(f"{d}: |out - ref| <= {t.atol:g} + {t.rtol:g} * |ref|"
                                  for d, t in tolerances.items()),
        "Arguments a plan may pass: tensor names (device pointers), size names (int32, or "
        "'i64:<expr>'), 'f32:<number>'.",
    ])


def to_written_kernel(text: str) -> dict[str, Any]:
    """The written kernel's fields; the candidate itself is checked when it is built."""
    data = parse_object(text)
    if not isinstance(data.get("source"), str) or not data["source"].strip():
        raise MalformedReply("'source' must be the full CUDA source, a non-empty string")
    if not isinstance(data.get("plan"), dict):
        raise MalformedReply("'plan' must be the full launch plan, a JSON object")
    return data


def _facts(context: NodeContext) -> str:
    """The kernel and its measurement, compact: rounded metrics, ptxas resources only."""
    m = context.measurement
    parts = [f"Task: {context.task}", f"CUDA source:\n```cuda\n{context.candidate.source}\n```",
             f"Launch plan: {json.dumps(context.candidate.plan_dict(), separators=(',', ':'))}"]
    if m is None:
        return "\n".join([*parts, "Not measured yet."])
    parts.append(f"Gate status: {m.status}" + (f" (guard {m.guard}: {m.message})" if m.guard else ""))
    if m.time_ms is not None:
        parts.append(f"Time: {m.time_ms:.4g} ms median (+- {m.spread_ms or 0:.2g} ms)")
    kernels = ((m.verdict or {}).get("compile") or {}).get("kernels") or []
    if kernels:
        keep = ("kernel", "registers", "spill_store_bytes", "spill_load_bytes", "shared_static_bytes")
        parts.append(f"ptxas: {json.dumps([{k: r.get(k) for k in keep} for r in kernels])}")
    if m.metrics:
        compact = {k: float(f"{v:.4g}") for k, v in sorted(m.metrics.items())}
        parts.append(f"ncu metrics: {json.dumps(compact, separators=(',', ':'))}")
    elif context.profiled_ancestor is not None:
        node_id, ancestor = context.profiled_ancestor
        level = "screened (fewer seeds and runs), not profiled" if m.level == "screen" else "not profiled"
        parts.append(f"This kernel was {level}. Its nearest profiled ancestor, node {node_id}, was "
                     f"diagnosed: {json.dumps(ancestor.to_dict(), separators=(',', ':'))}")
    if m.bottleneck:
        parts.append(f"Rule classifier's class: {m.bottleneck}")
    return "\n".join(parts)


def parse_object(text: str) -> dict[str, Any]:
    """The reply as a JSON object. Code fences are tolerated: some endpoints add them
    even in JSON mode."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedReply(f"reply is not JSON ({exc.msg} at char {exc.pos}): {text[:80]!r}") from exc
    if not isinstance(data, dict):
        raise MalformedReply(f"reply is JSON but not an object: {type(data).__name__}")
    return data


def to_diagnosis(text: str, source: str) -> Diagnosis:
    data = parse_object(text)
    bottleneck, summary = data.get("bottleneck"), data.get("summary")
    evidence, wants = data.get("evidence", []), data.get("wants", [])
    if bottleneck not in BOTTLENECKS:
        raise MalformedReply(f"bottleneck {bottleneck!r} is not one of {', '.join(BOTTLENECKS)}")
    if not isinstance(summary, str) or not summary.strip():
        raise MalformedReply("summary must be a non-empty string")
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise MalformedReply("evidence must be a list of strings")
    if not isinstance(wants, list) or not all(isinstance(w, str) for w in wants):
        raise MalformedReply("wants must be a list of family names")
    unknown = [w for w in wants if w not in FAMILIES]
    if unknown:
        raise MalformedReply(f"wants names unknown families: {', '.join(unknown)}")
    return Diagnosis(bottleneck, summary.strip(), tuple(evidence), tuple(dict.fromkeys(wants)), source)


def to_proposal_items(text: str) -> list[dict[str, Any]]:
    """The list of raw proposals. Only the envelope is checked here; each item is
    checked (and dropped with a reason) when it is materialised."""
    items = parse_object(text).get("proposals")
    if not isinstance(items, list):
        raise MalformedReply("'proposals' must be a list")
    if not all(isinstance(item, dict) for item in items):
        raise MalformedReply("each proposal must be a JSON object")
    return items


def strip_fences(source: str) -> str:
    """Models often wrap code in ```cuda fences inside the JSON string."""
    body = source.strip()
    if not (body.startswith("```") and body.endswith("```")):
        return source
    body = body.split("\n", 1)[1] if "\n" in body else ""
    return body.rsplit("```", 1)[0]
