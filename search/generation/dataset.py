"""(intent, kernel) pairs from the product's own verified kernels, for train-mot.

The intent side is what a writer is shown at generation time (`writing.fenced_prompt`:
the task's description and contract); the kernel side is the verified kernel in the
fenced format (`writing.fenced`). Sources: the suite's naive kernels (here), and, from
the callers that may read them, the lineage states (every state of an expert's flag
lattice passed the gate when its lineage was recorded) and search nodes whose full
gate passed. Pairs longer than a model's context are dropped by the trainer, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from profiling.harness import tasks as task_registry
from profiling.harness.candidate import Candidate

from .writing import Written, fenced, fenced_prompt


@dataclass(frozen=True)
class Pair:
    task: str
    prompt: str
    target: str
    origin: str  # "naive:<task>", "lineage:<task>:<flags>", "run:<id>#<node>"


def pair(task_name: str, candidate: Candidate, *, title: str, approach: str, origin: str) -> Pair:
    task = task_registry.get(task_name)
    written = Written(writer=origin, title=title, approach=approach, candidate=candidate)
    return Pair(task=task_name, prompt=fenced_prompt(task, task.description), target=fenced(written),
                origin=origin)


def suite_pairs(names: Iterable[str] | None = None) -> list[Pair]:
    """The suite's naive kernels, one pair per task."""
    found = []
    chosen = [task_registry.get(n) for n in names] if names else task_registry.all_tasks()
    for task in chosen:
        name = task.name
        if not task.naive_source:
            continue
        candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
        found.append(pair(name, candidate, title=f"naive {name}", approach="the straightforward kernel",
                          origin=f"naive:{name}"))
    return found


def save(pairs: Iterable[Pair], path: str | Path) -> int:
    rows = [asdict(p) for p in pairs]
    Path(path).write_text(json.dumps(rows, indent=1))
    return len(rows)


def load(path: str | Path) -> list[Pair]:
    try:
        rows = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a pairs file ({error})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"task", "prompt", "target", "origin"}
                                             <= set(r) for r in rows):
        raise ValueError(f"{path}: each pair needs task, prompt, target and origin")
    return [Pair(**{k: str(r[k]) for k in ("task", "prompt", "target", "origin")}) for r in rows]
