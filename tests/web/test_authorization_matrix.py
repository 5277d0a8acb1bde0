"""Who may do what, over every endpoint in the URL conf and every method its view takes.

The routes are read from Django's resolver: a new endpoint (or a new method on one) with
no row in MATRIX fails `test_every_endpoint_and_method_has_a_row`. Each row sends real
requests as each role, against real rows (a team run, a private run, a team and a private
declared task, share links, a report our gate wrote), each inside a savepoint rolled back
afterwards, so every role meets the same state. Each answer must have the row's status,
and no answer may carry a private thing to a role that may not see it (a marker per
thing: the run's intent, the task's name), unless the request itself named it. A write
that is refused must change nothing.

Roles: the run's owner (alice), a member of its team (bob), an admin of its team (dana),
a member of another team (erin), a user in no team (carol), a visitor (anonymous), and a
visitor holding the team run's share link (share_holder).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.urls import URLResolver, get_resolver
from rest_framework.test import APIClient

from accounts import services as accounts
from accounts.models import Invitation, Membership
from lineage.models import SkillCard, SkillCardVersion, SkillComment, SkillReview
from profiling.harness import tasks as task_registry
from profiling.models import DeclaredTask, Evaluation
from search.models import Run, RunNode, ShareLink, WritingJob
from tests.web.conftest import store_recorded_lineage

pytestmark = pytest.mark.django_db

ROLES = ["owner", "member", "admin", "other_team", "no_team", "anonymous", "share_holder"]
SIGNED_IN = ["owner", "member", "admin", "other_team", "no_team"]
TEAM = ["owner", "member", "admin"]
VISITORS = ["anonymous", "share_holder"]


def expect(default: int, **by_role: int) -> dict[str, int]:
    return {role: by_role.get(role, default) for role in ROLES}


# Reading and driving a run shared with the team, and one kept private by its owner.
READ_TEAM_RUN = expect(404, owner=200, member=200, admin=200, anonymous=401, share_holder=401)
# A team's skill library: its members read and comment, its admins (and reviewers) review.
READ_TEAM_LIBRARY = READ_TEAM_RUN
REVIEW_TEAM_LIBRARY = expect(404, owner=403, member=403, admin=200, anonymous=401, share_holder=401)
READ_PRIVATE_RUN = expect(404, owner=200, anonymous=401, share_holder=401)
DRIVE_TEAM_RUN = expect(404, owner=200, member=403, admin=200, anonymous=401, share_holder=401)
DRIVE_PRIVATE_RUN = expect(404, owner=200, anonymous=401, share_holder=401)
ANY_SIGNED_IN = expect(200, anonymous=401, share_holder=401)
BY_LINK = expect(404, share_holder=200)
PAGE = expect(200, anonymous=302, share_holder=302)
PUBLIC = expect(200)
WRONG_PASSWORD = {"username": "alice", "password": "nope"}
WRONG_OLD_PASSWORD = {"old_password": "nope", "new_password1": "new-secret-42",
                      "new_password2": "new-secret-42"}
# Sent as JSON, which a form view does not read: an empty form, answered with its errors.
MISTYPED_SIGN_UP = {"username": "newton", "password1": "new-secret-42", "password2": "new-secret-43"}


@dataclass
class Probe:
    """One request, sent as every role. `path` and `body` may depend on the role (a share
    link's URL, say); `statuses` is what each role must get."""

    method: str
    path: str | Callable[[str], str]
    statuses: dict[str, int]
    body: Any = None
    changes_nothing_unless: tuple[int, ...] = (200, 201, 204, 302)  # a refusal writes nothing

    def path_for(self, role: str) -> str:
        return self.path(role) if callable(self.path) else self.path


@dataclass
class World:
    team_run: Run
    private_run: Run
    token: str  # the team run's share link
    private_token: str
    team_share: int
    private_share: int
    team_task: str
    private_task: str
    team_id: int
    other_team_id: int
    export: dict
    lineage_id: int
    writing_job: int  # alice's
    invitation: str  # the path of dana's open invitation to the team (its token in it)
    invitation_id: int
    users: dict[str, Any] = field(default_factory=dict)
    # marker -> the roles that may see it; a marker is text only that thing contains
    markers: dict[str, list[str]] = field(default_factory=dict)


@pytest.fixture
def world(people, relu_run, api, task_dir, settings, tmp_path) -> World:
    settings.OPTIML_OPEN_SIGN_UP = True  # the embedded default; off, its page is a 404 to all
    erin = get_user_model().objects.create_user("erin", password="erin-secret-1")
    other_team = accounts.team_create(name="others", admin=erin)
    # frank is in another team with dana, the team's admin: the one she may add by name.
    frank = get_user_model().objects.create_user("frank", password="frank-secret-1")
    accounts.membership_set(team=accounts.team_create(name="reviewers", admin=people["dana"]), user=frank)
    alice, team = people["alice"], people["team"]
    team_run = relu_run(user=alice, team=team, intent="MARK-TEAM-RUN intent")
    private_run = relu_run(user=alice, intent="MARK-PRIVATE-RUN intent")
    Run.objects.filter(pk__in=[team_run.pk, private_run.pk]).update(status=Run.Status.RUNNING)  # mid-search
    settings.OPTIML_WORKDIR = tmp_path
    report = tmp_path / "relu-537c95419d00.ncu-rep"
    report.write_bytes(b"NCU-REP of the root")
    evaluation = RunNode.objects.get(run=team_run, node_id=0).evaluation  # both roots: one kernel
    evaluation.source, evaluation.verdict["profile"]["report_path"] = Evaluation.Source.GATE, str(report)
    evaluation.save()
    owner = api(alice)
    team_share, private_share = (owner.post(f"/api/runs/{run.pk}/shares/").json()
                                 for run in (team_run, private_run))
    names = {}
    for slug, team_id in (("mark-team-task", team.pk), ("mark-private-task", None)):
        response = owner.post("/api/tasks/declared/", {
            "name": slug, "sizes": {"n": 1024}, "inputs": [{"name": "x", "shape": ["n"]}],
            "outputs": [{"name": "y", "shape": ["n"]}], "reference": {"y": "np.maximum(x, 0)"},
            "team": team_id}, format="json")
        assert response.status_code == 201, response.json()
        names[slug] = response.json()["name"]
    export = owner.get(f"/api/runs/{team_run.pk}/export/").json()
    card = {"sentence": "float4", "effects": {"speedup": {"n": 1, "median": 1.2, "min": 1.2, "max": 1.2}},
            "evidence": {"lineages": 1, "transitions": 1}, "scope": {"tasks": ["relu"], "arch": "sm_90"},
            "anchor": {"rewrites": [], "steps": []}}
    SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified", data=card)
    # The team's own copy, in its library: only its members may read it.
    SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified", team=team,
                             data={**card, "sentence": "MARK-TEAM-CARD float4"})
    for run in (team_run, private_run):  # a node the card made in each run
        root = RunNode.objects.get(run=run, node_id=0)
        RunNode.objects.create(run=run, node_id=99, parent_id=0, candidate=root.candidate, state="done",
                               engine={**root.engine, "id": 99, "parent": 0, "depth": 1, "created": 99},
                               source="skill:vec4-v1", title="VEC4: relu's step", status="passed",
                               level="screen", time_ms=0.5)
    users = {"owner": alice, "member": people["bob"], "admin": people["dana"], "other_team": erin,
             "no_team": people["carol"]}
    # A kernel alice had written from an intent: hers alone, whatever team she is in.
    job = WritingJob.objects.create(task="relu", intent="MARK-WRITING-JOB intent", created_by=alice)
    invitation = api(people["dana"]).post(f"/api/teams/{team.pk}/invitations/").json()
    invitation_path = invitation["url"].removeprefix("http://testserver")
    return World(
        team_run=team_run, private_run=private_run, token=team_share["token"],
        private_token=private_share["token"], team_share=team_share["id"], private_share=private_share["id"],
        team_task=names["mark-team-task"], private_task=names["mark-private-task"], team_id=team.pk,
        other_team_id=other_team.pk, export=export, users=users, lineage_id=store_recorded_lineage("relu").pk,
        writing_job=job.pk, invitation=invitation_path, invitation_id=invitation["id"],
        # The team run's link opens it (and only it) to whoever holds the link.
        markers={"MARK-TEAM-RUN": [*TEAM, "share_holder"], "MARK-PRIVATE-RUN": ["owner"],
                 names["mark-team-task"]: TEAM, names["mark-private-task"]: ["owner"], "MARK-TEAM-CARD": TEAM,
                 "MARK-WRITING-JOB": ["owner"], invitation_path.split("/")[-2]: [],
                 team_share["token"]: [], private_share["token"]: []})


