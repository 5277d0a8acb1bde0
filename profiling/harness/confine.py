"""Run the toolchain on untrusted source, confined.

nvcc reads whatever the source asks the preprocessor to read and prints what it finds, so
every toolchain run here gets:
- a minimal environment (`minimal_env`): PATH to the toolchain, HOME and TMPDIR in the
  build folder, LANG=C, nothing else; the worker's database URL and keys never reach it;
- the build folder as its working folder, holding only the candidate's kernel.cu;
- rlimits: address space, CPU time, file size, open files, no core dumps;
- a wall-clock limit, after which its process group is killed;
- output read through a pipe with a bound, so a flood of messages cannot fill memory;
- where the host allows it, bubblewrap (`bwrap`): no network or other namespaces, no
  capabilities, and a file system made of /usr (with /usr/local emptied), the CUDA
  toolkit, the ld cache, /dev/null, /proc, an empty /tmp and the build folder. The
  project's files, /home, /root, /work, /var and /etc/passwd are not there to be read.

Without a usable bwrap the same limits, environment and empty folder apply ("rlimits");
the include decision in compile.py does not depend on the sandbox. OPTIML_COMPILE_SANDBOX
chooses: "auto" (default: bwrap when usable), "bwrap" (required: a host without it cannot
compile) or "rlimits" (never bwrap; tests use it to exercise the fallback).

`worker_env` is the same idea for the GPU worker: an allow-list of what a Python + CUDA
child needs, so a kernel that reads its process's environment finds no secrets.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path

MiB = 1024 * 1024
GiB = 1024 * MiB
SANDBOX_VARIABLE = "OPTIML_COMPILE_SANDBOX"
BWRAP, RLIMITS = "bwrap", "rlimits"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class SandboxUnavailable(RuntimeError):
    """OPTIML_COMPILE_SANDBOX=bwrap, but bwrap is missing or cannot run on this host."""


@dataclass(frozen=True)
class Limits:
    # cicc and ptxas compile every suite kernel under a 1 GiB address space (measured,
    # peak RSS ~100 MB); 4 GiB leaves room for heavy templates. A read of /dev/zero
    # touches about half of it before failing (2.1 GB RSS, 4 s, measured), and a search
    # runs 4 compiles at once: 8 GiB would let those take 16 GB.
    address_space_bytes: int = 4 * GiB
    cpu_seconds: int = 120
    file_bytes: int = 256 * MiB  # a cubin may be 64 MiB (compile.MAX_CUBIN_BYTES); its PTX more
    open_files: int = 256
    wall_seconds: float = 150.0
    output_bytes: int = 1 * MiB
    # Kill at the output bound instead of reading on and dropping the rest: the
    # dependency pass wants nothing the process does after what it has shown.
    stop_at_output_limit: bool = False


@dataclass
class Confined:
    returncode: int | None
    output: str  # stdout and stderr together, at most Limits.output_bytes
    seconds: float
    sandbox: str
    timed_out: bool = False
    output_truncated: bool = False

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


@dataclass(frozen=True)
class Toolkit:
    nvcc: Path  # the real binary: `nvcc` on PATH may be a wrapper script elsewhere
    root: Path  # the install folder, bound read-only in the sandbox
    include_dirs: tuple[str, ...]  # the -I and -isystem folders nvcc gives the preprocessor


def toolkit() -> Toolkit | None:
    """The CUDA toolkit behind `nvcc` on PATH, or None without one."""
    found = shutil.which("nvcc")
    return _toolkit(found) if found else None


@lru_cache(maxsize=4)
def _toolkit(nvcc_on_path: str) -> Toolkit | None:
    # nvcc's dry run names its own folder (_HERE_) and the preprocessor's command line.
    # No candidate input is involved, so it runs plainly, with no secrets in its env.
    with tempfile.TemporaryDirectory(prefix="optiml-nvcc-probe-") as probe:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": probe, "LANG": "C"}
        proc = subprocess.run([nvcc_on_path, "--dryrun", "-E", "-x", "cu", os.devnull],
                              capture_output=True, text=True, timeout=60, env=env, cwd=probe,
                              stdin=subprocess.DEVNULL)
    lines = (proc.stdout + proc.stderr).splitlines()
    here = next((line.split("=", 1)[1].strip() for line in lines if line.startswith("#$ _HERE_=")), None)
    if here is None:
        return None
    nvcc = Path(os.path.realpath(os.path.join(here, "nvcc")))
    gcc_line = next((line for line in lines if re.match(r"#\$ \S*(gcc|g\+\+|c\+\+|clang)\S* ", line)), "")
    words = shlex.split(gcc_line[3:]) if gcc_line else []
    include_dirs = [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-I", "-isystem")]
    include_dirs += [word[2:] for word in words if word.startswith("-I") and len(word) > 2]
    return Toolkit(nvcc=nvcc, root=nvcc.parent.parent, include_dirs=tuple(include_dirs))


def minimal_env(work_dir: Path | str) -> dict[str, str]:
    """All a toolchain run sees of the environment: its PATH, its folder, the C locale."""
    path = []
    if (kit := toolkit()) is not None:
        path.append(str(kit.nvcc.parent))
    if (gcc := shutil.which("gcc")) is not None:  # nvcc's host compiler, found on PATH
        path.append(os.path.dirname(gcc))
    path += ["/usr/bin", "/bin"]
    return {"PATH": os.pathsep.join(dict.fromkeys(path)), "HOME": str(work_dir),
            "TMPDIR": str(work_dir), "LANG": "C"}


_WORKER_NAMES = frozenset({
    "PATH", "LD_LIBRARY_PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONPATH",
    "OPTIML_TASK_PATH", "OPTIML_CACHE_DIR", "XDG_CACHE_HOME",
})
_WORKER_PREFIXES = ("CUDA_", "NVIDIA_", "PYCUDA_")  # device selection, toolkit and cache paths
# Even an allowed prefix does not carry a name that says it is a credential.
_CREDENTIAL = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def worker_env(extra: Mapping[str, str] | None = None,
               environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The GPU worker's environment: an allow-list of what it needs, then `extra`."""
    source = os.environ if environ is None else environ
    env = {name: value for name, value in source.items()
           if (name in _WORKER_NAMES or name.startswith(_WORKER_PREFIXES))
           and not _CREDENTIAL.search(name)}
    env.update(extra or {})
    return env


