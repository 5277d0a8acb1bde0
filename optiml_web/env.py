"""Reading settings from the environment: small helpers that fail loudly.

Every helper raises ImproperlyConfigured with the variable's name when a value cannot be
understood, so a typo in a deployment stops the process at start-up instead of turning
into a default nobody asked for. settings.py is a list of calls to these.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "", *, environ: Mapping[str, str] = os.environ) -> str:
    # Empty counts as unset: an env file line "NAME=" must not mean "the empty string".
    return environ.get(name) or default


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] = os.environ) -> bool:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use true or false")


def env_int(name: str, default: int, *, environ: Mapping[str, str] = os.environ) -> int:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def env_float(name: str, default: float, *, environ: Mapping[str, str] = os.environ) -> float:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value < 0 or value != value:  # negative, or NaN
        raise ImproperlyConfigured(f"{name}={raw!r} must be a number of at least 0")
    return value


# DRF's rate periods (rest_framework.throttling.SimpleRateThrottle.parse_rate reads the
# first letter): a rate is "<requests>/<period>", as in "60/hour".
_RATE_PERIODS = {"s": "second", "sec": "second", "second": "second", "m": "minute", "min": "minute",
                 "minute": "minute", "h": "hour", "hour": "hour", "d": "day", "day": "day"}


def env_rate(name: str, default: str | None, *, environ: Mapping[str, str] = os.environ) -> str | None:
    """A request rate for a DRF throttle ("60/hour"), or None for "off" (no limit)."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value == "off":
        return None
    count, _, period = value.partition("/")
    if not (count.isascii() and count.isdigit() and int(count) > 0 and period in _RATE_PERIODS):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate: use <requests>/<period> with a period "
                                   "of second, minute, hour or day (\"60/hour\"), or off")
    return f"{int(count)}/{_RATE_PERIODS[period]}"


def env_secret(
    name: str, default: str | None = None, *, environ: Mapping[str, str] = os.environ
) -> str | None:
    """NAME, or the contents of the file named by NAME_FILE (Docker and Kubernetes secrets)."""
    value = environ.get(name)
    path = environ.get(f"{name}_FILE")
    if value and path:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    if value:
        return value
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {error.strerror}") from None
    return default


def parse_database_url(url: str) -> dict[str, Any]:
    """postgres://user:password@host:port/name?option=value -> a Django DATABASES entry."""
    usage = "expected postgres://user:password@host:port/name"
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(
            f"DATABASE_URL scheme {parts.scheme!r} is not supported; {usage} "
            "(or leave DATABASE_URL unset for SQLite)"
        )
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"DATABASE_URL has a bad port; {usage}") from None
    name = unquote(parts.path.lstrip("/"))
    if not parts.hostname:
        raise ImproperlyConfigured(f"DATABASE_URL names no host; {usage}")
    if not name or "/" in name:
        raise ImproperlyConfigured(f"DATABASE_URL names no database; {usage}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname,
        "PORT": str(port or 5432),
        # Query parameters (sslmode=require, ...) go to libpq unchanged.
        "OPTIONS": dict(parse_qsl(parts.query)),
    }


def sqlite_database(path: Path) -> dict[str, Any]:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            # The web process and the worker write to one file. IMMEDIATE takes the write
            # lock when a transaction starts, so two writers queue for `timeout` seconds
            # instead of failing halfway with "database is locked"; WAL lets readers in
            # while a writer works.
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


def secret_key(*, debug: bool, var_dir: Path, environ: Mapping[str, str] = os.environ) -> str:
    """OPTIML_SECRET_KEY(_FILE); in DEBUG, a random key made once and kept in var/secret_key."""
    key = env_secret("OPTIML_SECRET_KEY", environ=environ)
    if key:
        return key
    if not debug:
        raise ImproperlyConfigured(
            "OPTIML_SECRET_KEY (or OPTIML_SECRET_KEY_FILE) must be set when OPTIML_DEBUG is false"
        )
    path = var_dir / "secret_key"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        # Write aside, then link into place: link fails if the web process and the worker
        # raced us here, and then both read the one key that won.
        temporary = var_dir / f".secret_key.{os.getpid()}"
        temporary.write_text(secrets.token_urlsafe(50))
        temporary.chmod(0o600)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    return path.read_text().strip()