def _relabelled(export: dict, task: str) -> dict:
    data = copy.deepcopy(export)
    data["run"]["task"] = data["state"]["task"] = task
    return data


def _declared_kernel(world: World, api) -> dict:
    plan = api(world.users["owner"]).get(f"/api/tasks/declared/{world.private_task}/").json()["starting_plan"]
    kernel = plan["launches"][0]["kernel"]
    source = f'extern "C" __global__ void {kernel}(const float* x, float* y, int n) {{ }}\n'
    return {"task": world.private_task, "source": source, "plan": plan, "budget": 1}


def _run_probes(world: World, kind: str, path: str) -> list[Probe]:
    """The same request on the team run and on the private run."""
    team = {"read": READ_TEAM_RUN, "drive": DRIVE_TEAM_RUN}[kind]
    private = {"read": READ_PRIVATE_RUN, "drive": DRIVE_PRIVATE_RUN}[kind]
    method = "GET" if kind == "read" else "POST"
    return [Probe(method, path.format(run=world.team_run.pk), team),
            Probe(method, path.format(run=world.private_run.pk), private)]


def _by_link(world: World, rest: str) -> Callable[[str], str]:
    # The holder uses the link; everyone else can only guess one.
    return lambda role: f"/api/shared/{world.token if role == 'share_holder' else 'a-guessed-token'}/{rest}"


