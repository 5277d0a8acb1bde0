"""One timing at a time per GPU on a host: an exclusive file lock per device.

A GPU host runs one worker process per GPU (CUDA_VISIBLE_DEVICES), each with one pool
process, so evaluations never share a GPU. The lock makes that hold even when a host is
set up wrong (two workers given the same device, or a worker with several processes):
whoever evaluates or screens on a device takes its turn first, and a second one waits.
The device is the first of CUDA_VISIBLE_DEVICES, CUDA's default 0 when it is unset.
The lock is flock(2) on a file in the temporary folder, released by the kernel when its
holder exits, however it exits: a killed worker never leaves a GPU locked.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def device_key() -> str:
    """The device this process's CUDA calls go to, as CUDA_VISIBLE_DEVICES names it."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", first)


def lock_path(key: str | None = None) -> Path:
    return Path(tempfile.gettempdir()) / f"optiml-gpu-{key or device_key()}.lock"


@contextmanager
def gpu_turn(key: str | None = None) -> Iterator[None]:
    """Hold this host's lock on the device until the block ends; waits for a holder."""
    with open(lock_path(key), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
