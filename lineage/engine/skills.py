"""The `skills` proposal source: skill cards' generalised rewrites, applied to a node's kernel.

Registered by configuration (OPTIML_PROPOSAL_SOURCES, or a search's `sources` argument):
search never imports lineage. For a node, each card whose generalised rewrite matches the
kernel (its structural precondition: the pattern, with its context) is materialised by
instantiating the pattern at every match; the proposal says `skill:<card id>` and cites
the card's evidence. When an LLM is configured (OPTIML_LLM_*, or given), the cards whose
pattern does not match are handed to it instead, a few a node (the best evidenced first,
each once per kernel): intent, anchor, the steps' diffs, preconditions and risks in the
prompt, and the answer, a full kernel, is a proposal that says `skill:<card id>` and
`materialised_by: llm:<model>`. An unusable answer proposes nothing. Every proposal goes
through the gate, like any other.

The cards come from `cards` (the induced card dicts), or from OPTIML_SKILL_CARDS (a file
`python -m lineage.engine induce` wrote), or, by default, are induced once per process
from the lineages and probes recorded on the H200 under bench/results/.
"""

from __future__ import annotations

import glob
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.diffs import candidate_diff
from search.engine.types import NodeContext, Proposal

from . import antiunify, cards, probes
from .walker import Lineage

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
LLM_CARDS_PER_NODE = 2  # requests a node may cost: the best evidenced unmatched cards
# The search's families a card's intent counts as, for the judge's scoring.
_FAMILIES = {
    "VEC4": ("vectorize",), "RESTRICT": ("restrict",), "FAST_MATH": ("fast_math",),
    "LAUNCH_BOUNDS": ("launch_bounds",), "UNROLL": ("unroll",), "GRID_STRIDE": ("grid_stride",),
    "GRID_STRIDE_ACCUMULATE": ("grid_stride",), "BLOCK_PER_ROW": ("parallelism",),
    "WARP_PER_ROW": ("parallelism",), "WARP_SHUFFLE_REDUCE": ("warp_reduce",),
    "SMEM_TILE": ("tile",), "REG_TILE": ("tile",), "DOUBLE_BUFFER": ("tile",),
    "SMEM_PADDING": ("tile",), "ASYNC_COPY": ("tile",), "TENSOR_CORES": ("tile",),
}


@lru_cache(maxsize=1)
def recorded_cards() -> tuple[dict[str, Any], ...]:
    """The cards induced from the H200 recordings in this tree (once per process)."""
    lineages = [Lineage.from_dict(json.loads(Path(p).read_text()))
                for p in sorted(glob.glob(str(RESULTS / "*-h200-lineages*" / "lineage-*.json")))]
    found: dict[str, list[probes.Probe]] = {}
    for path in sorted(glob.glob(str(RESULTS / "*-h200-probes" / "probes-*.json"))):
        task, _gpu, items = probes.from_dict(json.loads(Path(path).read_text()))
        found.setdefault(task, []).extend(items)
    return tuple(card.to_dict() for card in cards.induce(lineages, found))


def load_cards(path: str | Path) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("format") != cards.CARDS_FORMAT:
        raise ValueError(f"{path}: not a cards file (python -m lineage.engine induce --out)")
    return list(data["cards"])


