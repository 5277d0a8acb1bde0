"""bench/live_load.py, small: a few real websocket viewers of one live run, served by
daphne as the image runs it over PostgreSQL and Redis, for a few seconds with silent gaps
between bursts of events. The committed run (bench/results/2026-12-07-cpu-live-load/)
is the same code with 200 viewers for 5 minutes and 60 s gaps. Skipped without
REDIS_URL and a PostgreSQL DATABASE_URL, as in CI."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

needs_redis_and_postgres = pytest.mark.skipif(
    not os.environ.get("REDIS_URL") or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs Redis (REDIS_URL) and PostgreSQL (DATABASE_URL), as in CI")

VIEWERS = 4


@pytest.fixture
def bench_database(monkeypatch):
    """A database of the bench's own beside DATABASE_URL's (the bench migrates it), dropped after."""
    import psycopg

    server = os.environ["DATABASE_URL"]
    name = f"optiml_live_load_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    monkeypatch.setenv("DATABASE_URL", urlunsplit(urlsplit(server)._replace(path=f"/{name}")))
    yield
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@needs_redis_and_postgres
@pytest.mark.timeout(300)
def test_a_few_viewers_hear_every_event_once_through_silent_gaps_and_none_is_cut(bench_database, tmp_path):
    from bench import live_load

    out = tmp_path / "live-load.json"
    result = live_load.main(["--out", str(out), "--viewers", str(VIEWERS), "--duration", "8", "--gap", "3",
                             "--steps", "2", "--interval", "0.1"])["result"]

    assert (result["cuts"], result["failed_connects"], result["server_error_lines"]) == (0, 0, 0), result
    assert result["viewers_with_every_event_exactly_once"] == VIEWERS, result
    assert (result["events_lost"], result["events_duplicated"]) == (0, 0)
    assert len(result["bursts_s_from_start"]) >= 2  # a gap between bursts, not one burst
    # Every viewer received every event published while it watched, live (after synced).
    published = result["events_published_while_watched"]
    assert result["latency_ms_commit_to_received"]["samples"] == VIEWERS * published
    assert out.exists()


def test_the_image_waits_for_a_storm_of_handshakes_rather_than_dropping_them():
    """daphne drops a websocket its app has not accepted within 5 s; 200 viewers
    reconnecting at once took 8.5 s on 2 busy cores, and 118 were dropped (the bench's
    README). The image's command, as the bench reads it, waits 30 s."""
    from bench.live_load import server_command

    command = server_command(8000)

    assert command[1:3] == ["-m", "optiml_web.daphne"]
    assert float(command[command.index("--websocket_connect_timeout") + 1]) >= 30
