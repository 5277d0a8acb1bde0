"""Secret gate seeds: the gate's correctness inputs are nobody's to choose or know.

A run's gate seed comes from the server's secret and the run's id; the user's `seed`
steers only the search. A single evaluation has no fixed seed at all. The seeds a
verdict was measured on are stored with it for the operator, and every page, API answer,
share link and export that users get leaves them out.

The verdicts are real H200 recordings, served by tests/web/stand_in_gate.py the way the
gate serves them (with their settings and seeds), since this host has no GPU."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from optiml_web.celery import app
from profiling import services as gate_services
from profiling.harness import tasks as task_registry
from profiling.harness.gate import GateOptions
from profiling.harness.seeds import SEED_BITS, gate_seed
from profiling.models import Evaluation
from profiling.serialization import text_for_users, verdict_for_users
from profiling.tasks import evaluation_enqueue
from search import services
from search.measuring import run_gate_seed
from search.models import Run, RunNode
from tests.web.stand_in_gate import SEED_STEP, GateLikeRecorded, ScreeningGateLikeRecorded, seeds_in

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
# Five relu kernels the H200 measured with the full gate, asked in this order by a rules
# run with seed 0: the naive root, float4, grid-stride, restrict, BLOCK 512.
SEARCH_RECORDING = FIXTURES / "h200-relu-search.json"


def new_run(budget: int = 3, **fields) -> Run:
    relu = task_registry.get("relu")
    return services.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan,
                               budget=budget, **fields)


def driven(evaluator, budget: int = 3, **fields) -> Run:
    return services.run_drive(run_id=new_run(budget, **fields).pk, evaluator=evaluator)


# -- the derivation -------------------------------------------------------------------------


def test_a_gate_seed_is_the_same_for_the_same_secret_and_parts_and_fits_the_workers_range():
    seed = gate_seed(b"operator's secret", "run", "42")

    assert seed == gate_seed(b"operator's secret", "run", "42")
    assert 0 <= seed < 2**SEED_BITS
    # Pinned: a run's seed must not change between releases, or its cached inputs (and
    # the operator's way to reproduce its verdicts) would be lost.
    assert gate_seed(b"operator's secret", "run", "42") == 1566507523873987290


def test_another_secret_another_run_or_a_regrouped_part_gives_another_seed():
    seeds = {gate_seed(b"secret", "run", "1"), gate_seed(b"secret", "run", "2"),
             gate_seed(b"other secret", "run", "1"), gate_seed(b"secret", "run:1"),
             gate_seed(b"secret", "run1")}

    assert len(seeds) == 5


@pytest.mark.parametrize(("secret", "parts", "error"), [
    (b"", ("run", "1"), ValueError), (b"secret", (), ValueError),
    ("secret", ("run", "1"), TypeError), (b"secret", ("run", 1), TypeError)])
def test_a_gate_seed_needs_a_secret_and_string_parts(secret, parts, error):
    with pytest.raises(error):
        gate_seed(secret, *parts)


def test_the_gate_secret_is_the_setting_when_set(settings):
    settings.OPTIML_GATE_SECRET = "from the environment"

    assert gate_services.gate_secret() == b"from the environment"


def test_without_the_setting_the_gate_secret_is_derived_from_the_secret_key_but_is_not_it(settings):
    settings.OPTIML_GATE_SECRET = None
    settings.SECRET_KEY = "key one"
    first = gate_services.gate_secret()

    assert gate_services.gate_secret() == first and len(first) == 32
    assert b"key one" not in first
    settings.SECRET_KEY = "key two"
    assert gate_services.gate_secret() != first


# -- which seed the gate gets ---------------------------------------------------------------


@pytest.mark.django_db
def test_two_runs_with_the_same_user_seed_get_different_gate_seeds_and_a_run_keeps_one():
    first_gate = GateLikeRecorded(SEARCH_RECORDING)
    first = driven(first_gate, seed=0, screen=False)
    Evaluation.objects.all().delete()  # nothing stored to reuse: the second run measures too
    second_gate = GateLikeRecorded(SEARCH_RECORDING)
    second = driven(second_gate, seed=0, screen=False)

    assert len(first_gate.asked) == len(second_gate.asked) == 3
    assert {o.seed for o in first_gate.asked} == {run_gate_seed(run=first)}
    assert {o.seed for o in second_gate.asked} == {run_gate_seed(run=second)}
    assert run_gate_seed(run=first) != run_gate_seed(run=second)
    assert run_gate_seed(run=first) == gate_seed(gate_services.gate_secret(), "run", str(first.pk))
    # Nothing of it is kept on the run: it is derived from the secret at each step.
    assert first.gate_options["seed"] is None and first.seed == 0


@pytest.mark.django_db
def test_the_screen_and_the_full_gate_of_a_run_share_its_gate_seed(settings, tmp_path):
    settings.OPTIML_WORKDIR = tmp_path
    gate = ScreeningGateLikeRecorded(SEARCH_RECORDING)

    run = driven(gate, budget=5, seed=0)

    assert gate.screened, "the run never screened: nothing checked"
    assert {o.seed for o in gate.asked + gate.screened} == {run_gate_seed(run=run)}


@pytest.mark.django_db
def test_the_user_seed_still_reproduces_the_tree_on_recorded_measurements():
    def tree(run: Run) -> list[tuple]:
        return [(n.node_id, n.parent_id, n.source, n.title, n.candidate.content_hash, n.status)
                for n in RunNode.objects.filter(run=run).select_related("candidate").order_by("node_id")]

    first = driven(GateLikeRecorded(SEARCH_RECORDING), budget=5, seed=0, screen=False)
    again = driven(GateLikeRecorded(SEARCH_RECORDING), budget=5, seed=0, screen=False)

    assert run_gate_seed(run=first) != run_gate_seed(run=again)
    assert tree(first) == tree(again) and len(tree(first)) >= 5
    assert first.state["config"]["seed"] == again.state["config"]["seed"] == 0


@pytest.fixture
def eager():
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.mark.django_db
def test_a_single_evaluation_never_has_a_fixed_seed(eager, relu_task, store, fast, monkeypatch,
                                                   django_capture_on_commit_callbacks):
    gate = GateLikeRecorded(FIXTURES / "schema-h200.json")
    monkeypatch.setattr(gate_services, "get_evaluator", lambda: gate)
    asked = GateOptions(seed=1234, input_cache="/tmp/somebody-elses-inputs")

    with django_capture_on_commit_callbacks(execute=True):
        evaluation_enqueue(candidate=store(fast), task_name="relu", options=asked)

    assert [(o.seed, o.input_cache) for o in gate.asked] == [(None, None)]
    stored = Evaluation.objects.get().verdict["seeds"]["base_seed"]
    assert stored != 1234 and 0 <= stored < 2**SEED_BITS  # the worker's own draw, recorded


# -- stored for the operator, never served ---------------------------------------------------


@pytest.mark.django_db
def test_the_seeds_are_stored_with_the_verdict():
    run = driven(GateLikeRecorded(SEARCH_RECORDING), seed=0, screen=False)

    base = run_gate_seed(run=run)
    rows = list(Evaluation.objects.all())
    assert len(rows) == 3
    for row in rows:
        assert row.verdict["seeds"] == {"base_seed": base}
        assert {record["seed"] // SEED_STEP for record in row.verdict["correctness"]} == {base}


def numbers_in(payload) -> set[int]:
    """Every whole number a JSON payload holds, as a value or written in a text."""
    if isinstance(payload, bool):
        return set()
    if isinstance(payload, int):
        return {payload}
    if isinstance(payload, str):
        return {int(digits) for digits in re.findall(r"\d+", payload)}
    if isinstance(payload, dict):
        return set().union(*(numbers_in(k) | numbers_in(v) for k, v in payload.items()))
    if isinstance(payload, list):
        return set().union(*(numbers_in(item) for item in payload))
    return set()


def keys_in(payload) -> set[str]:
    if isinstance(payload, dict):
        return set(payload).union(*(keys_in(v) for v in payload.values()))
    if isinstance(payload, list):
        return set().union(*(keys_in(item) for item in payload))
    return set()


def everything_users_see(api, user, run: Run) -> dict[str, object]:
    """Every API answer about the run, its nodes and events: as its owner, and by share link."""
    owner = api(user)
    token = owner.post(f"/api/runs/{run.pk}/shares/").json()["token"]
    visitor = api()
    node_ids = [n.node_id for n in RunNode.objects.filter(run=run)]
    answers = {
        "runs": owner.get("/api/runs/"), "run": owner.get(f"/api/runs/{run.pk}/"),
        "nodes": owner.get(f"/api/runs/{run.pk}/nodes/"),
        "events": owner.get(f"/api/runs/{run.pk}/events/"),
        "export": owner.get(f"/api/runs/{run.pk}/export/"),
        "shared": visitor.get(f"/api/shared/{token}/"),
        "shared events": visitor.get(f"/api/shared/{token}/events/"),
        **{f"node {n}": owner.get(f"/api/runs/{run.pk}/nodes/{n}/") for n in node_ids},
        **{f"shared node {n}": visitor.get(f"/api/shared/{token}/nodes/{n}/") for n in node_ids},
    }
    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 200)
    return {name: a.json() for name, a in answers.items()}


@pytest.mark.django_db
@pytest.mark.parametrize("screening", [False, True], ids=["full gate", "screened"])
def test_no_api_answer_a_user_can_reach_names_a_gate_seed(api, people, settings, tmp_path, screening):
    settings.OPTIML_WORKDIR = tmp_path
    gate = ScreeningGateLikeRecorded(SEARCH_RECORDING) if screening else GateLikeRecorded(SEARCH_RECORDING)
    run = driven(gate, budget=5, seed=0, screen=screening, user=people["alice"])
    base = run_gate_seed(run=run)
    stored = set().union(*(seeds_in(row.verdict) for row in Evaluation.objects.all()))
    assert base in stored  # the rows hold them: the check below is not vacuous
    # The base seed and every seed derivable from it (inputs.check_plan).
    secret = {base} | {base * SEED_STEP + offset for offset in range(SEED_STEP)}

    for name, payload in everything_users_see(api, people["alice"], run).items():
        assert not numbers_in(payload) & secret, f"{name} names a gate seed"
        assert "base_seed" not in keys_in(payload), f"{name} holds the verdict's seeds"

    node = api(people["alice"]).get(f"/api/runs/{run.pk}/nodes/0/").json()
    assert node["correctness"] and {c["seed"] for c in node["correctness"]} == {None}


def test_a_verdict_for_users_has_no_seeds_and_no_seed_in_its_texts():
    stored = {
        "status": "rejected", "guard": "wrong_values", "stage": "correctness L1 sizes {'n': 4099} seed 77000",
        "message": "L1 {'n': 4099} seed 77001 (normal): 497 of 1000 elements differ; 5 seeds each",
        "correctness": [{"level": "L1", "seed": 77001, "passed": False, "detail": "seed=77001"}],
        "settings": {"seeds": 5, "profile": True}, "seeds": {"base_seed": 77},
    }

    public = verdict_for_users(stored)

    assert "seeds" not in public and public["correctness"][0]["seed"] is None
    assert public["message"] == \
        "L1 {'n': 4099} seed (hidden) (normal): 497 of 1000 elements differ; 5 seeds each"
    assert public["stage"] == "correctness L1 sizes {'n': 4099} seed (hidden)"
    assert public["correctness"][0]["detail"] == "seed=(hidden)"
    assert public["settings"] == {"seeds": 5, "profile": True}  # how it was measured is public
    assert stored["seeds"] == {"base_seed": 77} and stored["correctness"][0]["seed"] == 77001  # a copy
    assert text_for_users("timeout during correctness L0 sizes {'n': 7} seed: 77002") == \
        "timeout during correctness L0 sizes {'n': 7} seed: (hidden)"


@pytest.mark.django_db
def test_staff_see_the_seeds_and_settings_of_an_evaluation_in_the_admin(admin_client):
    from django.urls import reverse

    run = driven(GateLikeRecorded(SEARCH_RECORDING), budget=1, seed=0, screen=False)
    row = Evaluation.objects.get()

    page = html.unescape(admin_client.get(reverse("admin:profiling_evaluation_change", args=[row.pk]))
                         .content.decode())

    assert "Gate seeds (operator only)" in page and f'"base_seed": {run_gate_seed(run=run)}' in page
    assert "Gate settings" in page and row.settings_key in page
