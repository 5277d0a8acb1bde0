"""A run's search state: in its rows, and in the memory of the worker that drove it last.

The rows are the truth. `Run.state` holds the engine's state without the tree's nodes
(Search.header()); each RunNode holds its node's state in `engine` (Node.to_dict()).
`search_save` writes the header and only the nodes the step changed (the tree names them:
Tree.take_changed), so a step's writes do not grow with the tree; the node's flat
columns (what the browser draws) are written from the same node at the same time. A
node whose visits and value_sum alone changed (each ancestor of a told node) gets only
its `visits`, `value_sum` and `value` columns written: those columns, not the copies in
`engine`, are its counts (search_load and state_of read them over the engine's).

Rebuilding a search from 5,000 rows takes a second, so the process that saved a run keeps
its Search in memory, with the random token it wrote to `Run.state_token`. `search_load`
uses the kept search only while the row still carries that token, that is, when nobody
else has saved the run since; otherwise it rebuilds from the rows. A step takes the kept
search out of memory before it changes it and `search_save` puts it back, so a step that
fails half-way leaves nothing behind but rows that were never committed, and the next step
rebuilds. Both are called under the run's row lock (select_for_update).
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from django.db import connection

from profiling import services as gate_services
from profiling.serialization import json_safe
from search.engine.search import Search
from search.engine.tree import Node
from search.models import Run, RunNode

T = TypeVar("T")

# Searches kept per worker process: a run's is one Search, a few MB at 5,000 nodes.
MAX_KEPT = 32
_kept: OrderedDict[int, tuple[str, Search]] = OrderedDict()

# Everything RunNode holds of a node, but the run, the id and the candidate (set once).
NODE_FIELDS = ["parent_id", "state", "source", "title", "rationale", "diff", "status", "guard",
               "level", "time_ms", "spread_ms", "reward", "visits", "value", "value_sum", "prior",
               "detail", "engine"]
COUNT_FIELDS = ["visits", "value", "value_sum"]


def search_load(run: Run, *, parts: Callable[[], tuple], issued: Iterable[int] = ()) -> Search:
    """The run's search as its rows say. `parts()` -> (judge, fallback judge, sources),
    called only when the search is rebuilt (a kept one has its own). `issued`: pending
    nodes whose evaluation is under way (see Search.from_parts)."""
    kept = _kept.pop(run.pk, None)
    if kept is not None and run.state_token and kept[0] == run.state_token:
        return kept[1]
    judge, fallback, sources = parts()
    return Search.from_parts(run.state, _engines(run), judge, sources, fallback_judge=fallback,
                             issued=issued)


def _engines(run: Run) -> list[dict]:
    """Every node's engine state, its counts from their columns."""
    rows = RunNode.objects.filter(run=run).order_by("node_id").values_list("engine", "visits", "value_sum")
    return [{**engine, "visits": visits, "value_sum": value_sum} for engine, visits, value_sum in rows]


def search_save(run: Run, search: Search) -> list[int]:
    """Write what changed since the last save: the header, the changed nodes (created or
    updated), and the run's summary columns; keep the search for the next step. Returns
    the ids of the nodes written."""
    changed, counted = search.tree.take_changed()
    # bulk_update matches on the primary key: look the rows' keys up by node id.
    keys = dict(RunNode.objects.filter(run=run, node_id__in=changed + counted).values_list("node_id", "pk"))
    node_rows_create(run, [(search.tree[node_id], None) for node_id in changed if node_id not in keys])
    _update_rows([(keys[node_id], _columns(search.tree[node_id])) for node_id in changed if node_id in keys],
                 NODE_FIELDS)
    _update_rows([(keys[node_id], _counts(search.tree[node_id])) for node_id in counted], COUNT_FIELDS)
    summary = search.summary()
    run.state = json_safe(search.header())
    run.state_token = secrets.token_hex(16)
    run.evaluated = search.evaluations
    run.root_ms, run.best_ms = summary["root_time_ms"], summary["best_time_ms"]
    run.best_node, run.best_found_at = summary["best_id"], summary["best_found_at_evaluation"]
    run.save()
    _kept[run.pk] = (run.state_token, search)
    while len(_kept) > MAX_KEPT:
        _kept.popitem(last=False)
    return changed


