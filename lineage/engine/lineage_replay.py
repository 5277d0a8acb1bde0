"""A recorded lineage served as an evaluator: the skills' roundtrip rehearsed without a GPU.

A lineage measured every state of an expert's flag lattice on the H200. A search from
the plain attempt whose candidates are states of that lattice (the card steps rebuild
them) can be evaluated by looking the state up: a candidate whose source is, token for
token, a state's plain source and whose launches equal that state's written plan at every
size the task checks *is* that state, and gets the measurement the walk recorded
(labelled replayed). Any other candidate is an error that says it is not a state of the
lineage, never a made-up number (as evaluators.ReplayEvaluator does for recordings).

What this shows: whether the search, with these cards and this budget, finds the path to
the expert. What it cannot: whether a candidate outside the lattice would have been
correct or fast. That is the roundtrip on the GPU (bench/skills_roundtrip.py).
"""

from __future__ import annotations

import dataclasses

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from search.engine.types import Measurement

from . import antiunify
from .experts import Expert
from .steps import same_launches
from .walker import Lineage

NOT_A_STATE = "not a state of the recorded lineage: nothing to replay"


class LineageReplay:
    """types.Evaluator over one lineage's recorded states."""

    def __init__(self, expert: Expert, lineage: Lineage) -> None:
        self.task = tasks.get(lineage.task)
        self.lineage = lineage
        self._states: dict[tuple[str, ...], list[tuple[str, Candidate]]] = {}
        for name, record in lineage.states.items():
            flags = frozenset(f for f in name.split(",") if f)
            if expert.valid(flags) and expert.candidate(flags).content_hash() == record.candidate_hash:
                written = expert.written_candidate(flags)
                self._states.setdefault(antiunify.source_tokens(written.source), []).append((name, written))
        self._done: list[tuple[str, Measurement]] = []
        self.served: dict[str, str] = {}  # candidate hash -> the state it was

    def state_of(self, candidate: Candidate) -> str | None:
        for name, written in self._states.get(antiunify.source_tokens(candidate.source), []):
            if same_launches(candidate.plan_dict(), written.plan_dict(), self.task):
                return name
        return None

    def submit(self, task: str, candidate: Candidate) -> None:
        digest = candidate.content_hash()
        name = self.state_of(candidate) if task == self.lineage.task else None
        if name is None:
            self._done.append((digest, Measurement(status="error", message=NOT_A_STATE, replayed=True)))
            return
        self.served[digest] = name
        recorded = Measurement.from_dict(self.lineage.states[name].measurement)
        self._done.append((digest, dataclasses.replace(recorded, replayed=True)))

    def collect(self, timeout_s: float) -> list[tuple[str, Measurement]]:
        done, self._done = self._done, []
        return done
