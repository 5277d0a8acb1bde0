"""Family forms: what a kernel computes, lifted from its syntax tree and plan, with the
math as holes; skeletons emit it again under another schedule (see types.py, lift.py,
skeletons.py and ../shared/ARCHITECTURE.md, "Family forms")."""

from .lift import lift
from .types import (
           CONTRACTION,
           FULL_REDUCE,
           MAP,
           PERMUTATION,
           ROWS,
           SCAN,
           WINDOW,
           Form,
           LoopHole,
           Reduction,
           Refusal,
           Uniform,
)

__all__ = ["CONTRACTION", "FULL_REDUCE", "MAP", "PERMUTATION", "ROWS", "SCAN", "WINDOW", "Form", "LoopHole",
           "Reduction", "Refusal", "Uniform", "lift"]