class SkillSource:
    name = "skills"

    def __init__(self, cards: list[dict[str, Any]] | None = None, llm: Any = None,
                 llm_cards_per_node: int = LLM_CARDS_PER_NODE) -> None:
        self._cards = cards
        self._llm = llm  # None: the endpoint OPTIML_LLM_* configures, if any
        self._llm_checked = llm is not None
        self.llm_cards_per_node = llm_cards_per_node
        self._asked: set[tuple[str, str]] = set()  # (card id, kernel hash) handed to the LLM

    @property
    def llm(self) -> Any:
        if not self._llm_checked:
            self._llm_checked = True
            if os.environ.get("OPTIML_LLM_BASE_URL"):
                from search.engine.judges import LLMConfigError, LLMJudge

                try:
                    self._llm = LLMJudge.from_env()
                except LLMConfigError:
                    self._llm = None  # misconfigured: the patterns alone, as without one
        return self._llm

    @property
    def cards(self) -> list[dict[str, Any]]:
        if self._cards is None:
            path = os.environ.get("OPTIML_SKILL_CARDS")
            self._cards = load_cards(path) if path else list(recorded_cards())
        return self._cards

    def propose(self, context: NodeContext) -> list[Proposal]:
        parent = context.candidate
        proposals: list[Proposal] = []
        seen = {parent.content_hash()}
        matched: set[str] = set()
        parsed = antiunify.Parsed(parent.source)  # once for every card's first match
        for card in self.cards:
            for shown in card.get("anchor", {}).get("rewrites", []):
                if not shown.get("generalised"):
                    continue
                rewrite = _rewrite(shown)
                applied = antiunify.apply_everywhere(rewrite, parent.source, parsed) if rewrite else None
                if applied is None:
                    continue
                child = Candidate.from_dict({**parent.to_dict(), "source": applied.source})
                if child.content_hash() in seen:
                    continue
                seen.add(child.content_hash())
                title = f"{card['intent']}: {shown['before']} -> {shown['after']}"
                proposals.append(Proposal(
                    source=f"skill:{card['id']}", title=title,
                    rationale=_rationale(card, shown), candidate=child,
                    families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
                    params={"card": card["id"], "pattern": shown["before"], "materialised_by": "pattern"}))
                matched.add(card["id"])
        for card in self.cards:
            for step in card.get("anchor", {}).get("steps", []):
                for edits_key in ("edits", "general_edits"):
                    made = apply_step({**step, "edits": step.get(edits_key, [])}, parent.source, parsed)
                    if made is None:
                        continue
                    child = Candidate.from_dict({**parent.to_dict(), "source": made})
                    if child.content_hash() in seen:
                        continue
                    seen.add(child.content_hash())
                    matched.add(card["id"])
                    where = f"{step['task']}'s step from {{{step['before'] or 'the plain attempt'}}}"
                    proposals.append(Proposal(
                        source=f"skill:{card['id']}", title=f"{card['intent']}: {where}",
                        rationale=_rationale(card, None, where), candidate=child,
                        families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
                        params={"card": card["id"], "materialised_by": "step", "step": where,
                                "generalised": edits_key == "general_edits"}))
        if self.llm is not None:
            proposals += self._by_llm(context, [c for c in self.cards if c["id"] not in matched], seen)
        return proposals

    def _by_llm(self, context: NodeContext, unmatched: list[dict[str, Any]],
                seen: set[str]) -> list[Proposal]:
        """The best evidenced cards whose pattern did not match, materialised by the LLM."""
        from search.engine.judges import prompts
        from search.engine.types import JudgeError

        parent = context.candidate
        task = tasks.get(context.task)
        roofline = cards.roofline_class(context.task)
        fitting = [c for c in unmatched if roofline in c["scope"].get("roofline", [])
                   and (c["id"], parent.content_hash()) not in self._asked]
        fitting.sort(key=lambda c: (-c["evidence"]["helped"], c["id"]))
        proposals = []
        for card in fitting[:self.llm_cards_per_node]:
            self._asked.add((card["id"], parent.content_hash()))
            try:
                text = self.llm.ask("skill", materialise_messages(task, parent, card), str)
                child = _read_kernel(text, parent)
            except (JudgeError, prompts.MalformedReply, ValueError):
                continue  # no answer, or not a kernel: nothing proposed (the transcript keeps it)
            if child.content_hash() in seen:
                continue
            seen.add(child.content_hash())
            proposals.append(Proposal(
                source=f"skill:{card['id']}", title=f"{card['intent']} (materialised by {self.llm.name})",
                rationale=_rationale(card, None), candidate=child,
                families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
                params={"card": card["id"], "materialised_by": self.llm.name}))
        return proposals


SYSTEM = ("You are a CUDA performance engineer applying one known optimization, described by "
          "a skill card learned from expert kernels, to a kernel written by someone else. You "
          "keep the kernel correct. Reply with one JSON object and nothing else.")


