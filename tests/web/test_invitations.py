"""A team's invitations (accounts/joining.py, /api/teams/<id>/invitations/, the page
/accounts/invitations/<token>/): made only by the team's admins, used once, open until they
expire or are revoked; whoever opens one signs up as a member of the team, open sign-up or
not, and a signed-in user joins as themselves. Only the token's hash is stored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts.models import Invitation, Membership, SignUp
from accounts.selectors import team_role

pytestmark = pytest.mark.django_db

GOOD = "a-long-passphrase-7"


@pytest.fixture
def closed(settings):
    """Production's default: no open sign-up."""
    settings.OPTIML_OPEN_SIGN_UP = False


def invite(api, user, team) -> dict:
    response = api(user).post(f"/api/teams/{team.pk}/invitations/")
    assert response.status_code == 201, response.content
    return response.json()


def path_of(invitation: dict) -> str:
    return invitation["url"].removeprefix("http://testserver")


def sign_up_by(path: str, username: str = "newton", client: Client | None = None):
    client = client or Client()
    return client.post(path, {"username": username, "password1": GOOD, "password2": GOOD})


def test_an_admin_makes_a_link_that_signs_a_newcomer_up_into_the_team_with_sign_up_closed(
    people, api, closed
):
    team = people["team"]
    invitation = invite(api, people["dana"], team)
    client = Client()

    assert Client().get("/accounts/sign-up/").status_code == 404  # closed to everyone else
    page = client.get(path_of(invitation))
    assert page.status_code == 200 and "Join kernels" in page.content.decode()
    assert "dana invites you" in page.content.decode()
    response = sign_up_by(path_of(invitation), client=client)

    assert response.status_code == 302 and response["Location"] == "/welcome/"
    newton = get_user_model().objects.get(username="newton")
    assert team_role(user=newton, team_id=team.pk) == Membership.Role.MEMBER
    me = client.get("/api/me/").json()
    assert me == {"username": "newton", "teams": [{"id": team.pk, "name": "kernels"}]}
    assert "You are in kernels." in client.get("/welcome/").content.decode()
    row = Invitation.objects.get(pk=invitation["id"])
    assert row.used_by == newton and row.used_at is not None
    assert SignUp.objects.get(user=newton).invited


def test_only_the_teams_admins_make_or_revoke_invitations(people, api):
    team = people["team"]
    for member in ("alice", "bob"):  # members of the team, not admins
        refused = api(people[member]).post(f"/api/teams/{team.pk}/invitations/")
        assert refused.status_code == 403, member
        assert "only the team's admins" in refused.json()["detail"]
    assert api(people["carol"]).post(f"/api/teams/{team.pk}/invitations/").status_code == 404  # a stranger
    assert api().post(f"/api/teams/{team.pk}/invitations/").status_code == 401
    assert not Invitation.objects.exists()

    made = invite(api, people["dana"], team)
    assert api(people["bob"]).delete(f"/api/teams/{team.pk}/invitations/{made['id']}/").status_code == 403
    assert Invitation.objects.get().revoked_at is None


def test_a_link_works_once(people, api, closed):
    invitation = invite(api, people["dana"], people["team"])

    assert sign_up_by(path_of(invitation), "first").status_code == 302
    again = Client().get(path_of(invitation))
    second = sign_up_by(path_of(invitation), "second")

    assert again.status_code == 404 and "This invitation cannot be used" in again.content.decode()
    assert second.status_code == 404
    assert not get_user_model().objects.filter(username="second").exists()


def test_a_claim_that_loses_the_race_makes_no_account(settings):
    """Two people submit one link at once: the second's claim finds it used and its
    account is rolled back with it (the conditional update's count is checked)."""
    from accounts import joining, services

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    team = services.team_create(name="racers")
    token = "a-token-for-the-race"
    Invitation.objects.create(team=team, token_hash=Invitation.digest(token),
                              expires=timezone.now() + timedelta(days=1))

    joining.user_sign_up(username="quick", password=GOOD, ip_address=None, invitation_token=token)
    with pytest.raises(joining.InvitationUnusable):
        joining.user_sign_up(username="slow", password=GOOD, ip_address=None, invitation_token=token)

    assert list(get_user_model().objects.values_list("username", flat=True)) == ["quick"]
    assert list(team.memberships.values_list("user__username", flat=True)) == ["quick"]


@pytest.mark.parametrize("state", ["expired", "revoked"])
def test_the_claim_itself_refuses_an_expired_or_revoked_invitation(settings, state):
    """The service checks again what the page checked when it opened: a link may expire or
    be revoked while its form is being filled in."""
    from accounts import joining, services

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    now = timezone.now()
    expires = now - timedelta(seconds=1) if state == "expired" else now + timedelta(days=1)
    Invitation.objects.create(team=services.team_create(name="late"), token_hash=Invitation.digest("tok"),
                              expires=expires, revoked_at=now if state == "revoked" else None)

    with pytest.raises(joining.InvitationUnusable):
        joining.user_sign_up(username="late", password=GOOD, ip_address=None, invitation_token="tok")
    assert not get_user_model().objects.exists()


def test_an_expired_link_opens_nothing(people, api, closed, settings):
    invitation = invite(api, people["dana"], people["team"])
    row = Invitation.objects.get(pk=invitation["id"])
    assert timedelta(days=settings.OPTIML_INVITATION_DAYS - 1) < row.expires - timezone.now() \
        <= timedelta(days=settings.OPTIML_INVITATION_DAYS)

    Invitation.objects.filter(pk=row.pk).update(expires=timezone.now() - timedelta(seconds=1))

    assert Client().get(path_of(invitation)).status_code == 404
    assert sign_up_by(path_of(invitation)).status_code == 404
    assert not get_user_model().objects.filter(username="newton").exists()
    assert api(people["dana"]).get(f"/api/teams/{people['team'].pk}/invitations/").json() == []


