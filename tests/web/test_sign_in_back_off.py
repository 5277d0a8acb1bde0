"""The sign-in back-off (accounts/throttle.py), pure: free tries, then a wait that
doubles with each failure up to the longest, and what that leaves a guesser."""

from __future__ import annotations

import pytest

from accounts.throttle import BackOff

PRODUCTION = BackOff(free_failures=5, first_wait_s=2, longest_wait_s=15 * 60)  # settings' defaults


def test_the_free_failures_wait_for_nothing_and_then_the_wait_doubles_up_to_the_longest():
    waits = [PRODUCTION.wait_s(failures) for failures in range(18)]

    assert waits[:5] == [0.0] * 5
    assert waits[5:15] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 900]
    assert waits[15:] == [900] * 3
    assert PRODUCTION.wait_s(10**9) == 900  # no overflow on a count nobody should reach


def test_the_wait_is_counted_from_the_latest_failure():
    assert PRODUCTION.seconds_left(6, since_latest_failure_s=1.5) == 2.5
    assert PRODUCTION.seconds_left(6, since_latest_failure_s=4) == 0.0
    assert PRODUCTION.seconds_left(3, since_latest_failure_s=0) == 0.0
    assert PRODUCTION.seconds_left(3, since_latest_failure_s=-0.01) == 0.0  # a clock a moment ahead
    assert PRODUCTION.seconds_left(6, since_latest_failure_s=-0.01) == 4.0


def guesses_in(back_off: BackOff, seconds: float) -> int:
    """Guesses at one name by someone who always fails and tries the moment they may."""
    elapsed, failures = 0.0, 0
    while True:
        elapsed += back_off.wait_s(failures)
        if elapsed > seconds:
            return failures
        failures += 1


def test_a_guesser_gets_about_a_hundred_guesses_a_day_at_a_name_a_quarter_of_the_old_locks():
    day = 24 * 3600
    per_day = guesses_in(PRODUCTION, day)

    # 5 free, 10 while the wait grows (about 32 minutes), then one per 15 minutes
    assert 100 <= per_day <= 110
    locked_five_per_quarter_hour = 5 * day // (15 * 60)  # django-axes' lock, as it was: 480
    assert per_day < locked_five_per_quarter_hour / 4


@pytest.mark.parametrize("free, first, longest", [(0, 2, 900), (5, 0, 900), (5, 10, 5)])
def test_a_back_off_that_would_not_hold_anybody_is_refused(free, first, longest):
    with pytest.raises(ValueError, match="needs free_failures"):
        BackOff(free, first, longest)
