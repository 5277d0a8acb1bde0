"""Experts collaborating in text (API experts, or local ones without the latent fusion).

The router picks the active experts. Each peer drafts an approach and a kernel, in
parallel; the primary reads the drafts as thoughts and writes the final kernel. Every
prompt and every draft is kept, so the session shows who contributed what. An expert
that is down or answers nonsense is recorded and skipped; if the primary itself fails,
the first usable draft stands in, and the record says so.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from profiling.harness.spec import Task

from .routing import Routing
from .writing import (
    Draft,
    Written,
    compose_messages,
    first_messages,
    intent_text,
    repair_messages,
    timed,
)


class TextExpert(Protocol):
    name: str

    def write(self, messages: list[dict[str, str]], purpose: str = "write") -> Written: ...


@dataclass
class Step:
    """What one writing round produced: a kernel, or why there is none, and who took part."""

    written: Written | None
    experts: tuple[str, ...]  # who contributed, the one whose kernel it is first
    error: str = ""
    stage: str = ""  # "endpoint" or "reply" when there is no kernel
    drafts: list[Draft] = field(default_factory=list)
    routing: Routing | None = None
    note: str = ""  # e.g. "the primary failed; the draft of X stands in"
    writer: str = ""  # who failed to write, when not simply experts[0] (the fused writer)


class Writer(Protocol):
    name: str

    def first(self, task: Task, intent: str) -> Step: ...

    def repair(self, task: Task, intent: str, previous: Written, feedback: str) -> Step: ...


class TextCollaboration:
    def __init__(self, experts: Mapping[str, TextExpert], router: Any, *, k: int = 3) -> None:
        """`router`: anything with route(text, k) -> Routing (router.Router, or
        routing.ConfiguredOrder where torch is not installed)."""
        self.experts = dict(experts)
        self.router = router
        self.k = k
        self.name = "text"
        self.routing: Routing | None = None

    def first(self, task: Task, intent: str) -> Step:
        routing = self.routing = self.router.route(intent_text(task, intent), self.k)
        messages = first_messages(task, intent)
        peers = [self.experts[name] for name in routing.peers]
        drafts: list[Draft] = []
        if peers:
            with ThreadPoolExecutor(max_workers=len(peers)) as pool:
                results = list(pool.map(lambda e: (e.name, timed(lambda: e.write(messages, "draft"))), peers))
            drafts = [Draft(expert=name, written=w, error=str(failure or ""), seconds=s,
                            prompt=messages[-1]["content"]) for name, (w, failure, s) in results]
        usable = [d for d in drafts if d.written is not None]
        primary = self.experts[routing.primary]
        final = compose_messages(task, intent, usable) if usable else messages
        written, failure, seconds = timed(lambda: primary.write(final, "compose" if usable else "write"))
        error = str(failure or "")
        drafts.append(Draft(expert=primary.name, written=written, error=error, seconds=seconds,
                            prompt=final[-1]["content"]))
        contributors = (routing.primary, *(d.expert for d in usable))
        if written is not None:
            return Step(written, contributors, drafts=drafts, routing=routing)
        if usable:
            stand_in = usable[0]
            return Step(stand_in.written, (stand_in.expert, *(d.expert for d in usable[1:])), drafts=drafts,
                        routing=routing, note=f"the primary {routing.primary} failed ({error}); the draft "
                                              f"of {stand_in.expert} stands in")
        return Step(None, tuple(routing.active), error=error, stage=failure.stage, drafts=drafts,
                    routing=routing)

    def repair(self, task: Task, intent: str, previous: Written, feedback: str) -> Step:
        """The writer of the previous kernel repairs it; if it is down, the next active
        expert does."""
        messages = repair_messages(task, intent, previous, feedback)
        order = list(self.routing.active if self.routing else self.experts)
        author = previous.writer if previous.writer in self.experts else order[0]
        tried: list[Draft] = []
        failure = None
        for name in [author, *(n for n in order if n != author)]:
            written, failure, seconds = timed(lambda name=name: self.experts[name].write(messages, "repair"))
            tried.append(Draft(expert=name, written=written, error=str(failure or ""), seconds=seconds,
                               prompt=messages[-1]["content"]))
            if written is not None:
                return Step(written, (name,), drafts=tried, routing=self.routing)
        return Step(None, tuple(d.expert for d in tried), error=str(failure), stage=failure.stage,
                    drafts=tried, routing=self.routing)


def describe(step: Step) -> dict[str, Any]:
    return {"experts": list(step.experts), "error": step.error, "note": step.note,
            "drafts": [d.to_dict() for d in step.drafts],
            "routing": step.routing.to_dict() if step.routing else None,
            "seconds": round(sum(d.seconds for d in step.drafts), 3), "at": time.time()}
