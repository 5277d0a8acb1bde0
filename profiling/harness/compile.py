"""nvcc -> cubin for sm_90, with ptxas resources parsed and a content-hash cache.

Runs on any machine with nvcc; no GPU needed. Compiler errors come back with the line of
the user's own source (we compile it verbatim: tunables arrive as -D options, not edits).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from .candidate import Candidate
from .policy import check_compile_options, check_source
from .verdict import CompileError, CompileReport, KernelResources

ARCH = "sm_90"
COMPILE_TIMEOUT_S = 120  # nvcc on one kernel file takes seconds; a template bomb does not finish
MAX_CUBIN_BYTES = 64 * 1024 * 1024
MAX_LOG_CHARS = 32_000
SOURCE_NAME = "kernel.cu"


class CompilerUnavailable(RuntimeError):
    """This host cannot compile at all: a fact about the host, not about the candidate."""


def default_cache_dir() -> Path:
    root = os.environ.get("OPTIML_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "optiml"
    )
    return Path(root) / "cubins"


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return "missing"
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def nvcc_command(candidate: Candidate, source_path: Path, cubin_path: Path) -> list[str]:
    defines = [f"-D{name}={value}" for name, value in sorted(candidate.tunables.items())]
    return [
        "nvcc", f"-arch={ARCH}", "-cubin", "-Xptxas", "-v", *defines,
        *candidate.compile_options, "-o", str(cubin_path), str(source_path),
    ]


def cache_key(candidate: Candidate) -> str:
    material = json.dumps(
        {"source": candidate.source, "options": list(candidate.compile_options),
         "tunables": candidate.tunables, "arch": ARCH, "nvcc": nvcc_version()},
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()


def compile_candidate(candidate: Candidate, cache_dir: Path | None = None) -> CompileReport:
    """Compile, or return the cached result. Raises PolicyViolation before nvcc runs."""
    check_source(candidate.source)
    check_compile_options(candidate.compile_options)
    cache_dir = cache_dir or default_cache_dir()
    entry = cache_dir / cache_key(candidate)
    cached = _read_cache(entry)
    if cached is not None:
        return cached
    if shutil.which("nvcc") is None:
        raise CompilerUnavailable("nvcc is not installed on this host, so nothing can be compiled")

    cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".build-") as build:
        build_dir = Path(build)
        source_path, cubin_path = build_dir / SOURCE_NAME, build_dir / "kernel.cubin"
        source_path.write_text(candidate.source)
        try:
            proc = subprocess.run(
                nvcc_command(candidate, source_path, cubin_path), cwd=build_dir,
                capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return CompileReport(ok=False, seconds=COMPILE_TIMEOUT_S, errors=[
                CompileError(None, f"nvcc took longer than {COMPILE_TIMEOUT_S} s and was stopped")])
        log = (proc.stdout + proc.stderr).replace(str(build_dir) + os.sep, "")[:MAX_LOG_CHARS]
        seconds = time.monotonic() - started
        if proc.returncode != 0 or not cubin_path.exists():
            return CompileReport(ok=False, seconds=seconds, log=log, errors=parse_errors(log))
        if cubin_path.stat().st_size > MAX_CUBIN_BYTES:
            return CompileReport(ok=False, seconds=seconds, log=log, errors=[
                CompileError(None, f"cubin larger than {MAX_CUBIN_BYTES} bytes")])
        report = CompileReport(
            ok=True, seconds=seconds, log=log, kernels=parse_ptxas(log),
            cubin_sha256=hashlib.sha256(cubin_path.read_bytes()).hexdigest(),
        )
        _write_cache(entry, build_dir, report)
    return _read_cache(entry, fresh=True) or report


_ERROR = re.compile(r"^(?:.*?)kernel\.cu\((\d+)\): (?:error|catastrophic error): (.*)$", re.MULTILINE)
_PTXAS_ERROR = re.compile(r"^ptxas (?:fatal|error)\s*:\s*(.*)$", re.MULTILINE)


def parse_errors(log: str) -> list[CompileError]:
    errors = [CompileError(int(m.group(1)), m.group(2).strip()) for m in _ERROR.finditer(log)]
    errors += [CompileError(None, "ptxas: " + m.group(1).strip()) for m in _PTXAS_ERROR.finditer(log)]
    if not errors and log.strip():
        errors.append(CompileError(None, log.strip().splitlines()[-1]))
    return errors


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(.*)$")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas(log: str) -> list[KernelResources]:
    """Registers, spills, stack and static shared memory per entry function."""
    kernels: list[KernelResources] = []
    current: KernelResources | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = KernelResources(kernel=m.group(1))
            kernels.append(current)
        elif current is None:
            continue
        elif m := _PROPS.search(line):
            current.stack_frame_bytes, current.spill_store_bytes, current.spill_load_bytes = (
                int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif m := _USED.search(line):
            current.registers = int(m.group(1))
            current.barriers = int(m.group(2) or 0)
            rest = m.group(3)
            if s := _SMEM.search(rest):
                current.shared_static_bytes = int(s.group(1))
            if c := _CMEM.search(rest):
                current.constant_bytes = int(c.group(1))
    return kernels


def _read_cache(entry: Path, fresh: bool = False) -> CompileReport | None:
    meta = entry / "report.json"
    if not meta.exists() or not (entry / "kernel.cubin").exists():
        return None
    data = json.loads(meta.read_text())
    data["kernels"] = [KernelResources(**k) for k in data["kernels"]]
    data["errors"] = [CompileError(**e) for e in data["errors"]]
    report = CompileReport(**data)
    report.cached = not fresh
    report.cubin_path = str(entry / "kernel.cubin")
    return report


def _write_cache(entry: Path, build_dir: Path, report: CompileReport) -> None:
    """Publish a finished build with one rename, so readers never see half a cache entry."""
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".entry-"))
    shutil.copy2(build_dir / "kernel.cubin", staging / "kernel.cubin")
    shutil.copy2(build_dir / SOURCE_NAME, staging / SOURCE_NAME)
    (staging / "report.json").write_text(json.dumps(asdict(report)))
    try:
        os.rename(staging, entry)
    except OSError:  # another process published the same key first; theirs is as good
        shutil.rmtree(staging, ignore_errors=True)
