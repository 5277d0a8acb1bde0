"""Access to a live socket ends when what let it in ends (issue 34, part 3): a member removed
from a team, leaving it, or its team deleted stops seeing the team's runs and cards at
once, and signing out closes the sockets that session opened; a link's visitors are
unaffected. So do the changes made past the services (the admin, cascades): a password
set or a user made inactive or deleted, a run moved out of a team or deleted, a link
revoked in the admin or deleted. Through the real ASGI application, as tests/web/test_live_runs.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from importlib import import_module

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.models import Session
from django.test import Client, RequestFactory
from django.utils import timezone

from accounts import services as accounts
from accounts.models import Team
from lineage.models import SkillCard
from search import sharing_services, socket_access
from search.models import Run, ShareLink
from tests.web.test_live_runs import MEMORY, socket
from tests.web.test_skills_api import card_data

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = {"type": "websocket.close", "code": 4404}  # the consumers' "may not see"

remove = database_sync_to_async(accounts.member_remove)
set_role = database_sync_to_async(accounts.member_set_role)
delete_team = database_sync_to_async(lambda team: Team.objects.get(pk=team.pk).delete())


@pytest.fixture
def live(settings):
    settings.CHANNEL_LAYERS = MEMORY
    settings.OPTIML_LIVE_POLL_S = 0
    settings.OPTIML_CARD_POLL_S = 0  # a card's socket hears only messages
    return settings


def session_of(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@database_sync_to_async
def sign_out(session: str) -> None:
    client = Client()
    client.cookies["sessionid"] = session
    assert client.post("/accounts/logout/").status_code == 302


@pytest.fixture
def team_run(people, relu_run):
    return relu_run(budget=1, user=people["alice"], team=people["team"])


@pytest.fixture
def team_card(people):
    return SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="induced", team=people["team"],
                                    data=card_data("vec4-v1", "VEC4", 1.16, 2, ["relu"]))


async def watching_run(run_id: int, session: str | None = None, share: str = "") -> WebsocketCommunicator:
    ws = socket(f"/ws/runs/{run_id}/?share={share}", session)
    assert (await ws.connect())[0]
    while (await ws.receive_json_from(timeout=5))["type"] != "synced":
        pass
    return ws


async def watching_card(path: str, session: str) -> WebsocketCommunicator:
    ws = socket(path, session)
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(timeout=5))["type"] == "card"
    return ws


async def still_open(ws: WebsocketCommunicator) -> bool:
    silent = await ws.receive_nothing(timeout=0.3)
    await ws.disconnect()
    return silent


@pytest.mark.parametrize("actor", ["dana", "bob"], ids=["removed by an admin", "leaving"])
def test_a_member_watching_a_team_run_is_closed_when_their_membership_ends_and_nobody_else_is(
        live, people, team_run, actor):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    bob, dana = session_of(people["bob"]), session_of(people["dana"])

    async def scenario():
        member = await watching_run(team_run.pk, bob)
        admin = await watching_run(team_run.pk, dana)
        visitor = await watching_run(team_run.pk, share=token)
        await remove(team=people["team"], actor=people[actor], username="bob")
        closed = await member.receive_output(timeout=2)
        return closed, await still_open(admin), await still_open(visitor)

    closed, admin_open, visitor_open = async_to_sync(scenario)()

    assert closed == CLOSED
    assert admin_open and visitor_open


def test_a_member_who_came_with_a_link_keeps_watching_by_the_link_until_it_is_revoked(
        live, people, team_run):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    bob = session_of(people["bob"])
    revoke = database_sync_to_async(sharing_services.share_revoke)

    async def scenario():
        member = await watching_run(team_run.pk, bob, share=token)
        await remove(team=people["team"], actor=people["dana"], username="bob")
        kept = await member.receive_nothing(timeout=0.3)
        await revoke(run=team_run, share_id=link.pk)
        return kept, await member.receive_output(timeout=2)

    kept, closed = async_to_sync(scenario)()

    assert kept  # the link still lets anyone see the run
    assert closed == CLOSED  # and only the link did, once bob had left the team


def test_a_role_change_leaves_a_member_who_may_still_see_watching(live, people, team_run, team_card):
    bob = session_of(people["bob"])

    async def scenario():
        run = await watching_run(team_run.pk, bob)
        card = await watching_card(f"/ws/skills/vec4-v1/?team={people['team'].pk}", bob)
        await set_role(team=people["team"], actor=people["dana"], username="bob", role="reviewer")
        return await still_open(run), await still_open(card)

    assert async_to_sync(scenario)() == (True, True)


def test_a_member_watching_a_team_librarys_card_is_closed_when_removed_and_keeps_the_default_librarys(
        live, people, team_card):
    SkillCard.objects.create(card_id="exp-v1", intent="EXP", status="induced",
                             data=card_data("exp-v1", "EXP", 1.3, 2, ["relu"]))
    bob, alice = session_of(people["bob"]), session_of(people["alice"])

    async def scenario():
        team_cards = await watching_card(f"/ws/skills/vec4-v1/?team={people['team'].pk}", bob)
        default_card = await watching_card("/ws/skills/exp-v1/", bob)
        colleague = await watching_card(f"/ws/skills/vec4-v1/?team={people['team'].pk}", alice)
        await remove(team=people["team"], actor=people["dana"], username="bob")
        closed = await team_cards.receive_output(timeout=2)
        return closed, await still_open(default_card), await still_open(colleague)

    closed, default_open, colleague_open = async_to_sync(scenario)()

    assert closed == CLOSED
    assert default_open and colleague_open


def test_deleting_a_team_closes_its_members_sockets_on_its_runs_and_cards(live, people, team_run, team_card):
    bob, alice = session_of(people["bob"]), session_of(people["alice"])

    async def scenario():
        run = await watching_run(team_run.pk, bob)
        card = await watching_card(f"/ws/skills/vec4-v1/?team={people['team'].pk}", bob)
        creator = await watching_run(team_run.pk, alice)  # she made the run: it stays hers
        await delete_team(people["team"])
        return (await run.receive_output(timeout=2), await card.receive_output(timeout=2),
                await still_open(creator))

    run_closed, card_closed, creator_open = async_to_sync(scenario)()

    assert run_closed == CLOSED and card_closed == CLOSED
    assert creator_open


def test_signing_out_closes_the_sockets_that_session_opened_and_no_others(live, people, team_run):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    laptop, phone = session_of(people["bob"]), session_of(people["bob"])
    SkillCard.objects.create(card_id="exp-v1", intent="EXP", status="induced",
                             data=card_data("exp-v1", "EXP", 1.3, 2, ["relu"]))

    async def scenario():
        run = await watching_run(team_run.pk, laptop)
        card = await watching_card("/ws/skills/exp-v1/", laptop)
        by_link = await watching_run(team_run.pk, laptop, share=token)
        other_session = await watching_run(team_run.pk, phone)
        visitor = await watching_run(team_run.pk, share=token)
        await sign_out(laptop)
        closed = (await run.receive_output(timeout=2), await card.receive_output(timeout=2))
        return closed, [await still_open(ws) for ws in (by_link, other_session, visitor)]

    closed, kept = async_to_sync(scenario)()

    assert closed == (CLOSED, CLOSED)
    assert kept == [True, True, True]


def test_a_session_signed_out_before_connecting_is_refused(live, people, team_run):
    bob = session_of(people["bob"])
    async_to_sync(sign_out)(bob)

    async def connect():
        ws = socket(f"/ws/runs/{team_run.pk}/", bob)
        return await ws.connect()

    assert async_to_sync(connect)() == (False, 4404)


def test_a_socket_takes_its_session_as_ended_when_the_sign_out_is_signalled_before_the_row_goes(
        live, people, team_run):
    """Django signals a sign-out before it deletes the session: a socket that read the row
    in between would find it still there and stay open."""
    bob = session_of(people["bob"])
    signing_out = RequestFactory().post("/accounts/logout/")
    signing_out.session = import_module(live.SESSION_ENGINE).SessionStore(bob)
    signal = database_sync_to_async(user_logged_out.send)

    async def scenario():
        ws = await watching_run(team_run.pk, bob)
        await signal(sender=type(people["bob"]), request=signing_out, user=people["bob"])
        return await ws.receive_output(timeout=2)

    assert async_to_sync(scenario)() == CLOSED


# -- the user, the run and the link changed by other paths than the services ----------------


@database_sync_to_async
def change_password_on_the_page(session: str, old: str, new: str) -> None:
    client = Client()
    client.cookies["sessionid"] = session
    response = client.post("/accounts/password/", {"old_password": old, "new_password1": new,
                                                   "new_password2": new})
    assert response.status_code == 302, response.content


@database_sync_to_async
def as_the_admin_saves(user, **fields) -> None:
    """What the admin's user page does: load the row, change it, save it whole."""
    row = type(user).objects.get(pk=user.pk)
    for name, value in fields.items():
        if name == "password":
            row.set_password(value)
        else:
            setattr(row, name, value)
    row.save()