def materialise_messages(task, parent: Candidate, card: dict[str, Any]) -> list[dict[str, str]]:
    """The request: the card (intent, anchor, one step's diff, preconditions, risks), the
    task's contract (never the reference's code) and the kernel with its plan."""
    from search.engine.judges import prompts

    example = next(iter(card.get("vector", [])), {})
    order = card["preconditions"]["order"]["required"]
    risks = "\n".join(f"- {r['kind']} in {r['task']}" + (f" ({r.get('guard')})" if r.get("guard") else "")
                      for r in card["risks"][:6]) or "- none recorded"
    context = "\n".join(f"- {c['reads']}" for c in card["preconditions"]["context"][:4]) or "- none recorded"
    prompt = "\n\n".join([
        f"Apply this optimization to the kernel below: {card['intent']}: {card['sentence']}.",
        f"Evidence: {card['evidence']['transitions']} steps in {card['evidence']['lineages']} expert "
        f"lineages ({', '.join(card['scope']['tasks'])}), median speed-up "
        f"{card['effects']['speedup'].get('median', 1.0):.2f}x.",
        "Where it acts (anchor): " + ", ".join(card["anchor"].get("kinds", [])[:6]),
        "It needs first: " + (", ".join(f"{k} (in {', '.join(v)})" for k, v in order.items())
                              or "nothing known"),
        f"When it pays:\n{context}",
        f"What went wrong with it:\n{risks}",
        f"One expert's step ({example.get('task', '?')}), as a diff:\n"
        f"```diff\n{example.get('source_diff', '')[:4000]}\n```",
        prompts.task_facts(task),
        f"The kernel:\n```cuda\n{parent.source}\n```",
        f"Its launch plan: {json.dumps(parent.plan_dict(), separators=(',', ':'))}",
        'Reply as {"source": "the FULL new CUDA source", "plan": "optional: changes to the plan '
        '({\"tunables\": {...}}) or the FULL plan", "why": "one sentence"}.',
    ])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def _read_kernel(text: str, parent: Candidate) -> Candidate:
    """The answer as a candidate; ValueError (or MalformedReply) when it is not one."""
    from search.engine.judges import prompts

    from .llm_deopt import _plan

    data = prompts.parse_object(text)
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ValueError("'source' must be the full CUDA source")
    source = prompts.strip_fences(source)
    if "".join(source.split()) == "".join(parent.source.split()):
        raise ValueError("the source is unchanged")
    return Candidate.from_source_and_plan(source, _plan(parent, data.get("plan")))


def apply_step(step: dict[str, Any], source: str, parsed: antiunify.Parsed | None = None) -> str | None:
    """A card step's edits applied together, each at one place, the first it matches (a
    step's edits are one a site: an edit made in two places is two edits); None unless
    the step is complete and every edit matches. `parsed`: `source` parsed already."""
    if not step.get("complete"):
        return None
    for tree in step["edits"]:
        matches = antiunify.apply(antiunify.rewrite_from_dict(tree), source, parsed)
        if not matches:
            return None
        source, parsed = min(matches, key=lambda m: m.start_byte).source, None
    return source


def _rationale(card: dict[str, Any], shown: dict[str, Any] | None, step: str = "") -> str:
    speed = card["effects"]["speedup"]
    median = f"median {speed['median']:.2f}x" if speed.get("n") else "no measured speed-up"
    if shown:
        where = f"this pattern came from {shown['edits']} edits in {', '.join(shown['tasks'])}."
    elif step:
        where = f"this is {step}, all its edits together."
    else:
        where = "no pattern of the card matched here: the LLM applied it."
    return (f"{card['sentence'][:1].upper()}{card['sentence'][1:]}. Seen in "
            f"{card['evidence']['lineages']} lineages ({', '.join(card['scope']['tasks'])}), "
            f"{card['evidence']['transitions']} steps, {median}; {where}")


def _rewrite(shown: dict[str, Any]) -> antiunify.Rewrite | None:
    """The card's rewrite, from the pattern trees it stores; None for a card without them."""
    tree = shown.get("tree")
    return antiunify.rewrite_from_dict(tree) if tree else None
