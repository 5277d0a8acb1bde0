"""What one user may ask of the server's costliest operations: starting runs and importing
them, each at a rate per user (settings.OPTIML_THROTTLE_RATES, search/throttles.py), and
imports a few at a time per process, their writes in batches, so that memory stays
bounded whoever imports what."""

from __future__ import annotations

import copy
import json
import os
import threading
import tracemalloc
import uuid

import pytest
from django.core.cache import caches

from search.models import Run, RunEvent, RunNode
from tests.web.test_run_api import relu_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def rates(settings):
    def set_rates(*, run_create: str | None = "60/hour", run_import: str | None = "20/hour") -> None:
        settings.OPTIML_THROTTLE_RATES = {"run_create": run_create, "run_import": run_import}

    return set_rates


@pytest.fixture
def exported(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    return api(people["alice"]).get(f"/api/runs/{run.pk}/export/").json()


def _rows() -> tuple[int, int, int]:
    return Run.objects.count(), RunNode.objects.count(), RunEvent.objects.count()


# -- a rate per user ------------------------------------------------------------------------


def test_a_user_past_the_run_rate_is_told_to_wait_and_nothing_is_started(api, people, rates):
    rates(run_create="2/hour")
    alice = api(people["alice"])
    for _ in range(2):
        assert alice.post("/api/runs/", relu_request(), format="json").status_code == 201
    before = _rows()

    response = alice.post("/api/runs/", relu_request(), format="json")

    assert response.status_code == 429
    assert 3500 <= int(response["Retry-After"]) <= 3600  # the first of the two leaves the hour then
    assert "throttled" in response.json()["detail"]
    assert _rows() == before
    # Reading is not starting, and the rate is alice's alone.
    assert alice.get("/api/runs/").status_code == 200
    assert api(people["bob"]).post("/api/runs/", relu_request(), format="json").status_code == 201


def test_a_user_past_the_import_rate_is_told_to_wait_and_nothing_is_imported(api, people, exported, rates):
    rates(run_import="1/hour")
    bob = api(people["bob"])
    assert bob.post("/api/runs/import/", exported, format="json").status_code == 201
    before = _rows()

    response = bob.post("/api/runs/import/", exported, format="json")

    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert _rows() == before
    assert api(people["carol"]).post("/api/runs/import/", exported, format="json").status_code == 201


def test_a_refused_import_counts_against_the_rate_too(api, people, exported, rates):
    """Reading a refused file costs the server what reading an accepted one does."""
    rates(run_import="2/hour")
    bob = api(people["bob"])
    broken = copy.deepcopy(exported)
    broken["state"]["tree"]["best_id"] = 999

    assert bob.post("/api/runs/import/", broken, format="json").status_code == 400
    assert bob.post("/api/runs/import/", broken, format="json").status_code == 400
    assert bob.post("/api/runs/import/", exported, format="json").status_code == 429


def test_a_rate_of_none_limits_nothing(api, people, rates):
    rates(run_create=None)
    alice = api(people["alice"])
    assert {alice.post("/api/runs/", relu_request(), format="json").status_code for _ in range(3)} == {201}


def test_the_schema_says_which_operations_answer_429(api, people):
    schema = api(people["alice"]).get("/api/schema/?format=json").json()
    runs = schema["paths"]["/api/runs/"]

    assert "429" in runs["post"]["responses"] and "429" not in runs["get"]["responses"]
    assert {"429", "503"} <= set(schema["paths"]["/api/runs/import/"]["post"]["responses"])


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL), as in CI")
def test_with_redis_every_web_process_counts_against_one_rate(api, people, rates, settings):
    """Two processes each make their own cache client; their counts meet in Redis."""
    from django.core.cache.backends.redis import RedisCache

    from optiml_web.env import caches as cache_settings

    rates(run_create="2/hour")
    throttle = cache_settings(os.environ["REDIS_URL"])["throttle"]
    throttle["KEY_PREFIX"] = f"test-rates-{uuid.uuid4().hex}"
    settings.CACHES = {**settings.CACHES, "throttle": throttle}
    alice = api(people["alice"])
    try:
        assert alice.post("/api/runs/", relu_request(), format="json").status_code == 201
        params = {name: value for name, value in throttle.items() if name != "LOCATION"}
        other_process = RedisCache(throttle["LOCATION"], params)
        key = f"throttle_run_create_{people['alice'].pk}"
        assert len(other_process.get(key)) == 1  # what the first process counted
        assert isinstance(caches["throttle"], RedisCache)
        assert alice.post("/api/runs/", relu_request(), format="json").status_code == 201
        assert alice.post("/api/runs/", relu_request(), format="json").status_code == 429
    finally:
        caches["throttle"].delete(f"throttle_run_create_{people['alice'].pk}")


