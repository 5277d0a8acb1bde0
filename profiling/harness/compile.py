"""nvcc -> cubin for sm_90, confined, with the includes decided by the preprocessor itself.

Runs on any machine with nvcc; no GPU needed. Each candidate costs two confined runs
(confine.py: minimal environment, empty folder, rlimits, bubblewrap where usable):
1. the dependency pass, `nvcc -E` with the compile's own options, gcc announcing each
   file as it stacks it (-H) and writing its dependency list (-MD). Every file it read
   must be kernel.cu or lie in the toolkit's or the system's include folders
   (policy.check_dependencies), and the text it wrote may hold no directive for cicc to
   run (policy.check_preprocessed);
2. the compile of that very text (kernel.cup) to a cubin, with `ptxas -v` and the PTX kept
   (signature.py reads the parameters from it). This run opens no header at all: what
   was checked is what is compiled.
Only the candidate's own lines reach a report: kernel.cu diagnostics, ptxas and nvcc's
own messages; a failed dependency pass is told in our words, with the line of kernel.cu
and only text that is on it. Errors keep the user's line numbers (tunables arrive as -D
options, not edits; the preprocessed text carries kernel.cu's line markers).
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
from dataclasses import asdict, replace
from functools import lru_cache
from pathlib import Path

from . import confine, signature
from .candidate import Candidate
from .confine import GiB, Limits, MiB, Toolkit
from .policy import (
    SOURCE_NAME,
    check_compile_options,
    check_dependencies,
    check_preprocessed,
    check_source,
    header_lines,
    make_dependencies,
    marker_files,
)
from .verdict import CompileError, CompileReport, KernelResources

ARCH = "sm_90"
COMPILE_TIMEOUT_S = 120  # nvcc on one kernel file takes seconds; a template bomb does not finish
MAX_CUBIN_BYTES = 64 * 1024 * 1024
MAX_PREPROCESSED_BYTES = 32 * MiB  # a naive kernel with cuda_runtime.h is 1.3 MB
MAX_LOG_CHARS = 32_000
PREPROCESSED_NAME, DEPS_NAME, DEPS_TARGET = "kernel.cup", "kernel.d", "kernel.dep"
CUBIN_NAME, PTX_NAME = "kernel.cubin", "kernel.ptx"
# Part of the cache key: entries written before the confined pipeline hold unfiltered logs.
PIPELINE_VERSION = 2
PREPROCESS_LIMITS = Limits(wall_seconds=60, cpu_seconds=60, file_bytes=MAX_PREPROCESSED_BYTES,
                           output_bytes=4 * MiB, stop_at_output_limit=True)
COMPILE_LIMITS = Limits(wall_seconds=COMPILE_TIMEOUT_S, cpu_seconds=COMPILE_TIMEOUT_S)


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


def preprocess_command(kit: Toolkit, candidate: Candidate) -> list[str]:
    defines = [f"-D{name}={value}" for name, value in sorted(candidate.tunables.items())]
    return [str(kit.nvcc), f"-arch={ARCH}", "-E", *defines, *candidate.compile_options,
            "-Xcompiler", f"-H,-MD,-MF,{DEPS_NAME},-MT,{DEPS_TARGET}",
            "-o", PREPROCESSED_NAME, SOURCE_NAME]


def list_includes_command(kit: Toolkit, candidate: Candidate) -> list[str]:
    """The dependency pass once more, listing headers it cannot find instead of stopping."""
    command = preprocess_command(kit, candidate)
    command[command.index("-Xcompiler") + 1] = f"-H,-M,-MG,-MT,{DEPS_TARGET}"
    command[command.index("-o") + 1] = DEPS_NAME
    return command


def compile_command(kit: Toolkit, candidate: Candidate) -> list[str]:
    return [str(kit.nvcc), f"-arch={ARCH}", "-cubin", "-Xptxas", "-v", *candidate.compile_options,
            "--keep", "--keep-dir", ".", "-o", CUBIN_NAME, PREPROCESSED_NAME]


def cache_key(candidate: Candidate) -> str:
    material = json.dumps(
        {"source": candidate.source, "options": list(candidate.compile_options),
         "tunables": candidate.tunables, "arch": ARCH, "nvcc": nvcc_version(),
         "pipeline": PIPELINE_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()


def compile_candidate(candidate: Candidate, cache_dir: Path | None = None) -> CompileReport:
    """Compile, or return the cached result. Raises PolicyViolation for what the source
    may not do: before nvcc runs when the text shows it, after the dependency pass when
    the preprocessor does."""
    check_source(candidate.source)
    check_compile_options(candidate.compile_options)
    cache_dir = cache_dir or default_cache_dir()
    entry = cache_dir / cache_key(candidate)
    cached = _read_cache(entry)
    if cached is not None:
        return cached
    kit = confine.toolkit() if shutil.which("nvcc") else None
    if kit is None:
        raise CompilerUnavailable("nvcc is not installed on this host, so nothing can be compiled")
    try:
        sandbox = confine.sandbox_mode()
    except confine.SandboxUnavailable as error:
        raise CompilerUnavailable(str(error)) from None

    cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".build-") as build:
        build_dir = Path(build)
        (build_dir / SOURCE_NAME).write_text(candidate.source)
        report = _build(kit, candidate, build_dir, sandbox)
        report.seconds = time.monotonic() - started
        if not report.ok:
            return report
        _write_cache(entry, build_dir, report)
    return _read_cache(entry, fresh=True) or report


def _build(kit: Toolkit, candidate: Candidate, build_dir: Path, sandbox: str) -> CompileReport:
    source = candidate.source
    pre = confine.run_confined(preprocess_command(kit, candidate), build_dir, PREPROCESS_LIMITS, sandbox)
    preprocessed = _read_limited(build_dir / PREPROCESSED_NAME, MAX_PREPROCESSED_BYTES)
    evidence = [*make_dependencies(_read_limited(build_dir / DEPS_NAME, 4 * MiB), DEPS_TARGET),
                *header_lines(pre.output), *marker_files(preprocessed)]
    # A text at the size limit may have been cut short: what is checked must be all of it.
    cut_short = preprocessed and (build_dir / PREPROCESSED_NAME).stat().st_size >= MAX_PREPROCESSED_BYTES
    failed = pre.timed_out or pre.returncode != 0 or pre.output_truncated or not preprocessed or cut_short
    if failed and not _limit_errors(pre, PREPROCESS_LIMITS, ""):
        # gcc stops at the first header it cannot find; listing them all (-M -MG) lets a
        # missing one outside the include folders be named, as a found one is.
        listed = confine.run_confined(list_includes_command(kit, candidate), build_dir,
                                      PREPROCESS_LIMITS, sandbox)
        evidence += [*make_dependencies(_read_limited(build_dir / DEPS_NAME, 4 * MiB), DEPS_TARGET),
                     *header_lines(listed.output)]
    check_dependencies(dict.fromkeys(evidence), build_dir, include_roots(kit), source)
    if failed:
        errors = [CompileError(None, f"the preprocessed source reached {MAX_PREPROCESSED_BYTES // MiB} "
                                     "MiB")] if cut_short else preprocessor_errors(pre, source)
        return CompileReport(ok=False, errors=errors, sandbox=sandbox,
                             log="\n".join(_as_line(e) for e in errors))
    check_preprocessed(preprocessed)
    run = confine.run_confined(compile_command(kit, candidate), build_dir, COMPILE_LIMITS, sandbox)
    compiled = candidate_lines(run.output.replace(str(build_dir) + os.sep, ""))
    own = [*preprocessor_warnings(pre.output, source), *compiled]
    left_out = len(run.output.splitlines()) - len(compiled)
    log = "\n".join(own + ([f"({left_out} lines about other files left out)"] if left_out > 0 else []))
    cubin = build_dir / CUBIN_NAME
    if run.timed_out or run.returncode != 0 or not cubin.exists():
        errors = _limit_errors(run, COMPILE_LIMITS, "nvcc") or parse_errors("\n".join(own)) or [
            CompileError(None, "nvcc failed; its messages name only other files than kernel.cu, "
                               "which are not shown")]
        return CompileReport(ok=False, log=log[:MAX_LOG_CHARS], errors=errors, sandbox=sandbox)
    if cubin.stat().st_size > MAX_CUBIN_BYTES:
        return CompileReport(ok=False, log=log[:MAX_LOG_CHARS], sandbox=sandbox, errors=[
            CompileError(None, f"cubin larger than {MAX_CUBIN_BYTES} bytes")])
    params = signature.kernel_params_of_file(build_dir / PTX_NAME) if (build_dir / PTX_NAME).exists() else {}
    kernels = [replace(k, params=params.get(k.kernel)) for k in parse_ptxas("\n".join(own))]
    return CompileReport(ok=True, log=log[:MAX_LOG_CHARS], kernels=kernels, sandbox=sandbox,
                         cubin_sha256=hashlib.sha256(cubin.read_bytes()).hexdigest())


@lru_cache(maxsize=4)
def include_roots(kit: Toolkit) -> tuple[str, ...]:
    """Where a dependency may lie: the toolkit's include folders, as nvcc hands them to the
    preprocessor, and the host compiler's own search list (asked once)."""
    with tempfile.TemporaryDirectory(prefix="optiml-gcc-probe-") as probe:
        asked = confine.run_confined(["gcc", "-E", "-x", "c++", "-", "-v"], Path(probe),
                                     Limits(wall_seconds=60), sandbox=confine.RLIMITS)
    lines, listed, search = asked.output.splitlines(), False, []
    for line in lines:
        if line.startswith("#include ") and "search starts here" in line:
            listed = True
        elif line.startswith("End of search list"):
            listed = False
        elif listed and line.startswith(" "):
            search.append(line.strip().removesuffix(" (framework directory)"))
    if not search:
        raise CompilerUnavailable(f"gcc did not list its include folders: {asked.output[-300:]}")
    # A root of "/" would admit every file; gcc's own list (asked with no CPATH) has none.
    return tuple(r for r in (*kit.include_dirs, *search) if os.path.normpath(r) != "/")


