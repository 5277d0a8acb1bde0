"""Text people write that others read refuses text-direction embeddings, overrides and
isolates (issue 34, item 8: only team names did): a run's intent, a writing job's, a
declared task's description, a card's sentence and notes, its comments and reviews;
usernames (Django's validator) too. One rule (accounts.names), a 400 naming the
character, and the schema's pattern agreeing."""

from __future__ import annotations

import jsonschema
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.names import display_text_problem
from lineage.models import SkillCard, SkillComment, SkillReview
from profiling.harness import tasks as task_registry
from profiling.models import DeclaredTask
from search.models import Run, WritingJob

pytestmark = pytest.mark.django_db

OVERRIDE = "approve\u202e.devorppa ton"  # reads "approve not approved." reversed
REFUSED = [("a\u202eb", "U+202E (right-to-left override)"),
           ("\u2067x\u2069", "U+2067 (right-to-left isolate)"),
           ("a\u202ab", "U+202A (left-to-right embedding)"),
           ("bell\x07", "U+0007"), ("esc\x1b[31m", "U+001B")]
# Several lines, tabs, another script and the directional marks its writers need stay.
TAKEN = ["two\nlines\tand a tab",
         "\u05d2\u05e8\u05e2\u05d9\u05df 4 \u200f\u05d1\u05dc\u05d5\u05e7\u05d9\u05dd",
         "\u0627\u0644\u0646\u0648\u0627\u0629 \u061c128", "\u00e9quipe \U0001f680"]


def run_request(intent: str) -> dict:
    relu = task_registry.get("relu")
    return {"task": "relu", "source": relu.naive_source, "plan": relu.naive_plan, "budget": 3,
            "judge": "rules", "seed": 0, "intent": intent}


@pytest.mark.parametrize(("text", "named"), REFUSED)
def test_a_runs_intent_with_a_text_direction_or_control_character_is_refused_naming_it(api, people, text,
                                                                                         named):
    response = api(people["alice"]).post("/api/runs/", run_request(text), format="json")

    assert response.status_code == 400 and list(response.json()) == ["intent"], response.json()
    assert named in response.json()["intent"][0]
    assert not Run.objects.exists()


@pytest.mark.parametrize("text", TAKEN)
def test_a_runs_intent_of_several_lines_or_another_script_is_taken(api, people, text):
    response = api(people["alice"]).post("/api/runs/", run_request(text), format="json")

    assert response.status_code == 201, response.json()
    assert Run.objects.get().intent == text.strip()


def test_a_writing_jobs_intent_is_refused_alike(api, people):
    response = api(people["alice"]).post("/api/kernels/write/", {"task": "relu", "intent": OVERRIDE},
                                         format="json")

    assert response.status_code == 400 and "U+202E" in response.json()["intent"][0], response.json()
    assert not WritingJob.objects.exists()


def test_a_declared_tasks_description_is_refused_alike(api, people, task_dir):
    definition = {"name": "bidi", "description": OVERRIDE, "sizes": {"n": 64},
                  "inputs": [{"name": "x", "dtype": "float32", "shape": ["n"]}],
                  "outputs": [{"name": "y", "dtype": "float32", "shape": ["n"]}],
                  "reference": {"y": "x"}, "tolerances": {"float32": {"atol": 0, "rtol": 0}}}

    response = api(people["alice"]).post("/api/tasks/declared/", definition, format="json")

    assert response.status_code == 400 and "U+202E" in response.json()["description"][0], response.json()
    assert not DeclaredTask.objects.exists()


def test_an_imported_runs_intent_is_refused_alike(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    exported = api(people["alice"]).get(f"/api/runs/{run.pk}/export/").json()
    exported["run"]["intent"] = OVERRIDE

    response = api(people["bob"]).post("/api/runs/import/", exported, format="json")

    assert response.status_code == 400 and "U+202E" in response.json()["run.intent"][0], response.json()
    assert Run.objects.count() == 1


def test_an_imported_nodes_title_is_refused_alike(api, people, relu_run):
    run = relu_run(budget=3, user=people["alice"])
    exported = api(people["alice"]).get(f"/api/runs/{run.pk}/export/").json()
    exported["state"]["tree"]["nodes"][0]["proposal"]["title"] = OVERRIDE

    response = api(people["bob"]).post("/api/runs/import/", exported, format="json")

    assert response.status_code == 400, response.json()
    assert "title" in response.json()["state.tree"][0] and "U+202E" in response.json()["state.tree"][0]
    assert Run.objects.count() == 1


@pytest.fixture
def card(people) -> SkillCard:
    return SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified",
                                    data={"card_id": "vec4-v1", "intent": "VEC4", "sentence": "do vec4"})


@pytest.fixture
def reviewer(people):
    return get_user_model().objects.create_user("rita", password="rita-secret-1", is_staff=True)


def test_a_cards_comments_reviews_and_text_are_refused_alike(api, people, card, reviewer):
    bob, rita = api(people["bob"]), api(reviewer)

    for response, field in [
        (bob.post("/api/skills/vec4-v1/comments/", {"text": OVERRIDE}, format="json"), "text"),
        (rita.post("/api/skills/vec4-v1/review/", {"decision": "approve", "comment": OVERRIDE},
                   format="json"), "comment"),
        (rita.patch("/api/skills/vec4-v1/", {"sentence": OVERRIDE}, format="json"), "sentence"),
        (rita.patch("/api/skills/vec4-v1/", {"notes": OVERRIDE}, format="json"), "notes"),
    ]:
        assert response.status_code == 400, (field, response.content)
        assert "U+202E" in response.json()[field][0], response.json()
    assert not SkillComment.objects.exists() and not SkillReview.objects.exists()
    assert SkillCard.objects.get().versions.count() == 0


def test_a_comment_of_several_lines_is_taken(api, people, card):
    response = api(people["bob"]).post("/api/skills/vec4-v1/comments/", {"text": "first\nsecond"},
                                       format="json")

    assert response.status_code == 201, response.content


def test_a_username_with_a_text_direction_character_cannot_sign_up(settings):
    settings.OPTIML_OPEN_SIGN_UP = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

    Client().post("/accounts/sign-up/", {"username": "admin\u202enimda", "password1": "a-long-passphrase-7",
                                         "password2": "a-long-passphrase-7"}, REMOTE_ADDR="203.0.113.9")

    assert not get_user_model().objects.filter(username__startswith="admin").exists()


@pytest.fixture(scope="module")
def schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


FIELDS = [("RunCreate", "intent"), ("KernelWrite", "intent"), ("DeclaredTaskCreate", "description"),
          ("SkillCommentCreate", "text"), ("SkillReviewCreate", "comment"),
          ("PatchedSkillCardEdit", "sentence"), ("PatchedSkillCardEdit", "notes")]


@pytest.mark.parametrize(("component", "field"), FIELDS)
@pytest.mark.parametrize("text", [text for text, _ in REFUSED] + TAKEN + ["plain words", "next\x85line"])
def test_the_schema_and_the_rule_agree_on_text(schema, component, field, text):
    property_ = schema["components"]["schemas"][component]["properties"][field]
    try:
        jsonschema.validate(text, property_)
        allowed = True
    except jsonschema.ValidationError:
        allowed = False

    assert allowed is (display_text_problem(text) is None), (component, field, text)