def matrix(world: World, api) -> dict[str, dict[str, list[Probe]]]:
    relu = task_registry.get("relu")
    launch = {"task": "relu", "source": relu.naive_source, "plan": relu.naive_plan, "budget": 1}
    declared = {"sizes": {"n": 64}, "inputs": [{"name": "x", "shape": ["n"]}],
                "outputs": [{"name": "y", "shape": ["n"]}], "reference": {"y": "x"}}
    team_only = expect(400, owner=201, member=201, admin=201, anonymous=401, share_holder=401)
    owner_only = expect(400, owner=201, anonymous=401, share_holder=401)
    return {
        "accounts/login/": {
            "GET": [Probe("GET", "/accounts/login/", PUBLIC)],
            "POST": [Probe("POST", "/accounts/login/", PUBLIC, body=WRONG_PASSWORD)],
            "PUT": [Probe("PUT", "/accounts/login/", PUBLIC, body=WRONG_PASSWORD)],
        },
        "accounts/logout/": {"POST": [Probe("POST", "/accounts/logout/", expect(302))]},
        # Changing one's own password: the form to anyone signed in (a wrong current
        # password answers it again, with its error); a visitor is sent to sign in.
        "accounts/password/": {
            "GET": [Probe("GET", "/accounts/password/", PAGE)],
            "POST": [Probe("POST", "/accounts/password/", PAGE, body=WRONG_OLD_PASSWORD)],
            "PUT": [Probe("PUT", "/accounts/password/", PAGE, body=WRONG_OLD_PASSWORD)],
        },
        "accounts/password/done/": {"GET": [Probe("GET", "/accounts/password/done/", PAGE)]},
        # Signing up (open here): a visitor gets the form (again, with its errors); anyone
        # signed in is sent on to the first-run page.
        "accounts/sign-up/": {
            "GET": [Probe("GET", "/accounts/sign-up/", expect(302, anonymous=200, share_holder=200))],
            "POST": [Probe("POST", "/accounts/sign-up/", expect(302, anonymous=200, share_holder=200),
                           body=MISTYPED_SIGN_UP)]},
        # An invitation: its link opens the sign-up form to a visitor and a "join" button to
        # anyone signed in (who joins on POST, or is in the team already); a guess opens nothing.
        "accounts/invitations/<token:token>/": {
            "GET": [Probe("GET", world.invitation, PUBLIC),
                    Probe("GET", "/accounts/invitations/a-guessed-token/", expect(404))],
            "POST": [Probe("POST", world.invitation, expect(302, anonymous=200, share_holder=200),
                           body=MISTYPED_SIGN_UP),
                     Probe("POST", "/accounts/invitations/a-guessed-token/", expect(404),
                           body=MISTYPED_SIGN_UP)]},
        "welcome/": {"GET": [Probe("GET", "/welcome/", PAGE)]},
        "api/me/": {"GET": [Probe("GET", "/api/me/", ANY_SIGNED_IN)]},
        # Teams: any signed-in user makes one; its members see it; its admins manage it
        # (dana is the team's admin; alice and bob are members); anyone else gets a 404.
        "api/teams/": {"GET": [Probe("GET", "/api/teams/", ANY_SIGNED_IN)],
                       "POST": [Probe("POST", "/api/teams/", expect(201, anonymous=401, share_holder=401),
                                      body={"name": "a new team"})]},
        "api/teams/<id:team_id>/": {"GET": [Probe("GET", f"/api/teams/{world.team_id}/", READ_TEAM_RUN)]},
        "api/teams/<id:team_id>/members/": {"POST": [
            Probe("POST", f"/api/teams/{world.team_id}/members/",
                  expect(404, owner=403, member=403, admin=201, anonymous=401, share_holder=401),
                  body={"username": "frank", "role": "member"})]},
        "api/teams/<id:team_id>/members/<username:username>/": {
            "PATCH": [Probe("PATCH", f"/api/teams/{world.team_id}/members/bob/",
                            expect(404, owner=403, member=403, admin=200, anonymous=401, share_holder=401),
                            body={"role": "admin"})],
            "DELETE": [Probe("DELETE", f"/api/teams/{world.team_id}/members/bob/",  # bob may leave
                             expect(404, owner=403, member=204, admin=204, anonymous=401,
                                    share_holder=401))]},
        # A team's invitations: its members see the open ones (never a token); its admins
        # make and revoke them.
        "api/teams/<id:team_id>/invitations/": {
            "GET": [Probe("GET", f"/api/teams/{world.team_id}/invitations/", READ_TEAM_RUN)],
            "POST": [Probe("POST", f"/api/teams/{world.team_id}/invitations/",
                           expect(404, owner=403, member=403, admin=201, anonymous=401, share_holder=401))]},
        "api/teams/<id:team_id>/invitations/<id:invitation_id>/": {"DELETE": [
            Probe("DELETE", f"/api/teams/{world.team_id}/invitations/{world.invitation_id}/",
                  expect(404, owner=403, member=403, admin=204, anonymous=401, share_holder=401))]},
        "teams/": {"GET": [Probe("GET", "/teams/", PAGE)]},
        "runs/compare/": {"GET": [Probe("GET", "/runs/compare/", PAGE)]},
        "api/runs/compare/": {"GET": [
            Probe("GET", f"/api/runs/compare/?a={world.team_run.pk}&b={world.team_run.pk}", READ_TEAM_RUN),
            Probe("GET", f"/api/runs/compare/?a={world.team_run.pk}&b={world.private_run.pk}",
                  READ_PRIVATE_RUN)]},
        "api/tasks/": {"GET": [Probe("GET", "/api/tasks/", ANY_SIGNED_IN)]},
        "api/tasks/declared/": {
            "GET": [Probe("GET", "/api/tasks/declared/", ANY_SIGNED_IN)],
            "POST": [Probe("POST", "/api/tasks/declared/", expect(201, anonymous=401, share_holder=401),
                           body={"name": "anyones", **declared}),
                     Probe("POST", "/api/tasks/declared/", team_only,
                           body={"name": "for-the-team", "team": world.team_id, **declared})],
        },
        "api/tasks/declared/<task:name>/": {"GET": [
            Probe("GET", f"/api/tasks/declared/{world.team_task}/", READ_TEAM_RUN),
            Probe("GET", f"/api/tasks/declared/{world.private_task}/", READ_PRIVATE_RUN)]},
        "api/sources/": {"GET": [Probe("GET", "/api/sources/", ANY_SIGNED_IN)]},
        "api/demo/": {"GET": [Probe("GET", "/api/demo/", ANY_SIGNED_IN)]},
        "api/kernels/write/": {"POST": [  # no LLM is configured: a 400 for all who get that far
            Probe("POST", "/api/kernels/write/", expect(400, anonymous=401, share_holder=401),
                  body={"task": world.private_task, "intent": "relu"})]},
        "api/kernels/write/<id:job_id>/": {"GET": [
            Probe("GET", f"/api/kernels/write/{world.writing_job}/", READ_PRIVATE_RUN)]},
        "api/runs/": {
            "GET": [Probe("GET", "/api/runs/", ANY_SIGNED_IN),
                    Probe("GET", f"/api/runs/?team={world.team_id}", ANY_SIGNED_IN)],
            "POST": [Probe("POST", "/api/runs/", expect(201, anonymous=401, share_holder=401), body=launch),
                     Probe("POST", "/api/runs/", team_only, body={**launch, "team": world.team_id}),
                     Probe("POST", "/api/runs/", owner_only, body=_declared_kernel(world, api))],
        },
        "api/runs/preflight/": {"POST": [  # checks only: nothing is made, for anyone signed in
            Probe("POST", "/api/runs/preflight/", expect(200, anonymous=401, share_holder=401),
                  body={k: launch[k] for k in ("task", "source", "plan")}),
            Probe("POST", "/api/runs/preflight/", expect(400, owner=200, anonymous=401, share_holder=401),
                  body={k: v for k, v in _declared_kernel(world, api).items() if k != "budget"})]},
        "api/runs/import/": {"POST": [
            Probe("POST", "/api/runs/import/", owner_only,
                  body=_relabelled(world.export, world.private_task)),
            Probe("POST", f"/api/runs/import/?team={world.team_id}", team_only, body=world.export),
            Probe("POST", f"/api/runs/import/?team={world.other_team_id}",
                  expect(400, anonymous=401, share_holder=401, other_team=201), body=world.export)]},
        "api/runs/<id:run_id>/": {"GET": _run_probes(world, "read", "/api/runs/{run}/")},
        "api/runs/<id:run_id>/nodes/": {"GET": _run_probes(world, "read", "/api/runs/{run}/nodes/")},
        "api/runs/<id:run_id>/nodes.csv": {"GET": _run_probes(world, "read", "/api/runs/{run}/nodes.csv")},
        "api/runs/<id:run_id>/nodes.json": {"GET": _run_probes(world, "read", "/api/runs/{run}/nodes.json")},
        "api/runs/<id:run_id>/nodes/<id:node_id>/": {
            "GET": _run_probes(world, "read", "/api/runs/{run}/nodes/0/")},
        "api/runs/<id:run_id>/nodes/<id:node_id>/ncu-report/": {
            "GET": _run_probes(world, "read", "/api/runs/{run}/nodes/0/ncu-report/")},
        "api/runs/<id:run_id>/pause/": {"POST": _run_probes(world, "drive", "/api/runs/{run}/pause/")},
        "api/runs/<id:run_id>/resume/": {"POST": [  # a running run cannot resume: 409 once allowed
            Probe("POST", f"/api/runs/{world.team_run.pk}/resume/",
                  {**DRIVE_TEAM_RUN, "owner": 409, "admin": 409}),
            Probe("POST", f"/api/runs/{world.private_run.pk}/resume/", {**DRIVE_PRIVATE_RUN, "owner": 409})]},
        "api/runs/<id:run_id>/stop/": {"POST": _run_probes(world, "drive", "/api/runs/{run}/stop/")},
        "api/runs/<id:run_id>/events/": {"GET": _run_probes(world, "read", "/api/runs/{run}/events/")},
        "api/runs/<id:run_id>/shares/": {
            "GET": [Probe("GET", f"/api/runs/{world.team_run.pk}/shares/", DRIVE_TEAM_RUN),
                    Probe("GET", f"/api/runs/{world.private_run.pk}/shares/", DRIVE_PRIVATE_RUN)],
            "POST": [Probe("POST", f"/api/runs/{world.team_run.pk}/shares/",
                           {**DRIVE_TEAM_RUN, "owner": 201, "admin": 201}),
                     Probe("POST", f"/api/runs/{world.private_run.pk}/shares/",
                           {**DRIVE_PRIVATE_RUN, "owner": 201})],
        },
        "api/runs/<id:run_id>/shares/<id:share_id>/": {"DELETE": [
            Probe("DELETE", f"/api/runs/{world.team_run.pk}/shares/{world.team_share}/",
                  {**DRIVE_TEAM_RUN, "owner": 204, "admin": 204}),
            Probe("DELETE", f"/api/runs/{world.private_run.pk}/shares/{world.private_share}/",
                  {**DRIVE_PRIVATE_RUN, "owner": 204}),
            # A link of the private run, through the team run's URL: not that run's link.
            Probe("DELETE", f"/api/runs/{world.team_run.pk}/shares/{world.private_share}/",
                  {**DRIVE_TEAM_RUN, "owner": 404, "admin": 404})]},
        "api/runs/<id:run_id>/export/": {"GET": _run_probes(world, "read", "/api/runs/{run}/export/")},
        "api/shared/<token:token>/": {"GET": [Probe("GET", _by_link(world, ""), BY_LINK)]},
        "api/shared/<token:token>/events/": {"GET": [Probe("GET", _by_link(world, "events/"), BY_LINK)]},
        "api/shared/<token:token>/nodes.csv": {"GET": [Probe("GET", _by_link(world, "nodes.csv"), BY_LINK)]},
        "api/shared/<token:token>/nodes.json": {
            "GET": [Probe("GET", _by_link(world, "nodes.json"), BY_LINK)]},
        "api/shared/<token:token>/nodes/<id:node_id>/": {
            "GET": [Probe("GET", _by_link(world, "nodes/0/"), BY_LINK)]},
        "api/shared/<token:token>/nodes/<id:node_id>/ncu-report/": {
            "GET": [Probe("GET", _by_link(world, "nodes/0/ncu-report/"), BY_LINK)]},
        # The project's skill library: read and discussed by anyone signed in, reviewed
        # only by its reviewers (the project's admins; none of these roles is one).
        "api/skills/": {"GET": [Probe("GET", "/api/skills/", ANY_SIGNED_IN),
                                Probe("GET", "/api/skills/?sort=effect&task=relu", ANY_SIGNED_IN),
                                Probe("GET", f"/api/skills/?team={world.team_id}", READ_TEAM_LIBRARY),
                                Probe("GET", f"/api/skills/?team={world.other_team_id}",
                                      expect(404, other_team=200, anonymous=401, share_holder=401))]},
        "api/skills/libraries/": {"GET": [Probe("GET", "/api/skills/libraries/", ANY_SIGNED_IN)]},
        # Copying the default library into a team: the team's admins and reviewers.
        "api/skills/copy/": {"POST": [
            Probe("POST", "/api/skills/copy/", {**REVIEW_TEAM_LIBRARY, "admin": 201},
                  body={"team": world.team_id}),
            Probe("POST", "/api/skills/copy/", expect(404, other_team=201, anonymous=401, share_holder=401),
                  body={"team": world.other_team_id, "cards": ["vec4-v1"]})]},
        "api/lineages/": {"GET": [Probe("GET", "/api/lineages/", ANY_SIGNED_IN)]},
        "api/lineages/<id:lineage_id>/": {"GET": [
            Probe("GET", f"/api/lineages/{world.lineage_id}/", ANY_SIGNED_IN),
            Probe("GET", "/api/lineages/999999/", expect(404, anonymous=401, share_holder=401))]},
        "api/skills/export/": {"GET": [Probe("GET", "/api/skills/export/", ANY_SIGNED_IN),
                                       Probe("GET", f"/api/skills/export/?team={world.team_id}",
                                             READ_TEAM_LIBRARY)]},
        "api/skills/import/": {"POST": [  # the default library's reviewers; none of these roles is one
            Probe("POST", "/api/skills/import/", expect(403, anonymous=401, share_holder=401),
                  body={"format": "optiml-skill-library", "version": 1, "cards": []}),
            # The team's admin gets past the permission to the file's check (it has no cards).
            Probe("POST", f"/api/skills/import/?team={world.team_id}", {**REVIEW_TEAM_LIBRARY, "admin": 400},
                  body={"format": "optiml-skill-library", "version": 1, "cards": []})]},
        "api/skills/<card:card_id>/": {
            "GET": [Probe("GET", "/api/skills/vec4-v1/", ANY_SIGNED_IN),
                    Probe("GET", f"/api/skills/vec4-v1/?team={world.team_id}", READ_TEAM_LIBRARY)],
            "PATCH": [Probe("PATCH", "/api/skills/vec4-v1/", expect(403, anonymous=401, share_holder=401),
                            body={"sentence": "float4 loads"}),
                      Probe("PATCH", f"/api/skills/vec4-v1/?team={world.team_id}", REVIEW_TEAM_LIBRARY,
                            body={"sentence": "float4 loads"})]},
        # The card's usage: only nodes of runs the role may see (the markers check it).
        "api/skills/<card:card_id>/usage/": {
            "GET": [Probe("GET", "/api/skills/vec4-v1/usage/", ANY_SIGNED_IN),
                    Probe("GET", f"/api/skills/vec4-v1/usage/?team={world.team_id}", READ_TEAM_LIBRARY)]},
        "api/skills/<card:card_id>/effects/": {
            "GET": [Probe("GET", "/api/skills/vec4-v1/effects/", ANY_SIGNED_IN),
                    Probe("GET", f"/api/skills/vec4-v1/effects/?team={world.team_id}", READ_TEAM_LIBRARY)]},
        "api/skills/<card:card_id>/versions/": {
            "GET": [Probe("GET", "/api/skills/vec4-v1/versions/", ANY_SIGNED_IN),
                    Probe("GET", f"/api/skills/vec4-v1/versions/?team={world.team_id}", READ_TEAM_LIBRARY)]},
        "api/skills/<card:card_id>/review/": {"POST": [
            Probe("POST", "/api/skills/vec4-v1/review/", expect(403, anonymous=401, share_holder=401),
                  body={"decision": "approve", "comment": "fine"}),
            Probe("POST", f"/api/skills/vec4-v1/review/?team={world.team_id}",
                  {**REVIEW_TEAM_LIBRARY, "admin": 201}, body={"decision": "approve", "comment": "fine"})]},
        "api/skills/<card:card_id>/comments/": {
            "GET": [Probe("GET", "/api/skills/vec4-v1/comments/", ANY_SIGNED_IN),
                    Probe("GET", f"/api/skills/vec4-v1/comments/?team={world.team_id}", READ_TEAM_LIBRARY)],
            "POST": [Probe("POST", "/api/skills/vec4-v1/comments/",
                           expect(201, anonymous=401, share_holder=401),
                           body={"text": "does it hold for odd N?"}),
                     Probe("POST", f"/api/skills/vec4-v1/comments/?team={world.team_id}",
                           {**READ_TEAM_LIBRARY, **{r: 201 for r in TEAM}},
                           body={"text": "does it hold for odd N?"})]},
        "api/schema/": {"GET": [Probe("GET", "/api/schema/", PUBLIC)]},
        "api/docs/": {"GET": [Probe("GET", "/api/docs/", PUBLIC),
                              Probe("GET", "/api/docs/?script=", PUBLIC)]},
        # The pages are shells the front end fills from the API: no run data in them.
        "": {"GET": [Probe("GET", "/", expect(302))]},
        "runs/": {"GET": [Probe("GET", "/runs/", PAGE)]},
        "runs/new/": {"GET": [Probe("GET", "/runs/new/", PAGE)]},
        "runs/<id:run_id>/": {"GET": [Probe("GET", f"/runs/{world.private_run.pk}/", PAGE)]},
        "share/<token:token>/": {"GET": [Probe("GET", f"/share/{world.token}/", PUBLIC)]},
        "skills/": {"GET": [Probe("GET", "/skills/", PAGE)]},
        "lineages/<id:lineage_id>/": {"GET": [Probe("GET", f"/lineages/{world.lineage_id}/", PAGE)]},
        "skills/<card:card_id>/": {"GET": [Probe("GET", "/skills/vec4-v1/", PAGE)]},
    }


