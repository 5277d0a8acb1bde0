"""The node table's downloads in a real Chromium (issue 35): on a run's page the CSV and JSON
links give the run's table, on the compare page each side's, and on a share link's page,
signed out, the shared run's. Two finished relu runs of ada's over the recorded H200 relu
search; test_explorer's server and app, imported here by name (so the tests' parameters
name them again: F811). The browser half is tests/e2e/node_table_download.mjs;
screenshots go to build/e2e/ (node-table-downloads.png, compare-downloads.png)."""
# ruff: noqa: F811

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from search.node_table import COLUMNS
from tests.e2e.test_explorer import MISSING, SHOTS, USER, _browse, _manage, app_env, server  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
SCRIPT = Path(__file__).with_name("node_table_download.mjs")

MAKE_RUNS = f"""
import json
from django.contrib.auth.models import User
from profiling.harness import tasks
from search import services, sharing_services
from search.models import RunNode

ada = User.objects.get(username={USER!r})
relu = tasks.get("relu")
runs = [services.run_drive(run_id=services.run_create(task_name="relu", source=relu.naive_source,
                                                       plan=relu.naive_plan, budget=budget, user=ada).pk)
        for budget in (4, 2)]
_link, token = sharing_services.share_create(run=runs[0], user=ada)
print(json.dumps({{"ids": [run.pk for run in runs], "token": token,
                  "nodes": [RunNode.objects.filter(run=run).count() for run in runs]}}))
"""


def _csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_node_table_downloads_from_the_run_the_compare_and_the_shared_pages(server, app_env):
    made = json.loads(_manage(app_env, "shell", "-c", MAKE_RUNS).splitlines()[-1])
    (a, b), (a_nodes, b_nodes) = made["ids"], made["nodes"]

    result = _browse(SCRIPT, *server, RUN_IDS=f"{a},{b}", SHARE_TOKEN=made["token"])

    assert result["page_errors"] == []
    run_csv = result["run_csv"]
    assert run_csv["name"] == f"optiml-run-{a}-relu-nodes.csv"
    assert run_csv["text"].splitlines()[0] == ",".join(COLUMNS)
    rows = _csv_rows(run_csv["text"])
    assert len(rows) == a_nodes == result["run_table_rows"]  # what the page's table shows
    assert rows[0]["id"] == "0" and rows[0]["source"] == "root" and rows[0]["status"] == "passed"
    table = json.loads(result["run_json"]["text"])
    assert result["run_json"]["name"] == f"optiml-run-{a}-relu-nodes.json"
    assert [row["id"] for row in table["nodes"]] == [int(row["id"]) for row in rows]
    # Compare: each side's own table.
    assert result["compare_curves"] == [f"#{a} relu", f"#{b} relu"]  # both best-so-far curves, overlaid
    settings = {row[0]: row[1:] for row in result["compare_settings"]}  # the settings table
    assert settings["budget"] == ["yes", "4 evaluations", "2 evaluations"]  # differs: marked
    assert settings["judge"] == ["no", "rules", "rules"] and settings["BLOCK"][0] in ("yes", "no")
    assert result["compare_a_csv"]["text"] == run_csv["text"]
    assert result["compare_b_json"]["name"] == f"optiml-run-{b}-relu-nodes.json"
    assert len(json.loads(result["compare_b_json"]["text"])["nodes"]) == b_nodes
    # A share link's holder, signed out, downloads what the link shows.
    assert result["shared_csv"]["text"] == run_csv["text"]
    for name in ("node-table-downloads", "compare-downloads"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name