# One INSERT's JSON, at most (but always one row): psycopg encodes all of a statement's
# jsonb parameters before it sends any, so one INSERT of an imported file's 60 MB of rows
# held another 135 MB (measured with tracemalloc) while it was sent.
WRITE_BATCH_BYTES = 4 * 1024 * 1024
WRITE_BATCH_ROWS = 500


def in_batches(items: Iterable[T], size_of: Callable[[T], int], *, max_bytes: int = WRITE_BATCH_BYTES,
               max_rows: int = WRITE_BATCH_ROWS) -> Iterator[list[T]]:
    """`items` in order, in lists of at most `max_rows` items and `max_bytes` by `size_of`
    (a larger item alone)."""
    batch: list[T] = []
    size = 0
    for item in items:
        item_size = size_of(item)
        if batch and (size + item_size > max_bytes or len(batch) >= max_rows):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item_size
    if batch:
        yield batch


def json_size(value: Any) -> int:
    """Characters of `value` as compact JSON: about what storing it costs."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def node_rows_create(run: Run, nodes: list[tuple[Node, dict | None]]) -> None:
    """New rows for these nodes; each with its engine state as given, or (None) as the node's."""
    stored = gate_services.candidates_get_or_create(candidates=[node.proposal.candidate for node, _ in nodes])
    for batch in in_batches(nodes, lambda pair: json_size(pair[1]) if pair[1] is not None else 0):
        rows = []
        for node, engine in batch:
            columns = _columns(node)
            if engine is not None:
                columns["engine"] = engine
            rows.append(RunNode(run=run, node_id=node.id, candidate=stored[node.candidate_hash], **columns))
        RunNode.objects.bulk_create(rows)


def search_state_header(state: dict) -> dict:
    """A whole search state (Search.to_dict()) without the tree's nodes: what Run.state holds."""
    return {**state, "tree": {k: v for k, v in state["tree"].items() if k != "nodes"}}


def search_forget(run_id: int) -> None:
    """Drop the kept search of a run (its rows were changed outside search_save)."""
    _kept.pop(run_id, None)


def state_of(run: Run) -> dict:
    """The run's whole search state, as Search.to_dict() would give it: the header and
    every node's row (for export, and the rebuilds that need the whole tree)."""
    nodes = _engines(run)
    header = run.state or {}
    return {**header, "tree": {**header.get("tree", {}), "nodes": nodes}}


def _update_rows(rows: list[tuple[int, dict]], names: list[str]) -> None:
    """UPDATE each row (by primary key) to its values, in one executemany. Django's
    bulk_update builds one CASE per column over all rows, which costs more Python than the
    whole rest of a step; the values go through each field's own conversion all the same."""
    if not rows:
        return
    fields = [RunNode._meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sql = (f"UPDATE {quote(RunNode._meta.db_table)} SET {assignments} "
           f"WHERE {quote(RunNode._meta.pk.column)} = %s")
    params = [[f.get_db_prep_save(values[f.name], connection) for f in fields] + [pk] for pk, values in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _counts(node: Node) -> dict:
    return {"visits": node.visits, "value": node.value, "value_sum": node.value_sum}


def _columns(node: Node) -> dict:
    m = node.measurement
    proposal = node.proposal
    engine = json_safe(node.to_dict())
    # What the API shows of the node, from the JSON-safe engine state (no second walk).
    detail = {
        "measurement": engine["measurement"], "diagnosis": engine["diagnosis"],
        "judge_error": node.judge_error, "reward_terms": engine["reward_terms"],
        "deltas_vs_parent": engine["deltas_vs_parent"], "deltas_vs_root": engine["deltas_vs_root"],
        "families": engine["proposal"]["families"], "params": engine["proposal"]["params"],
        "evaluation_index": node.evaluation, "reused": node.reused, "duplicate_of": node.duplicate_of,
    }
    return {
        "parent_id": node.parent, "state": node.state, "source": proposal.source,
        "title": proposal.title[:300], "rationale": proposal.rationale, "diff": proposal.diff,
        "status": m.status if m else "", "guard": (m.guard or "") if m else "",
        "level": m.level if m else "", "time_ms": m.time_ms if m else None,
        "spread_ms": m.spread_ms if m else None, "reward": node.reward if node.done else None,
        **_counts(node), "prior": node.prior, "detail": detail, "engine": engine,
    }
