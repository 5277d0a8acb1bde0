"""The phases of the search as named functions over a Tree: select, expand, backpropagate.

    node = select(tree, rng)            # PUCT descent to a node that may take a new child
    child = expand(tree, node)          # progressive widening: its best untried proposal
    ... evaluate child.candidate elsewhere, then ...
    backpropagate(tree, child, reward)  # returns flow to the root

Several asks may be outstanding at once (ask/tell). A pending node is an evaluation in
flight: it adds a *virtual loss* to itself and each ancestor (Chaslot, Winands & van den
Herik 2008, "Parallel Monte-Carlo Tree Search"; Silver et al. 2016 use the same device
in AlphaGo), so the next descent sees those paths as visited and unrewarding and
spreads out. Nothing here draws random numbers except to break exact ties, from the
explicit, seeded `rng`.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter

import numpy as np

from .tree import Node, Tree, Untried

# Scores closer than this are a tie, broken by the seeded RNG (as mctx breaks ties with
# noise from its explicit key).
TIE_NOISE = 1e-9


def widening_limit(visits: float, *, widening_c: float, widening_alpha: float) -> int:
    """Progressive widening: at most ceil(c * visits^alpha) children, and at least one.

    Coulom 2007 ("Computing Elo Ratings of Move Patterns in the Game of Go") and
    Couëtoux et al. 2011 ("Continuous Upper Confidence Trees") let a node with n visits
    have ceil(C * n^alpha) children, so a node's children grow with the evidence that it
    is worth refining. The defaults (C = 2, alpha = 0.5) are our choice for budgets of
    tens to hundreds of evaluations: the root opens about 2*sqrt(N) children.
    """
    return max(1, math.ceil(widening_c * max(visits, 1.0) ** widening_alpha))


def pending_below(tree: Tree) -> Counter[int]:
    """For each node, how many pending nodes it or its descendants hold (evaluations in
    flight); a node holding none is missing (counts 0)."""
    counts: Counter[int] = Counter()
    for node in tree.pending():
        for ancestor in tree.path(node.id):
            counts[ancestor.id] += 1
    return counts


def value_bounds(tree: Tree) -> tuple[float, float]:
    """Min and max of the node values seen so far, for normalising Q to [0, 1] (MuZero's
    MinMaxStats, Schrittwieser et al. 2020; mctx `qtransform_by_min_max`)."""
    values = [node.value for node in tree.nodes.values()
              if node.visits and node.parent is not None]
    return (min(values), max(values)) if values else (0.0, 0.0)


def _normalised(value: float, bounds: tuple[float, float]) -> float:
    low, high = bounds
    return (value - low) / (high - low) if high > low else 0.5


def open_nodes(tree: Tree, inflight: dict[int, int], *, widening_c: float,
               widening_alpha: float, virtual_loss: float) -> set[int]:
    """Done nodes from which a descent can still reach an expansion: they may widen now,
    or some child of theirs is open. Pending and failed nodes are never open."""
    result: set[int] = set()
    for node in sorted(tree.nodes.values(), key=lambda n: -n.depth):
        if not node.done:
            continue
        if can_widen(tree, node, inflight, widening_c=widening_c, widening_alpha=widening_alpha,
                     virtual_loss=virtual_loss) or any(c in result for c in node.children):
            result.add(node.id)
    return result


def can_widen(tree: Tree, node: Node, inflight: dict[int, int], *, widening_c: float,
              widening_alpha: float, virtual_loss: float) -> bool:
    """Whether the node may take a new child now. Children the gate failed do not count
    against the limit: they are no alternative to refine, and counting them let a node
    whose first few children all failed stall the search with proposals left (each
    failure adds one child and one visit, and the limit grows only with the root of the
    visits)."""
    visits = node.visits + virtual_loss * inflight.get(node.id, 0)
    limit = widening_limit(visits, widening_c=widening_c, widening_alpha=widening_alpha)
    live = sum(1 for c in node.children if not (tree[c].done and not tree[c].passed))
    return bool(node.untried) and live < limit


def puct_scores(tree: Tree, parent: Node, children: list[Node], inflight: dict[int, int], *,
                c_puct: float, c_puct_base: float, virtual_loss: float,
                bounds: tuple[float, float] | None = None) -> list[float]:
    """PUCT (Silver et al. 2017, AlphaZero; with MuZero's visit-dependent c):

        score = Q(s,a) + c(s) * P(s,a) * sqrt(N(s)) / (1 + N(s,a))
        c(s)  = c_puct + ln((N(s) + c_puct_base + 1) / c_puct_base)

    Q is the child's mean return normalised to [0, 1] by the tree's min and max; a
    pending evaluation below a node counts `virtual_loss` visits of value 0 (the worst
    seen). P is the judge's score normalised over the siblings. `bounds`: value_bounds(tree),
    when the caller has it.
    """
    bounds = value_bounds(tree) if bounds is None else bounds
    n_parent = parent.visits + virtual_loss * inflight.get(parent.id, 0)
    c = c_puct + math.log((n_parent + c_puct_base + 1) / c_puct_base)
    total_prior = sum(max(child.prior, 0.0) for child in children)
    scores = []
    for child in children:
        n_child = child.visits + virtual_loss * inflight.get(child.id, 0)
        q = child.visits * _normalised(child.value, bounds) / n_child if n_child else 0.0
        p = max(child.prior, 0.0) / total_prior if total_prior > 0 else 1.0 / len(children)
        scores.append(q + c * p * math.sqrt(n_parent) / (1 + n_child))
    return scores


class SelectMemo:
    """What select needs of the whole tree, kept on the tree from one call to the next: the
    values of the visited nodes (sorted: their min and max normalise Q) and the open nodes
    (open_nodes). Each call brings it up to date from the nodes the tree noted as touched
    since (Tree.take_noted) and their ancestors, the only nodes whose openness can have
    changed, instead of reading every node: select then costs what a step changed, not
    the size of the tree. It gives exactly what value_bounds and open_nodes would."""

    def __init__(self, tree: Tree, widening: dict[str, float], inflight: dict[int, int]) -> None:
        self.widening = widening
        self.values: dict[int, float] = {}
        self.sorted: list[float] = []
        self.open: set[int] = set()
        tree.take_noted()
        for node in tree.nodes.values():
            self._value(node)
        self._reopen(tree, sorted(tree.nodes, key=lambda i: -tree[i].depth), inflight)

    @classmethod
    def of(cls, tree: Tree, widening: dict[str, float], inflight: dict[int, int]) -> SelectMemo:
        memo = tree.memo
        if not isinstance(memo, cls) or memo.widening != widening:
            tree.memo = memo = cls(tree, widening, inflight)
        else:
            memo.refresh(tree, inflight)
        return memo

    def bounds(self) -> tuple[float, float]:
        return (self.sorted[0], self.sorted[-1]) if self.sorted else (0.0, 0.0)

    def refresh(self, tree: Tree, inflight: dict[int, int]) -> None:
        affected: set[int] = set()
        for node_id in tree.take_noted():
            self._value(tree[node_id])
            current: int | None = node_id
            while current is not None and current not in affected:  # it and its ancestors
                affected.add(current)
                current = tree[current].parent
        self._reopen(tree, sorted(affected, key=lambda i: -tree[i].depth), inflight)

    def _value(self, node: Node) -> None:
        old = self.values.pop(node.id, None)
        if old is not None:
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        if node.visits and node.parent is not None:
            self.values[node.id] = node.value
            bisect.insort(self.sorted, node.value)

    def _reopen(self, tree: Tree, deepest_first: list[int], inflight: dict[int, int]) -> None:
        for node_id in deepest_first:
            node = tree[node_id]
            if node.done and (can_widen(tree, node, inflight, **self.widening)
                              or any(c in self.open for c in node.children)):
                self.open.add(node_id)
            else:
                self.open.discard(node_id)


def select(tree: Tree, rng: np.random.Generator, *, c_puct: float = 1.25,
           c_puct_base: float = 19652.0, widening_c: float = 2.0, widening_alpha: float = 0.5,
           virtual_loss: float = 1.0) -> int | None:
    """Descend from the root by PUCT to a node that may take a new child; None when no
    expansion is possible now (everything is pending, failed or fully expanded).

    c_puct = 1.25 and c_puct_base = 19652 are MuZero's pb_c_init and pb_c_base
    (Schrittwieser et al. 2020, pseudocode); widening_c / widening_alpha: see
    `widening_limit`; virtual_loss: visits charged per evaluation in flight (Chaslot et
    al. 2008 use one).
    """
    inflight = pending_below(tree)
    widening = {"widening_c": widening_c, "widening_alpha": widening_alpha,
                "virtual_loss": virtual_loss}
    memo = SelectMemo.of(tree, widening, inflight)
    reachable, bounds = memo.open, memo.bounds()
    if tree.root_id not in reachable:
        return None
    node = tree.root
    while not can_widen(tree, node, inflight, **widening):
        children = [tree[c] for c in node.children if c in reachable]
        scores = np.asarray(puct_scores(tree, node, children, inflight, c_puct=c_puct,
                                        c_puct_base=c_puct_base, virtual_loss=virtual_loss,
                                        bounds=bounds))
        scores = scores + TIE_NOISE * rng.random(len(scores))
        node = children[int(np.argmax(scores))]
    return node.id


def expand(tree: Tree, node_id: int, *, widening_c: float = 2.0, widening_alpha: float = 0.5,
           virtual_loss: float = 1.0) -> int | None:
    """Add the node's best untried proposal as a pending child; None if widening allows no
    more children now or nothing untried is left.

    An untried proposal whose kernel entered the tree elsewhere since it was proposed is
    dropped here: each kernel is in the tree, and evaluated, once.
    """
    node = tree[node_id]
    inflight = pending_below(tree)
    if not can_widen(tree, node, inflight, widening_c=widening_c, widening_alpha=widening_alpha,
                     virtual_loss=virtual_loss):
        return None
    tree.touch(node_id)
    while node.untried:
        item: Untried = node.untried.pop(0)
        if tree.find(item.candidate_hash) is not None:
            node.dropped_duplicates += 1
            continue
        return tree.add_child(node_id, item).id
    return None


def backpropagate(tree: Tree, node_id: int, value: float, *, discount: float = 1.0) -> None:
    """Add one visit and the return to `node_id` and each ancestor.

    The leaf's return is `value` (its reward). Going up, each node's own reward is added
    (G <- r_parent + discount * G, as in MuZero's backup), so a node's mean value is the
    mean total improvement found through it, counted from its parent. discount = 1:
    trajectories are a handful of steps and every step's gain is real.
    """
    node = tree[node_id]
    ret = value
    for _ in range(len(tree)):  # no path is longer than the tree: a looped one stops here
        tree.touch_counts(node.id)
        node.visits += 1
        node.value_sum += ret
        if node.parent is None:
            return
        node = tree[node.parent]
        ret = node.reward + discount * ret
