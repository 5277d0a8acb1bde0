"""What a routing decision is, and the configured order: no torch needed (API experts
route by the configured order until the trained router of `router.py` exists)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Routing:
    active: tuple[str, ...]  # best first; active[0] is the primary
    scores: dict[str, float]
    by: str  # how the choice was made, in words

    @property
    def primary(self) -> str:
        return self.active[0]

    @property
    def peers(self) -> tuple[str, ...]:
        return self.active[1:]

    def to_dict(self) -> dict[str, Any]:
        return {"active": list(self.active), "primary": self.primary,
                "scores": {k: round(v, 4) for k, v in self.scores.items()}, "by": self.by}


class ConfiguredOrder:
    """The top-K in the configured order, saying why."""

    def __init__(self, experts: list[str], why: str = "the configured order") -> None:
        if not experts:
            raise ValueError("a router needs at least one expert")
        self.experts, self.why = list(experts), why

    def route(self, text: str, k: int) -> Routing:
        k = max(1, min(k, len(self.experts)))
        scores = {name: 1.0 - i / len(self.experts) for i, name in enumerate(self.experts)}
        return Routing(tuple(self.experts[:k]), scores, self.why)