def sandbox_mode() -> str:
    """BWRAP or RLIMITS for the next run, as OPTIML_COMPILE_SANDBOX and the host allow."""
    wanted = os.environ.get(SANDBOX_VARIABLE, "auto").strip().lower() or "auto"
    if wanted not in ("auto", BWRAP, RLIMITS):
        raise SandboxUnavailable(f"{SANDBOX_VARIABLE}={wanted!r}: use auto, bwrap or rlimits")
    if wanted == RLIMITS:
        return RLIMITS
    usable, why = bwrap_usable()
    if usable:
        return BWRAP
    if wanted == BWRAP:
        raise SandboxUnavailable(f"{SANDBOX_VARIABLE}=bwrap, but {why}")
    return RLIMITS


@lru_cache(maxsize=1)
def bwrap_usable() -> tuple[bool, str]:
    """Whether bwrap runs nvcc's preprocessor (and so its host compiler) here, with the
    very mounts a compile gets (asked once)."""
    if shutil.which("bwrap") is None:
        return False, "bwrap is not installed (Debian: apt-get install bubblewrap)"
    kit = toolkit()
    if kit is None:
        return False, "nvcc is not installed"
    with tempfile.TemporaryDirectory(prefix="optiml-bwrap-probe-") as probe:
        (Path(probe) / "probe.cu").write_text("int probe;\n")
        argv = bwrap_argv(Path(probe), minimal_env(probe)) + [
            str(kit.nvcc), "-E", "-o", "probe.cup", "probe.cu"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=probe,
                                  env=minimal_env(probe), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as error:
            return False, f"bwrap could not run nvcc: {error}"
    if proc.returncode != 0:
        return False, f"bwrap could not run nvcc: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return True, ""


def bwrap_argv(work_dir: Path, env: Mapping[str, str]) -> list[str]:
    """bwrap's command line: only what the toolchain needs, read-only, and the build folder."""
    work = str(work_dir)
    # By its full path: it runs with the minimal PATH, which need not hold its folder.
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent",
            "--cap-drop", "ALL", "--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):  # merged /usr: these are links into it
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # /usr/local holds other software, site packages, sometimes secrets: only the toolkit
    # (and a host compiler installed there) is needed from it.
    if os.path.isdir("/usr/local"):
        args += ["--tmpfs", "/usr/local"]
    tools: list[str] = []
    kit = toolkit()
    for tool in (kit.root if kit else None, _gcc_root()):
        if tool is not None and not _visible(str(tool), tools):
            args += ["--ro-bind", str(tool), str(tool)]
            tools.append(str(tool))
    for hidden in _hidden_paths():
        if _visible(hidden, tools):  # a project or home folder under /usr stays out of view
            args += ["--tmpfs", hidden]
    for name in ("/etc/ld.so.cache", "/etc/alternatives"):
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    # Not --dev: /dev/zero and /dev/urandom read forever; the toolchain needs /dev/null.
    args += ["--dev-bind", "/dev/null", "/dev/null", "--proc", "/proc", "--tmpfs", "/tmp",
             "--bind", work, work, "--chdir", work, "--"]
    return args


def run_confined(argv: Sequence[str], work_dir: Path, limits: Limits,
                 sandbox: str | None = None) -> Confined:
    """Run argv in work_dir under the limits (and bwrap unless sandbox=RLIMITS)."""
    sandbox = sandbox or sandbox_mode()
    env = minimal_env(work_dir)
    command = [*bwrap_argv(work_dir, env), *argv] if sandbox == BWRAP else list(argv)
    started = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=work_dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=partial(_apply_limits, limits),
    )
    with proc:
        output, truncated, timed_out = _read_bounded(proc, limits, started + limits.wall_seconds)
        returncode = proc.wait()
    return Confined(returncode=None if timed_out else returncode,
                    output=output.decode("utf-8", errors="replace"),
                    seconds=time.monotonic() - started, sandbox=sandbox,
                    timed_out=timed_out, output_truncated=truncated)


