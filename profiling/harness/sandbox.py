"""Run one untrusted evaluation in its own process group, with a private result channel.

The child gets a pipe's write end as an inherited file descriptor and sends JSON lines
on it. Its stdout and stderr go to a log file we never parse: a kernel's printf lands on
stdout, so stdout cannot be trusted to carry a verdict. At the time limit the whole
process group is killed; a crash, a hang or a fault becomes a result, never an exception,
and the next evaluation starts from a clean process.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a verdict is kilobytes; this bounds a runaway child
LOG_TAIL_CHARS = 4000


@dataclass
class IsolatedResult:
    messages: list[dict] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    log_tail: str = ""

    def last(self, kind: str) -> dict | None:
        return next((m for m in reversed(self.messages) if m.get("type") == kind), None)

    @property
    def died_by_signal(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name
        return None


def _child_limits() -> None:
    # No core dumps from crashing kernels' host processes: they would fill the disk.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_isolated(
    argv: list[str],
    *,
    time_limit_s: float,
    log_path: Path,
    channel_arg: bool = True,
    env: dict[str, str] | None = None,
    on_message: Callable[[dict], None] | None = None,
) -> IsolatedResult:
    """Run argv (+ the channel's fd number when channel_arg) and collect its messages."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    result = IsolatedResult()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                [*argv, str(write_fd)] if channel_arg else argv,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(write_fd,) if channel_arg else (), start_new_session=True,
                env=env, preexec_fn=_child_limits,
            )
        finally:
            os.close(write_fd)
        try:
            _read_messages(read_fd, proc, started + time_limit_s, result, on_message)
        finally:
            os.close(read_fd)
            _kill_group(proc)
    result.returncode = proc.returncode
    result.seconds = time.monotonic() - started
    result.log_tail = _tail(log_path)
    return result


def _read_messages(fd: int, proc: subprocess.Popen, deadline: float, result: IsolatedResult,
                   on_message: Callable[[dict], None] | None) -> None:
    buffer, total = b"", 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            result.timed_out = True
            return
        ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:  # EOF: the child closed the channel or exited
            break
        total += len(chunk)
        if total > MAX_MESSAGE_BYTES:
            result.messages.append({"type": "error", "message": "result channel overflowed"})
            return
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                message = _decode(line)
                result.messages.append(message)
                if on_message is not None:
                    on_message(message)
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        result.timed_out = True


def _decode(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"type": "error", "message": "undecodable message on the result channel"}
    return message if isinstance(message, dict) else {"type": "error", "message": "non-object message"}


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child and anything it started; a hung kernel holds its process hostage."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    # A process stuck in the driver is reaped by the OS later; we must not block forever.
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL_CHARS))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class Channel:
    """The child's end: JSON lines to the inherited descriptor."""

    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "w", buffering=1) if fd >= 0 else None

    def send(self, kind: str, **data) -> None:
        if self._file is not None:
            self._file.write(json.dumps({"type": kind, **data}, default=str) + "\n")
            self._file.flush()
