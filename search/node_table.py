"""A run's node table for download (issue 35, "CSV and JSON export of node tables"): one
row per node of the search tree, the same columns as CSV and as JSON: the run page's node
table's (id, time, source, title, guard, level, reward, visits) and more (parent, state,
verdict, spread, speed-ups, depth, GPU).

The rows are the stored node rows (RunNode), read once; the speed-ups and depths are
worked out here, by `table_rows`, which is pure. A speed-up is given only for a node that
passed: a rejected kernel's time is no speed-up of anything.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from django.db.models.fields.json import KT

from profiling import selectors as gate_selectors
from search.models import Run, RunNode

COLUMNS = ("id", "parent", "source", "title", "state", "status", "guard", "median_ms", "spread_ms",
           "speedup_vs_root", "speedup_vs_vendor", "level", "depth", "gpu", "reward", "visits")
# A spreadsheet runs a cell that starts with one of these as a formula; a node's title
# comes from a proposer (an LLM, an imported file), so such a cell is quoted as text
# (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def node_table(*, run: Run) -> dict[str, Any]:
    """The run (what the speed-ups are over) and its nodes' rows, in node order. Each
    node's speed-up over the vendor is over the vendor's time on the GPU that measured the
    node, and none where that GPU has none (profiling.selectors.vendor_time_on); the run's
    is its best node's (else its root's)."""
    nodes = list(RunNode.objects.filter(run=run).order_by("node_id")
                 .values("node_id", "parent_id", "source", "title", "state", "status", "guard", "level",
                         "time_ms", "spread_ms", "reward", "visits", gpu=KT("detail__measurement__gpu")))
    vendors = {gpu: gate_selectors.vendor_time_on(task=run.task, gpu=gpu)
               for gpu in {node["gpu"] or "" for node in nodes}}
    shown = next((node for node in nodes if node["node_id"] == (run.best_node or 0)), None)
    vendor = vendors.get(shown["gpu"] or "") if shown else None
    return {
        "run": {"id": run.pk, "task": run.task.name, "root_ms": run.root_ms, "best_ms": run.best_ms,
                "vendor_ms": vendor.ms if vendor else None, "vendor_gpu": vendor.gpu if vendor else None,
                "vendor_source": vendor.source if vendor else None},
        "columns": list(COLUMNS),
        "nodes": table_rows(nodes, root_ms=run.root_ms,
                            vendor_ms_by_gpu={gpu: v.ms for gpu, v in vendors.items() if v is not None}),
    }


def run_measured_gpu(*, run: Run) -> str:
    """The GPU that measured the run's best node (else its root): the one whose vendor time
    the run is compared with; "" before any measurement."""
    gpu = (RunNode.objects.filter(run=run, node_id=run.best_node or 0)
           .annotate(gpu=KT("detail__measurement__gpu")).values_list("gpu", flat=True).first())
    return gpu or ""


def run_vendor_time(*, run: Run, gpu: str | None = None) -> gate_selectors.VendorTime | None:
    """The vendor's time the run's best node (else its root) is compared with: the one on
    the GPU that measured it (`gpu`, when the caller has read run_measured_gpu), or None
    where that GPU has none."""
    return gate_selectors.vendor_time_on(task=run.task, gpu=run_measured_gpu(run=run) if gpu is None else gpu)


def run_vendor(*, run: Run) -> dict[str, Any]:
    """What the run's header says of the vendor, under the run API's names: the GPU that
    measured the run (`measured_gpu`, null before any measurement) and the vendor's time
    on it, where it came from and the GPU it names (all null where that GPU has none:
    the header then says "no vendor time on <measured_gpu>")."""
    gpu = run_measured_gpu(run=run)
    vendor = run_vendor_time(run=run, gpu=gpu)
    return {"measured_gpu": gpu or None, "vendor_ms": vendor.ms if vendor else None,
            "vendor_gpu": vendor.gpu if vendor else None, "vendor_source": vendor.source if vendor else None}


def table_rows(nodes: Iterable[dict[str, Any]], *, root_ms: float | None,
               vendor_ms_by_gpu: dict[str, float]) -> list[dict[str, Any]]:
    """RunNode values (node_id, parent_id, ..., time_ms, gpu) -> rows with COLUMNS, in order;
    `vendor_ms_by_gpu`: the vendor's time on each GPU that has one."""
    nodes = list(nodes)
    parents = {node["node_id"]: node["parent_id"] for node in nodes}
    return [{
        "id": node["node_id"], "parent": node["parent_id"], "source": node["source"],
        "title": node["title"], "state": node["state"], "status": node["status"], "guard": node["guard"],
        "median_ms": node["time_ms"], "spread_ms": node["spread_ms"],
        "speedup_vs_root": _speedup(root_ms, node),
        "speedup_vs_vendor": _speedup(vendor_ms_by_gpu.get(node["gpu"] or ""), node),
        "level": node["level"], "depth": _depth(node["node_id"], parents), "gpu": node["gpu"] or "",
        "reward": node.get("reward"), "visits": node.get("visits", 0),
    } for node in nodes]


def table_csv(table: dict[str, Any]) -> str:
    """The rows as CSV with a header line; an empty cell for no value."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table["columns"])
    for row in table["nodes"]:
        writer.writerow([_cell(row[column]) for column in table["columns"]])
    return out.getvalue()


def _speedup(reference_ms: float | None, node: dict[str, Any]) -> float | None:
    if not reference_ms or node["status"] != "passed" or not node["time_ms"]:
        return None
    return reference_ms / node["time_ms"]


def _depth(node_id: int, parents: dict[int, int | None]) -> int:
    # Bounded by the number of nodes, so a parent that is missing or a loop (an imported
    # file is anybody's) ends the walk instead of hanging it.
    depth, at = 0, parents.get(node_id)
    while at is not None and at in parents and depth < len(parents):
        depth, at = depth + 1, parents[at]
    return depth


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
