"""Access to a live socket, checked again whenever it may have been taken away.

A socket (a run's viewer, search.consumers; a skill card's, lineage.consumers) is let in
at its handshake. What let it in can end while it stays open: a membership (a member
removed or leaving, a role changed, the team deleted), the session that signed it in
(signing out; a password set, which ends the user's sessions; the user made inactive or
deleted), the run (moved to another team or creator, deleted) or the share link it came
with (revoked or deleted, by the API or the admin). So every socket of a signed-in user
joins the group `user.<id>` (search.broadcast.user_group), and when the user's access
changes that group hears "look again" (search.broadcast.access_changed_after_commit,
after the change commits); when a run's changes, the run's group hears it. Each socket
then asks the selector it asked at connect, for the user its session signs in *now*
(accounts.selectors.session_user), and closes with its "may not see" code if the answer
is no. The message carries no verdict, so a repeated one costs a re-check; nothing it says
can let anybody see more. A lost one, and what sends none (a session that expires, a
change written past the signals), is caught by each socket asking again unprompted every
few minutes (RECHECK_EVERY_S).

Setting a password re-keys the session it was set from (Django's update_session_auth_hash),
so the sockets that session had opened close too: the page reconnects under its new key.

The messages are sent from signal receivers, not from accounts.services: memberships,
users, runs and links change by more paths than the services (the admin, a team's or a
user's deletion cascading, `manage.py changepassword`), and accounts sits below the apps
whose sockets these are. Visitors who came by a share link, signed out, are in no user
group: a revoked or deleted link closes their sockets
(search.broadcast.share_revoked_after_commit).
"""

from __future__ import annotations

import asyncio
import logging
import random

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_init, post_save

from accounts import selectors as account_selectors
from accounts.models import Membership
from optiml_web.socket_reads import socket_read
from search import broadcast
from search.models import Run, ShareLink

log = logging.getLogger(__name__)

# How often an open socket asks again with no message to prompt it, in seconds: the
# backstop for what sends none (a session that expires; a change written past the models'
# signals, such as a queryset update) and for a message lost with the channel layer
# (broadcast.group_send logs and drops it). Each asks a few indexed reads: 5,000 viewers
# (bench/results/2026-11-29-browser-live-5000.json) about 17 checks a second.
RECHECK_EVERY_S = 300.0


class AccessRechecked:
    """Mixed into a websocket consumer whose access rests on its signed-in user or link.

    The consumer calls `follow_user()` in connect before it checks access (a change that
    commits between the two is then heard, as "join first, then read" for news),
    `recheck_periodically()` once it has accepted, and `unfollow_user()` when it refuses
    or disconnects; it implements `recheck_access(user)`, which closes the socket when
    `user` (or the link it came with) may no longer see what it shows."""

    user_group: str | None = None
    session_key: str | None = None
    periodic_recheck: asyncio.Task | None = None

    async def follow_user(self) -> None:
        user = self.scope.get("user")
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None else None
        if user is None or not user.is_authenticated:
            return
        self.user_group = broadcast.user_group(user.pk)
        await self.channel_layer.group_add(self.user_group, self.channel_name)

    def recheck_periodically(self) -> None:
        self.periodic_recheck = asyncio.create_task(self._recheck_every_while())

    async def _recheck_every_while(self) -> None:
        while True:
            # Spread over half a period: the sockets a restart reopens together ask apart.
            await asyncio.sleep(random.uniform(RECHECK_EVERY_S / 2, RECHECK_EVERY_S))
            try:
                await self.access_changed({})
            except Exception:  # the database away a moment: ask again next time
                log.exception("socket %s: access not checked again", self.scope.get("path", "?")[:200])

    async def unfollow_user(self) -> None:
        if self.periodic_recheck is not None:
            self.periodic_recheck.cancel()
            self.periodic_recheck = None
        if self.user_group is not None:
            await self.channel_layer.group_discard(self.user_group, self.channel_name)
            self.user_group = None

    async def access_changed(self, message: dict) -> None:
        """Ask again, as whom this socket's session signs in now."""
        if self.session_key is not None and message.get("session_ended") == self.session_key:
            user = AnonymousUser()  # being signed out: its row may outlive this message a moment
        else:
            user = await _session_user(self.session_key)
        await self.recheck_access(user)

    async def recheck_access(self, user) -> None:
        raise NotImplementedError


@socket_read
def _session_user(session_key: str | None):
    return account_selectors.session_user(session_key=session_key)


def membership_saved(sender, instance: Membership, created: bool, **kwargs) -> None:
    # A new membership takes nothing away; a changed role may.
    if not created:
        broadcast.access_changed_after_commit(user_id=instance.user_id)


def membership_deleted(sender, instance: Membership, **kwargs) -> None:
    broadcast.access_changed_after_commit(user_id=instance.user_id)


def signed_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        broadcast.access_changed_after_commit(user_id=user.pk, session_ended=request.session.session_key)


def user_saved(sender, instance, created: bool, update_fields=None, **kwargs) -> None:
    # A sign-in saves last_login alone, which ends nothing; any other save may have set a
    # password (ending the user's sessions) or made the user inactive: their sockets look.
    if not created and not (update_fields is not None and set(update_fields) <= {"last_login"}):
        broadcast.access_changed_after_commit(user_id=instance.pk)


def user_deleted(sender, instance, **kwargs) -> None:
    broadcast.access_changed_after_commit(user_id=instance.pk)


def _run_access(run: Run) -> tuple[int | None, int | None]:
    # From __dict__: a field deferred by .only() is not read (one query per run) just to
    # be remembered; a save cannot change a field it did not load.
    return run.__dict__.get("team_id"), run.__dict__.get("created_by_id")


def run_loaded(sender, instance: Run, **kwargs) -> None:
    instance._access_as_loaded = _run_access(instance)


def run_saved(sender, instance: Run, created: bool, **kwargs) -> None:
    # Who may see a run rests on its team and creator: their viewers look when either
    # changes (the admin's run page). A run's steps save it often; they change neither.
    if not created and _run_access(instance) != getattr(instance, "_access_as_loaded", None):
        broadcast.run_access_changed_after_commit(run_id=instance.pk)
    instance._access_as_loaded = _run_access(instance)


def run_deleted(sender, instance: Run, **kwargs) -> None:
    broadcast.run_access_changed_after_commit(run_id=instance.pk)


def share_link_saved(sender, instance: ShareLink, created: bool, **kwargs) -> None:
    # The API revokes by a conditional update and says so itself (sharing_services.share_revoke);
    # the admin revokes by setting revoked_at and saving.
    if instance.revoked_at is not None:
        broadcast.share_revoked_after_commit(run_id=instance.run_id, share_id=instance.pk)


def share_link_deleted(sender, instance: ShareLink, **kwargs) -> None:
    broadcast.share_revoked_after_commit(run_id=instance.run_id, share_id=instance.pk)


def connect_receivers() -> None:
    """Called once, from SearchConfig.ready()."""
    user = get_user_model()
    for signal, receiver, sender in [
        (post_save, membership_saved, Membership), (post_delete, membership_deleted, Membership),
        (post_save, user_saved, user), (post_delete, user_deleted, user),
        (post_init, run_loaded, Run), (post_save, run_saved, Run), (post_delete, run_deleted, Run),
        (post_save, share_link_saved, ShareLink), (post_delete, share_link_deleted, ShareLink),
    ]:
        signal.connect(receiver, sender=sender, dispatch_uid=f"socket_access.{receiver.__name__}")
    user_logged_out.connect(signed_out, dispatch_uid="socket_access.signed_out")