def _read_bounded(proc: subprocess.Popen, limits: Limits, deadline: float) -> tuple[bytes, bool, bool]:
    """What the process prints, up to the bound: (output, truncated, timed_out)."""
    reader = _BoundedReader(proc.stdout.fileno(), limits)
    timed_out = not reader.read_until(deadline)
    if timed_out or (reader.truncated and limits.stop_at_output_limit):
        _kill_group(proc)
    if timed_out:  # what it wrote before it was killed is still in the pipe
        reader.read_until(time.monotonic() + 5)
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # it closed its output but kept running
        timed_out = True
        _kill_group(proc)
    return bytes(reader.kept), reader.truncated, timed_out


class _BoundedReader:
    def __init__(self, fd: int, limits: Limits) -> None:
        self.fd, self.limits = fd, limits
        self.kept, self.size, self.truncated = bytearray(), 0, False

    def read_until(self, deadline: float) -> bool:
        """Read to the end of the output (True) or the deadline (False); past the bound,
        chunks are dropped, or reading stops when the limits say so (True)."""
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self.fd, 64 * 1024)
            if not chunk:
                return True
            self.kept += chunk[: max(0, self.limits.output_bytes - self.size)]
            self.size += len(chunk)
            if self.size > self.limits.output_bytes:
                self.truncated = True
                if self.limits.stop_at_output_limit:
                    return True
        return False


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # bwrap's namespace dies with it
        os.killpg(proc.pid, signal.SIGKILL)


def _apply_limits(limits: Limits) -> None:
    """In the child, before exec: limits only ever lowered, never above the current hard one."""
    for which, value in ((resource.RLIMIT_AS, limits.address_space_bytes),
                         (resource.RLIMIT_CPU, limits.cpu_seconds),
                         (resource.RLIMIT_FSIZE, limits.file_bytes),
                         (resource.RLIMIT_NOFILE, limits.open_files),
                         (resource.RLIMIT_CORE, 0)):
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _gcc_root() -> Path | None:
    """The install prefix of nvcc's host compiler, when it is not the system's own."""
    gcc = shutil.which("gcc")
    return Path(os.path.realpath(gcc)).parent.parent if gcc else None


def _hidden_paths() -> list[str]:
    paths = [str(PROJECT_ROOT), os.path.expanduser("~")]
    if sys.prefix != sys.base_prefix:  # a virtualenv, not the system's Python
        paths.append(os.path.realpath(sys.prefix))
    return [p for p in paths if p not in ("/", "/usr")]


def _visible(path: str, tools: Sequence[str]) -> bool:
    """Whether the sandbox already shows `path`: under /usr but not /usr/local, or a tool."""
    return (_inside(path, ["/usr"]) and not _inside(path, ["/usr/local"])) or _inside(path, tools)


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
