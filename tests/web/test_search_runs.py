"""Search runs through Django: rows for the run, its nodes and a gap-free event log, over
the real naive relu verdict recorded on the H200 (its children have no recording, which
the search must carry as failed evaluations, not crash on)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from profiling.evaluators import RecordedEvaluator
from profiling.harness import tasks as task_registry
from profiling.models import Evaluation
from search import control_services, selectors, services
from search.models import Run, RunEvent, RunNode
from search.state import state_of

pytestmark = pytest.mark.django_db

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "h200-relu-naive.json"


def new_run(budget: int = 4, **overrides) -> Run:
    relu = task_registry.get("relu")
    return services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                               budget=budget, **overrides)


def test_a_run_over_recordings_stores_every_node_and_a_gap_free_event_log():
    run = services.run_drive(run_id=new_run(budget=4).pk, evaluator=RecordedEvaluator(RECORDING))

    assert run.status == Run.Status.FINISHED and run.evaluated == 4
    nodes = selectors.run_nodes(run=run)
    assert [n.node_id for n in nodes] == sorted(n["id"] for n in state_of(run)["tree"]["nodes"])
    root = nodes[0]
    assert root.parent_id is None and root.source == "root" and root.status == "passed"
    assert root.time_ms == pytest.approx(0.8061, abs=1e-3)  # the real H200 time
    assert root.evaluation.source == Evaluation.Source.RECORDED
    children = [n for n in nodes if n.parent_id is not None]
    assert children and all(n.status == "error" for n in children if n.state == "done")
    assert all(n.source != "root" and n.title and n.diff for n in children)
    seqs = list(RunEvent.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)) and run.next_seq == len(seqs) + 1
    kinds = [e.kind for e in RunEvent.objects.filter(run=run)]
    assert kinds[0] == "run_created" and kinds[-1] == "run_finished"
    assert kinds.count("node_evaluated") == 4


def test_events_after_a_sequence_number_are_exactly_the_ones_missed():
    run = services.run_drive(run_id=new_run(budget=3).pk, evaluator=RecordedEvaluator(RECORDING))
    every = selectors.run_events_after(run=run, seq=0)
    later = selectors.run_events_after(run=run, seq=4)
    assert [e.seq for e in later] == [e.seq for e in every if e.seq > 4]


def test_stepping_a_finished_run_changes_nothing():
    run = services.run_drive(run_id=new_run(budget=2).pk, evaluator=RecordedEvaluator(RECORDING))
    before = (RunNode.objects.count(), RunEvent.objects.count(), Evaluation.objects.count())
    services.run_step(run_id=run.pk, evaluator=RecordedEvaluator(RECORDING))
    assert (RunNode.objects.count(), RunEvent.objects.count(), Evaluation.objects.count()) == before


def test_a_paused_run_does_not_step_until_resumed_and_a_stopped_one_never_again():
    run = new_run(budget=3)
    control_services.run_set_status(run_id=run.pk, status=Run.Status.PAUSED)
    assert services.run_step(run_id=run.pk, evaluator=RecordedEvaluator(RECORDING)).evaluated == 0
    control_services.run_set_status(run_id=run.pk, status=Run.Status.RUNNING)
    assert services.run_step(run_id=run.pk, evaluator=RecordedEvaluator(RECORDING)).evaluated == 1
    control_services.run_set_status(run_id=run.pk, status=Run.Status.STOPPED)
    with pytest.raises(services.RunError, match="stopped run cannot become running"):
        control_services.run_set_status(run_id=run.pk, status=Run.Status.RUNNING)


def test_a_run_resumes_from_its_stored_state_after_a_restart():
    run = new_run(budget=3)
    services.run_step(run_id=run.pk, evaluator=RecordedEvaluator(RECORDING))
    # A new process knows nothing but the rows: drive it from the database alone.
    run = services.run_drive(run_id=run.pk, evaluator=RecordedEvaluator(RECORDING))
    assert run.evaluated == 3 and run.status == Run.Status.FINISHED


def test_bad_requests_are_refused_and_write_nothing():
    relu = task_registry.get("relu")
    with pytest.raises(task_registry.UnknownTask):
        services.run_create(task_name="reluu", source=relu.naive_source, plan=relu.naive_plan, budget=3)
    with pytest.raises(services.RunError, match="budget"):
        new_run(budget=0)
    with pytest.raises(services.RunError, match="unknown judge"):
        new_run(judge="oracle")
    assert Run.objects.count() == 0 and RunEvent.objects.count() == 0


def test_the_optimize_command_explains_and_writes_the_trajectory(settings, tmp_path):
    settings.OPTIML_EVALUATOR = f"recorded:{RECORDING}"
    out, trajectory = StringIO(), tmp_path / "trajectory.json"
    call_command("optimize", "--task", "relu", "--budget", "3", "--json", str(trajectory), stdout=out)
    text = out.getvalue()
    assert "Run " in text and "Summary: 3 candidates evaluated" in text
    data = json.loads(trajectory.read_text())
    assert data["run"]["evaluated"] == 3 and data["nodes"][0]["parentId"] is None
    assert {"id", "parentId", "source", "title", "diff", "time_ms"} <= set(data["nodes"][1])


def test_the_optimize_command_refuses_bad_input_in_one_line(tmp_path):
    with pytest.raises(CommandError, match="unknown task"):
        call_command("optimize", "--task", "nope")
    with pytest.raises(CommandError, match="cannot read"):
        call_command("optimize", "--task", "relu", "--from", str(tmp_path / "missing.cu"))
    assert Run.objects.count() == 0