# gcc's messages in the dependency pass: `kernel.cu:12:3: error: ...`.
_GCC_MESSAGE = re.compile(r"^kernel\.cu:(\d+):(?:\d+:)? (fatal error|error|warning): (.*)$", re.MULTILINE)
_MISSING = re.compile(r"^(.+): (No such file or directory|Permission denied|Is a directory)$")


def preprocessor_errors(result: confine.Confined, source: str) -> list[CompileError]:
    """A failed dependency pass in our words. Its output may hold what a foreign file
    made the preprocessor say, so only the kernel.cu line and text on it are kept."""
    limit = _limit_errors(result, PREPROCESS_LIMITS, "the preprocessor")
    if limit:
        return limit
    errors = [_verified(int(m.group(1)), m.group(3), source) for m in _GCC_MESSAGE.finditer(result.output)
              if m.group(2) != "warning"]
    return errors[:5] or [CompileError(None, f"the preprocessor failed (exit {result.returncode}) "
                                              "without naming a line of kernel.cu")]


def preprocessor_warnings(output: str, source: str) -> list[str]:
    """#warning lines of a dependency pass that succeeded, as `kernel.cu(N): warning: ...`."""
    return [_as_line(_verified(int(m.group(1)), m.group(3), source), "warning")
            for m in _GCC_MESSAGE.finditer(output)
            if m.group(2) == "warning" and m.group(3).startswith("#warning")]


