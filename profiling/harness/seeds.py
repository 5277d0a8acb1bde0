"""Gate seeds the people whose kernels are checked cannot know.

The gate checks a kernel on random inputs drawn from a base seed (inputs.check_plan
derives every correctness run's seed from it). If a user could pick or predict that
seed, the inputs would be public and a kernel could be written for them. So on a shared
server the base seed is not the user's: it is derived from a secret only the operator
holds and from what it is for (a run, say), with an HMAC:

    gate_seed(secret, "run", "42")  # the gate's base seed for every candidate of run 42

The same secret and parts always give the same seed, so a run's candidates share one
seed (and its input cache, inputs.py), and the operator, who holds the secret, can
reproduce any verdict; without the secret the seed of one run says nothing about
another's. Pure: no Django, no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import json

# The worker draws a random base seed of this many bits when none is given
# (worker.Session: secrets.randbits(SEED_BITS)); derived seeds keep to the same range:
# 62 bits, far past an offline search for the seed that explains a verdict's numbers.
SEED_BITS = 62


def gate_seed(secret: bytes, *parts: str) -> int:
    """The base seed for `parts` (e.g. "run", "42") under `secret`: HMAC-SHA256 of the
    parts, its first bytes read as a big-endian integer, cut to SEED_BITS bits.

    The parts are encoded as a JSON list, so ("a:b",) and ("a", "b") never collide.
    Raises ValueError for an empty secret (every seed would be public) or no parts, and
    TypeError for a part that is not a string.
    """
    if not isinstance(secret, bytes | bytearray):
        raise TypeError(f"the secret must be bytes, not {type(secret).__name__}")
    if not secret:
        raise ValueError("an empty secret makes every gate seed public")
    if not parts:
        raise ValueError("say what the seed is for: gate_seed(secret, 'run', run_id)")
    for part in parts:
        if not isinstance(part, str):
            raise TypeError(f"seed parts are strings, not {type(part).__name__}: {part!r}")
    message = json.dumps(list(parts), separators=(",", ":"), ensure_ascii=False).encode()
    digest = hmac.new(bytes(secret), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


__all__ = ["SEED_BITS", "gate_seed"]