@pytest.mark.parametrize("change", ["password on the page", "password by an admin", "made inactive",
                                    "deleted"])
def test_a_change_that_ends_a_users_sessions_closes_the_sockets_they_opened(live, people, team_run, change):
    laptop, phone = session_of(people["bob"]), session_of(people["bob"])
    alice = session_of(people["alice"])
    bob = people["bob"]
    make_change = {
        "password on the page": lambda: change_password_on_the_page(laptop, "bob-secret-1", "a-new-one-77x"),
        "password by an admin": lambda: as_the_admin_saves(bob, password="an-admins-choice-77x"),
        "made inactive": lambda: as_the_admin_saves(bob, is_active=False),
        "deleted": lambda: database_sync_to_async(type(bob).objects.filter(pk=bob.pk).delete)(),
    }[change]

    async def scenario():
        stolen = await watching_run(team_run.pk, phone)
        colleague = await watching_run(team_run.pk, alice)
        await make_change()
        return await stolen.receive_output(timeout=2), await still_open(colleague)

    closed, colleague_open = async_to_sync(scenario)()

    assert closed == CLOSED
    assert colleague_open


def test_signing_in_again_leaves_the_users_other_sockets_open(live, people, team_run):
    """A sign-in saves the user (its last_login): that ends no session."""
    bob = session_of(people["bob"])

    async def scenario():
        ws = await watching_run(team_run.pk, bob)
        await database_sync_to_async(session_of)(people["bob"])
        return await still_open(ws)

    assert async_to_sync(scenario)()