# -- the routes, from the resolver -------------------------------------------------------


def _routes() -> dict[str, list[str]]:
    """route -> the methods its view answers (the admin as one prefix, checked apart)."""

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if str(pattern.pattern) == "admin/":
                    continue
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern.callback

    routes = {}
    for route, callback in walk(get_resolver().url_patterns):
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        if view is None:  # a function view (the pages): GET is what it is for
            routes[route] = ["GET"]
        else:
            routes[route] = sorted(m.upper() for m in view.http_method_names
                                   if m not in ("options", "head") and hasattr(view, m))
    return routes


def test_every_endpoint_and_method_has_a_row(world, api):
    rows = matrix(world, api)

    assert {route: sorted(methods) for route, methods in rows.items()} == _routes()


def _client(world: World, role: str) -> APIClient:
    client = APIClient()
    if role in world.users:
        client.force_login(world.users[role])
    return client


def _state() -> tuple:
    """What a refused write must leave as it was."""
    return (list(Run.objects.order_by("pk").values_list("pk", "status", "drive_token")),
            list(ShareLink.objects.order_by("pk").values_list("pk", "revoked_at")),
            list(DeclaredTask.objects.order_by("pk").values_list("pk", "name")),
            RunNode.objects.count(), list(SkillCard.objects.order_by("pk").values_list("pk", "status")),
            SkillReview.objects.count(), SkillComment.objects.count(), SkillCardVersion.objects.count(),
            list(WritingJob.objects.order_by("pk").values_list("pk", "status")),
            get_user_model().objects.count(),
            list(Membership.objects.order_by("pk").values_list("pk", "role")),
            list(Invitation.objects.order_by("pk").values_list("pk", "used_at", "revoked_at")))


