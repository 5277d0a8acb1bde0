"""The search tree as plain data: nodes by id, each saying where it came from and how it did.

A node is one kernel variant. It is created "pending" when the search asks for it to be
evaluated and becomes "done" when told its Measurement. Nothing here decides anything:
selection, widening and backup are the named functions in mcts.py, and the Search
(search.py) fills in diagnoses, proposals and rewards. The whole tree round-trips
through JSON exactly (`Tree.from_dict(tree.to_dict()).to_dict() == tree.to_dict()`), so a
run can be stored, resumed and replayed.

A tree remembers which nodes changed since it was last asked (`touch`, `take_changed`):
the web layer stores a run's nodes as rows and rewrites only those, so a step costs the
same at 5,000 nodes as at 50. Whatever changes a node calls `touch` (add_child here,
expand in mcts.py, the search when it completes a node), or `touch_counts` when only its
visits and value_sum changed (backpropagate, which passes every ancestor): a store can
then write two numbers instead of the whole node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import Diagnosis, Measurement, Proposal

PENDING = "pending"
DONE = "done"


@dataclass(frozen=True)
class Untried:
    """A proposal waiting to become a child, with the prior the judge gave it."""

    prior: float
    proposal: Proposal
    candidate_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"prior": self.prior, "candidate_hash": self.candidate_hash,
                "proposal": self.proposal.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Untried:
        return cls(prior=data["prior"], candidate_hash=data["candidate_hash"],
                   proposal=Proposal.from_dict(data["proposal"]))


@dataclass
class Node:
    """One kernel variant in the tree.

    `value_sum / visits` is the mean return through this node as seen from its parent:
    its own reward plus the rewards below it on each backed-up path (see
    mcts.backpropagate). `deltas_vs_parent` / `deltas_vs_root` hold ratios after/before
    ("time" and every profile metric both sides have), so 0.5 means halved.
    """

    id: int
    parent: int | None
    depth: int
    proposal: Proposal
    candidate_hash: str
    created: int  # order of creation; equals the id while ids are handed out in order
    state: str = PENDING
    prior: float = 1.0
    measurement: Measurement | None = None
    diagnosis: Diagnosis | None = None
    judge_error: str | None = None  # the judge failed on this node and the fallback answered
    reward: float = 0.0
    reward_terms: dict[str, float] = field(default_factory=dict)
    visits: int = 0
    value_sum: float = 0.0
    children: list[int] = field(default_factory=list)
    untried: list[Untried] = field(default_factory=list)  # best prior first
    dropped_duplicates: int = 0  # proposals dropped because their kernel was already in the tree
    deltas_vs_parent: dict[str, float] = field(default_factory=dict)
    deltas_vs_root: dict[str, float] = field(default_factory=dict)
    evaluation: int | None = None  # 1-based index of the evaluation that completed it
    reused: bool = False  # completed from a stored measurement, not evaluated again
    binary: str | None = None  # what the GPU ran (binaries.binary_key), once measured
    duplicate_of: int | None = None  # an earlier node with the same binary: this one is not refined

    @property
    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0

    @property
    def done(self) -> bool:
        return self.state == DONE

    @property
    def passed(self) -> bool:
        return self.measurement is not None and self.measurement.passed

    def add_untried(self, items: list[Untried]) -> None:
        """Keep untried proposals sorted best prior first; equal priors keep their order."""
        self.untried = sorted([*self.untried, *items], key=lambda item: -item.prior)

    def row(self) -> dict[str, Any]:
        """A flat summary for progress lines, events and golden tests."""
        m = self.measurement
        return {
            "id": self.id, "parent": self.parent, "depth": self.depth,
            "source": self.proposal.source, "title": self.proposal.title,
            "state": self.state, "status": m.status if m else None,
            "time_ms": m.time_ms if m else None, "spread_ms": m.spread_ms if m else None,
            "replayed": m.replayed if m else False, "level": m.level if m else None,
            "prior": self.prior,
            "reward": self.reward, "visits": self.visits, "value": self.value,
            "evaluation": self.evaluation, "duplicate_of": self.duplicate_of,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "parent": self.parent, "depth": self.depth,
            "proposal": self.proposal.to_dict(), "candidate_hash": self.candidate_hash,
            "created": self.created, "state": self.state, "prior": self.prior,
            "measurement": self.measurement.to_dict() if self.measurement else None,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis else None,
            "judge_error": self.judge_error, "reward": self.reward,
            "reward_terms": dict(self.reward_terms), "visits": self.visits,
            "value_sum": self.value_sum, "children": list(self.children),
            "untried": [item.to_dict() for item in self.untried],
            "dropped_duplicates": self.dropped_duplicates,
            "deltas_vs_parent": dict(self.deltas_vs_parent),
            "deltas_vs_root": dict(self.deltas_vs_root),
            "evaluation": self.evaluation, "reused": self.reused,
            "binary": self.binary, "duplicate_of": self.duplicate_of,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        data = dict(data)
        data["proposal"] = Proposal.from_dict(data["proposal"])
        if data.get("measurement") is not None:
            data["measurement"] = Measurement.from_dict(data["measurement"])
        if data.get("diagnosis") is not None:
            data["diagnosis"] = Diagnosis.from_dict(data["diagnosis"])
        data["untried"] = [Untried.from_dict(item) for item in data.get("untried", [])]
        return cls(**data)


@dataclass
class Tree:
    """Nodes by id, the root, and the fastest verified node so far."""

    nodes: dict[int, Node]
    root_id: int = 0
    best_id: int | None = None
    _by_hash: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    _changed: set[int] = field(default_factory=set, repr=False, compare=False)
    _counted: set[int] = field(default_factory=set, repr=False, compare=False)
    # For mcts.select's memo: every node touched since it last looked.
    _noted: set[int] = field(default_factory=set, repr=False, compare=False)
    # Nodes that were pending when last seen (a node never goes back from done to pending).
    _pending: set[int] = field(default_factory=set, repr=False, compare=False)
    memo: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_hash = {node.candidate_hash: node.id for node in self.nodes.values()}
        self._pending = {node.id for node in self.nodes.values() if not node.done}

    def touch(self, *node_ids: int) -> None:
        """Note that these nodes changed (see the module docstring)."""
        self._changed.update(node_ids)
        self._noted.update(node_ids)

    def touch_counts(self, node_id: int) -> None:
        """Note that only this node's visits and value_sum changed."""
        self._counted.add(node_id)
        self._noted.add(node_id)

    def take_noted(self) -> set[int]:
        """The nodes touched since the last call (for mcts.select's memo); forgets them."""
        noted, self._noted = self._noted, set()
        return noted

    def take_changed(self) -> tuple[list[int], list[int]]:
        """(nodes changed, nodes whose visits and value_sum alone changed) since the last
        call, each in id order; forgets them."""
        changed = sorted(self._changed)
        counted = sorted(self._counted - self._changed)
        self._changed, self._counted = set(), set()
        return changed, counted

    @classmethod
    def with_root(cls, proposal: Proposal) -> Tree:
        """A tree holding only the starting kernel, pending its first evaluation."""
        root = Node(id=0, parent=None, depth=0, proposal=proposal,
                    candidate_hash=proposal.candidate.content_hash(), created=0)
        tree = cls(nodes={0: root})
        tree.touch(0)
        return tree

    @property
    def root(self) -> Node:
        return self.nodes[self.root_id]

    @property
    def best(self) -> Node | None:
        return self.nodes[self.best_id] if self.best_id is not None else None

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def find(self, candidate_hash: str) -> int | None:
        """The node holding this kernel, if any: each kernel appears in the tree once."""
        return self._by_hash.get(candidate_hash)

    def add_child(self, parent_id: int, item: Untried) -> Node:
        if item.candidate_hash in self._by_hash:
            raise ValueError(f"kernel {item.candidate_hash[:12]} is already node "
                             f"{self._by_hash[item.candidate_hash]}")
        parent = self.nodes[parent_id]
        node_id = len(self.nodes)
        node = Node(id=node_id, parent=parent_id, depth=parent.depth + 1, proposal=item.proposal,
                    candidate_hash=item.candidate_hash, created=node_id, prior=item.prior)
        self.nodes[node_id] = node
        self._by_hash[item.candidate_hash] = node_id
        self._pending.add(node_id)
        parent.children.append(node_id)
        self.touch(parent_id, node_id)
        return node

    def path(self, node_id: int) -> list[Node]:
        """Nodes from the root down to `node_id`, both included. A tree the engine grew has
        no loop in its parent links and no missing parent, but one read back from storage
        might (a bad import, a hand-edited row): the walk stops at the first node it meets
        again or a parent that is not in the tree, so it always ends, and the path then
        starts below the loop or the gap rather than at the root."""
        path: list[Node] = []
        seen: set[int] = set()
        current: int | None = node_id
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            path.append(self.nodes[current])
            current = self.nodes[current].parent
        return path[::-1]

    def pending(self) -> list[Node]:
        """The nodes not yet done, in id order; costs what is pending, not the tree."""
        self._pending = {node_id for node_id in self._pending if not self.nodes[node_id].done}
        return [self.nodes[node_id] for node_id in sorted(self._pending)]

    def rows(self) -> list[dict[str, Any]]:
        return [self.nodes[node_id].row() for node_id in sorted(self.nodes)]

    def to_dict(self) -> dict[str, Any]:
        return {**self.header(), "nodes": [self.nodes[node_id].to_dict() for node_id in sorted(self.nodes)]}

    def header(self) -> dict[str, Any]:
        """The tree without its nodes: with each node's to_dict(), all of it."""
        return {"root_id": self.root_id, "best_id": self.best_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tree:
        nodes = {item["id"]: Node.from_dict(item) for item in data["nodes"]}
        return cls(nodes=nodes, root_id=data["root_id"], best_id=data["best_id"])
