"""Access to a live socket, checked again whenever it may have been taken away.

A socket (a run's viewer, search.consumers; a skill card's, lineage.consumers) is let in
at its handshake. What let it in can end while it stays open: a membership (a member
removed or leaving, a role changed, the team deleted) or the session that signed it in
(signing out). So every socket of a signed-in user joins the group `user.<id>`
(search.broadcast.user_group), and when either changes that group hears "look again"
(search.broadcast.access_changed_after_commit, after the change commits). Each socket
then asks the selector it asked at connect, for the user its session signs in *now*
(accounts.selectors.session_user), and closes with its "may not see" code if the answer
is no. The message carries no verdict, so a repeated one costs a re-check and a lost one
leaves a socket as open as it was; nothing it says can let anybody see more.

The messages are sent from signal receivers, not from accounts.services: memberships end
by more paths than the services (the admin's team page, a team's or a user's deletion
cascading), and accounts sits below the apps whose sockets these are. Visitors who came
by a share link, signed out, are in no user group: a revoked link closes their sockets
(search.broadcast.share_revoked_after_commit).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save

from accounts import selectors as account_selectors
from accounts.models import Membership
from search import broadcast


class AccessRechecked:
    """Mixed into a websocket consumer whose access rests on its signed-in user.

    The consumer calls `follow_user()` in connect before it checks access (a change that
    commits between the two is then heard, as "join first, then read" for news), and
    `unfollow_user()` when it refuses or disconnects; it implements `recheck_access(user)`,
    which closes the socket when `user` may no longer see what it shows."""

    user_group: str | None = None
    session_key: str | None = None

    async def follow_user(self) -> None:
        user = self.scope.get("user")
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None else None
        if user is None or not user.is_authenticated:
            return
        self.user_group = broadcast.user_group(user.pk)
        await self.channel_layer.group_add(self.user_group, self.channel_name)

    async def unfollow_user(self) -> None:
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


@database_sync_to_async
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


def connect_receivers() -> None:
    """Called once, from SearchConfig.ready()."""
    post_save.connect(membership_saved, sender=Membership, dispatch_uid="socket_access.membership_saved")
    post_delete.connect(membership_deleted, sender=Membership,
                        dispatch_uid="socket_access.membership_deleted")
    user_logged_out.connect(signed_out, dispatch_uid="socket_access.signed_out")