def _body_text(response) -> str:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


ROWS = sorted(_routes())


@pytest.mark.parametrize("route", ROWS)
def test_each_role_gets_what_its_row_says_and_sees_nothing_private(world, api, route):
    failures = []
    for probes in matrix(world, api)[route].values():
        for probe in probes:
            for role in ROLES:
                failures += _check(world, probe, role)
    assert not failures, "\n".join(failures)


def _check(world: World, probe: Probe, role: str) -> list[str]:
    path = probe.path_for(role)
    asked = f"{path} {probe.body!r}"
    with transaction.atomic():
        client = _client(world, role)
        before = _state()
        response = client.generic(probe.method, path, *_encoded(probe.body))
        text, after = _body_text(response), _state()
        transaction.set_rollback(True)
    where = f"{probe.method} {path} as {role}"
    problems = []
    if response.status_code != probe.statuses[role]:
        problems.append(f"{where}: {response.status_code}, expected {probe.statuses[role]}: {text[:200]}")
    if response.status_code not in probe.changes_nothing_unless and after != before:
        problems.append(f"{where}: refused ({response.status_code}) yet changed the database")
    for marker, allowed in world.markers.items():
        if marker in text and role not in allowed and marker not in asked:
            problems.append(f"{where}: leaks {marker!r}")
    return problems