def _verified(line: int, message: str, source: str) -> CompileError:
    """gcc's message when what it quotes is on that line of the candidate, else its kind."""
    text = _spliced_line(source, line)
    message = re.sub(r"\s*\[-W[\w=-]+\]$", "", message)
    if message.startswith(("#error", "#warning")):
        shown = message.split(None, 1)[1] if " " in message else ""
        return CompileError(line, message if shown in text else message.split()[0])
    if missing := _MISSING.match(message):
        name, why = missing.groups()
        return CompileError(line, f"cannot include {name}: {why.lower()}" if name in text
                            else f"an #include names a file that cannot be read ({why.lower()})")
    quoted = re.findall(r"[\"'‘“]([^\"'’”]*)[\"'’”]", message)
    if all(q in source for q in quoted):
        return CompileError(line, message)
    return CompileError(line, "the preprocessor stopped with an error here")


def _limit_errors(result: confine.Confined, limits: Limits, who: str) -> list[CompileError]:
    if result.timed_out:
        why = f"{who} took longer than {limits.wall_seconds:.0f} s and was stopped"
    elif result.signal_name == "SIGXCPU":
        why = f"{who} used more than {limits.cpu_seconds} s of CPU time and was stopped"
    elif result.signal_name == "SIGXFSZ":
        why = f"{who} wrote a file larger than {limits.file_bytes // MiB} MiB and was stopped"
    elif re.search(r"out of memory|virtual memory exhausted|std::bad_alloc", result.output):
        why = (f"{who} ran out of its {limits.address_space_bytes / GiB:.0f} GiB address space "
               "(an include of a device such as /dev/zero does this)")
    elif result.output_truncated and limits.stop_at_output_limit:
        why = f"{who} printed more than {limits.output_bytes // MiB} MiB of messages and was stopped"
    else:
        return []
    return [CompileError(None, why)]


