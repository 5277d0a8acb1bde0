"""compute-sanitizer over a candidate's L0 runs: races, uninitialised reads, bad accesses.

Some faults never show as a wrong value on the seeds the gate happens to draw: a
reduction missing a `__syncthreads` is right whenever its warps happen to run in order,
a read one element past an input returns whatever lies there, and canaries only catch
writes. NVIDIA's compute-sanitizer instruments the kernels and sees them directly. The
gate runs the worker under each tool at the task's L0 sizes (small, odd and prime: cheap
under instrumentation, and where edge cases live), one seed each, with buffers
allocated to their exact size (no canary region for memcheck to miss an overrun in),
before a verdict can pass:

| tool      | guard                | finds                                              |
| --------- | -------------------- | -------------------------------------------------- |
| memcheck  | `out_of_bounds`      | reads or writes outside an allocation, misaligned  |
| racecheck | `race`               | shared-memory hazards between threads of a block   |
| initcheck | `uninitialized_read` | reads of global memory never written               |
| synccheck | `sync_error`         | barriers in divergent code, bad sync masks         |

The tool's report goes to a file of its own (`--log-file`), never to the worker's
stdout, where the candidate's printf could forge one; a tool that found an error exits
with ERROR_EXIT_CODE. The tools run at the same time, each in its own process.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .sandbox import run_isolated

GUARD_OF_TOOL = {"memcheck": "out_of_bounds", "racecheck": "race",
                 "initcheck": "uninitialized_read", "synccheck": "sync_error"}
TOOL_OPTIONS = {
    "memcheck": [],
    # The default "analysis" report: on the H200 the "hazard" report took over 280 s for
    # a warp-synchronous sum that analysis reported in 6 s (as warnings, which count).
    "racecheck": [],
    "initcheck": [],
    "synccheck": [],
}
# The harness's own kernels (inputs, checksums, comparisons) carry this in their names
# and compute-sanitizer leaves them out; the gate refuses a candidate kernel whose name
# holds it (gate.py), or it would run unchecked.
RESERVED = "optiml_"
ERROR_EXIT_CODE = 86  # not an exit code our worker or Python uses
SANITIZE_TIME_LIMIT_S = 300.0
REPORT_LINES = 8  # lines of the tool's report kept in the verdict's message


@dataclass
class ToolResult:
    tool: str
    ran: bool
    guard: str | None = None
    message: str = ""
    seconds: float = 0.0


def sanitizer_binary() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        candidate = Path(root or "/nonexistent") / "bin" / "compute-sanitizer"
        if candidate.is_file():
            return str(candidate)
    return None


def command(tool: str, log_file: Path, target: list[str]) -> list[str]:
    binary = sanitizer_binary()
    if binary is None:
        raise FileNotFoundError("compute-sanitizer is not installed")
    return [binary, "--tool", tool, *TOOL_OPTIONS[tool], "--log-file", str(log_file),
            "--error-exitcode", str(ERROR_EXIT_CODE), "--print-limit", "20",
            "--kernel-name-exclude", f"kns={RESERVED}", *target]


def run_tools(tools: tuple[str, ...], request_path: Path, workdir: Path, env: dict,
              digest: str) -> list[ToolResult]:
    """Each tool over the worker in sanitize mode, in parallel; one result per tool."""
    if not tools:
        return []
    if sanitizer_binary() is None:
        return [ToolResult(tool, ran=False, message="compute-sanitizer is not installed")
                for tool in tools]
    with ThreadPoolExecutor(max_workers=len(tools)) as pool:
        return list(pool.map(lambda tool: _run_tool(tool, request_path, workdir, env, digest),
                             tools))


def _run_tool(tool: str, request_path: Path, workdir: Path, env: dict, digest: str) -> ToolResult:
    log_file = workdir / f"sanitize-{tool}-{digest[:12]}.log"
    log_file.unlink(missing_ok=True)
    target = [sys.executable, "-m", "profiling.harness.worker", str(request_path)]
    result = run_isolated(command(tool, log_file, target), time_limit_s=SANITIZE_TIME_LIMIT_S,
                          log_path=workdir / f"sanitize-{tool}-{digest[:12]}.out", env=env)
    report = _read(log_file)
    worker = result.last("result")
    found = parse_report(tool, report)
    if found is None and result.returncode == ERROR_EXIT_CODE:
        found = f"{tool} reported an error: {summary_lines(report) or 'no report written'}"
    if found is not None:
        return ToolResult(tool, True, GUARD_OF_TOOL[tool], found, result.seconds)
    if result.timed_out:
        bound = (result.stage_limit or {}).get("bound", f"{SANITIZE_TIME_LIMIT_S:.0f} s")
        return ToolResult(tool, True, "timeout", f"under {tool}, still running past {bound}",
                          result.seconds)
    if worker is None and result.returncode == 0:
        return ToolResult(tool, True, None, "", result.seconds)  # no channel through
    if worker is None:
        death = result.died_by_signal or f"exit code {result.returncode}"
        return ToolResult(tool, True, "crash", f"the worker under {tool} died ({death})",
                          result.seconds)
    if worker.get("status") == "rejected":
        # Passed without the tool but not under it: an outcome that depends on timing
        # is a race whatever the tool itself made of it.
        return ToolResult(tool, True, worker.get("guard"), f"under {tool} (slower, other "
                          f"interleavings): {worker.get('message', '')}", result.seconds)
    return ToolResult(tool, True, None, "", result.seconds)


_FINDINGS = {
    "memcheck": re.compile(r"(Invalid __\w+__ (read|write)|Misaligned|Out-of-range|"
                           r"Address .* is out of bounds|Program hit cudaError)", re.IGNORECASE),
    "racecheck": re.compile(r"(Race reported|hazard detected|Potential \w+ hazard)", re.IGNORECASE),
    "initcheck": re.compile(r"Uninitialized __\w+__ memory (read|access)", re.IGNORECASE),
    "synccheck": re.compile(r"(Barrier error|Invalid arguments|Divergent|syncwarp|"
                            r"Invalid barrier)", re.IGNORECASE),
}
_SUMMARY = re.compile(r"(ERROR|RACECHECK|INITCHECK|SYNCCHECK) SUMMARY: (\d+) (error|hazard)",
                      re.IGNORECASE)


def parse_report(tool: str, report: str) -> str | None:
    """What the tool found, in a few of its own lines, or None when it found nothing."""
    lines = []
    for raw in report.splitlines():
        line = raw.strip("= ").strip()
        if line.startswith("Saved host backtrace"):
            break  # the host's call stack says nothing about the kernel
        if raw.startswith("=") and line and line != "COMPUTE-SANITIZER":
            lines.append(line)
    findings = [line for line in lines if _FINDINGS[tool].search(line)]
    counted = any(int(m.group(2)) > 0 for m in (_SUMMARY.search(line) for line in lines) if m)
    if not findings and not counted:
        return None
    first = findings[0] if findings else summary_lines(report)
    context = [line for line in lines if line and line != first][:REPORT_LINES - 1]
    return f"{tool}: {first}" + ("; " + "; ".join(context) if context else "")


def summary_lines(report: str) -> str:
    return "; ".join(line.strip("= ").strip() for line in report.splitlines()
                     if _SUMMARY.search(line))


def _read(path: Path, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as file:
            return file.read(limit).decode(errors="replace")
    except OSError:
        return ""
