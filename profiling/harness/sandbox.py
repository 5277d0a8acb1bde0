"""Run untrusted evaluations in their own process group, with a private result channel.

The child gets a pipe's write end as an inherited file descriptor and sends JSON lines
on it. Its stdout and stderr go to a log file we never parse: a kernel's printf lands on
stdout, so stdout cannot be trusted to carry a verdict. At the time limit the whole
process group is killed; a crash, a hang or a fault becomes a result, never an exception.

`run_isolated` runs one child for one evaluation: the next starts from a clean process.
`PersistentChild` keeps one child for many requests (the search's screen, which cannot
afford a new CUDA context per candidate): requests go down its stdin as JSON lines, each
answered by messages ending in one "result"; a child that dies or hangs is killed and
the next request starts a new one.

Two limits keep a child from holding a GPU or a disk: a stage message may carry
`limit_s`, the seconds within which the child must send its next message (the worker
bounds each launch of a candidate by the task's own scale, so a slow kernel is stopped
in seconds, not at the whole time limit); and the child's stdout and stderr pass
through a pump that keeps the first MAX_LOG_BYTES in the log and drops the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a verdict is kilobytes; this bounds a runaway child
LOG_TAIL_CHARS = 4000
MAX_LOG_BYTES = 1024 * 1024  # per child: a printf flood wrote 28 MB in 55 s before this


@dataclass
class IsolatedResult:
    messages: list[dict] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    # The child missed a stage's own bound (`limit_s` of its last message), not the
    # whole time limit: the last message says what was bounded and why.
    stage_limit: dict | None = None
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
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(write_fd,) if channel_arg else (), start_new_session=True,
                env=env, preexec_fn=_child_limits,
            )
        finally:
            os.close(write_fd)
        pump = LogPump(proc.stdout, log)
        try:
            _read_messages(read_fd, proc, started + time_limit_s, result, on_message)
        finally:
            os.close(read_fd)
            _kill_group(proc)
            pump.finish()
    result.returncode = proc.returncode
    result.seconds = time.monotonic() - started
    result.log_tail = _tail(log_path)
    return result


def _read_messages(fd: int, proc: subprocess.Popen, deadline: float, result: IsolatedResult,
                   on_message: Callable[[dict], None] | None) -> None:
    if _collect(_LineReader(fd), deadline, result, on_message, until_result=False) != "eof":
        return
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        result.timed_out = True


def _collect(reader: _LineReader, deadline: float, result: IsolatedResult,
             on_message: Callable[[dict], None] | None, *, until_result: bool) -> str:
    """Read messages into result until EOF, the deadline, an overflow or (until_result)
    a "result" message; returns which of "eof", "timeout", "overflow", "result"."""
    stage_deadline, bounded = None, None
    while not (until_result and result.last("result") is not None):
        now = time.monotonic()
        remaining = min(deadline, stage_deadline or deadline) - now
        if remaining <= 0:
            result.timed_out = True
            if stage_deadline is not None and stage_deadline < deadline:
                result.stage_limit = bounded
            return "timeout"
        lines = reader.read(remaining)
        if lines is None:  # EOF: the child closed the channel or exited
            return "eof"
        if reader.overflowed:
            result.messages.append({"type": "error", "message": "result channel overflowed"})
            return "overflow"
        for line in lines:
            message = _decode(line)
            result.messages.append(message)
            stage_deadline, bounded = _stage_bound(message)
            if on_message is not None:
                on_message(message)
    return "result"


def _stage_bound(message: dict) -> tuple[float | None, dict | None]:
    """The deadline a message sets for the next one: its `limit_s` from now, or none."""
    limit = message.get("limit_s")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
        return time.monotonic() + float(limit), message
    return None, None


class LogPump:
    """Copies a child's output to its log, keeping the first MAX_LOG_BYTES.

    The child writes into a pipe that is always drained (so a flood never blocks it on a
    full pipe, which would look like a hang); what is past the cap is counted, dropped,
    and said at the end of the log.
    """

    def __init__(self, pipe, log, limit: int = MAX_LOG_BYTES):
        self.pipe, self.log, self.limit = pipe, log, limit
        self.written = self.dropped = 0
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(1 << 16):
                keep = chunk[: max(0, self.limit - self.written)]
                if keep:
                    self.log.write(keep)
                    self.log.flush()
                self.written += len(keep)
                self.dropped += len(chunk) - len(keep)

    def finish(self) -> None:
        """After the child's group is killed: the pipe reaches EOF and the pump ends."""
        self.thread.join(timeout=10)
        if self.dropped:
            self.log.write(f"\n[optiml: log capped at {self.limit} bytes; {self.dropped} more "
                           f"bytes of output were dropped]\n".encode())
            self.log.flush()
        with contextlib.suppress(OSError):
            self.pipe.close()


