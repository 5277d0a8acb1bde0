"""Ask/tell Monte Carlo Tree Search over kernel variants (OptiML-X).

    search = Search("relu", naive, judge=RuleJudge(), sources=[TunableSource()],
                    fallback_judge=RuleJudge(), config=SearchConfig(seed=0))
    for node_id, candidate in search.ask(4):          # hand these to any worker
        evaluator.submit("relu", candidate)
    for candidate_hash, measurement in evaluator.collect(timeout_s=60):
        search.tell(candidate_hash, measurement)      # the run advances as results arrive

The search owns the tree, the seeded RNG and the bookkeeping; the domain enters through
the Judge and ProposalSource protocols (types.py). A failed candidate is a node whose
measurement says so, with a fixed negative reward, never an exception. `to_dict()` holds
the whole state (RNG included) as JSON-safe data; `Search.from_dict` resumes it exactly.
The same state comes in two parts for a store that keeps nodes as rows: `header()` (all
but the nodes) and each node's to_dict(), of which `tree.take_changed()` names the ones
that changed; `Search.from_parts(header, nodes)` resumes from them.
`run_search` is the loop for one process (the CLI and tests); the web layer drives
ask/tell itself from stored results.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiling.harness.candidate import Candidate

from . import mcts
from .binaries import measured_binary
from .reward import PROXY_WEIGHTS, Guardrails, ratios, reward
from .tree import DONE, Node, Tree, Untried
from .types import (
    Diagnosis,
    Evaluator,
    Judge,
    JudgeError,
    Measurement,
    NodeContext,
    Proposal,
    ProposalSource,
)

STATE_VERSION = 1
EventSink = Callable[[str, dict[str, Any]], None]
BinaryOf = Callable[[Candidate], str | None]  # what a candidate compiles to (binaries.py)


@dataclass(frozen=True)
class SearchConfig:
    """Budget, seed and the search's constants (their sources are in mcts.py and reward.py)."""

    budget: int = 30  # evaluations, the root's included
    seed: int = 0
    c_puct: float = 1.25
    c_puct_base: float = 19652.0
    widening_c: float = 2.0
    widening_alpha: float = 0.5
    virtual_loss: float = 1.0
    discount: float = 1.0
    max_depth: int = 8  # nodes this deep are evaluated but not refined further
    guardrails: Guardrails = field(default_factory=Guardrails)
    # How much of the gain measured reachable from this very kernel (Proposal.reaches) a
    # node's return counts before any child repeats the measurement (Search._lookahead);
    # 0: a node's return is its reward alone, as before 2026-12-03.
    lookahead: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchConfig:
        # A state saved before the lookahead existed goes on as it started: without it.
        return cls(**{"lookahead": 0.0, **data, "guardrails": Guardrails(**data.get("guardrails", {}))})

    def widening(self) -> dict[str, float]:
        return {"widening_c": self.widening_c, "widening_alpha": self.widening_alpha,
                "virtual_loss": self.virtual_loss}


