"""Sign-in throttling: which failures a sign-in waits for, counted in the database so that
every web process sees the same counts; accounts.throttle says how long.

A failure is counted under keys, each with its own back-off (settings.OPTIML_LOGIN_*):
- a browser that has signed in as this name before carries a signed device cookie
  (OWASP's "device cookies"); its tries as that name count under that device alone, and
  no other count holds them up. So nobody, a colleague behind the same address or a
  stranger who knows the name, can make a user who signed in here before wait, and a
  user's own typos hold up no one else;
- any other try counts under the (name, address) pair, so a name tried from elsewhere, and
  other names from this address, are not held up; and under the address, with a larger
  free allowance, against one address guessing passwords for many names (each name adds
  at most its own free failures there, so one name's retries never make the address wait).
A try that must wait is refused before any password is checked and is not counted (it
cannot lengthen the wait); a success clears the count it was made under, never the
address's. The address is REMOTE_ADDR: behind a proxy, run daphne with --proxy-headers.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Value, When
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import SignInFailures
from accounts.throttle import BackOff

DEVICE_COOKIE = "optiml_device"
DEVICE_COOKIE_AGE_S = 365 * 24 * 3600  # a year: a device signed in within it is known
_DEVICE_SALT = "accounts.signing_in.device"
_LONGEST_NAME = 150  # django.contrib.auth's username max_length: longer names are nobody's


@dataclass(frozen=True)
class Refusal:
    """A try that must wait: how long, and after how many failures under what."""

    seconds_left: float
    failures: int
    by_address: bool  # counted over all names tried from the address, not this name's


def pair_back_off() -> BackOff:
    return BackOff(settings.OPTIML_LOGIN_FAILURE_LIMIT, settings.OPTIML_LOGIN_FIRST_WAIT_S,
                   settings.OPTIML_LOGIN_LONGEST_WAIT_S)


def address_back_off() -> BackOff:
    return BackOff(settings.OPTIML_LOGIN_ADDRESS_FAILURE_LIMIT, settings.OPTIML_LOGIN_FIRST_WAIT_S,
                   settings.OPTIML_LOGIN_LONGEST_WAIT_S)


def client_address(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR") or None


def _keys(request: HttpRequest, username: str) -> list[tuple[str, BackOff, bool]]:
    """The counts a try as `username` is held to, each with its back-off and whether it
    is the address's count."""
    device = known_device(request, username)
    if device is not None:
        return [(f"device:{device}", pair_back_off(), False)]
    address = client_address(request) or "unknown"
    return [(f"pair:{address}:{username[:_LONGEST_NAME]}", pair_back_off(), False),
            (f"address:{address}", address_back_off(), True)]


def sign_in_refusal(*, request: HttpRequest, username: str) -> Refusal | None:
    """The wait a try as `username` must still sit out, the longest of its counts'; None
    when it may go ahead now."""
    now = timezone.now()
    keys = _keys(request, username)
    rows = {row.key: row for row in SignInFailures.objects.filter(key__in=[key for key, _, _ in keys],
                                                                   latest__gte=_forgotten_before(now))}
    refusals = []
    for key, back_off, by_address in keys:
        row = rows.get(key)
        if row is None:
            continue
        left = back_off.seconds_left(row.failures, (now - row.latest).total_seconds())
        if left > 0:
            refusals.append(Refusal(left, row.failures, by_address))
    return max(refusals, key=lambda refusal: refusal.seconds_left, default=None)


def sign_in_failure_record(*, request: HttpRequest, username: str) -> None:
    """Counts a failed try: one more, or the first again where the latest failure was
    forgotten. The address counts a name's failures only up to the name's free allowance:
    past it the name's own wait holds the guesser, and one person's retries at their own
    name never add up to the address's wait for everyone new behind it. Forgotten rows
    are deleted on the way."""
    now = timezone.now()
    forgotten = _forgotten_before(now)
    SignInFailures.objects.filter(latest__lt=forgotten).delete()
    (name_key, name_back_off, _), *address = _keys(request, username)
    failures = _count(name_key, now, forgotten)
    if address and failures <= name_back_off.free_failures:
        _count(address[0][0], now, forgotten)


def _count(key: str, now: datetime, forgotten: datetime) -> int:
    """One more failure under `key`; the count it makes."""
    # A conditional update, then an insert where there was no row; two first failures at
    # once both insert, one loses on the unique key and counts by the update instead.
    more = {"failures": Case(When(latest__lt=forgotten, then=Value(1)), default=F("failures") + 1),
            "latest": now}
    with transaction.atomic():
        if not SignInFailures.objects.filter(key=key).update(**more):
            try:
                with transaction.atomic():
                    SignInFailures.objects.create(key=key, failures=1, latest=now)
            except IntegrityError:
                SignInFailures.objects.filter(key=key).update(**more)
        # Read in the transaction that holds the row's lock: this failure's own count.
        return SignInFailures.objects.values_list("failures", flat=True).get(key=key)


def sign_in_success_record(*, request: HttpRequest, username: str) -> None:
    """Clears the count the successful try was held to: its device's, or its pair's; the
    address's stays, so one good password does not buy more guesses at other names."""
    key, _, _ = _keys(request, username)[0]
    SignInFailures.objects.filter(key=key).delete()


def _forgotten_before(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.OPTIML_LOGIN_MEMORY_S)


# -- the device cookie ----------------------------------------------------------------------


def known_device(request: HttpRequest, username: str) -> str | None:
    """The id of this browser as a device that has signed in as `username`, from its signed
    cookie; None when it carries none for that name (or a forged or expired one)."""
    value = request.COOKIES.get(DEVICE_COOKIE)
    if not value:
        return None
    try:
        cookie = signing.loads(value, salt=_DEVICE_SALT, max_age=DEVICE_COOKIE_AGE_S)
    except signing.BadSignature:
        return None
    if not isinstance(cookie, dict) or cookie.get("name") != username or not cookie.get("device"):
        return None
    return str(cookie["device"])


def device_cookie_value(*, request: HttpRequest, username: str) -> str:
    """The cookie that makes this browser a known device for `username`: its own id kept
    where it was that device already, a new one otherwise."""
    device = known_device(request, username) or secrets.token_urlsafe(16)
    return signing.dumps({"name": username, "device": device}, salt=_DEVICE_SALT)
