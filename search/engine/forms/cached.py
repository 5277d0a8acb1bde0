"""A kernel's forms, lifted once per (source, plan) in a process: the judge ranks every
node by its family and the skills source instantiates cards on it, and both read the
same lift (a lift parses and walks the kernel: milliseconds, every node, every
proposal round)."""

from __future__ import annotations

import json
from functools import lru_cache

from . import splice
from .lift import lift
from .types import Form, Refusal


@lru_cache(maxsize=512)
def lifted_launches(source: str, plan_json: str) -> tuple[tuple[int | None, Form | Refusal], ...]:
    """The whole plan's form (index None), or, for a plan of several launches that does
    not lift whole, each launch's (its index in the plan)."""
    plan = json.loads(plan_json)
    whole = lift(source, plan)
    if isinstance(whole, Form) or len(plan.get("launches") or []) < 2:
        return ((None, whole),)
    return tuple(splice.per_launch(source, plan))