class Search:
    """The tree, the RNG and the protocol objects that fill it; see the module docstring."""

    def __init__(self, task: str, root: Candidate, *, judge: Judge,
                 sources: Sequence[ProposalSource] = (), config: SearchConfig | None = None,
                 fallback_judge: Judge | None = None, root_title: str = "starting kernel",
                 tolerance_allows_fast_math: bool = False,
                 known: dict[str, Measurement] | None = None,
                 root_proposal: Proposal | None = None,
                 binary_sizes: Sequence[dict[str, int]] | None = None) -> None:
        self.task = task
        self.config = config or SearchConfig()
        self.judge = judge
        self.fallback_judge = fallback_judge
        self.sources = list(sources)
        self.tolerance_allows_fast_math = tolerance_allows_fast_math
        self.rng = np.random.default_rng(self.config.seed)
        # The root says who wrote it: "root" for a given kernel, the writer's name (an
        # LLM's, say) for one written from an intent.
        if root_proposal is not None and root_proposal.candidate != root:
            raise ValueError("root_proposal must carry the root candidate")
        self.tree = Tree.with_root(root_proposal or Proposal(
            source="root", title=root_title, rationale="the kernel the search starts from",
            candidate=root))
        self.evaluations = 0
        # Measurements of kernels by content hash, from this run and any given as `known`
        # (measured earlier for the same task and GPU): a kernel is never measured twice.
        self.known: dict[str, Measurement] = dict(known or {})
        self._given = set(self.known)  # measured elsewhere: the state keeps these itself
        self._issued: set[int] = set()  # pending nodes handed out since this object was made
        self._events: list[tuple[str, dict[str, Any]]] = []
        # The sizes the gate runs kernels at (the task's L0 and L1), for telling which nodes
        # run the same binary (binaries.py); None: every node is refined as its own kernel.
        self.binary_sizes = [dict(s) for s in binary_sizes] if binary_sizes else None
        self.binaries: dict[str, int] = {}  # binary -> the smallest node id that runs it

    # -- ask / tell ------------------------------------------------------------------

    def ask(self, n: int = 1) -> list[tuple[int, Candidate]]:
        """Up to n (node id, candidate) pairs to evaluate. Pending nodes not yet handed out
        by this object (after a restart, say) come first; then new children by select and
        expand. Fewer than n (even none) when nothing more can be expanded until results
        arrive."""
        asked = [node for node in self.tree.pending() if node.id not in self._issued][:n]
        while len(asked) < n:
            node_id = mcts.select(self.tree, self.rng, c_puct=self.config.c_puct,
                                  c_puct_base=self.config.c_puct_base, **self.config.widening())
            if node_id is None:
                break
            child_id = mcts.expand(self.tree, node_id, **self.config.widening())
            if child_id is None:
                continue  # its untried proposals were all duplicates; select again
            child = self.tree[child_id]
            self._emit("node_added", child.row())
            if child.candidate_hash in self.known:
                self._complete(child, self.known[child.candidate_hash], reused=True)
                continue
            asked.append(child)
        self._issued.update(node.id for node in asked)
        return [(node.id, node.proposal.candidate) for node in asked]

    def tell(self, candidate_hash: str, measurement: Measurement) -> int | None:
        """Record a measurement; returns the node it completed, or None when no pending node
        holds that kernel (a repeated or stale message changes nothing)."""
        node_id = self.tree.find(candidate_hash)
        if node_id is None or self.tree[node_id].done:
            return None
        self.evaluations += 1
        self.known[candidate_hash] = measurement
        self._complete(self.tree[node_id], measurement, reused=False)
        return node_id

    def in_flight(self) -> list[int]:
        """Pending nodes handed out for evaluation and not yet told."""
        return sorted(node_id for node_id in self._issued if not self.tree[node_id].done)

    def release(self, node_ids: Iterable[int]) -> None:
        """Hand these pending nodes out again at the next ask (their evaluation was lost,
        or could not be made yet)."""
        self._issued.difference_update(node_ids)

    def pop_events(self) -> list[tuple[str, dict[str, Any]]]:
        """Events since the last call: ("node_added" | "node_evaluated" | "best_improved", data)."""
        events, self._events = self._events, []
        return events

    # -- what happens when a node is done -----------------------------------------------

    def _complete(self, node: Node, measurement: Measurement, *, reused: bool) -> None:
        self.tree.touch(node.id)
        node.state, node.measurement, node.reused = DONE, measurement, reused
        node.evaluation = None if reused else self.evaluations
        self._note_binary(node)
        self._score(node)
        if node.duplicate_of is not None:
            node.diagnosis = _duplicate_diagnosis(node.duplicate_of)
        elif node.passed and node.depth < self.config.max_depth:
            node.diagnosis, items = self._consult(node)
            node.add_untried(items)
        elif not node.passed:
            node.diagnosis = _failure_diagnosis(measurement)
        mcts.backpropagate(self.tree, node.id, node.reward + self._lookahead(node),
                           discount=self.config.discount)
        self._emit("node_evaluated", {**node.row(), "reward_terms": dict(node.reward_terms)})
        self._update_best(node)

    def tell_binary(self, candidate_hash: str, binary: str) -> int | None:
        """Before its evaluation, the binary a pending node compiled to (binaries.binary_key,
        compiled ahead on a CPU). When a node with a smaller id runs the same binary,
        returns that node's id, and once it is measured this node is done as its
        duplicate: its measurement reused (no evaluation spent), never refined,
        `duplicate_of` naming it; until then it waits (evaluating it would measure the same
        program twice). None: no smaller node runs it, and the node is evaluated as any
        other. The smallest id is the rule, not the first told, so that workers that
        compile in any order agree without asking the search (search.node_services)."""
        node_id = self.tree.find(candidate_hash)
        if node_id is None or self.tree[node_id].done:
            return None
        node = self.tree[node_id]
        if node.binary != binary:
            node.binary = binary
            self.tree.touch(node_id)
        first = min(self.binaries.get(binary, node_id), node_id)
        self.binaries[binary] = first
        if first == node_id:
            return None
        twin = self.tree[first]
        if twin.done and twin.measurement is not None:
            node.duplicate_of = first
            self._complete(node, twin.measurement, reused=True)
        return first

    def _note_binary(self, node: Node) -> None:
        """Note the measured node's binary. When a node with a smaller id runs it, this one
        is its duplicate and is not refined."""
        if self.binary_sizes is None or node.measurement is None:
            return
        if node.binary is None:
            node.binary = measured_binary(node.proposal.candidate, node.measurement, self.binary_sizes)
        if node.binary is None:
            return
        first = min(self.binaries.get(node.binary, node.id), node.id)
        self.binaries[node.binary] = first
        if first != node.id:
            node.duplicate_of = first

    def _lookahead(self, node: Node) -> float:
        """What the node's return counts beyond its own reward: `lookahead` times the log
        of the best speed-up measured reachable from this very kernel through one of its
        proposals (Proposal.reaches: a lineage's recorded path from the state the node
        is). A value estimate at the leaf, as AlphaZero's value network gives one, but
        from measurements only, never from a guess. Without it a lineage's plain attempt,
        as slow as or slower than the kernel it replaces (conv2d's: 2.23 ms for 2.23;
        self_attention's: 170 ms for 42), returns one of the worst values in the tree,
        and the steps it opens are never reached (the H200 transfer runs of 2026-12-03).
        Its children's real returns join its mean as they are measured."""
        if not self.config.lookahead or not node.passed or node.duplicate_of is not None:
            return 0.0
        measured = [item.proposal.reaches for item in node.untried
                    if item.proposal.reaches is not None and item.proposal.reaches > 1.0]
        return self.config.lookahead * math.log(max(measured)) if measured else 0.0

    def _score(self, node: Node) -> None:
        root = self.tree.root
        if node.parent is None:
            node.reward, node.reward_terms = 0.0, {}
            return
        parent = self.tree[node.parent]
        assert parent.measurement is not None and node.measurement is not None
        node.reward, node.reward_terms = reward(parent.measurement, node.measurement,
                                                weights=PROXY_WEIGHTS,
                                                guardrails=self.config.guardrails)
        node.deltas_vs_parent = ratios(parent.measurement, node.measurement)
        if root.measurement is not None:
            node.deltas_vs_root = ratios(root.measurement, node.measurement)

    def _update_best(self, node: Node) -> None:
        """The best is the fastest kernel the full gate passed: a time only the screen
        measured (fewer seeds and runs) steers the search but is never its answer."""
        if not node.passed or node.measurement is None or node.measurement.time_ms is None:
            return
        if node.measurement.level != "full":
            return
        best = self.tree.best
        if best is not None and best.measurement.time_ms <= node.measurement.time_ms:
            return
        self.tree.best_id = node.id
        root_time = self.tree.root.measurement.time_ms if self.tree.root.passed else None
        self._emit("best_improved", {
            "id": node.id, "time_ms": node.measurement.time_ms, "evaluation": node.evaluation,
            "speedup_vs_root": root_time / node.measurement.time_ms if root_time else None})

    def _context(self, node: Node, diagnosis: Diagnosis | None = None) -> NodeContext:
        path = self.tree.path(node.id)
        profiled = next(((n.id, n.diagnosis) for n in reversed(path[:-1])
                         if n.diagnosis is not None and n.measurement is not None
                         and n.measurement.metrics), None)
        return NodeContext(task=self.task, candidate=node.proposal.candidate,
                           measurement=node.measurement, diagnosis=diagnosis,
                           tolerance_allows_fast_math=self.tolerance_allows_fast_math,
                           history=tuple(n.proposal.title for n in path[1:]),
                           profiled_ancestor=profiled)

    def _consult(self, node: Node) -> tuple[Diagnosis, list[Untried]]:
        """Diagnose, gather proposals from the judge and every source, drop kernels already
        in the tree, score the rest. A JudgeError hands the node to the fallback judge."""
        try:
            return self._consult_with(self.judge, node)
        except JudgeError as error:
            node.judge_error = f"{self.judge.name}: {error}"
            if self.fallback_judge is None:
                return self._consult_without_judge(node, error)
            diagnosis, items = self._consult_with(self.fallback_judge, node)
            note = (f" [the {self.judge.name} judge failed ({error}); this diagnosis and the "
                    f"priors are the {self.fallback_judge.name} judge's]")
            return dataclasses.replace(diagnosis, summary=diagnosis.summary + note), items

    def _consult_with(self, judge: Judge, node: Node) -> tuple[Diagnosis, list[Untried]]:
        diagnosis = judge.diagnose(self._context(node))
        proposals = self._gather(node, judge.propose(self._context(node, diagnosis), diagnosis),
                                 diagnosis)
        return diagnosis, [Untried(prior=float(judge.score(p, diagnosis)), proposal=p,
                                   candidate_hash=h) for h, p in proposals]

    def _consult_without_judge(self, node: Node, error: JudgeError) -> tuple[Diagnosis, list[Untried]]:
        m = node.measurement
        diagnosis = Diagnosis(bottleneck=(m.bottleneck if m else None) or "unknown",
                              summary=f"the {self.judge.name} judge failed ({error}) and no "
                              "fallback judge is configured: proposals are unranked",
                              source="none")
        return diagnosis, [Untried(prior=1.0, proposal=p, candidate_hash=h)
                           for h, p in self._gather(node, [], diagnosis)]

    def _gather(self, node: Node, judged: list[Proposal],
                diagnosis: Diagnosis) -> list[tuple[str, Proposal]]:
        """The judge's proposals, then each source's, without kernels already in the tree
        (or proposed twice here)."""
        context = self._context(node, diagnosis)
        proposals = [*judged, *(p for source in self.sources for p in source.propose(context))]
        seen: set[str] = set()
        kept = []
        for proposal in proposals:
            digest = proposal.candidate.content_hash()
            if digest in seen or self.tree.find(digest) is not None:
                node.dropped_duplicates += 1
                continue
            seen.add(digest)
            kept.append((digest, proposal))
        return kept

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        self._events.append((kind, data))

    # -- state ---------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        root, best = self.tree.root, self.tree.best
        root_time = root.measurement.time_ms if root.passed else None
        best_time = best.measurement.time_ms if best is not None else None
        return {
            "task": self.task, "evaluations": self.evaluations, "nodes": len(self.tree),
            "root_time_ms": root_time, "best_id": self.tree.best_id, "best_time_ms": best_time,
            "best_spread_ms": best.measurement.spread_ms if best is not None else None,
            "speedup_vs_root": root_time / best_time if root_time and best_time else None,
            "best_found_at_evaluation": best.evaluation if best is not None else None,
            "replayed": any(n.measurement.replayed for n in self.tree.nodes.values()
                            if n.measurement is not None),
        }

    def to_dict(self) -> dict[str, Any]:
        header = self.header()
        return {**header, "tree": {**header["tree"], "nodes": [
            self.tree[node_id].to_dict() for node_id in sorted(self.tree.nodes)]}}

    def header(self) -> dict[str, Any]:
        """The state without the tree's nodes (to_dict() is this plus every node's to_dict())."""
        return {
            "version": STATE_VERSION, "task": self.task, "config": self.config.to_dict(),
            "judge": self.judge.name, "fallback_judge": getattr(self.fallback_judge, "name", None),
            "sources": [source.name for source in self.sources],
            "tolerance_allows_fast_math": self.tolerance_allows_fast_math,
            "rng": self.rng.bit_generator.state, "evaluations": self.evaluations,
            "binary_sizes": self.binary_sizes,
            "known": {h: self.known[h].to_dict() for h in sorted(self._given)
                      if self.tree.find(h) is None},  # the tree's own are in its nodes
            "tree": self.tree.header(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], judge: Judge, sources: Sequence[ProposalSource] = (),
                  *, fallback_judge: Judge | None = None) -> Search:
        return cls.from_parts(data, data["tree"]["nodes"], judge, sources, fallback_judge=fallback_judge)

    @classmethod
    def from_parts(cls, header: dict[str, Any], nodes: Sequence[dict[str, Any]], judge: Judge,
                   sources: Sequence[ProposalSource] = (), *,
                   fallback_judge: Judge | None = None, issued: Iterable[int] = ()) -> Search:
        """Resume from header() and the nodes' to_dict()s (in any order); any "nodes" the
        header's tree holds are ignored. `issued`: pending nodes already handed out for
        evaluation (by an earlier object), which ask() then does not hand out again."""
        data = header
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"search state version {data.get('version')!r}; expected {STATE_VERSION}")
        search = cls.__new__(cls)
        search.task = data["task"]
        search.config = SearchConfig.from_dict(data["config"])
        search.judge, search.fallback_judge, search.sources = judge, fallback_judge, list(sources)
        search.tolerance_allows_fast_math = data["tolerance_allows_fast_math"]
        search.rng = np.random.default_rng()
        search.rng.bit_generator.state = data["rng"]
        search.evaluations = data["evaluations"]
        search.tree = Tree.from_dict({**data["tree"], "nodes": nodes})
        search.known = {h: Measurement.from_dict(m) for h, m in data["known"].items()}
        search._given = set(search.known)
        search.known.update({n.candidate_hash: n.measurement for n in search.tree.nodes.values()
                             if n.measurement is not None})
        search._issued, search._events = set(issued), []
        search.binary_sizes = data.get("binary_sizes")
        search.binaries = {}
        for node_id in sorted(search.tree.nodes):  # the smallest id that runs each binary
            node = search.tree[node_id]
            if node.binary is not None:
                search.binaries.setdefault(node.binary, node_id)
        return search


