"""The `skills` proposal source: skill cards' generalised rewrites, applied to a node's kernel.

Registered by configuration (OPTIML_PROPOSAL_SOURCES, or a search's `sources` argument):
search never imports lineage. For a node, each card whose generalised rewrite matches the
kernel (its structural precondition: the pattern, with its context) is materialised by
instantiating the pattern at every match; the proposal says `skill:<card id>` and cites
the card's evidence. A card that does not match proposes nothing: asking an LLM to
materialise it is the next step, not done here. Every proposal goes through the gate,
like any other.

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

from profiling.harness.candidate import Candidate
from search.engine.diffs import candidate_diff
from search.engine.types import NodeContext, Proposal

from . import antiunify, cards, probes
from .walker import Lineage

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
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

    def __init__(self, cards: list[dict[str, Any]] | None = None) -> None:
        self._cards = cards

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
        for card in self.cards:
            for shown in card.get("anchor", {}).get("rewrites", []):
                if not shown.get("generalised"):
                    continue
                rewrite = _rewrite(shown)
                applied = antiunify.apply_everywhere(rewrite, parent.source) if rewrite else None
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
                    params={"card": card["id"], "pattern": shown["before"]}))
        return proposals


def _rationale(card: dict[str, Any], shown: dict[str, Any]) -> str:
    speed = card["effects"]["speedup"]
    median = f"median {speed['median']:.2f}x" if speed.get("n") else "no measured speed-up"
    return (f"{card['sentence'][:1].upper()}{card['sentence'][1:]}. Seen in "
            f"{card['evidence']['lineages']} lineages ({', '.join(card['scope']['tasks'])}), "
            f"{card['evidence']['transitions']} steps, {median}; this pattern came from "
            f"{shown['edits']} edits in {', '.join(shown['tasks'])}.")


def _rewrite(shown: dict[str, Any]) -> antiunify.Rewrite | None:
    """The card's rewrite, from the pattern trees it stores; None for a card without them."""
    tree = shown.get("tree")
    return antiunify.rewrite_from_dict(tree) if tree else None
