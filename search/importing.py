"""Reading an exported trajectory (search.selectors.run_trajectory) back, strictly.

`parse_trajectory` checks everything before anything is written: the file's shape and
size (node and event counts, each kernel within the gate's size limit), the task (one
the importer may use: a file cannot reach another team's private task), the search
state (it must load as the engine's Search, and every node's kernel must hash to the
hash it claims), that every value fits the column it becomes, the node list against the
state, and the event log's sequence. A problem is a TrajectoryError naming the part of
the file and what is wrong.

What a file says is shown, never trusted: its verdicts may name any path as a report, and
an imported node has no Evaluation row, so nothing is ever served from disk for it
(search.inspector.ncu_report_path).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from accounts.names import display_text_problem
from optiml_web.limits import (
    MAX_IMPORT_EVENTS,
    MAX_IMPORT_NODES,
    MAX_INTENT_CHARS,
    MAX_SOURCE_NAMES,
    plan_error,
    source_error,
)
from profiling.harness.candidate import CandidateError
from search.engine.judges import RuleJudge
from search.engine.search import STATE_VERSION, Search
from search.engine.tree import Tree

FORMAT = "optiml-trajectory"
VERSION = 1
MAX_KIND = 40  # RunEvent.kind's max_length
MAX_INT32 = 2**31 - 1  # PostgreSQL integer: RunNode.node_id, visits, Run.budget, evaluated
MAX_INT64 = 2**63 - 1  # PostgreSQL bigint: Run.seed
MAX_BUDGET = 10_000  # the API's largest budget (search.serializers.RunCreateSerializer)
# RunNode's short text columns and their max_length: a longer value would fail the write.
NODE_TEXT_LIMITS = {"proposal source": 120, "status": 12, "guard": 40, "level": 6, "state": 10}
# The longest time or spread a measurement may claim: one hour. No timed launch can last
# longer than the gate's whole GPU subprocess, which is killed after GateOptions.time_limit_s
# (600 s by default); an hour leaves room for a raised limit, while a value like 1e308 ms
# (which would break every speed-up and chart the run shows) is refused.
MAX_TIME_MS = 3_600_000.0
# The shortest time a measurement may claim: 0.1 us, five times finer than the CUDA event
# timer the gate times with resolves ("around 0.5 microseconds", CUDA Runtime API,
# cudaEventElapsedTime), and far under a launch's own overhead (microseconds). A time like
# 1e-300 ms made the node's achieved FLOP/s infinite, which no JSON answer can carry.
MIN_TIME_MS = 1e-4
# A verdict's counts, rates and percentages (timing's flops and bytes, the profile's
# metrics) are 0 or of a magnitude from 1e-9 to 1e20. The inspector divides and multiplies
# them (search.inspector.roofline, profiling.harness.profile.hierarchical_roofline): within
# the band none of its results leaves a float's range (1e300 FLOP over 1 ns made one
# infinite, which no JSON answer carries). An H200 at its highest peak (under 4e15 FLOP/s,
# FP8 tensor cores with sparsity) does under 1.5e19 in MAX_TIME_MS; the recorded H200
# verdicts span 0.52 (a percentage) to 3.4e10 (DRAM bytes).
VERDICT_MAGNITUDES = (1e-9, 1e20)


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


def parse_trajectory(data: Any, *, tasks: Collection[str]) -> ParsedTrajectory:
    """`tasks`: the names of the tasks the importer may use (the suite, and the declared
    tasks of their own and their teams'). A run on any other task is refused as unknown,
    and the message lists only these."""
    if not isinstance(data, dict):
        raise TrajectoryError("file", "a trajectory is a JSON object with run, nodes and state")
    if data.get("format", FORMAT) != FORMAT or data.get("version", VERSION) != VERSION:
        raise TrajectoryError("format", f"expected format {FORMAT!r} version {VERSION}, got "
                              f"{data.get('format')!r} version {data.get('version')!r}")
    run, nodes, state = (_part(data, key, kind) for key, kind in
                         (("run", dict), ("nodes", list), ("state", dict)))
    _check_counts(nodes, state, data.get("events", []))  # before the state is loaded: cheap
    task = run.get("task")
    if not isinstance(task, str) or task not in tasks:
        raise TrajectoryError("run.task", f"unknown task {_shown(task)}; known tasks: "
                              f"{', '.join(sorted(tasks))}")
    search = _search(state, task)
    _check_nodes(nodes, search)
    return ParsedTrajectory(
        search=search, state=state, judge=_text(state, "judge", "state.judge", 100),
        sources=_names(state.get("sources", [])), events=_events(data.get("events", [])),
        gpu_seconds=_seconds(run.get("gpu_seconds", 0.0)), intent=_optional_text(run, "intent"),
        original_id=_original_id(run.get("id")))


def _check_counts(nodes: list, state: dict, events: Any) -> None:
    tree = state.get("tree")
    tree_nodes = tree.get("nodes") if isinstance(tree, dict) else None
    for where, items, limit in (("nodes", nodes, MAX_IMPORT_NODES),
                                ("state.tree", tree_nodes, MAX_IMPORT_NODES),
                                ("events", events, MAX_IMPORT_EVENTS)):
        if isinstance(items, list | dict) and len(items) > limit:
            raise TrajectoryError(where, f"{len(items)} entries; an import takes at most {limit}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}..."


def _original_id(value: Any) -> int | None:
    # Only said in the run's message ("imported from run N"): any whole number will do.
    whole = isinstance(value, int) and not isinstance(value, bool)
    return value if whole and 0 < value <= MAX_INT64 else None


def _part(data: dict, key: str, kind: type) -> Any:
    if not isinstance(data.get(key), kind):
        raise TrajectoryError(key, f"missing, or not a JSON {'object' if kind is dict else 'list'}")
    return data[key]


# What a state the engine cannot load is, when Python's own words are all there is to say
# ("Measurement.__init__() missing 1 required positional argument", "'int' object is not
# subscriptable"): those name the engine's classes, not the file's parts, so they stay out.
NOT_A_STATE = ("not a search state this version of OptiML Studio reads: a part of it is missing "
               "or of the wrong kind (export the run again)")


def _search(state: dict, task: str) -> Search:
    if state.get("version") != STATE_VERSION:
        raise TrajectoryError("state", f"search state version {_shown(state.get('version'))}; "
                              f"this version of OptiML Studio reads version {STATE_VERSION}")
    try:
        search = Search.from_dict(state, RuleJudge())
    except CandidateError as error:  # a node's kernel or plan: the harness says which field
        raise TrajectoryError("state.tree", f"a node's kernel: {error}") from None
    except KeyError as error:  # a key the file lacks, named as the file spells it
        missing = _shown(error.args[0]) if error.args else "a part"
        raise TrajectoryError("state", f"not a search state: it lacks {missing}") from None
    except (TypeError, ValueError, AttributeError, ArithmeticError, LookupError):
        raise TrajectoryError("state", NOT_A_STATE) from None
    if search.task != task:
        raise TrajectoryError("state.task",
                              f"the state is of task {_shown(search.task)}, the run of {task!r}")
    tree = search.tree
    if type(tree.root_id) is not int or tree.root_id not in tree.nodes or tree.root.parent is not None:
        raise TrajectoryError("state.tree", "the tree has no root")
    for node in tree.nodes.values():
        _check_numbers(node)
        _check_kernel(node)
        if node.proposal.candidate.content_hash() != node.candidate_hash:
            raise TrajectoryError("state.tree", f"node {node.id}'s kernel does not match its hash")
    _check_tree_shape(state["tree"]["nodes"], tree)
    _check_best(tree)
    _check_run_columns(search)
    return search


def _check_tree_shape(given: list[dict], tree: Tree) -> None:
    """The nodes form one tree hanging from the root. Ids are unique (Tree.from_dict keeps
    the last of a repeated id, silently). Every other node's parent is an earlier node: the
    engine hands ids out in order (Tree.add_child), and since each step up a parent chain
    then goes to a smaller id, no chain can loop and every one ends at the one parentless
    node, the root. Each node's children are the nodes naming it as parent (the search
    walks down through them)."""
    seen: set[int] = set()
    for item in given:
        if item["id"] in seen:
            raise TrajectoryError("state.tree", f"node {item['id']} appears more than once")
        seen.add(item["id"])
    children: dict[int, list[int]] = {node_id: [] for node_id in tree.nodes}
    for node in sorted(tree.nodes.values(), key=lambda n: n.id):
        if node.id == tree.root_id:
            continue
        if node.parent is None:
            raise TrajectoryError("state.tree", f"node {node.id} has no parent, but only the root "
                                  f"(node {tree.root_id}) may have none")
        if node.parent not in tree.nodes:
            raise TrajectoryError("state.tree", f"node {node.id}'s parent {node.parent} is not in the tree")
        if node.parent >= node.id:
            raise TrajectoryError("state.tree", f"node {node.id}'s parent {node.parent} is not an earlier "
                                  "node: its parent links would loop instead of reaching the root")
        children[node.parent].append(node.id)
    for node in tree.nodes.values():
        listed = node.children if isinstance(node.children, list) else None
        if listed is None or any(type(c) is not int for c in listed) or sorted(listed) != children[node.id]:
            raise TrajectoryError("state.tree", f"node {node.id}'s children {_shown(node.children)} are "
                                  f"not the nodes naming it as parent {children[node.id]}")


def _check_best(tree: Tree) -> None:
    """The best node is a node of the tree that passed the gate with a time (the run shows
    its time, and the speed-up over the root, from that measurement)."""
    best = tree.best_id
    if best is None:
        return
    if isinstance(best, bool) or not isinstance(best, int) or best not in tree.nodes:
        raise TrajectoryError("state.tree", f"the best node {_shown(best)} is not in the tree")
    node = tree.nodes[best]
    if not node.passed or node.measurement.time_ms is None:
        raise TrajectoryError("state.tree", f"the best node {best} has no passed, timed measurement")
    # The run's account of why it is faster (search.engine.explain.why_faster) compares each
    # step of this path with its parent's measurement. The tree's shape is already checked,
    # so the path reaches the root.
    for step in tree.path(best):
        if step.measurement is None:
            raise TrajectoryError("state.tree", f"node {step.id}, on the path from the root to the best "
                                  f"node {best}, has no measurement")


def _check_run_columns(search: Search) -> None:
    config = search.config
    for name, value, low, high in (("config.budget", config.budget, 1, MAX_BUDGET),
                                   ("config.seed", config.seed, 0, MAX_INT64),
                                   ("evaluations", search.evaluations, 0, MAX_INT32)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise TrajectoryError(f"state.{name}", f"must be a whole number from {low} to {high}")


def _check_kernel(node) -> None:
    """Every kernel in the tree (the node's, and those of its untried proposals) within
    the limits a new run's kernel has: the gate's source size and the API's plan size."""
    for proposal in [node.proposal, *(item.proposal for item in node.untried)]:
        problem = source_error(proposal.candidate.source) or plan_error(proposal.candidate.plan_dict())
        if problem:
            raise TrajectoryError("state.tree", f"node {node.id}: {problem}")


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
        if not math.isfinite(value):  # the API's parser refuses 1e400; a caller's dict may not
            raise TrajectoryError("state.tree", f"node {node.id}'s {name} is not a finite number")
    for name in ("deltas_vs_parent", "deltas_vs_root", "reward_terms"):  # read by the run's account
        ratios = getattr(node, name)
        if not isinstance(ratios, dict) or not all(isinstance(key, str) and _finite(value)
                                                   for key, value in ratios.items()):
            raise TrajectoryError("state.tree", f"node {node.id}'s {name} must be an object of names to "
                                  "finite numbers")
    if m is not None:
        _check_time(node.id, "time_ms", m.time_ms, low=MIN_TIME_MS)  # no kernel runs in no time
        _check_time(node.id, "spread_ms", m.spread_ms, low=0.0)  # identical runs spread 0
        _check_verdict(node.id, m.verdict)
    whole = {"id": node.id, "parent": node.parent, "depth": node.depth, "visits": node.visits}
    for name, value in whole.items():
        if value is None and name == "parent":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT32:
            raise TrajectoryError("state.tree", f"node {node.id!r}'s {name} must be a whole number "
                                  f"from 0 to {MAX_INT32}")
    if m is not None and not isinstance(m.status, str):
        raise TrajectoryError("state.tree", f"node {node.id} has no status")
    if not isinstance(node.proposal.source, str) or not isinstance(node.proposal.title, str):
        raise TrajectoryError("state.tree", f"node {node.id}'s proposal needs a source and a title")
    texts = {"proposal source": node.proposal.source, "state": node.state,
             "status": m.status if m else "", "guard": (m.guard or "") if m else "",
             "level": m.level if m else ""}
    for name, value in texts.items():
        if not isinstance(value, str) or len(value) > NODE_TEXT_LIMITS[name]:
            raise TrajectoryError("state.tree", f"node {node.id}'s {name} must be text of at most "
                                  f"{NODE_TEXT_LIMITS[name]} characters")
    # Shown to whoever may see the copy, like a typed intent: written by the file, not a proposer.
    for name, value in (("title", node.proposal.title), ("rationale", node.proposal.rationale)):
        problem = display_text_problem(value) if isinstance(value, str) else None
        if problem:
            raise TrajectoryError("state.tree", f"node {node.id}'s {name}: {problem}")


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _check_time(node_id: int, name: str, value: float | None, *, low: float) -> None:
    """A measured time (already known to be a finite number) within [low, MAX_TIME_MS]."""
    if value is not None and not low <= value <= MAX_TIME_MS:
        raise TrajectoryError("state.tree", f"node {node_id}'s {name} is {value!r}: it must be "
                              f"at least {low:g} and at most {MAX_TIME_MS:g} ms")


def _check_verdict(node_id: int, verdict: Any) -> None:
    """The parts of a verdict the node's inspector computes with (search.inspector.node_detail
    and its roofline): objects where it reads keys, numbers where it divides."""
    where = f"node {node_id}'s verdict"
    if verdict is None:
        return
    if not isinstance(verdict, dict):
        raise TrajectoryError("state.tree", f"{where} must be an object")
    for part in ("compile", "timing", "profile", "environment"):
        if verdict.get(part) is not None and not isinstance(verdict[part], dict):
            raise TrajectoryError("state.tree", f"{where}'s {part} must be an object")
    low, high = VERDICT_MAGNITUDES
    band = f"0 or of a magnitude from {low:g} to {high:g}"
    for work in ("flops", "bytes"):
        value = (verdict.get("timing") or {}).get(work)
        if value is not None and not (_in_band(value) and value >= 0):
            raise TrajectoryError("state.tree", f"{where}'s timing {work} is {_shown(value)}: it must be "
                                  f"{band}")
    metrics = (verdict.get("profile") or {}).get("metrics")
    if metrics is None:
        return
    if not isinstance(metrics, dict) or not all(isinstance(key, str) for key in metrics):
        raise TrajectoryError("state.tree", f"{where}'s profile metrics must be an object of names to "
                              "numbers")
    for key, value in metrics.items():
        if not _in_band(value):
            raise TrajectoryError("state.tree", f"{where}'s profile metric {_shown(key)} is {_shown(value)}: "
                                  f"it must be {band}")


def _in_band(value: Any) -> bool:
    low, high = VERDICT_MAGNITUDES
    return _finite(value) and (value == 0 or low <= abs(value) <= high)


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
    if not isinstance(value, str) or len(value) > MAX_INTENT_CHARS:
        raise TrajectoryError(f"run.{key}", f"must be text of at most {MAX_INTENT_CHARS} characters")
    problem = display_text_problem(value)  # others read it, as they read a typed one
    if problem:
        raise TrajectoryError(f"run.{key}", problem)
    return value


def _names(value: Any) -> list[str]:
    if (not isinstance(value, list) or len(value) > MAX_SOURCE_NAMES
            or not all(isinstance(name, str) and len(name) <= 100 for name in value)):
        raise TrajectoryError("state.sources", f"must be a list of at most {MAX_SOURCE_NAMES} names")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise TrajectoryError("run.gpu_seconds", "must be a number of seconds, at least 0")
    return float(value)