def allowed_hosts(value: str, *, debug: bool) -> list[str]:
    """OPTIML_ALLOWED_HOSTS, comma-separated. Required without DEBUG: a production host
    that answers to any Host header lets a forged one into password-reset links, caches
    and the websocket origin check."""
    hosts = [host.strip() for host in value.split(",") if host.strip()]
    if hosts:
        return hosts
    if not debug:
        raise ImproperlyConfigured(
            "OPTIML_ALLOWED_HOSTS must name the host names the site answers to "
            "(e.g. studio.example.org) when OPTIML_DEBUG is false"
        )
    return ["127.0.0.1", "localhost"]


def evaluator_setting(value: str) -> str:
    """OPTIML_EVALUATOR: "gate", or "recorded:<path to JSON>"."""
    if value == "gate" or (value.startswith("recorded:") and len(value) > len("recorded:")):
        return value
    raise ImproperlyConfigured(
        f"OPTIML_EVALUATOR={value!r}; use 'gate' or 'recorded:<path to recordings JSON>'"
    )


def celery_broker(redis_url: str, var_dir: Path) -> tuple[str, dict[str, Any]]:
    """(broker URL, transport options): Redis when given, else files under var/celery/."""
    if redis_url:
        return redis_url, {}
    folder = var_dir / "celery"
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    # The embedded default needs no Redis: kombu's filesystem transport passes messages
    # through files that the web process writes and the worker reads.
    return "filesystem://", {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }


# channels-redis waits for a message in BZPOPMIN for RedisChannelLayer.brpop_timeout
# (5 s), and redis-py 8 (redis._defaults) gives up reading a socket after 5 s by default: the two
# raced, and an idle viewer's consumer died with "Timeout reading" (close code 1011) every
# ~5 s. A socket may stay silent for three blocking waits before it counts as dead.
CHANNEL_SOCKET_TIMEOUT_S = 15.0
# A Redis that does not answer the connect is down, not slow.
CHANNEL_CONNECT_TIMEOUT_S = 5.0
# A connection unused this long is PINGed before its next command, so one that a restart
# of Redis or a NAT dropped is replaced rather than failing a viewer.
CHANNEL_HEALTH_CHECK_S = 30
# Per process and event loop. Commands beyond it wait (up to CHANNEL_POOL_WAIT_S) for a
# free connection instead of failing with "Too many connections".
CHANNEL_MAX_CONNECTIONS = 50
CHANNEL_POOL_WAIT_S = 10.0


def channel_layers(redis_url: str) -> dict[str, Any]:
    if redis_url:
        host = {
            "address": redis_url,
            "socket_timeout": CHANNEL_SOCKET_TIMEOUT_S,
            "socket_connect_timeout": CHANNEL_CONNECT_TIMEOUT_S,
            "socket_keepalive": True,
            "health_check_interval": CHANNEL_HEALTH_CHECK_S,
            "max_connections": CHANNEL_MAX_CONNECTIONS,
            "timeout": CHANNEL_POOL_WAIT_S,
        }
        return {
            "default": {
                "BACKEND": "optiml_web.channel_layer.WaitingRedisChannelLayer",
                "CONFIG": {"hosts": [host]},
            }
        }
    # One process serves every browser in the embedded default, so memory is enough.
    return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def caches(redis_url: str) -> dict[str, Any]:
    """Django's caches: "default" in each process's memory (nothing shares it), and
    "throttle", the history of the per-user request rates (search.throttles), in Redis
    when there is one, so that every web process counts against one rate and a restart
    does not reset it."""
    default = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "default"}
    if not redis_url:
        return {"default": default,
                "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                             "LOCATION": "throttle"}}
    return {"default": default,
            "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url,
                         "KEY_PREFIX": "optiml-throttle",
                         "OPTIONS": {"socket_timeout": CHANNEL_SOCKET_TIMEOUT_S,
                                     "socket_connect_timeout": CHANNEL_CONNECT_TIMEOUT_S}}}
