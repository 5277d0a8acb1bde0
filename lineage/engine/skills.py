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
`python -m lineage.engine induce` wrote), or, by default, are induced from the lineages and
probes recorded on the H200 under bench/results/ (lineage.engine.recorded: once per content
of those recordings and of the code, kept on disk) and read once per process.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from profiling.harness import tasks
from profiling.harness.candidate import Candidate, CandidateError
from search.engine.diffs import candidate_diff
from search.engine.types import NodeContext, Proposal

from . import antiunify, cards, experts, skeleton_cards, skeleton_source
from .recorded import RESULTS, recorded_cards, recorded_lineages  # noqa: F401  (imported from here too)
from .steps import (  # noqa: F401  (imported from here by tests and callers)
    apply_step,
    kernel_key,
    materialise_step,
    recorded_state_key,
    same_launches,
    step_plan,
)

# A card's proposal title starts with its intent ("VEC4: softmax's step from ...").
_INTENT_TITLE = re.compile(r"([A-Z][A-Z0-9_]*)\b")
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


def load_cards(path: str | Path) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("format") != cards.CARDS_FORMAT:
        raise ValueError(f"{path}: not a cards file (python -m lineage.engine induce --out)")
    return list(data["cards"])


class SkillSource:
    name = "skills"

    def __init__(self, cards: list[dict[str, Any]] | None = None, llm: Any = None,
                 llm_cards_per_node: int = LLM_CARDS_PER_NODE, together: bool = True,
                 prune_orders: bool = True, measured_reach: bool = True,
                 skeleton_cards: list[dict[str, Any]] | None = None,
                 leave_out_own: bool | None = None, skeletons: bool | None = None) -> None:
        self._cards = cards
        # Skeleton cards (skeleton_cards.py): a family's schedule for any kernel that lifts
        # to it. None: those induced from the recorded lineages. With `leave_out_own`
        # (or OPTIML_SKILLS_LEAVE_OUT_OWN=1) a node's own task's lineage is not counted.
        self._skeleton_cards = skeleton_cards
        # Whether the recorded skeleton cards join the token cards: yes by default, no when
        # token cards are given (a chosen set), when OPTIML_SKILL_SKELETONS=0, or for replays
        # of runs recorded before skeletons (skeletons=False).
        if skeletons is None:
            skeletons = cards is None and os.environ.get("OPTIML_SKILL_SKELETONS", "1") != "0"
        self.skeletons = skeletons
        self.leave_out_own = (os.environ.get("OPTIML_SKILLS_LEAVE_OUT_OWN") == "1"
                              if leave_out_own is None else leave_out_own)
        # Whether a card's patterns are also proposed all together (_together), and
        # whether the cards' order preconditions prune (_waits); both off to replay the
        # 2026-12-01 H200 roundtrip, which was recorded before they existed.
        self.together = together
        self.prune_orders = prune_orders
        # Whether a step at its own recorded state says what it reaches (Proposal.reaches)
        # and the lineage entry expects its recorded path, not its best first step; off to
        # replay the H200 runs recorded before 2026-12-03.
        self.measured_reach = measured_reach
        self.pruned: list[tuple[str, list[str]]] = []  # (proposal title, intents it needed first)
        self._llm = llm  # None: the endpoint OPTIML_LLM_* configures, if any
        self._llm_checked = llm is not None
        self.llm_cards_per_node = llm_cards_per_node
        self._asked: set[tuple[str, str]] = set()  # (card id, kernel hash) handed to the LLM
        self._reached: dict[str, dict[str, float]] = {}  # task -> state -> best reached (_best_reached)

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
        """The token-level cards; OPTIML_SKILL_CARDS=skeletons keeps the skeleton cards alone
        (no token induction in this process: the first proposal in milliseconds)."""
        if self._cards is None:
            path = os.environ.get("OPTIML_SKILL_CARDS")
            self._cards = [] if path == "skeletons" else load_cards(path) if path else list(recorded_cards())
        return self._cards

    @property
    def skeleton_cards(self) -> list[dict[str, Any]]:
        """The skeleton cards: given, or those induced from the recorded lineages when
        `skeletons` is on (milliseconds: ten plain kernels lifted), those admitted by transfer
        (skeleton_cards.in_library)."""
        if self._skeleton_cards is None:
            self._skeleton_cards = [card for card in skeleton_cards.recorded()
                                    if skeleton_cards.in_library(card)] if self.skeletons else []
        return self._skeleton_cards

    def prepare(self) -> str:
        """Read (or, the first time on a machine, induce) the cards now rather than at the
        first proposal, so that a time-limited search does not spend its time on them;
        what was loaded, for the caller to print."""
        return (f"{len(self.cards)} skill cards and {len(self.skeleton_cards)} admitted skeleton cards "
                "(lineage.engine.skills)")

    def propose(self, context: NodeContext) -> list[Proposal]:
        parent = context.candidate
        proposals: list[Proposal] = []
        here = kernel_key(parent)
        seen = {here}  # kernels proposed here, layout aside
        matched: set[str] = set()
        parsed = antiunify.Parsed(parent.source)  # once for every card's first match
        for card in self.cards:
            for shown in card.get("anchor", {}).get("rewrites", []):
                if not shown.get("generalised") or not shown.get("alone", True):
                    continue  # a pattern of one lineage, or one edit of larger steps only
                rewrite = _rewrite(shown)
                applied = antiunify.apply_everywhere(rewrite, parent.source, parsed) if rewrite else None
                if applied is None:
                    continue
                child = Candidate.from_dict({**parent.to_dict(), "source": applied.source})
                if kernel_key(child) in seen:
                    continue
                seen.add(kernel_key(child))
                title = f"{card['intent']}: {shown['before']} -> {shown['after']}"
                proposals.append(Proposal(
                    source=f"skill:{card['id']}", title=title,
                    rationale=_rationale(card, shown), candidate=child,
                    families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
                    params={"card": card["id"], "pattern": shown["before"], "materialised_by": "pattern"},
                    expected_speedup=_median(card)))
                matched.add(card["id"])
            if self.together:
                child = self._together(card, parent, seen)
                if child is not None:
                    proposals.append(child)
                    matched.add(card["id"])
        task = tasks.get(context.task)
        for card in self.cards:
            for step in card.get("anchor", {}).get("steps", []):
                for edits_key, sites_key in (("edits", "sites"), ("general_edits", "general_sites")):
                    child = materialise_step({**step, "edits": step.get(edits_key, []),
                                              "sites": step.get(sites_key)}, parent, task, parsed)
                    if child is None or kernel_key(child) in seen:
                        continue
                    seen.add(kernel_key(child))
                    matched.add(card["id"])
                    where = f"{step['task']}'s step from {{{step['before'] or 'the plain attempt'}}}"
                    proposals.append(Proposal(
                        source=f"skill:{card['id']}", title=f"{card['intent']}: {where}",
                        rationale=_rationale(card, None, where), candidate=child,
                        families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
                        params={"card": card["id"], "materialised_by": "step", "step": where,
                                "generalised": edits_key == "general_edits",
                                "lineage": step["task"], "before": step["before"],
                                "after": step["after"]},
                        expected_speedup=step.get("speedup") or _median(card),
                        reaches=self._reaches(step, here)))
        waits = self._waits(proposals, context) if self.prune_orders else (lambda card: [])
        kept = []
        for proposal in proposals:
            first = waits(next(c for c in self.cards if c["id"] == proposal.params["card"]))
            if first:
                self.pruned.append((proposal.title, first))
            else:
                kept.append(proposal)
        if self.llm is not None:  # cards that wait are not handed to the LLM either
            unmatched = [c for c in self.cards if c["id"] not in matched and not waits(c)]
            kept += self._by_llm(context, unmatched, seen)
        skeletons = skeleton_source.proposals(self.skeleton_cards, context, seen, kernel_key,
                                              self.leave_out_own)
        return skeletons + kept + self._lineage_entry(context, seen)

    def _reaches(self, step: dict[str, Any], here: tuple[str, str]) -> float | None:
        """For a lineage's step proposed at exactly the state it was recorded from (`here`
        is the parent's kernel key): its measured speed-up times the best its lineage's
        recorded steps reached from the state after it (Proposal.reaches). None for a
        step carried to any other kernel."""
        speedup = step.get("speedup")
        if not self.measured_reach or not speedup or recorded_state_key(step["task"], step["before"]) != here:
            return None
        return float(speedup) * self._best_reached(step["task"]).get(step["after"], 1.0)

    def _best_reached(self, task: str) -> dict[str, float]:
        """For each recorded state of `task`'s lineage (its flags, comma-separated): the
        largest product of measured speed-ups along the recorded steps from it, 1 where
        none is faster. Steps only switch flags on, so the states form a DAG."""
        if task not in self._reached:
            edges: dict[str, list[tuple[float, str]]] = {}
            for card in self.cards:
                for step in card.get("anchor", {}).get("steps", []):
                    if step.get("task") == task and step.get("speedup"):
                        edges.setdefault(step["before"], []).append((float(step["speedup"]), step["after"]))
            best: dict[str, float] = {}

            def reach(state: str) -> float:
                if state not in best:
                    best[state] = 1.0  # a cycle (never recorded) ends here
                    best[state] = max([1.0, *(s * reach(after) for s, after in edges.get(state, ()))])
                return best[state]

            for state in list(edges):
                reach(state)
            self._reached[task] = best
        return self._reached[task]

    def _lineage_entry(self, context: NodeContext, seen: set[tuple[str, str]]) -> list[Proposal]:
        """At the search's root, when the cards hold a lineage of this very task: that
        lineage's plain attempt (every optimization off, as written), the kernel its steps
        replay from. It is no card and generalises nothing: it says `lineage:<task>`, and
        a search whose cards leave the task's lineage out (bench/skills_transfer.py
        --leave-own-out) never gets it. Like any proposal it must pass the gate."""
        if context.history or not any(v.get("task") == context.task
                                      for c in self.cards for v in c.get("vector", [])):
            return []
        try:
            entry = experts.load(context.task).written_candidate(frozenset())
        except (experts.ExpertError, OSError, CandidateError):
            return []  # the lineage's expert is not in this checkout
        if kernel_key(entry) in seen:
            return []
        seen.add(kernel_key(entry))
        steps = sum(1 for c in self.cards for v in c.get("vector", []) if v.get("task") == context.task)
        # What the lineage measured from this very kernel: its first steps (taken from the
        # plain attempt), the children the search will be offered once it is in the tree.
        first = [(c["intent"], float(step["speedup"])) for c in self.cards
                 for step in c.get("anchor", {}).get("steps", [])
                 if step.get("task") == context.task and not step.get("before") and step.get("speedup")]
        best = max(first, key=lambda found: found[1], default=None)
        # What its recorded steps reached from this kernel, the best path's product
        # (toward the expert's time): the expectation the entry is ranked by.
        reached = self._best_reached(context.task).get("", 1.0)
        expected = ((f" Its best first step, {best[0]}, measured {best[1]:.2f}x from this kernel;"
                     if best else "") + f" its recorded steps reached {reached:.2f}x from it.")
        return [Proposal(
            source=f"lineage:{context.task}", title=f"{context.task}'s lineage: its plain attempt",
            rationale=(f"The skill library holds a verified lineage of {context.task} ({steps} "
                       "steps in its cards). This is its plain attempt, every optimization off, "
                       "as a person would write it: the kernel its cards' steps replay from, "
                       f"toward the expert. It replaces this kernel whole; the gate checks it.{expected}"),
            candidate=entry, diff=candidate_diff(context.candidate, entry),
            families=tuple(dict.fromkeys(f for intent, _ in first for f in _FAMILIES.get(intent, ()))),
            params={"lineage": context.task, "state": "", "materialised_by": "lineage"},
            expected_speedup=(reached if self.measured_reach else best[1]) if best else None)]

    def _waits(self, proposals: list[Proposal], context: NodeContext):
        """For a card, the intents it must wait for here (none: it may be proposed): the
        probes showed in this task that its step was refused or did nothing without
        intent Y (its `order.required`), Y is not on the path from the root, and a card
        of Y proposes at this node, so the search can take Y first. The order the
        lineages showed to fail is not tried; the one they showed to work still is."""
        by_id = {c["id"]: c for c in self.cards}
        here = {by_id[p.params["card"]]["intent"] for p in proposals if p.params.get("card") in by_id}
        done = {m.group(1) for title in context.history if (m := _INTENT_TITLE.match(title))}

        def waits(card: dict[str, Any]) -> list[str]:
            required = card.get("preconditions", {}).get("order", {}).get("required", {})
            return sorted(y for y, where in required.items()
                          if context.task in where and y in here and y not in done)
        return waits

    def _together(self, card: dict[str, Any], parent: Candidate,
                  seen: set[tuple[str, str]]) -> Proposal | None:
        """The card's generalised patterns all made, each wherever it matches: how a
        card whose steps were several edits (restrict on the inputs and on the output, a
        float4 type and its loads) is materialised whole, in one proposal. Only for cards
        with a pattern that never was a whole step alone (those are not proposed one by
        one: half of a step is seldom a kernel)."""
        shown_all = [r for r in card.get("anchor", {}).get("rewrites", []) if r.get("generalised")]
        if not any(not r.get("alone", True) for r in shown_all):
            return None
        source, used = parent.source, []
        for shown in shown_all:
            rewrite = _rewrite(shown)
            applied = antiunify.apply_everywhere(rewrite, source) if rewrite else None
            if applied is not None:
                source, used = applied.source, [*used, shown["before"]]
        if not used:
            return None
        child = Candidate.from_dict({**parent.to_dict(), "source": source})
        if kernel_key(child) in seen:
            return None
        seen.add(kernel_key(child))
        learned = sorted({t for r in shown_all for t in r["tasks"]})
        where = f"{len(used)} patterns together ({', '.join(learned)})"
        return Proposal(
            source=f"skill:{card['id']}", title=f"{card['intent']}: its {where}",
            rationale=_rationale(card, None, f"the card's {where}"), candidate=child,
            families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
            params={"card": card["id"], "patterns": used, "materialised_by": "patterns"},
            expected_speedup=_median(card))

    def _by_llm(self, context: NodeContext, unmatched: list[dict[str, Any]],
                seen: set[tuple[str, str]]) -> list[Proposal]:
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
            if kernel_key(child) in seen:
                continue
            seen.add(kernel_key(child))
            proposals.append(Proposal(
                source=f"skill:{card['id']}", title=f"{card['intent']} (materialised by {self.llm.name})",
                rationale=_rationale(card, None), candidate=child,
                families=_FAMILIES.get(card["intent"], ()), diff=candidate_diff(parent, child),
                params={"card": card["id"], "materialised_by": self.llm.name},
                expected_speedup=_median(card)))
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


def _median(card: dict[str, Any]) -> float | None:
    """The card's median measured speed-up (None: never measured), what its proposals
    expect: the judge weighs it into their prior (rules.evidence_weight)."""
    speed = card["effects"]["speedup"]
    return speed.get("median") if speed.get("n") else None


def _rewrite(shown: dict[str, Any]) -> antiunify.Rewrite | None:
    """The card's rewrite, from the pattern trees it stores; None for a card without them."""
    tree = shown.get("tree")
    return antiunify.rewrite_from_dict(tree) if tree else None
