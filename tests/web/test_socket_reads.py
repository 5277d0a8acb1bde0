"""Websocket handshakes read the database side by side (optiml_web.socket_reads): channels'
thread-sensitive `database_sync_to_async` put every socket's reads in the process on one
thread, so 200 viewers connecting at once queued behind each other (issue 34;
bench/handshakes.py measures it). The access rule itself is tested where it lives
(test_live_runs, test_socket_access, test_skills_live)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from optiml_web import socket_reads

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_sockets_reads_run_at_the_same_time_on_different_threads():
    both_inside = threading.Barrier(2, timeout=5)  # one thread for both: the first waits in vain

    @socket_reads.socket_read
    def read() -> str:
        both_inside.wait()
        return threading.current_thread().name

    async def two():
        return await asyncio.gather(read(), read())

    names = async_to_sync(two)()

    assert len(set(names)) == 2 and all(name.startswith("socket-db") for name in names)


def test_a_read_leaves_no_database_connection_open_behind_it(people):
    @socket_reads.socket_read
    def read() -> int:
        from django.contrib.auth import get_user_model

        return get_user_model().objects.count()

    async def many():
        return await asyncio.gather(*(read() for _ in range(20)))

    from django.contrib.auth import get_user_model

    assert async_to_sync(many)() == [get_user_model().objects.count()] * 20
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        assert cursor.fetchone()[0] == 0


def test_the_pool_is_as_large_as_the_setting_says(settings, monkeypatch):
    monkeypatch.setattr(socket_reads, "_pool", None)
    settings.OPTIML_SOCKET_DB_THREADS = 3

    assert socket_reads._executor()._max_workers == 3