class _LineReader:
    """JSON lines from a pipe, at most MAX_MESSAGE_BYTES in all."""

    def __init__(self, fd: int):
        self.fd, self.buffer, self.total, self.overflowed = fd, b"", 0, False

    def read(self, timeout_s: float) -> list[bytes] | None:
        """Complete lines that arrived within timeout_s (maybe none); None at EOF."""
        ready, _, _ = select.select([self.fd], [], [], min(timeout_s, 1.0))
        if not ready:
            return []
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return None
        self.total += len(chunk)
        self.overflowed = self.total > MAX_MESSAGE_BYTES
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line for line in lines if line.strip()]


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
        self._file = None
        # A wrapper (compute-sanitizer, ncu) may not pass the descriptor on: the parent
        # then reads the exit status alone.
        if fd >= 0:
            with contextlib.suppress(OSError):
                self._file = os.fdopen(fd, "w", buffering=1)

    def send(self, kind: str, **data) -> None:
        if self._file is not None:
            self._file.write(json.dumps({"type": kind, **data}, default=str) + "\n")
            self._file.flush()


class PersistentChild:
    """One long-lived child for many requests; killed and restarted when it dies or hangs.

        child = PersistentChild([sys.executable, "-m", "worker", "--serve"], log_path=...)
        result = child.request({"task": ...}, time_limit_s=60)   # an IsolatedResult
        child.close()

    The child reads one JSON request per line on stdin and answers on the channel (its
    fd is the last argument) with messages ending in one {"type": "result"}. Stdin
    carries only what this process writes; the channel only what the child sends; its
    stdout and stderr go to the log. A request that meets a dead or hung child gets a
    result with `returncode` or `timed_out` set, as run_isolated's would, and the child
    is gone: the next request starts a new one.
    """

    def __init__(self, argv: list[str], *, log_path: Path, env: dict[str, str] | None = None,
                 own_group: bool = True):
        self.argv, self.log_path, self.env = argv, log_path, env
        # Its own process group (killed alone when it hangs), or this process's: a helper
        # of a process that is itself killed with its group (gpuref.py) goes with it.
        self.own_group = own_group
        self._proc: subprocess.Popen | None = None
        self._reader: _LineReader | None = None
        self._log = None
        self._pump: LogPump | None = None
        self._last_returncode: int | None = None  # of the child last stopped
        self.starts = 0  # how many children were started (a test and a benchmark read it)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _start(self) -> None:
        read_fd, write_fd = os.pipe()
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed in _stop)
        try:
            self._proc = subprocess.Popen(
                [*self.argv, str(write_fd)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=self.own_group,
                env=self.env, preexec_fn=_child_limits,
            )
        finally:
            os.close(write_fd)
        self._pump = LogPump(self._proc.stdout, self._log)
        self._reader = _LineReader(read_fd)
        self.starts += 1

    def start(self) -> None:
        """Start the child now, if none is running, rather than at the first request."""
        if not self.alive:
            self._stop()
            self._start()

    def kill(self) -> None:
        """End the child at once, without waiting for it to leave (close() waits)."""
        self._stop()

    def request(self, payload: dict, *, time_limit_s: float,
                on_message: Callable[[dict], None] | None = None) -> IsolatedResult:
        result = self._request(payload, time_limit_s, on_message)
        if not result.messages and not result.timed_out:
            # It died without a word for this request: a child that answered its last
            # request and then left (after a CUDA fault it must not serve on) can still
            # look alive when the next request is written. Once more, to a new child.
            result = self._request(payload, time_limit_s, on_message)
        return result

    def _request(self, payload: dict, time_limit_s: float,
                 on_message: Callable[[dict], None] | None) -> IsolatedResult:
        if not self.alive:
            self._stop()
            self._start()
        assert self._proc is not None and self._proc.stdin is not None and self._reader is not None
        started = time.monotonic()
        result = IsolatedResult()
        try:
            self._proc.stdin.write(json.dumps(payload).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died before reading: the read below sees EOF and says so
        self._reader.total = 0  # the overflow bound is per request
        _collect(self._reader, started + time_limit_s, result, on_message, until_result=True)
        if result.last("result") is None:  # dead, hung, or flooding: it serves no more
            self._stop()
            result.returncode = self._last_returncode
        result.seconds = time.monotonic() - started
        result.log_tail = _tail(self.log_path)
        return result

    def _stop(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # type: ignore[union-attr]
            if self.own_group:
                _kill_group(self._proc)
            else:  # its group is ours: only the child itself
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=30)
            self._last_returncode = self._proc.returncode
        if self._pump is not None:
            self._pump.finish()
        if self._reader is not None:
            os.close(self._reader.fd)
        if self._log is not None:
            self._log.close()
        self._proc = self._reader = self._log = self._pump = None

    def close(self) -> None:
        """End the child: EOF on its stdin lets it leave cleanly; then its group is killed."""
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
        self._stop()
