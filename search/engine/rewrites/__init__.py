"""Deterministic CUDA source rewrites over the tree-sitter CUDA grammar.

Each rewrite is a small class with `name`, `families`, a checked `precondition` that
returns None or the reason it does not apply, and `apply`. `RewriteSource` runs them
all as a ProposalSource ("rewrite:<name>" proposals).
"""

from .base import Rewrite, Rewritten
from .source import RewriteSource, all_rewrites

__all__ = ["Rewrite", "RewriteSource", "Rewritten", "all_rewrites"]