def run_search(search: Search, evaluator: Evaluator, *, budget: int | None = None,
               on_event: EventSink | None = None, parallel: int = 1,
               collect_timeout_s: float = 1.0, time_limit_s: float | None = None,
               binary_of: BinaryOf | None = None) -> Search:
    """Ask up to `parallel` candidates, submit them, collect, tell; until the search has
    made `budget` evaluations in all (those before a resume count; default
    config.budget), the tree has nothing left to try, or `time_limit_s` has passed (no
    new candidate is asked for after it). Every result in flight is collected before
    returning, so the state it leaves has nothing half-done.

    `binary_of` (binaries.compiled_binary at the task's sizes, say) gives what each asked
    candidate compiles to before it is submitted, as the web path's CPU workers do
    (search.node_services.node_compile): one whose binary a node with a smaller id runs is not
    submitted but done from that node's measurement (Search.tell_binary), no evaluation
    spent. None: every asked candidate is submitted."""
    target = search.config.budget if budget is None else budget
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    in_flight: set[str] = set()
    twins: dict[str, str] = {}  # duplicates waiting for their twin's measurement: hash -> binary

    def room() -> int:
        if deadline is not None and time.monotonic() >= deadline:
            return 0
        return min(parallel - len(in_flight), target - search.evaluations - len(in_flight))

    while True:
        duplicates = True
        while duplicates and room() > 0:  # duplicates take no room: ask again after them
            duplicates = False
            for _, candidate in search.ask(room()):
                if _is_duplicate(search, candidate, binary_of, twins):
                    duplicates = True
                else:
                    evaluator.submit(search.task, candidate)
                    in_flight.add(candidate.content_hash())
        _deliver(search, on_event)
        if not in_flight:
            # Nothing measures their twins any more: they are handed out again on resume.
            search.release(search.tree.find(h) for h in twins)
            return search
        for candidate_hash, measurement in evaluator.collect(collect_timeout_s):
            if candidate_hash in in_flight:
                in_flight.discard(candidate_hash)
                search.tell(candidate_hash, measurement)
        for candidate_hash, binary in list(twins.items()):  # their twins measured now: done too
            _told_twin(search, candidate_hash, binary, twins)
        _deliver(search, on_event)


