"""The expert corpus: `lineage/experts/<task>/` holds `expert.cu` and `manifest.json`.

    {
      "task": "relu",
      "source": "expert.cu",
      "flags": [
        {"name": "OPT_GRID_STRIDE", "depends": [], "note": "one wave of blocks"},
        {"name": "OPT_VEC4", "depends": ["OPT_GRID_STRIDE"], "note": "needs n % 4 handled"}
      ],
      "plan": {"launches": [...], "tunables": {"BLOCK": 256}},
      "cpu_emulator": true
    }

Each optimization is one idea behind a flag, `#if OPT_<INTENT> ... #else <simpler> #endif`,
named from the shared vocabulary (vocabulary.py). A state of the expert is the set of
flags that are on; it is valid when every flag's `depends` are on too. The flags reach
the compiler as `-DOPT_X=0|1` (as tunables), and the plan's expressions may use them
(`"grid": ["cdiv(n, BLOCK * (1 + 3 * OPT_VEC4))"]`): expressions are arithmetic, so a
flag's effect on a launch is written as a product with its 0 or 1.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiling.harness import expr
from profiling.harness.candidate import Candidate, CandidateError

from . import macros, unifdef
from .vocabulary import intent_of

EXPERTS_DIR = Path(__file__).resolve().parents[1] / "experts"
# Experts of families the suite has no task of (a permutation): their lineages feed the
# skeleton cards only (lineage/family_experts/README.md); their tasks sit beside them.
FAMILY_EXPERTS_DIR = Path(__file__).resolve().parents[1] / "family_experts"
FAMILY_TASKS_DIR = FAMILY_EXPERTS_DIR / "tasks"

State = frozenset[str]


class ExpertError(ValueError):
    """A malformed expert; the message names the file and the field."""


@dataclass(frozen=True)
class Flag:
    name: str
    depends: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Expert:
    task: str
    source: str
    flags: tuple[Flag, ...]
    plan: dict[str, Any]
    path: str = ""
    # Whether CI runs every state on tests/search/cuda_on_cpu.py at the small sizes (only
    # where the emulator covers what the kernel uses: 1-D grids, shuffles, atomics).
    cpu_emulator: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.flags)

    def all_on(self) -> State:
        return frozenset(self.names)

    def valid(self, on: State) -> bool:
        by_name = {f.name: f for f in self.flags}
        return on <= set(by_name) and all(set(by_name[name].depends) <= on for name in on)

    def removable(self, on: State) -> list[str]:
        """Flags that can be turned off from `on`: no flag that is on depends on them."""
        return [f.name for f in self.flags if f.name in on
                and not any(f.name in other.depends for other in self.flags if other.name in on)]

    def states(self) -> list[State]:
        """Every valid state, fewest flags first."""
        found = [frozenset(c) for r in range(len(self.flags) + 1)
                 for c in itertools.combinations(self.names, r)]
        return [s for s in found if self.valid(s)]

    def values(self, on: State) -> dict[str, int]:
        return {name: int(name in on) for name in self.names}

    def candidate(self, on: State) -> Candidate:
        plan = json.loads(json.dumps(self.plan))
        plan["tunables"] = {**plan.get("tunables", {}), **self.values(on)}
        return Candidate.from_source_and_plan(self.source, plan)

    def plain_candidate(self, on: State) -> Candidate:
        """The state as plain CUDA (what a lineage shows, and what the CPU emulator runs)."""
        plan = self.candidate(on).plan_dict()
        return Candidate.from_source_and_plan(self.plain_source(on), plan)

    def written_candidate(self, on: State) -> Candidate:
        """The state as a person would have written it: the plain source, and the launch
        plan with the flags folded out of its expressions and its tunables (written_plan).
        The plans give the same launches at every size; the roundtrip starts from here."""
        return Candidate.from_source_and_plan(self.plain_source(on), self.written_plan(on))

    def written_plan(self, on: State) -> dict[str, Any]:
        """The plan with every OPT_ flag put in and folded away (expr.fold):
        `OPT_BLOCK_PER_ROW * M + (1 - OPT_BLOCK_PER_ROW) * cdiv(M, 128)` reads `M` with the
        flag on, `cdiv(M, 128)` with it off. No OPT_ name is left (the arguments use
        none: they are the task's tensors and sizes)."""
        values = self.values(on)
        plan = json.loads(json.dumps(self.plan))
        for launch in plan.get("launches", []):
            for key in ("grid", "block"):
                if key in launch:
                    launch[key] = [expr.fold(d, values) for d in launch[key]]
            if "shared_bytes" in launch:
                launch["shared_bytes"] = expr.fold(launch["shared_bytes"], values)
        plan["tunables"] = {k: v for k, v in plan.get("tunables", {}).items() if k not in values}
        return plan

    def plain_source(self, on: State) -> str:
        """The source as a person would have written this state: no OPT_ left, and the
        macros that carried a flag (defined once per branch) expanded where they are used
        (macros.py), so a step reads where it acts."""
        return macros.expand(unifdef.resolve(self.source, self.values(on)),
                             macros.flag_carrying(self.source))

    def plain_plan(self, on: State, sizes: dict[str, int]) -> str:
        """The state's launch plan as a person reads it: each launch's grid, block and
        shared bytes at `sizes` (the task's suite sizes), and the tunables, no OPT_ left."""
        candidate = self.candidate(on)
        names = {**sizes, **candidate.tunables}

        def value(expression: str | int) -> str:
            try:
                return str(expr.evaluate_int(expression, names))
            except expr.ExpressionError:
                return str(expression)  # shown as written; the gate names the error

        lines = [f"at {', '.join(f'{k}={v}' for k, v in sizes.items())}"]
        for launch in candidate.launches:
            lines += [f"launch {launch.kernel}",
                      f"  grid ({', '.join(value(d) for d in launch.grid)})",
                      f"  block ({', '.join(value(d) for d in launch.block)})",
                      f"  shared_bytes {value(launch.shared_bytes)}",
                      f"  args {', '.join(str(a) for a in launch.args)}"]
        lines += [f"tunable {k} = {v}" for k, v in sorted(candidate.tunables.items())
                  if k not in self.names]
        return "\n".join(lines) + "\n"


def load(task: str, root: Path | None = None) -> Expert:
    folder = (root or EXPERTS_DIR) / task
    manifest_path = folder / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ExpertError(f"{manifest_path}: {error}") from None
    where = str(manifest_path)
    if manifest.get("task") != task:
        raise ExpertError(f"{where}: 'task' must be {task!r}")
    try:
        source = (folder / manifest.get("source", "expert.cu")).read_text()
    except OSError as error:
        raise ExpertError(f"{where}: source: {error}") from None
    flags = tuple(_flag(where, i, item) for i, item in enumerate(manifest.get("flags") or []))
    expert = Expert(task=task, source=source, flags=flags, plan=manifest.get("plan") or {},
                    path=str(folder), cpu_emulator=bool(manifest.get("cpu_emulator", False)))
    _check(expert, where)
    return expert


def load_any(task: str) -> Expert:
    """The suite's expert of `task`, or the family expert of that name."""
    family = task in tasks_with_experts(FAMILY_EXPERTS_DIR) and task not in tasks_with_experts()
    return load(task, FAMILY_EXPERTS_DIR if family else None)


def tasks_with_experts(root: Path | None = None) -> list[str]:
    root = root or EXPERTS_DIR
    return sorted(p.parent.name for p in root.glob("*/manifest.json"))


def _flag(where: str, index: int, item: Any) -> Flag:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise ExpertError(f"{where}: flags[{index}] must be an object with a 'name'")
    try:
        intent_of(item["name"])
    except ValueError as error:
        raise ExpertError(f"{where}: flags[{index}]: {error}") from None
    depends = item.get("depends") or []
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        raise ExpertError(f"{where}: flags[{index}].depends must be a list of flag names")
    return Flag(item["name"], tuple(depends), str(item.get("note", "")))


def _check(expert: Expert, where: str) -> None:
    names = set(expert.names)
    if len(names) != len(expert.flags):
        raise ExpertError(f"{where}: a flag is declared twice")
    for flag in expert.flags:
        unknown = set(flag.depends) - names
        if unknown:
            raise ExpertError(f"{where}: {flag.name} depends on undeclared {sorted(unknown)}")
    used = unifdef.flags_used(expert.source)
    if used - names:
        raise ExpertError(f"{where}: the source uses undeclared flags {sorted(used - names)}")
    if names - used:
        raise ExpertError(f"{where}: flags {sorted(names - used)} change nothing in the source")
    if not expert.valid(expert.all_on()):
        raise ExpertError(f"{where}: the dependencies are not satisfiable with every flag on")
    _acyclic(expert, where)
    try:
        expert.candidate(expert.all_on())
    except CandidateError as error:
        raise ExpertError(f"{where}: plan: {error}") from None


def _acyclic(expert: Expert, where: str) -> None:
    depends = {f.name: set(f.depends) for f in expert.flags}
    done: set[str] = set()
    while len(done) < len(depends):
        ready = [n for n, d in depends.items() if n not in done and d <= done]
        if not ready:
            raise ExpertError(f"{where}: the flags' dependencies form a cycle among "
                              f"{sorted(set(depends) - done)}")
        done |= set(ready)


def generation_pairs(*, full: bool = True, root: Path | None = None) -> list:
    """OptiML-G's training pairs from the experts: each expert's plain first attempt
    (every flag off) and, with `full`, its whole kernel (every flag on), both states its
    lineage's walk put through the gate (search.generation.dataset pairs)."""
    from search.generation.dataset import pair

    pairs = []
    for task in tasks_with_experts(root):
        expert = load(task, root)
        states = [(frozenset(), "plain first attempt")]
        if full:
            states.append((expert.all_on(), "expert kernel"))
        for state, title in states:
            flags = "+".join(sorted(state)) or "none"
            pairs.append(pair(task, expert.written_candidate(state), title=f"{task}: {title}",
                              approach=f"the expert's kernel with {flags} on",
                              origin=f"lineage:{task}:{flags}"))
    return pairs