@pytest.mark.parametrize("change", ["revoked in the admin", "deleted"])
def test_a_link_revoked_or_deleted_outside_the_api_closes_its_visitors(live, people, team_run, change):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    other, other_token = sharing_services.share_create(run=team_run, user=people["alice"])

    @database_sync_to_async
    def end_link():
        if change == "deleted":
            ShareLink.objects.get(pk=link.pk).delete()
        else:  # the admin's form: revoked_at set, the row saved
            row = ShareLink.objects.get(pk=link.pk)
            row.revoked_at = timezone.now()
            row.save()

    async def scenario():
        visitor = await watching_run(team_run.pk, share=token)
        other_visitor = await watching_run(team_run.pk, share=other_token)
        await end_link()
        return await visitor.receive_output(timeout=2), await still_open(other_visitor)

    closed, other_open = async_to_sync(scenario)()

    assert closed == CLOSED
    assert other_open


def test_a_run_moved_out_of_a_team_closes_the_teams_members_and_keeps_its_creator_and_link(
        live, people, team_run):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    bob, alice = session_of(people["bob"]), session_of(people["alice"])

    @database_sync_to_async
    def move_out():  # the admin's run page: the row loaded, its team cleared, saved whole
        run = Run.objects.get(pk=team_run.pk)
        run.team = None
        run.save()

    async def scenario():
        member = await watching_run(team_run.pk, bob)
        creator = await watching_run(team_run.pk, alice)
        visitor = await watching_run(team_run.pk, share=token)
        await move_out()
        return await member.receive_output(timeout=2), await still_open(creator), await still_open(visitor)

    closed, creator_open, visitor_open = async_to_sync(scenario)()

    assert closed == CLOSED
    assert creator_open and visitor_open


