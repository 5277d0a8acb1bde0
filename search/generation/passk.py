"""pass@1, pass@k and the time to a first passing kernel, over the suite's intents.

The intent of a suite task is its description and its contract (tensors, sizes,
tolerance: `writing.intent_text`), never its reference code or its naive kernel.
pass@k is the unbiased estimator of Chen et al. (2021) over n samples of which c pass
at the first try (no repair); "after repair" counts a sample that passes within the
loop's rounds, and time to pass is measured from the first request.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from profiling.harness.spec import Task

from .loop import Checker, Generation, generate
from .text import Writer


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k samples drawn from n (c of them correct) is
    correct: 1 - C(n - c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def evaluate(tasks: Sequence[Task], make_writer: Callable[[int], Writer], checker: Checker, *,
             samples: int = 5, k: int = 5, rounds: int = 3,
             on_generation: Callable[[Generation], None] | None = None) -> dict[str, Any]:
    """Each task `samples` times (writer i made by make_writer(i), e.g. its seed); the
    report per task and over the suite."""
    if k > samples:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, not {samples}")
    rows = []
    for task in tasks:
        generations = []
        for index in range(samples):
            generation = generate(task, task.description, make_writer(index), checker, rounds=rounds)
            generations.append(generation)
            if on_generation is not None:
                on_generation(generation)
        first = sum(g.passed_first_try for g in generations)
        repaired = sum(g.passed for g in generations)
        times = [g.seconds_to_pass for g in generations if g.seconds_to_pass is not None]
        rows.append({
            "task": task.name, "samples": samples, "passed_first_try": first, "passed_after_repair": repaired,
            "pass@1": pass_at_k(samples, first, 1), f"pass@{k}": pass_at_k(samples, first, k),
            "pass@1 after repair": pass_at_k(samples, repaired, 1),
            "median_seconds_to_pass": statistics.median(times) if times else None,
            "stages": _stages(generations),
        })
    mean = (lambda key: sum(r[key] for r in rows) / len(rows)) if rows else (lambda key: None)
    return {"tasks": rows, "pass@1": mean("pass@1"), f"pass@{k}": mean(f"pass@{k}"),
            "pass@1 after repair": mean("pass@1 after repair"), "samples": samples, "k": k, "rounds": rounds}


def _stages(generations: Sequence[Generation]) -> dict[str, int]:
    """Where the attempts ended, counted: what the writers get wrong."""
    counts: dict[str, int] = {}
    for generation in generations:
        for attempt in generation.attempts:
            counts[attempt.stage] = counts.get(attempt.stage, 0) + 1
    return dict(sorted(counts.items()))
