"""Query and path parameters: bad input is a 400 naming the parameter (or a 404 for a
path that names nothing), never a 500, on every endpoint that reads one; the rule is one
module's (optiml_web.params)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from optiml_web import params
from search.models import Run

pytestmark = pytest.mark.django_db

# Each was a 500 once: "²".isdigit() is true and int("²") fails; thirty nines pass
# isdigit() and int() but no database integer holds them.
BAD_NUMBERS = ["²", "٣", "9" * 30, str(2**63), "-1", "1.5", "", " 1", "0x10", "1e3",
               "007"]  # 007 was 7 here, where a plan expression refuses it: one rule, numerals'



@pytest.mark.parametrize("raw", BAD_NUMBERS)
def test_parse_int_refuses_anything_but_ascii_digits_within_bounds(raw):
    with pytest.raises(params.ParameterError) as refused:
        params.parse_int(raw, "team")

    assert refused.value.name == "team"
    assert refused.value.message.startswith("a whole number from 0 to 9223372036854775807")


def test_parse_int_takes_the_whole_range_a_database_id_can_hold():
    assert params.parse_int("0", "after") == 0
    assert params.parse_int(str(2**63 - 1), "after") == 2**63 - 1
    assert params.parse_int("-3", "x", minimum=-5) == -3


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("true", True), ("Yes", True), ("0", False),
                                            ("false", False), ("off", False)])
def test_parse_bool_reads_the_usual_spellings(raw, value):
    assert params.parse_bool(raw, "mine") is value


def test_parse_bool_and_choice_name_what_they_take():
    with pytest.raises(params.ParameterError, match="true or false"):
        params.parse_bool("maybe", "mine")
    with pytest.raises(params.ParameterError, match="one of finished, running"):
        params.parse_choice("zzz", "status", ["running", "finished"])


def _bad_gets(run: Run, raw: str) -> list[str]:
    value = quote(raw)
    return [f"/api/runs/?team={value}", f"/api/runs/{run.pk}/events/?after={value}"]


@pytest.mark.parametrize("raw", BAD_NUMBERS)
def test_a_bad_number_in_a_query_is_a_400_naming_the_parameter(api, people, relu_run, raw):
    run = relu_run(user=people["alice"])
    alice = api(people["alice"])

    for url in _bad_gets(run, raw):
        response = alice.get(url)
        assert response.status_code == 400, (url, response.content[:200])
        [(name, [message])] = response.json().items()
        assert name in url and message.startswith("a whole number from 0 to "), message
    imported = alice.post(f"/api/runs/import/?team={quote(raw)}", {}, format="json")
    assert imported.status_code == 400 and list(imported.json()) == ["team"]
    assert Run.objects.count() == 1  # the import wrote nothing


def test_the_signed_out_share_events_refuse_a_bad_after_with_a_400(api, people, relu_run):
    run = relu_run(user=people["alice"])
    token = api(people["alice"]).post(f"/api/runs/{run.pk}/shares/").json()["token"]

    for raw in ("²", "9" * 30, "-1"):
        response = api().get(f"/api/shared/{token}/events/?after={quote(raw)}")
        assert response.status_code == 400 and list(response.json()) == ["after"]
    assert len(api().get(f"/api/shared/{token}/events/?after=1").json()) == run.next_seq - 2


def test_run_list_filters_refuse_an_unknown_status_or_a_word_for_mine(api, people, relu_run):
    relu_run(user=people["alice"])
    alice = api(people["alice"])

    assert alice.get("/api/runs/?status=zzz").json() == {
        "status": ["one of failed, finished, paused, running, stopped, not 'zzz'"]}
    assert list(alice.get("/api/runs/?mine=maybe").json()) == ["mine"]
    assert alice.get("/api/runs/?task=" + "x" * 101).status_code == 400
    for empty in ("status", "mine", "team"):  # present but empty is no value either
        assert list(alice.get(f"/api/runs/?{empty}=").json()) == [empty]
    assert len(alice.get("/api/runs/?status=finished&mine=true").json()) == 1


@pytest.mark.parametrize("path", ["/api/runs/99999999999999999999/", f"/api/runs/{2**63}/events/",
                                  "/api/runs/1/nodes/99999999999999999999/", "/api/tasks/declared/a%00b/",
                                  "/api/shared/not%00a-token/", "/runs/99999999999999999999/"])
def test_a_path_naming_an_impossible_id_or_name_is_a_404(api, people, path):
    response = api(people["alice"]).get(path)

    assert response.status_code == 404
    if path.startswith("/api/"):
        assert response.json() == {"detail": "not found"}  # JSON under /api/, even from Django


def test_an_id_written_with_a_leading_zero_names_nothing(api, people, relu_run):
    run = relu_run(user=people["alice"], drive=False)
    alice = api(people["alice"])

    assert alice.get(f"/api/runs/{run.pk}/").status_code == 200
    assert alice.get(f"/api/runs/00{run.pk}/").status_code == 404
    assert alice.get(f"/api/runs/{run.pk}/events/?after=00").status_code == 400


def test_the_largest_id_a_database_holds_is_a_plain_no_such_run(api, people):
    response = api(people["alice"]).get(f"/api/runs/{2**63 - 1}/")

    assert response.status_code == 404 and response.json() == {"detail": "no such run"}


def test_a_consumer_answers_a_bad_parameter_by_accepting_then_closing_with_a_reason_a_frame_holds():
    from asgiref.sync import async_to_sync

    class Consumer:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        async def accept(self) -> None:
            self.calls.append(("accept",))

        async def close(self, code: int, reason: str) -> None:
            self.calls.append(("close", code, reason))

    consumer = Consumer()
    error = params.ParameterError("team", "é" * 100)  # two bytes a character: one is cut in half

    async_to_sync(params.close_bad_request)(consumer, error)

    (accepted,), (closed, code, reason) = consumer.calls
    assert (accepted, closed, code) == ("accept", "close", 4400)
    assert reason == "team: " + "é" * 58 and len(reason.encode()) == 122 <= params.MAX_CLOSE_REASON_BYTES