def test_a_saved_run_whose_team_and_creator_are_unchanged_leaves_its_viewers_alone(live, people, team_run):
    bob = session_of(people["bob"])

    async def scenario():
        ws = await watching_run(team_run.pk, bob)
        await database_sync_to_async(lambda: Run.objects.get(pk=team_run.pk).save())()
        return await still_open(ws)

    assert async_to_sync(scenario)()


def test_deleting_a_run_closes_every_socket_on_it(live, people, team_run):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    alice = session_of(people["alice"])

    async def scenario():
        creator = await watching_run(team_run.pk, alice)
        visitor = await watching_run(team_run.pk, share=token)
        await database_sync_to_async(lambda: Run.objects.filter(pk=team_run.pk).delete())()
        return await creator.receive_output(timeout=2), await visitor.receive_output(timeout=2)

    assert async_to_sync(scenario)() == (CLOSED, CLOSED)


# -- what sends no message: each socket asks again unprompted ------------------------------


@pytest.fixture
def rechecking(live, monkeypatch):
    monkeypatch.setattr(socket_access, "RECHECK_EVERY_S", 0.2)
    return live


def test_a_session_that_expires_while_its_sockets_are_open_closes_them(rechecking, people, team_run,
                                                                      team_card):
    bob, alice = session_of(people["bob"]), session_of(people["alice"])
    expire = database_sync_to_async(lambda: Session.objects.filter(session_key=bob).update(
        expire_date=timezone.now() - timedelta(seconds=1)))

    async def scenario():
        run = await watching_run(team_run.pk, bob)
        card = await watching_card(f"/ws/skills/vec4-v1/?team={people['team'].pk}", bob)
        colleague = await watching_run(team_run.pk, alice)
        await expire()
        return (await run.receive_output(timeout=2), await card.receive_output(timeout=2),
                await still_open(colleague))

    run_closed, card_closed, colleague_open = async_to_sync(scenario)()

    assert run_closed == CLOSED and card_closed == CLOSED
    assert colleague_open


def test_a_link_revoked_with_no_message_sent_closes_its_visitors_all_the_same(rechecking, people, team_run):
    """A queryset update sends no signal, as a message lost with the channel layer."""
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    revoke_quietly = database_sync_to_async(lambda: ShareLink.objects.filter(pk=link.pk).update(
        revoked_at=timezone.now()))

    async def scenario():
        visitor = await watching_run(team_run.pk, share=token)
        await revoke_quietly()
        return await visitor.receive_output(timeout=2)

    assert async_to_sync(scenario)() == CLOSED


def test_asking_again_and_again_leaves_a_viewer_who_may_see_watching(rechecking, people, team_run, team_card):
    link, token = sharing_services.share_create(run=team_run, user=people["alice"])
    bob = session_of(people["bob"])

    async def scenario():
        sockets = [await watching_run(team_run.pk, bob), await watching_run(team_run.pk, share=token),
                   await watching_card(f"/ws/skills/vec4-v1/?team={people['team'].pk}", bob)]
        await asyncio.sleep(1)  # five periods and more
        return [await still_open(ws) for ws in sockets]

    assert async_to_sync(scenario)() == [True, True, True]
