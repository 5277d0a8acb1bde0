"""Teams in the app (/api/teams/ and the /teams/ page's API): make a team, add colleagues by
username, set roles, remove them or leave; a team always keeps an admin; refusals name
their field and change nothing."""

from __future__ import annotations

import pytest

from accounts.models import Membership, Team

pytestmark = pytest.mark.django_db


def test_a_person_makes_a_team_adds_a_colleague_and_makes_them_admin(api, people):
    alice = api(people["alice"])
    made = alice.post("/api/teams/", {"name": "  attention   kernels "}, format="json")
    assert made.status_code == 201 and made.json()["name"] == "attention kernels"
    team = made.json()
    assert team["role"] == "admin" and team["members"] == [{"username": "alice", "role": "admin"}]

    # bob is alice's colleague in the kernels team: she may add him by his name.
    added = alice.post(f"/api/teams/{team['id']}/members/", {"username": "bob"}, format="json")
    assert added.status_code == 201 and {"username": "bob", "role": "member"} in added.json()["members"]
    promoted = alice.patch(f"/api/teams/{team['id']}/members/bob/", {"role": "admin"}, format="json")
    assert promoted.status_code == 200
    assert api(people["bob"]).get(f"/api/teams/{team['id']}/").json()["role"] == "admin"
    assert team["id"] in {t["id"] for t in api(people["bob"]).get("/api/me/").json()["teams"]}


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"name": ""}, "name", "blank"), ({"name": "   "}, "name", "blank"),
    ({"name": "x" * 101}, "name", "100"),
    ({"name": 443}, "name", "Text is required, not int"),  # DRF's CharField took it as "443"
])
def test_bad_team_names_are_refused_on_the_name(api, people, body, field, words):
    response = api(people["alice"]).post("/api/teams/", body, format="json")  # alice is in kernels
    assert response.status_code == 400 and words in response.json()[field][0]
    assert Team.objects.count() == 1


def test_a_name_the_users_teams_hold_and_a_member_added_twice_are_conflicts(api, people):
    """Sound requests that the teams as they stand refuse: 409, with the field's message."""
    taken = api(people["alice"]).post("/api/teams/", {"name": "KERNELS"}, format="json")  # in kernels
    assert taken.status_code == 409 and "you are in a team named 'KERNELS' already" in taken.json()["name"][0]
    twice = api(people["dana"]).post(f"/api/teams/{people['team'].pk}/members/", {"username": "bob"},
                                     format="json")
    assert twice.status_code == 409 and "in the team already" in twice.json()["username"][0]
    assert Team.objects.count() == 1


def test_adding_refuses_unknown_people_and_bad_roles(api, people):
    dana, team = api(people["dana"]), people["team"]
    base = f"/api/teams/{team.pk}/members/"
    for body, field, words in [({"username": "nobody"}, "username", "is in a team with you"),
                               ({"username": "carol"}, "username", "is in a team with you"),
                               ({"username": "carol", "role": "owner"}, "role", "not a valid choice")]:
        response = dana.post(base, body, format="json")
        assert response.status_code == 400 and words in str(response.json()[field]), response.json()
    assert not Membership.objects.filter(team=team, user=people["carol"]).exists()


def test_a_team_keeps_an_admin(api, people):
    dana, team = api(people["dana"]), people["team"]
    base = f"/api/teams/{team.pk}/members/"
    demoted = dana.patch(f"{base}dana/", {"role": "member"}, format="json")
    assert demoted.status_code == 409 and "at least one admin" in demoted.json()["role"][0]
    left = dana.delete(f"{base}dana/")
    assert left.status_code == 409 and "at least one admin" in left.json()["role"][0]
    assert dana.patch(f"{base}bob/", {"role": "admin"}, format="json").status_code == 200
    assert dana.delete(f"{base}dana/").status_code == 204  # now someone else is admin
    assert api(people["dana"]).get(f"/api/teams/{team.pk}/").status_code == 404


def test_members_may_leave_but_not_manage(api, people):
    bob, team = api(people["bob"]), people["team"]
    base = f"/api/teams/{team.pk}/members/"
    assert bob.post(base, {"username": "carol"}, format="json").status_code == 403
    assert bob.delete(f"{base}alice/").status_code == 403
    assert bob.delete(f"{base}bob/").status_code == 204
    assert not Membership.objects.filter(team=team, user=people["bob"]).exists()
    assert api(people["carol"]).get(f"/api/teams/{team.pk}/").status_code == 404  # not hers to see


def test_the_teams_page_needs_sign_in(client, people):
    assert client.get("/teams/").status_code == 302
    client.force_login(people["alice"])
    assert b'data-page="teams"' in client.get("/teams/").content
