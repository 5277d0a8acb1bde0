"""The lineage app: lineages walked here (through recordings) or imported are stored whole,
and bad files are one clear error with nothing written. Measurements come from the
scripted stand-in (tests/lineage/scripted_gpu.py: SYNTHETIC NUMBERS) recorded the way
a GPU host records real ones."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lineage import services
from lineage.engine import experts
from lineage.engine.walker import walk
from lineage.models import Lineage, LineageState, RejectedAttempt, Transition
from search.engine.evaluators import RecordingEvaluator
from tests.lineage.scripted_gpu import ScriptedGpu

pytestmark = pytest.mark.django_db

BROKEN = frozenset({"OPT_GRID_STRIDE"})


def counts() -> tuple[int, int, int, int]:
    return (Lineage.objects.count(), LineageState.objects.count(), Transition.objects.count(),
            RejectedAttempt.objects.count())


def test_a_walk_replayed_from_recordings_is_stored_with_its_evidence(tmp_path):
    relu = experts.load("relu")
    recordings = tmp_path / "rec.json"
    recorded = walk(relu, RecordingEvaluator(ScriptedGpu(relu, failing=[BROKEN]), recordings))
    out = StringIO()

    call_command("lineage", "walk", "--task", "relu", "--replay", str(recordings), stdout=out)

    row = Lineage.objects.get()
    assert row.replayed and row.origin == "walk" and row.complete
    assert row.states.count() == len(recorded.states)
    assert row.transitions.count() == len(recorded.transitions)
    assert set(row.rejected.values_list("guard", flat=True)) == {"wrong_values"}
    vec4 = row.transitions.filter(flag="OPT_VEC4").first()
    assert "float4" in vec4.source_diff and vec4.speedup == pytest.approx(1.3)
    call_command("lineage", "show", str(row.pk), stdout=out)
    call_command("lineage", "list", stdout=out)
    assert "rejected: OPT_GRID_STRIDE" in out.getvalue() and "complete" in out.getvalue()
    # Why the walk ended, and who made each step, are kept on the rows and shown.
    assert row.stopped.startswith("walked out") and "stopped: walked out" in out.getvalue()
    assert set(row.transitions.values_list("proposer", flat=True)) == {"flags"}
    assert set(row.rejected.values_list("proposer", flat=True)) == {"flags"}
    assert "[flags]" in out.getvalue()


def test_a_lineage_walked_elsewhere_is_imported_whole(tmp_path):
    relu = experts.load("relu")
    path = tmp_path / "lineage.json"
    path.write_text(walk(relu, ScriptedGpu(relu)).dumps())

    call_command("lineage", "import", str(path), stdout=StringIO())

    row = Lineage.objects.get()
    assert row.origin == "import" and not row.replayed and row.data["task"] == "relu"


@pytest.mark.parametrize("content", ["not json", "[]", '{"format": 1}', '{"format": 99, "task": "relu"}',
                                     '{"format": 1, "task": "no_such_task", "expert": "x"}'])
def test_a_bad_lineage_file_is_one_clear_error_and_nothing_is_written(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError):
        call_command("lineage", "import", str(path), stdout=StringIO())
    assert counts() == (0, 0, 0, 0)


def test_a_lineage_that_fails_halfway_leaves_no_rows(tmp_path):
    relu = experts.load("relu")
    data = json.loads(walk(relu, ScriptedGpu(relu)).dumps())
    data["transitions"][-1]["speedup"] = "fast"  # a float column given text
    with pytest.raises(Exception):  # noqa: B017 (whatever the database says, nothing stays)
        services.lineage_store(lineage=services.lineage_parse(data), origin="import")
    assert counts() == (0, 0, 0, 0)


def test_walking_without_a_gpu_or_recordings_says_so():
    with pytest.raises(CommandError, match="no GPU"):
        call_command("lineage", "walk", "--task", "relu", stdout=StringIO())