def test_a_revoked_link_opens_nothing_and_revoking_twice_is_a_404(people, api, closed):
    team = people["team"]
    invitation = invite(api, people["dana"], team)
    url = f"/api/teams/{team.pk}/invitations/{invitation['id']}/"

    assert api(people["dana"]).delete(url).status_code == 204
    assert api(people["dana"]).delete(url).status_code == 404

    assert Client().get(path_of(invitation)).status_code == 404
    assert sign_up_by(path_of(invitation)).status_code == 404


def test_a_made_up_token_is_a_404_with_the_message_never_a_500(closed):
    for path in ("/accounts/invitations/not-a-real-token/", "/accounts/invitations/" + "A" * 128 + "/"):
        response = Client().get(path)
        assert response.status_code == 404 and "This invitation cannot be used" in response.content.decode()
    assert Client().get("/accounts/invitations/bad%20token/").status_code == 404  # not a token at all


def test_the_form_on_an_invitation_checks_the_password_as_sign_up_does(people, api, closed):
    invitation = invite(api, people["dana"], people["team"])

    weak = Client().post(path_of(invitation), {"username": "newton", "password1": "12345678",
                                                "password2": "12345678"})
    taken = sign_up_by(path_of(invitation), "bob")

    assert weak.status_code == 200 and "This password is too common." in weak.content.decode()
    assert taken.status_code == 200 and "A user with that username already exists." in taken.content.decode()
    assert Invitation.objects.get(pk=invitation["id"]).used_at is None  # still open for a good try
    assert sign_up_by(path_of(invitation)).status_code == 302


def test_a_signed_in_user_joins_as_themselves(people, api, closed):
    team, carol = people["team"], people["carol"]
    invitation = invite(api, people["dana"], team)
    client = Client()
    client.force_login(carol)

    page = client.get(path_of(invitation))
    assert page.status_code == 200 and "Join kernels as carol" in page.content.decode()
    assert 'name="password1"' not in page.content.decode()
    response = client.post(path_of(invitation))

    assert response.status_code == 302 and response["Location"] == "/teams/"
    assert team_role(user=carol, team_id=team.pk) == Membership.Role.MEMBER
    assert Invitation.objects.get(pk=invitation["id"]).used_by == carol
    assert Client().get(path_of(invitation)).status_code == 404  # used


def test_a_member_who_opens_a_link_keeps_their_role_and_leaves_the_link_open(people, api):
    team, dana = people["team"], people["dana"]
    invitation = invite(api, dana, team)
    client = Client()
    client.force_login(dana)

    assert "You are in kernels already" in client.get(path_of(invitation)).content.decode()
    assert client.post(path_of(invitation)).status_code == 302

    assert team_role(user=dana, team_id=team.pk) == Membership.Role.ADMIN
    assert Invitation.objects.get(pk=invitation["id"]).used_at is None


def test_the_team_lists_its_open_invitations_without_their_tokens(people, api):
    team = people["team"]
    made = [invite(api, people["dana"], team) for _ in range(2)]
    api(people["dana"]).delete(f"/api/teams/{team.pk}/invitations/{made[0]['id']}/")

    listed = api(people["bob"]).get(f"/api/teams/{team.pk}/invitations/")

    assert listed.status_code == 200
    assert [row["id"] for row in listed.json()] == [made[1]["id"]]
    assert listed.json()[0]["created_by"] == "dana"
    token = path_of(made[1]).rstrip("/").rsplit("/", 1)[-1]
    assert token not in listed.content.decode()
    assert Invitation.objects.get(pk=made[1]["id"]).token_hash == Invitation.digest(token)
    assert not Invitation.objects.filter(token_hash=token).exists()
    assert api(people["carol"]).get(f"/api/teams/{team.pk}/invitations/").status_code == 404


def test_invitation_sign_ups_do_not_count_against_the_open_sign_up_limit(people, api, settings):
    settings.OPTIML_OPEN_SIGN_UP = True
    settings.OPTIML_SIGN_UP_ADDRESS_LIMIT = 1
    links = [invite(api, people["dana"], people["team"]) for _ in range(2)]

    invited = [sign_up_by(path_of(link), f"invited{i}").status_code for i, link in enumerate(links)]
    assert invited == [302, 302]
    assert Client().post("/accounts/sign-up/", {"username": "open", "password1": GOOD,
                                                "password2": GOOD}).status_code == 302
    assert Client().post("/accounts/sign-up/", {"username": "open2", "password1": GOOD,
                                                "password2": GOOD}).status_code == 429


def test_an_invitations_token_never_reaches_the_log():
    from optiml_web.log_redaction import redact

    token = "Zx9-_abcDEF123"
    for line in (f'"GET /accounts/invitations/{token}/ HTTP/1.1" 200',
                 f'"GET /accounts/login/?next=/accounts/invitations/{token}/ HTTP/1.1" 200',
                 f'"GET /accounts/login/?next=%2Faccounts%2Finvitations%2F{token}%2F HTTP/1.1" 200'):
        assert token not in redact(line), line
    assert redact("DELETE /api/teams/3/invitations/12/") == "DELETE /api/teams/3/invitations/12/"
