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
cannot lengthen the wait); a try that may go ahead is counted as a failure before its
password is checked, and taken back if it was right: its count clears, all but the
address's, which keeps its earlier failures. The address is REMOTE_ADDR: behind a proxy,
run daphne with --proxy-headers.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import F
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
    # A space after the address, which has none: an IPv6 address has colons, and a name
    # may start with what would extend it (2001:db8::1 trying "5:bob" is not 2001:db8::1:5).
    return [(f"pair:{address} {username[:_LONGEST_NAME]}", pair_back_off(), False),
            (f"address:{address}", address_back_off(), True)]


def sign_in_attempt(*, request: HttpRequest, username: str) -> Refusal | None:
    """Claims a try as `username`: a Refusal with the longest wait of its counts when it
    must wait (nothing counted), else None, the try counted as a failure in advance, to be
    taken back by sign_in_success_record if the password turns out right. Counting before
    the password is checked, under the rows' locks, is what holds a burst of tries sent at
    once to the same allowance as tries sent one by one."""
    SignInFailures.objects.filter(latest__lt=_forgotten_before(timezone.now())).delete()
    keys = _keys(request, username)
    with transaction.atomic():
        rows = [_locked_row(key, timezone.now()) for key, _, _ in keys]  # the name's first, always
        # The time once the locks are held: a try that waited for another's lock sees the
        # other's failure as earlier than now, not later.
        now = timezone.now()
        forgotten = _forgotten_before(now)
        refusals = []
        for row, (_, back_off, by_address) in zip(rows, keys, strict=True):
            failures = 0 if row.latest < forgotten else row.failures
            left = back_off.seconds_left(failures, (now - row.latest).total_seconds())
            if left > 0:
                refusals.append(Refusal(left, failures, by_address))
        if refusals:
            return max(refusals, key=lambda refusal: refusal.seconds_left)
        name_row, *address_rows = rows
        _count(name_row, now, forgotten)
        # The address counts a name's failures only up to the name's free allowance: past
        # it the name's own wait holds the guesser, and one person's retries at their own
        # name never add up to the address's wait for everyone new behind it.
        counted = [name_row.key]
        if address_rows and name_row.failures <= keys[0][1].free_failures:
            _count(address_rows[0], now, forgotten)
            counted.append(address_rows[0].key)
    request.sign_in_counted = counted
    return None


def _locked_row(key: str, now: datetime) -> SignInFailures:
    """The row of `key`, locked until the transaction ends; made (with no failures) where
    there was none. Two first tries at once both insert; one loses on the unique key and
    waits for the other's row instead."""
    row = SignInFailures.objects.select_for_update().filter(key=key).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            return SignInFailures.objects.create(key=key, failures=0, latest=now)
    except IntegrityError:
        return SignInFailures.objects.select_for_update().get(key=key)


def _count(row: SignInFailures, now: datetime, forgotten: datetime) -> None:
    row.failures = 1 if row.latest < forgotten else row.failures + 1
    row.latest = now
    row.save(update_fields=["failures", "latest"])


def sign_in_success_record(*, request: HttpRequest, username: str) -> None:
    """Clears the count the successful try was held to, its device's or its pair's, and
    takes back what the try added to its address's count in advance; the address's earlier
    failures stay, so one good password does not buy more guesses at other names."""
    key, _, _ = _keys(request, username)[0]
    SignInFailures.objects.filter(key=key).delete()
    counted = getattr(request, "sign_in_counted", [])
    SignInFailures.objects.filter(key__in=[other for other in counted if other != key],
                                  failures__gt=0).update(failures=F("failures") - 1)


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