def _encoded(body: Any) -> tuple:
    import json

    if body is None:
        return ()
    return (json.dumps(body), "application/json")


# -- the admin and the websocket -----------------------------------------------------------


def test_the_admin_lets_no_role_in_not_even_to_its_lists(world):
    from django.contrib import admin

    lists = ["/admin/", *(f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
                          for model in admin.site._registry)]
    for role in ROLES:
        client = _client(world, role)
        for path in lists:
            response = client.get(path)
            assert response.status_code == 302 and "/admin/login/" in response["Location"], (role, path)


def test_the_login_form_posts_as_a_form_and_signs_in(world, client):
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-secret-1"})

    assert response.status_code == 302


WEBSOCKET_ACCESS = {"ws/runs/<id:run_id>/": {"team": [*TEAM, "share_holder"], "private": ["owner"]},
                    "ws/skills/<card:card_id>/": {"default": SIGNED_IN, "team": TEAM},
                    "": {}}  # the catch-all (optiml_web/sockets.py): nobody, 4404


@pytest.mark.django_db(transaction=True)
def test_the_live_view_websocket_lets_in_exactly_who_may_see_the_run(world, settings):
    """The websocket routes, from the router: each role connects to the team run and the
    private run (the share holder with the team run's link), and follows the default
    library's card and the team's copy; the others are refused, 4404."""
    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator
    from django.test import Client

    from optiml_web.asgi import application, websocket_urlpatterns

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.OPTIML_LIVE_POLL_S = settings.OPTIML_CARD_POLL_S = 0
    assert {str(route.pattern) for route in websocket_urlpatterns} == set(WEBSOCKET_ACCESS)
    sessions = {}
    for role, user in world.users.items():
        client = Client()
        client.force_login(user)
        sessions[role] = client.cookies["sessionid"].value

    async def connect(role: str, run: Run) -> tuple[bool, Any]:
        share = world.token if role == "share_holder" else "a-guessed-token"
        headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
        if role in sessions:
            headers.append((b"cookie", f"sessionid={sessions[role]}".encode()))
        ws = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/?after=0&share={share}", headers=headers)
        connected, code = await ws.connect()
        first = await ws.receive_json_from(timeout=5) if connected else None
        await ws.disconnect()
        return connected, code if not connected else first["type"]

    access = WEBSOCKET_ACCESS["ws/runs/<id:run_id>/"]
    for which, run in (("team", world.team_run), ("private", world.private_run)):
        for role in ROLES:
            seen = async_to_sync(connect)(role, run)
            expected = (True, "events") if role in access[which] else (False, 4404)
            assert seen == expected, (which, role, seen)

    async def follow(role: str, path: str) -> tuple[bool, Any]:
        headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
        if role in sessions:
            headers.append((b"cookie", f"sessionid={sessions[role]}".encode()))
        ws = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await ws.connect()
        first = await ws.receive_json_from(timeout=5) if connected else None
        await ws.disconnect()
        return connected, code if not connected else first["type"]

    access = WEBSOCKET_ACCESS["ws/skills/<card:card_id>/"]
    paths = {"default": "/ws/skills/vec4-v1/", "team": f"/ws/skills/vec4-v1/?team={world.team_id}"}
    for which, path in paths.items():
        for role in ROLES:
            seen = async_to_sync(follow)(role, path)
            expected = (True, "card") if role in access[which] else (False, 4404)
            assert seen == expected, (which, role, seen)
    assert async_to_sync(follow)("owner", "/ws/skills/nope-v1/") == (False, 4404)
    for role in ROLES:  # a path no app routes: refused alike, whoever asks
        assert async_to_sync(follow)(role, "/ws/elsewhere/") == (False, 4404), role
