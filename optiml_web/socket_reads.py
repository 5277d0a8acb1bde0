"""The database reads of websocket consumers, on a pool of threads of their own.

Channels' `database_sync_to_async` is thread-sensitive: with no request around it (a
websocket's handshake has none), every call in the process runs on asgiref's one shared
thread. So every viewer's handshake (the session's user, the access check, the log's end,
the progress) queued behind every other's, 30-40 ms each, and 200 viewers connecting at
once after a restart waited seconds (bench/results/2026-12-07-cpu-live-load/; daphne drops
a handshake the app has not accepted within its --websocket_connect_timeout).

These reads hold nothing that is thread-bound: each is a function of its arguments that
reads through Django's per-thread connection, opened and closed around the call as
`database_sync_to_async` does. So they may run side by side, on at most
OPTIML_SOCKET_DB_THREADS threads (and as many database connections at a time) in a web
process. What a read decides is unchanged: the access rule, the log and the progress are
the same selectors, asked at the same points (search.consumers, lineage.consumers,
search.socket_access). bench/handshakes.py measures the difference.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from channels.auth import AuthMiddleware, CookieMiddleware, SessionMiddleware
from channels.auth import get_user as channels_get_user
from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import connections

_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.OPTIML_SOCKET_DB_THREADS,
                                   thread_name_prefix="socket-db")
    return _pool


class _SocketRead(DatabaseSyncToAsync):
    """`database_sync_to_async`, not thread-sensitive, on this module's pool (made on the
    first call, once settings are read). The pool's threads outlive the call: each closes
    its connection when the read is done, so an idle pool holds none."""

    def __init__(self, func: Callable[..., Any]) -> None:
        super().__init__(func, thread_sensitive=False)

    def thread_handler(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().thread_handler(*args, **kwargs)
        finally:
            connections.close_all()

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._executor = _executor()
        return await super().__call__(*args, **kwargs)


def socket_read(func: Callable[..., Any]) -> _SocketRead:
    """Decorates a consumer's database read: `await read(...)` runs it on the pool."""
    return _SocketRead(func)


_get_user = socket_read(channels_get_user.func)


class PooledAuthMiddleware(AuthMiddleware):
    """Channels' AuthMiddleware, the session's user read on the pool."""

    async def resolve_scope(self, scope: dict) -> None:
        scope["user"]._wrapped = await _get_user(scope)


def AuthMiddlewareStack(inner):  # noqa: N802  (as channels.auth names its own)
    """channels.auth.AuthMiddlewareStack with the session's user read on the pool."""
    return CookieMiddleware(SessionMiddleware(PooledAuthMiddleware(inner)))