def _is_duplicate(search: Search, candidate: Candidate, binary_of: BinaryOf | None,
                  twins: dict[str, str]) -> bool:
    """Whether an asked candidate runs the binary of a node with a smaller id (then it is
    not to be evaluated)."""
    binary = binary_of(candidate) if binary_of is not None else None
    return bool(binary) and _told_twin(search, candidate.content_hash(), binary, twins)


def _told_twin(search: Search, candidate_hash: str, binary: str, twins: dict[str, str]) -> bool:
    """Tell the search a pending node's binary; whether a node with a smaller id runs it.
    Such a node is done now when that node is measured, else it waits in `twins`."""
    duplicate = search.tell_binary(candidate_hash, binary) is not None
    if duplicate and not search.tree[search.tree.find(candidate_hash)].done:
        twins[candidate_hash] = binary
    else:
        twins.pop(candidate_hash, None)
    return duplicate


def _deliver(search: Search, on_event: EventSink | None) -> None:
    for kind, data in search.pop_events():
        if on_event is not None:
            on_event(kind, data)


def _duplicate_diagnosis(first: int) -> Diagnosis:
    return Diagnosis(bottleneck="duplicate",
                     summary=f"the same binary as node #{first} (the cubin and every launch at every "
                     f"size): not refined further, since its children would repeat node #{first}'s",
                     source="search")


def _failure_diagnosis(measurement: Measurement) -> Diagnosis:
    guard = f" by the {measurement.guard} guard" if measurement.guard else ""
    what = "rejected" if measurement.status == "rejected" else "not measured"
    return Diagnosis(bottleneck="failed", summary=f"{what}{guard}: {measurement.message}".strip(),
                     evidence=(measurement.message,) if measurement.message else (),
                     source="gate")
