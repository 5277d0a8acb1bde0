"""RewriteSource: every deterministic rewrite whose precondition holds, as proposals.

Each rewrite sees the parsed source, decides with a stated reason whether it applies,
and edits by syntax-node byte ranges. The result must parse again without errors and
its plan must pass the gate's plan check at the L1 and all L0 sizes; otherwise it is
not proposed, and the reason is kept (`refusals`) for tests and explanations.
"""

from __future__ import annotations

from tree_sitter import Tree

from profiling.harness import expr
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import check_plan

from ..sources import candidate_diff
from ..types import NodeContext, Proposal
from .base import Rewrite, task_of
from .block_per_row import BlockPerRow
from .fast_math import FastMath
from .grid_stride import GridStride
from .grid_stride_accumulate import GridStrideAccumulate
from .launch_bounds import LaunchBounds
from .online_softmax import OnlineSoftmax
from .restrict import Restrict
from .syntax import RewriteError, parse
from .unroll import Unroll
from .vectorize import VectorizeFloat4
from .vectorize_rows import VectorizeRows
from .warp_reduce import WarpShuffleReduce


def all_rewrites() -> tuple[Rewrite, ...]:
    return (Restrict(), Unroll(), LaunchBounds(), GridStride(), VectorizeFloat4(), GridStrideAccumulate(),
            WarpShuffleReduce(), BlockPerRow(), OnlineSoftmax(), VectorizeRows(), FastMath())


class RewriteSource:
    """Proposals from the source rewrites; `refusals` says why the others did not apply."""

    name = "rewrite"

    def __init__(self, rewrites: tuple[Rewrite, ...] | None = None):
        self.rewrites = rewrites if rewrites is not None else all_rewrites()

    def propose(self, context: NodeContext) -> list[Proposal]:
        proposals, _ = self.evaluate(context)
        return proposals

    def refusals(self, context: NodeContext) -> dict[str, str]:
        """Rewrite name -> why it does not apply to this candidate."""
        _, refused = self.evaluate(context)
        return refused

    def evaluate(self, context: NodeContext) -> tuple[list[Proposal], dict[str, str]]:
        parent = context.candidate
        source = parent.source.encode()
        tree = parse(source)
        if tree.root_node.has_error:
            reason = "the source does not parse cleanly with the tree-sitter CUDA grammar"
            return [], {rewrite.name: reason for rewrite in self.rewrites}
        proposals, refused = [], {}
        for rewrite in self.rewrites:
            result = self._try(rewrite, tree, source, context)
            if isinstance(result, str):
                refused[rewrite.name] = result
            else:
                proposals.append(result)
        return proposals, refused

    def _try(self, rewrite: Rewrite, tree: Tree, source: bytes, context: NodeContext) -> Proposal | str:
        parent = context.candidate
        try:
            reason = rewrite.precondition(tree, source, parent, context)
            if reason is not None:
                return reason
            new_source, new_plan, rationale = rewrite.apply(tree, source, parent, context)
            child = Candidate.from_source_and_plan(new_source, new_plan or parent.plan_dict())
            if parse(new_source).root_node.has_error:
                return "the rewritten source does not parse cleanly (a bug in the rewrite; not proposed)"
            check_plan(task_of(context), child, task_of(context).sizes)
        except (RewriteError, CandidateError, expr.ExpressionError) as error:
            return f"not proposed: {error}"
        if child.content_hash() == parent.content_hash():
            return "the rewrite would not change the candidate"
        return Proposal(
            source=f"rewrite:{rewrite.name}", title=rewrite.title, rationale=rationale, candidate=child,
            families=rewrite.families, diff=candidate_diff(parent, child), params={"rewrite": rewrite.name},
        )
