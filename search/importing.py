"""Reading an exported trajectory (search.selectors.run_trajectory) back, strictly.

`parse_trajectory` checks everything before anything is written: the file's shape, the
task, the search state (it must load as the engine's Search, and every node's kernel
must hash to the hash it claims), the node list against the state, and the event log's
sequence. A problem is a TrajectoryError naming the part of the file and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiling.harness import tasks as task_registry
from search.engine.judges import RuleJudge
from search.engine.search import Search

FORMAT = "optiml-trajectory"
VERSION = 1
MAX_KIND = 40  # RunEvent.kind's max_length


class TrajectoryError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ParsedTrajectory:
    search: Search
    state: dict[str, Any]  # as given: it loaded, so it is kept unchanged
    judge: str
    sources: list[str]
    events: list[tuple[str, dict[str, Any]]]
    gpu_seconds: float
    intent: str
    original_id: int | None


def parse_trajectory(data: Any) -> ParsedTrajectory:
    if not isinstance(data, dict):
        raise TrajectoryError("file", "a trajectory is a JSON object with run, nodes and state")
    if data.get("format", FORMAT) != FORMAT or data.get("version", VERSION) != VERSION:
        raise TrajectoryError("format", f"expected format {FORMAT!r} version {VERSION}, got "
                              f"{data.get('format')!r} version {data.get('version')!r}")
    run, nodes, state = (_part(data, key, kind) for key, kind in
                         (("run", dict), ("nodes", list), ("state", dict)))
    task = run.get("task")
    try:
        task_registry.get(task if isinstance(task, str) else "")
    except task_registry.UnknownTask as error:
        raise TrajectoryError("run.task", str(error)) from None
    search = _search(state, task)
    _check_nodes(nodes, search)
    return ParsedTrajectory(
        search=search, state=state, judge=_text(state, "judge", "state.judge", 100),
        sources=_names(state.get("sources", [])), events=_events(data.get("events", [])),
        gpu_seconds=_seconds(run.get("gpu_seconds", 0.0)), intent=_optional_text(run, "intent"),
        original_id=run.get("id") if isinstance(run.get("id"), int) else None)


def _part(data: dict, key: str, kind: type) -> Any:
    if not isinstance(data.get(key), kind):
        raise TrajectoryError(key, f"missing, or not a JSON {'object' if kind is dict else 'list'}")
    return data[key]


def _search(state: dict, task: str) -> Search:
    try:
        search = Search.from_dict(state, RuleJudge())
    except KeyError as error:
        raise TrajectoryError("state", f"not a search state: it lacks {error}") from None
    except (TypeError, ValueError, AttributeError, ArithmeticError) as error:
        raise TrajectoryError("state", f"not a search state: {error}") from None
    if search.task != task:
        raise TrajectoryError("state.task", f"the state is of task {search.task!r}, the run of {task!r}")
    tree = search.tree
    if tree.root_id not in tree.nodes or tree.root.parent is not None:
        raise TrajectoryError("state.tree", "the tree has no root")
    for node in tree.nodes.values():
        if node.parent is not None and node.parent not in tree.nodes:
            raise TrajectoryError("state.tree", f"node {node.id}'s parent {node.parent} is not in the tree")
        if node.proposal.candidate.content_hash() != node.candidate_hash:
            raise TrajectoryError("state.tree", f"node {node.id}'s kernel does not match its hash")
        _check_numbers(node)
    if tree.best_id is not None and tree.best_id not in tree.nodes:
        raise TrajectoryError("state.tree", f"the best node {tree.best_id} is not in the tree")
    return search


def _check_numbers(node) -> None:
    """The numbers that become columns: a string here would fail only when written."""
    m = node.measurement
    numbers = {"visits": node.visits, "value_sum": node.value_sum, "prior": node.prior,
               "reward": node.reward, "depth": node.depth,
               "time_ms": m.time_ms if m else None, "spread_ms": m.spread_ms if m else None}
    for name, value in numbers.items():
        if value is None and name in ("time_ms", "spread_ms"):
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TrajectoryError("state.tree", f"node {node.id}'s {name} is not a number")
    if node.visits < 0 or (m is not None and not isinstance(m.status, str)):
        raise TrajectoryError("state.tree", f"node {node.id} has a negative visit count or no status")
    if not isinstance(node.proposal.source, str) or not isinstance(node.proposal.title, str):
        raise TrajectoryError("state.tree", f"node {node.id}'s proposal needs a source and a title")


def _check_nodes(nodes: list, search: Search) -> None:
    ids = [node.get("id") if isinstance(node, dict) else None for node in nodes]
    if any(not isinstance(node_id, int) for node_id in ids):
        raise TrajectoryError("nodes", "every node must be an object with an integer id")
    if sorted(ids) != sorted(search.tree.nodes):
        raise TrajectoryError("nodes", f"the nodes listed ({len(ids)}) are not the state's tree "
                              f"({len(search.tree.nodes)})")


def _events(events: Any) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(events, list):
        raise TrajectoryError("events", "must be a list")
    parsed = []
    for index, event in enumerate(events):
        where = f"events[{index}]"
        if not isinstance(event, dict) or event.get("seq") != index + 1:
            raise TrajectoryError(where, f"must be an object with seq {index + 1}: the log has no gaps")
        kind, data = event.get("kind"), event.get("data", {})
        if not isinstance(kind, str) or not kind or len(kind) > MAX_KIND:
            raise TrajectoryError(f"{where}.kind", f"must be a name of 1 to {MAX_KIND} characters")
        if not isinstance(data, dict):
            raise TrajectoryError(f"{where}.data", "must be a JSON object")
        parsed.append((kind, data))
    return parsed


def _text(data: dict, key: str, where: str, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise TrajectoryError(where, f"must be a name of 1 to {limit} characters")
    return value


def _optional_text(data: dict, key: str) -> str:
    value = data.get(key) or ""
    if not isinstance(value, str):
        raise TrajectoryError(f"run.{key}", "must be text")
    return value


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise TrajectoryError("state.sources", "must be a list of names")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise TrajectoryError("run.gpu_seconds", "must be a number of seconds, at least 0")
    return float(value)
