"""The contract every source rewrite keeps, and the task lookup they share.

A rewrite is deterministic and conservative: `precondition` returns None only when the
rewrite provably keeps the kernel's results (up to the floating-point reordering its
rationale states, if any); otherwise it returns the reason it does not apply, in words
a person can check against the source. `apply` is only called after a None.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from tree_sitter import Tree

from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task

from ..types import NodeContext


class Rewritten(NamedTuple):
    source: str
    plan: dict[str, Any] | None  # None: the plan is unchanged
    rationale: str


class Rewrite(Protocol):
    name: str
    title: str
    families: tuple[str, ...]

    def precondition(self, tree: Tree, source: bytes, candidate: Candidate,
                     context: NodeContext) -> str | None: ...

    def apply(self, tree: Tree, source: bytes, candidate: Candidate,
              context: NodeContext) -> Rewritten: ...


def task_of(context: NodeContext) -> Task:
    return tasks.get(context.task)


def joined_reasons(reasons: list[str], fallback: str) -> str:
    """One line that says why nothing applied: every kernel's reason, or the fallback."""
    return "; ".join(dict.fromkeys(reasons)) if reasons else fallback


class SiteRewrite:
    """A rewrite that applies wherever some kernel has a site for it.

    `find_sites` returns the sites and, for each kernel without one, the reason in
    words; `precondition` is then the same for every such rewrite: None when any site
    exists, otherwise every kernel's reason (or `no_sites` when there is no kernel).
    """

    no_sites = "no extern \"C\" __global__ kernels"

    def find_sites(self, tree: Tree, source: bytes, candidate: Candidate,
                   context: NodeContext) -> tuple[list[Any], list[str]]:
        raise NotImplementedError

    def precondition(self, tree: Tree, source: bytes, candidate: Candidate,
                     context: NodeContext) -> str | None:
        sites, reasons = self.find_sites(tree, source, candidate, context)
        return None if sites else joined_reasons(reasons, self.no_sites)