# -- imports a few at a time -----------------------------------------------------------------


def test_an_import_past_the_imports_read_at_once_waits_then_is_a_503_that_writes_nothing(
    api, people, exported, settings
):
    from search.throttles import import_slots

    settings.OPTIML_IMPORTS_AT_ONCE, settings.OPTIML_IMPORT_WAIT_S = 1, 0.2
    bob = api(people["bob"])
    before = _rows()

    with import_slots.held(at_once=1, wait_s=0):  # another import is being read
        response = bob.post("/api/runs/import/", exported, format="json")

    assert response.status_code == 503
    assert "reads at most 1 imported runs at a time" in response.json()["detail"]
    assert response["Retry-After"] == "1"
    assert _rows() == before
    assert bob.post("/api/runs/import/", exported, format="json").status_code == 201  # the slot is free again


def test_an_import_that_waits_for_a_slot_proceeds_when_the_other_one_ends(api, people, exported, settings):
    from search.throttles import import_slots

    settings.OPTIML_IMPORTS_AT_ONCE, settings.OPTIML_IMPORT_WAIT_S = 1, 30
    holding, release = threading.Event(), threading.Event()

    def other_import():
        with import_slots.held(at_once=1, wait_s=0):
            holding.set()
            release.wait(10)

    other = threading.Thread(target=other_import)
    other.start()
    holding.wait(10)
    threading.Timer(0.3, release.set).start()

    response = api(people["bob"]).post("/api/runs/import/", exported, format="json")
    other.join()

    assert response.status_code == 201, response.json()


def test_a_failed_import_gives_its_slot_back(api, people, exported, settings):
    settings.OPTIML_IMPORTS_AT_ONCE, settings.OPTIML_IMPORT_WAIT_S = 1, 0
    bob = api(people["bob"])

    assert bob.post("/api/runs/import/", {"run": {}}, format="json").status_code == 400
    assert bob.post("/api/runs/import/", exported, format="json").status_code == 201


def test_writing_an_import_holds_a_batch_of_its_json_not_another_copy_of_the_file(
    api, people, exported, monkeypatch
):
    """An import of 20 events of 1 MB each: before batching, its one INSERT encoded all
    20 MB at once (and sent them), 2.25 times the file in memory on top of the parsed
    file itself; in batches of at most WRITE_BATCH_BYTES, a few MB."""
    from search import sharing_services
    from search.state import WRITE_BATCH_BYTES

    data = copy.deepcopy(exported)
    for _ in range(20):
        data["events"].append({"seq": len(data["events"]) + 1, "kind": "note", "data": {"pad": "x" * 10**6}})
    body = json.dumps(data).encode()
    del data
    write_peak = []
    run_import = sharing_services.run_import

    def measured(**kwargs):
        tracemalloc.start()
        try:
            run = run_import(**kwargs)
            write_peak.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        return run

    monkeypatch.setattr(sharing_services, "run_import", measured)

    response = api(people["bob"]).post("/api/runs/import/", body, content_type="application/json")

    assert response.status_code == 201, response.json()
    assert RunEvent.objects.filter(run_id=response.json()["id"], kind="note").count() == 20
    assert write_peak[0] < 3 * WRITE_BATCH_BYTES < len(body) / 1.5, (write_peak, len(body))