def _spliced_line(source: str, line: int) -> str:
    """Physical line `line` of the source with the lines it continues onto (splices)."""
    lines = source.splitlines()[line - 1:]
    text = ""
    for part in lines:
        text += part
        if not part.rstrip().endswith("\\"):
            break
    return text


def _as_line(error: CompileError, kind: str = "error") -> str:
    return f"{SOURCE_NAME}({error.line}): {kind}: {error.message}" if error.line else error.message


_OWN = re.compile(r"^kernel\.cu\(\d+\): |^ptxas |^nvcc |^\d+ errors? detected in the compilation of ")


def candidate_lines(output: str) -> list[str]:
    """The compile's lines that come from the candidate: its kernel.cu diagnostics with
    their quoted lines, ptxas' and nvcc's own; none about another file, so none that
    could quote one."""
    kept, following = [], False
    for line in output.splitlines():
        if _OWN.match(line):
            kept.append(line.replace(f'"{PREPROCESSED_NAME}"', f'"{SOURCE_NAME}"'))
            following = True
        elif following and (line[:1] in (" ", "\t") or not line.strip()):
            kept.append(line)
        else:
            following = False
    return kept


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


def _read_limited(path: Path, limit: int) -> str:
    """A file the toolchain wrote, or "" if it did not; never more than `limit` bytes."""
    try:
        with path.open("rb") as handle:
            return handle.read(limit).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _read_cache(entry: Path, fresh: bool = False) -> CompileReport | None:
    meta = entry / "report.json"
    if not meta.exists() or not (entry / CUBIN_NAME).exists():
        return None
    data = json.loads(meta.read_text())
    data["kernels"] = [KernelResources(**k) for k in data["kernels"]]
    data["errors"] = [CompileError(**e) for e in data["errors"]]
    report = CompileReport(**data)
    report.cached = not fresh
    report.cubin_path = str(entry / CUBIN_NAME)
    return report


def _write_cache(entry: Path, build_dir: Path, report: CompileReport) -> None:
    """Publish a finished build with one rename, so readers never see half a cache entry."""
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".entry-"))
    shutil.copy2(build_dir / CUBIN_NAME, staging / CUBIN_NAME)
    shutil.copy2(build_dir / SOURCE_NAME, staging / SOURCE_NAME)
    (staging / "report.json").write_text(json.dumps(asdict(report)))
    try:
        os.rename(staging, entry)
    except OSError:  # another process published the same key first; theirs is as good
        shutil.rmtree(staging, ignore_errors=True)
