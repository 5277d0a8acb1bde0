"""How long a sign-in waits after failures: a back-off that grows, never a lock.

Pure: no Django. accounts.signing_in keeps the counts and applies this to them.

A count of failures gets `free_failures` tries with no wait; after that, each further try
waits `first_wait_s`, doubling with each failure, up to `longest_wait_s`, counted from the
latest failure. Nothing ever locks: once the wait has passed, the right password signs in,
so the worst anybody can do to a name is make its next try wait `longest_wait_s`, while a
guesser, who fails every time, is held to about one guess per `longest_wait_s` once the
waits have grown.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackOff:
    free_failures: int  # tries before any wait: a person's typos (OWASP suggests 3 to 10)
    first_wait_s: float  # the wait after the first failure past the free ones
    longest_wait_s: float  # where the doubling stops

    def __post_init__(self) -> None:
        if self.free_failures < 1 or self.first_wait_s <= 0 or self.longest_wait_s < self.first_wait_s:
            raise ValueError(f"{self}: needs free_failures >= 1 and 0 < first_wait_s <= longest_wait_s")

    def wait_s(self, failures: int) -> float:
        """The wait after `failures` failures, from the latest of them."""
        past_free = failures - self.free_failures
        if past_free < 0:
            return 0.0
        # 2 ** 64 is past any longest wait; the cap keeps the power from growing without bound.
        return min(self.first_wait_s * 2.0 ** min(past_free, 64), self.longest_wait_s)

    def seconds_left(self, failures: int, since_latest_failure_s: float) -> float:
        """How long the next try must still wait; 0 when it may go ahead now. A latest
        failure "in the future" (another process's clock, a moment ahead) counts as now."""
        return max(0.0, self.wait_s(failures) - max(0.0, since_latest_failure_s))
