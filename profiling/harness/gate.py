"""The gate's front door: compile -> (on a GPU host) verify -> time -> profile.

    from profiling.harness.gate import GateOptions, evaluate
    verdict = evaluate("softmax", candidate, GateOptions())

Compilation happens in this process (nvcc as a subprocess, no GPU needed). Everything
that touches the GPU happens in a fresh subprocess per candidate (sandbox.py runs
worker.py), killed with its process group at the time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from . import HARNESS_VERSION, confine, expr, inputs, profile, sanitize, signature, tasks
from .candidate import Candidate, CandidateError
from .compile import CompilerUnavailable, compile_candidate
from .policy import PolicyViolation
from .sandbox import IsolatedResult, run_isolated
from .spec import Task
from .verdict import (
    ERROR,
    INCOMPLETE,
    PASSED,
    CheckRecord,
    CompileReport,
    Environment,
    ProfileReport,
    TimingReport,
    Verdict,
    rejected,
)

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding `profiling/`
HARNESS_KERNELS = Path(__file__).with_name("kernels") / "refresh.cu"
PROFILE_TIME_LIMIT_S = 300.0  # ncu replays each kernel once per metric pass


@dataclass(frozen=True)
class GateOptions:
    levels: tuple[str, ...] = ("L0", "L1")
    seeds: int = 5  # fresh inputs per seed, distributions alternating
    warmup_runs: int = 3
    timing_runs: int = 30
    profile: bool = True
    time_limit_s: float = 600.0  # whole GPU subprocess, wall clock
    workdir: str | None = None  # requests, logs, .ncu-rep files; a temp dir if None
    l1_sizes: dict[str, int] | None = None  # override the task's full size (tests)
    seed: int | None = None  # fixed base seed (reproduce a failure); random if None
    adversary: dict = field(default_factory=dict)  # test hooks that make the gate harder
    # With a fixed seed, a directory where inputs and reference outputs are kept for the
    # next candidate of the same task (a search): see inputs.py.
    input_cache: str | None = None
    spot_checks: int = 8  # timed runs whose outputs are verified (chosen unobservably)
    # Their references on the GPU, for tasks whose reference allows it, after they agreed
    # with the host's (gpuref.py). Where a reference is computed does not change what is
    # checked, so it is not part of identity(); the verdict's environment says which.
    gpu_references: bool = True
    # L1 inputs drawn on the GPU from the seed by the harness's own kernel, for tasks with
    # default float inputs (inputs.generated_on_gpu); else generated on the host. The same
    # distributions either way, so it is not part of identity() either.
    gpu_inputs: bool = True
    # Outputs compared with the reference on the GPU by the harness's kernel before the
    # host's guards, which judge only what it does not pass (gpu_compare.py): where a
    # comparison runs does not change what passes, so it is not part of identity(). Off
    # until its GPU tests (tests/gpu/test_gpu_compare.py) have run on a GPU: no machine
    # was lent for them the session it was written (2026-12-07).
    compare_on_gpu: bool = False
    # compute-sanitizer tools run at L0 sizes before the verdict can pass (sanitize.py).
    sanitize: tuple[str, ...] = ("memcheck", "racecheck", "initcheck", "synccheck")
    # Every buffer the candidate can reach in its own address range between unmapped guard
    # regions, where the driver has virtual memory management (buffers.py); off only for a
    # cost measurement's baseline (bench/guard_regions.py), and then not standard.
    guard_regions: bool = True
    # The vendor's and the naive kernel's times measured on this GPU after the worker, once
    # per (GPU, driver, torch, task, sizes), when its cache had none (comparisons_gpu.py).
    # What the kernel is compared with, not how it is checked: not part of identity().
    measure_comparisons: bool = True

    def identity(self) -> dict:
        """What this verdict's measurement depended on: stored with it and part of the
        key it is looked up by, so a weaker measurement never stands in for the standard
        gate. Where files live (workdir, input_cache) and the seed do not change what is
        measured; the seed is recorded in the verdict instead (Verdict.seeds)."""
        identity = {"levels": list(self.levels), "seeds": self.seeds, "warmup_runs": self.warmup_runs,
                    "timing_runs": self.timing_runs, "profile": self.profile,
                    "l1_sizes": dict(sorted(self.l1_sizes.items())) if self.l1_sizes else None,
                    "spot_checks": self.spot_checks, "sanitize": sorted(self.sanitize),
                    "adversary": dict(sorted(self.adversary.items()))}
        if not self.guard_regions:  # only when off: the keys of verdicts stored before it stay
            identity["guard_regions"] = False
        return identity

    def is_standard(self) -> bool:
        """The settings every stored verdict served to other runs must have been measured
        with: the defaults (a time limit or a place for files does not weaken them)."""
        return self.identity() == GateOptions().identity()


@lru_cache(maxsize=1)
def gpu_name() -> str | None:
    """The first GPU's name, or None on a host without one (or without pycuda)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    names = out.stdout.strip().splitlines()
    return names[0].strip() if out.returncode == 0 and names else None


def evaluate(task_name: str, candidate: Candidate, options: GateOptions | None = None) -> Verdict:
    """Judge one candidate. Raises only for an unknown task; a bad kernel is a verdict."""
    return evaluate_task(tasks.get(task_name), candidate, options)


def evaluate_task(task: Task, candidate: Candidate, options: GateOptions | None = None) -> Verdict:
    """The same for a task given as itself (one a test defines, not in the registry)."""
    options = options or GateOptions()
    started = time.monotonic()
    verdict = _evaluate(task, candidate, options)
    verdict.seconds = time.monotonic() - started
    verdict.environment.harness_version = HARNESS_VERSION
    return verdict


def _evaluate(task: Task, candidate: Candidate, options: GateOptions) -> Verdict:
    compiled = compile_checked(task, candidate, options.l1_sizes or task.sizes)
    if isinstance(compiled, Verdict):
        return compiled
    return _run_on_gpu(task, candidate, candidate.content_hash(), compiled, options)


def compile_checked(task: Task, candidate: Candidate, l1_sizes: dict[str, int]) -> Verdict | CompileReport:
    """Everything before the GPU (cpu_stage). Returns the compile report, or the verdict
    that ends the evaluation here (a rejection, or "incomplete" on a host without a GPU)."""
    checked = cpu_stage(task, candidate, l1_sizes)
    if isinstance(checked, Verdict) or gpu_name() is not None:
        return checked
    return Verdict(task=task.name, candidate_hash=candidate.content_hash(), status=INCOMPLETE,
                   stage="compile", compile=checked, message="compiled and checked; running it needs "
                   "a GPU host (an NVIDIA GPU with pycuda installed)")


def cpu_stage(task: Task, candidate: Candidate, l1_sizes: dict[str, int]) -> Verdict | CompileReport:
    """The plan, the policy, nvcc, the kernels the plan names and their arguments: what
    needs no GPU, so that the New session form's pre-flight (preflight.py) asks exactly
    what the gate will. Returns the compile report, or the verdict that ends it (a
    rejection, or an error when this host has no nvcc)."""
    digest = candidate.content_hash()
    try:
        check_plan(task, candidate, l1_sizes)
    except CandidateError as error:
        return rejected(task.name, digest, "plan", str(error), "plan")
    try:
        report = compile_candidate(candidate)
    except PolicyViolation as violation:
        return rejected(task.name, digest, violation.guard, str(violation), "compile")
    except CompilerUnavailable as error:
        return Verdict(task=task.name, candidate_hash=digest, status=ERROR, stage="compile",
                       message=str(error))
    if not report.ok:
        first = report.errors[0] if report.errors else None
        where = f"line {first.line}: " if first and first.line else ""
        return rejected(task.name, digest, "compile",
                        f"{where}{first.message if first else 'nvcc failed'}", "compile",
                        compile=report)
    defined = {k.kernel for k in report.kernels}
    reserved = sorted(k for k in defined if sanitize.RESERVED in k)
    if reserved:
        return rejected(task.name, digest, "source_policy",
                        f"kernel {reserved[0]!r}: names containing {sanitize.RESERVED!r} belong to the "
                        "harness's own kernels, which compute-sanitizer does not check", "compile",
                        compile=report)
    for launch in candidate.launches:
        if launch.kernel not in defined:
            return rejected(task.name, digest, "plan",
                            f"the plan launches {launch.kernel!r}, but the source defines "
                            f"{', '.join(sorted(defined)) or 'no extern C kernel'}",
                            "plan", compile=report)

    buffers = {t.name for t in task.all_tensors()} | {s.name for s in candidate.scratch}
    try:  # each argument's kind and size against the kernel's parameters, from its PTX
        signature.check_launches(candidate.launches, {k.kernel: k.params for k in report.kernels},
                                 buffers)
    except CandidateError as error:
        return rejected(task.name, digest, "plan", str(error), "plan", compile=report)
    return report


def check_plan(task: Task, candidate: Candidate, l1_sizes: dict[str, int]) -> None:
    """Every name in the plan is a tensor, a scratch buffer, a size or a tunable."""
    tensors = {t.name for t in task.all_tensors()} | {s.name for s in candidate.scratch}
    clash = tensors & set(candidate.tunables) or set(candidate.tunables) & set(task.sizes)
    if clash:
        raise CandidateError(f"tunables may not reuse tensor or size names: {sorted(clash)}")
    for sizes in (l1_sizes, *task.l0_sizes):
        names = {**sizes, **candidate.tunables}
        for index, launch in enumerate(candidate.launches):
            where = f"launches[{index}] ({launch.kernel})"
            try:
                for dim in (*launch.grid, *launch.block):
                    if expr.evaluate(dim, names) < 1:
                        raise ValueError(f"grid {list(launch.grid)} and block "
                                         f"{list(launch.block)} must be positive")
                if expr.evaluate(launch.shared_bytes, names) < 0:
                    raise ValueError(f"shared_bytes {launch.shared_bytes!r} is negative")
                for arg in launch.args:
                    if isinstance(arg, str) and arg not in tensors:
                        if arg.startswith("f32:"):
                            _f32(arg)
                        else:
                            expr.evaluate(arg.split(":", 1)[1] if arg[:4] in ("i64:", "i32:")
                                          else arg, names)
            except (expr.ExpressionError, ValueError) as error:
                raise CandidateError(f"{where} at sizes {sizes}: {error}") from None
        for scratch in candidate.scratch:
            try:
                count = expr.evaluate_int(scratch.count, names)
            except expr.ExpressionError as error:
                raise CandidateError(f"scratch {scratch.name!r}: {error}") from None
            if count < 0:
                raise CandidateError(f"scratch {scratch.name!r}: count {scratch.count!r} = "
                                     f"{count} at sizes {sizes} is negative")


def _f32(arg: str) -> float:
    """The number of an `f32:<number>` argument; a ValueError in words, not float()'s
    ("could not convert string to float: 'abc'")."""
    try:
        return float(arg[4:])
    except ValueError:
        raise ValueError(f"argument {arg!r}: after f32: a number, e.g. f32:0.5") from None


def harness_cubin() -> str:
    report = compile_candidate(Candidate(source=HARNESS_KERNELS.read_text(), launches=()))
    if not report.ok or report.cubin_path is None:
        raise RuntimeError(f"the harness's own kernels failed to compile: {report.log[-2000:]}")
    return report.cubin_path


def child_env() -> dict[str, str]:
    """The GPU worker's environment: an allow-list (confine.worker_env), so a kernel's
    process never holds the web app's database URL, secret key or API keys."""
    return confine.worker_env({
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1"})


def worker_request(task: Task, candidate: Candidate, report: CompileReport, options: dict) -> dict:
    """What a GPU worker is asked (worker.Session reads it): the gate's and the screen's."""
    return {"task": task.name, "candidate": candidate.to_dict(), "cubin": report.cubin_path,
            "harness_cubin": harness_cubin(), "options": options}


def worker_options(options: GateOptions, *, seed: int | None) -> dict:
    return {"levels": list(options.levels), "seeds": options.seeds,
            "warmup_runs": options.warmup_runs, "timing_runs": options.timing_runs,
            "l1_sizes": options.l1_sizes, "seed": seed,
            "input_cache": options.input_cache if seed is not None else None,
            "spot_checks": options.spot_checks, "adversary": options.adversary,
            "gpu_references": options.gpu_references, "gpu_inputs": options.gpu_inputs,
            "compare_on_gpu": options.compare_on_gpu,
            "guard_regions": options.guard_regions}


# A passing time more than this many times faster than the vendor library (at the task's
# own sizes) is measured again by a second full gate in a fresh process, with fresh
# seeds, before it can count: an attack on the gate is likelier than beating cuBLAS 3x.
SUSPICIOUS_SPEEDUP = 3.0


def _run_on_gpu(task: Task, candidate: Candidate, digest: str, report: CompileReport,
                options: GateOptions) -> Verdict:
    workdir = Path(options.workdir or tempfile.mkdtemp(prefix="optiml-eval-"))
    workdir.mkdir(parents=True, exist_ok=True)
    early = _EarlySanitizers(task, report, candidate, options, workdir, digest)
    verdict, request = _full_run(task, candidate, digest, report, options, workdir, options.seed,
                                 on_message=early.on_message)
    settings = options.identity()
    if verdict.status == PASSED and options.sanitize:
        verdict, ran = early.apply(verdict)
        settings["sanitize"] = sorted(ran)
    else:
        early.discard()
    if verdict.status == PASSED and _suspiciously_fast(task, verdict, options):
        started = time.monotonic()
        second, _ = _full_run(task, candidate, digest, report, options, workdir, None)
        verdict.stage_seconds["second_gate"] = time.monotonic() - started
        if second.status != PASSED:
            second.message = (f"second full gate (the first measured {verdict.timing.median_ms:.4f} "
                              f"ms, over {SUSPICIOUS_SPEEDUP:.0f}x faster than the vendor's "
                              f"{_vendor_ms_to_beat(task, verdict, options):.4f} ms): {second.message}")
            second.stage_seconds = {**verdict.stage_seconds, **second.stage_seconds}
            verdict = second
        else:
            verdict.seeds["second_gate"] = second.seeds
    if verdict.status == PASSED and options.profile:
        started = time.monotonic()
        verdict.profile = profile_candidate(task, candidate, report, request, workdir, digest)
        verdict.stage_seconds["profile"] = time.monotonic() - started
    if options.measure_comparisons and verdict.comparison:
        from .comparisons_gpu import GpuMeasurer, measured_after

        started = time.monotonic()
        measurer = GpuMeasurer(workdir=workdir, time_limit_s=options.time_limit_s)
        verdict.comparison = measured_after(task, verdict.comparison, measurer=measurer)
        verdict.stage_seconds["comparisons"] = time.monotonic() - started
    verdict.settings = settings
    verdict.stage = "done" if verdict.status == PASSED else verdict.stage
    return verdict


def _full_run(task: Task, candidate: Candidate, digest: str, report: CompileReport,
              options: GateOptions, workdir: Path, seed: int | None,
              on_message=None) -> tuple[Verdict, dict]:
    """Correctness and timing in one fresh worker process (`on_message` sees each of its
    messages as it arrives)."""
    started = time.monotonic()
    request = worker_request(task, candidate, report, worker_options(options, seed=seed))
    request_path = workdir / f"request-{digest[:12]}.json"
    request_path.write_text(json.dumps(request))
    prepared = time.monotonic()
    prepare_inputs(task, options.levels, options.l1_sizes or task.sizes,
                   dict.fromkeys(options.levels, options.seeds), seed, options.input_cache,
                   gpu_inputs=options.gpu_inputs)
    prepared = time.monotonic() - prepared
    result = run_isolated([sys.executable, "-m", "profiling.harness.worker", str(request_path)],
                          time_limit_s=options.time_limit_s, log_path=workdir / "worker.log",
                          env=child_env(), on_message=on_message)
    verdict = verdict_from_result(task.name, digest, report, result, options.time_limit_s)
    verdict.stage_seconds["gpu"] = time.monotonic() - started
    verdict.stage_seconds["prepare_inputs"] = prepared
    return verdict, request


# The worker's stage after its last timed run: from here on it only reads outputs back
# and checks them on the host (timing.TimedRuns.run), so the GPU is free to share.
VERIFY_STAGE = "verify timed runs"


class _EarlySanitizers:
    """compute-sanitizer's tools at L0 (sanitize.py), started while the worker verifies its
    timed runs instead of after it.

    The sanitizers must not run beside the timed runs (they would share the GPU with the
    measurement), but once the worker reports VERIFY_STAGE its timing is over and what is
    left, references and comparisons on the host and one correctness check, does not
    depend on having the GPU to itself. Starting the tools then hides their seconds
    behind the verification, which costs as much or more on every suite task. Their result
    counts only if the worker's verdict passes; a worker that never reaches that stage
    (rejected, or a gate with no timed runs) gets them after it, as before. They run on
    the worker's base seed, which the stage message carries.
    """

    def __init__(self, task: Task, report: CompileReport, candidate: Candidate,
                 options: GateOptions, workdir: Path, digest: str) -> None:
        self.task, self.report, self.candidate = task, report, candidate
        self.options, self.workdir, self.digest = options, workdir, digest
        self._thread: threading.Thread | None = None
        self._outcome: tuple[list, float] | BaseException | None = None

    def on_message(self, message: dict) -> None:
        if (self.options.sanitize and self._thread is None and message.get("type") == "stage"
                and message.get("stage") == VERIFY_STAGE and isinstance(message.get("base_seed"), int)):
            self._start(message["base_seed"])

    def _start(self, seed: int | None) -> None:
        self._thread = threading.Thread(target=self._run, args=(seed,), name="sanitizers", daemon=True)
        self._thread.start()

    def _run(self, seed: int | None) -> None:
        started = time.monotonic()
        try:
            results = _run_sanitizers(self.task, self.report, self.candidate, self.options,
                                      self.workdir, self.digest, seed)
            self._outcome = (results, time.monotonic() - started)
        except BaseException as error:  # re-raised in apply(), on the gate's thread
            self._outcome = error

    def apply(self, verdict: Verdict) -> tuple[Verdict, list[str]]:
        """The verdict after the sanitizers, and the tools that ran."""
        overlapped = self._thread is not None
        if not overlapped:
            self._start(verdict.seeds.get("base_seed"))
        waited = time.monotonic()
        self._thread.join()
        verdict.stage_seconds["sanitize_wait"] = time.monotonic() - waited
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        results, seconds = self._outcome
        verdict.stage_seconds["sanitize"] = seconds
        verdict.stage_seconds["sanitize_overlapped"] = float(overlapped)
        return _apply_sanitizers(self.task, verdict, results, self.digest)

    def discard(self) -> None:
        """The worker's verdict failed: let tools already started finish (each is bounded:
        sanitize.py), and ignore what they found."""
        if self._thread is not None:
            self._thread.join()


def _run_sanitizers(task: Task, report: CompileReport, candidate: Candidate, options: GateOptions,
                    workdir: Path, digest: str, seed: int | None) -> list:
    request = worker_request(task, candidate, report, {
        **worker_options(options, seed=seed),
        "mode": "sanitize", "levels": ["L0"], "seeds": 1, "timing_runs": 0, "input_cache": None})
    request_path = workdir / f"sanitize-{digest[:12]}.json"
    request_path.write_text(json.dumps(request))
    return sanitize.run_tools(tuple(options.sanitize), request_path, workdir, child_env(), digest)


def _apply_sanitizers(task: Task, verdict: Verdict, results: list, digest: str) -> tuple[Verdict, list[str]]:
    verdict.stage_seconds.update({f"sanitize_{r.tool}": r.seconds for r in results})
    found = next((r for r in results if r.guard is not None), None)
    if found is not None:
        verdict = rejected(task.name, digest, found.guard, found.message, f"sanitize {found.tool}",
                           compile=verdict.compile, correctness=verdict.correctness,
                           timing=verdict.timing, environment=verdict.environment,
                           seeds=verdict.seeds, stage_seconds=verdict.stage_seconds)
    return verdict, [r.tool for r in results if r.ran]


def _suspiciously_fast(task: Task, verdict: Verdict, options: GateOptions) -> bool:
    """Over SUSPICIOUS_SPEEDUP x the vendor's time on this GPU when it was measured here
    (at the sizes timed), else the recorded one at the task's own sizes: a GPU with no
    measurement yet is checked as before rather than not at all."""
    vendor_ms = _vendor_ms_to_beat(task, verdict, options)
    return (vendor_ms is not None and verdict.timing is not None
            and verdict.timing.median_ms * SUSPICIOUS_SPEEDUP < vendor_ms)


def _vendor_ms_to_beat(task: Task, verdict: Verdict, options: GateOptions) -> float | None:
    from .comparisons import MEASURED, Comparison, same_gpu

    here = Comparison.from_dict(verdict.comparison) if verdict.comparison else None
    if (here is not None and here.source == MEASURED and here.vendor_ms
            and same_gpu(here.gpu, verdict.environment.gpu)):
        return here.vendor_ms
    at_full_size = options.l1_sizes is None or options.l1_sizes == task.sizes
    return task.vendor.time_ms if task.vendor is not None and at_full_size else None


def prepare_inputs(task: Task, levels, l1_sizes: dict, seeds: dict[str, int], seed: int | None,
                   input_cache: str | None, *, gpu_inputs: bool = False) -> None:
    """With a fixed seed and a cache, build the inputs and references the worker will
    read, in parallel, before it starts (the worker would build them one by one); not
    those it generates on the GPU itself (`gpu_inputs`: inputs.generated_on_gpu)."""
    if seed is not None and input_cache:
        checks = [c for c in inputs.check_plan(task, list(levels), l1_sizes, seeds, seed)
                  if not (gpu_inputs and inputs.generated_on_gpu(task, c))]
        inputs.prepare(task, checks, input_cache)


def verdict_from_result(task: str, digest: str, report: CompileReport, result: IsolatedResult,
                        time_limit_s: float) -> Verdict:
    final = result.last("result")
    stage = result.last("stage") or {}
    where = stage.get("stage", "start")
    if stage.get("level"):
        where += f" {stage['level']} sizes {stage.get('sizes')} seed {stage.get('seed')}"
    common = {"compile": report}
    checks = [m for m in result.messages if m.get("type") == "check"]
    if checks:
        fields = CheckRecord.__dataclass_fields__
        common["correctness"] = [CheckRecord(**{k: v for k, v in m.items() if k in fields})
                                 for m in checks]
    if final is not None:
        common.update(
            correctness=[CheckRecord(**r) for r in final.get("correctness", [])],
            timing=TimingReport(**final["timing"]) if final.get("timing") else None,
            environment=Environment(**{k: v for k, v in final.get("environment", {}).items()
                                       if k in Environment.__dataclass_fields__}),
        )
        if isinstance(final.get("seeds"), dict):
            common["seeds"] = final["seeds"]
        if isinstance(final.get("comparison"), dict):  # the worker's GPU's (comparisons.py)
            common["comparison"] = final["comparison"]
        if isinstance(final.get("stage_seconds"), dict):
            common["stage_seconds"] = {f"worker_{k}": v for k, v in final["stage_seconds"].items()
                                       if isinstance(v, int | float)}
    if result.timed_out and result.stage_limit is not None:
        return rejected(task, digest, "timeout", f"{result.stage_limit.get('bound', 'a bounded stage')}"
                        f" was still running at its bound (during {where}); the process group "
                        "was killed", where, **common)
    if result.timed_out:
        return rejected(task, digest, "timeout", f"still running after {time_limit_s:.0f} s "
                        f"(during {where}); the process group was killed", where, **common)
    if final is None:
        death = result.died_by_signal or f"exit code {result.returncode}"
        return rejected(task, digest, "crash", f"the evaluation process died ({death}) during "
                        f"{where}: {result.log_tail[-600:].strip()}", where, **common)
    if final["status"] == "passed":
        return Verdict(task=task, candidate_hash=digest, status=PASSED, stage="timing", **common)
    if final["status"] == "error":
        return Verdict(task=task, candidate_hash=digest, status=ERROR, guard="internal",
                       message=final.get("message", ""), stage=where, **common)
    return rejected(task, digest, final["guard"], final.get("message", ""), where, **common)


def profile_candidate(task: Task, candidate: Candidate, report: CompileReport, request: dict,
                      workdir: Path, digest: str) -> ProfileReport:
    """ncu over one launch of the plan; a profiling failure is noted, never a rejection."""
    request = {**request, "options": {**request["options"], "mode": "profile"}}
    request_path = workdir / f"profile-{digest[:12]}.json"
    request_path.write_text(json.dumps(request))
    report_path = workdir / f"{task.name}-{digest[:12]}.ncu-rep"
    kernels = [launch.kernel for launch in candidate.launches]
    target = [sys.executable, "-m", "profiling.harness.worker", str(request_path), "-1"]
    result = run_isolated(profile.ncu_command(str(report_path), kernels, target),
                          time_limit_s=PROFILE_TIME_LIMIT_S, log_path=workdir / "ncu.log",
                          channel_arg=False, env=child_env())
    if result.timed_out or not report_path.exists():
        return ProfileReport(metrics={}, per_kernel=[], bottleneck="unknown",
                             evidence=[f"ncu produced no report: {result.log_tail[-400:].strip()}"])
    imported = subprocess.run(profile.import_command(str(report_path)), capture_output=True,
                              text=True, timeout=120)
    try:
        kernels_profiled = profile.parse_raw_csv(imported.stdout)
    except ValueError as error:
        return ProfileReport(metrics={}, per_kernel=[], bottleneck="unknown",
                             evidence=[f"could not read the ncu report: {error}"],
                             report_path=str(report_path))
    metrics = profile.aggregate(kernels_profiled)
    bottleneck, evidence = profile.classify(metrics)
    return ProfileReport(metrics=metrics, per_kernel=[asdict(k) for k in kernels_profiled],
                         bottleneck=bottleneck, evidence=evidence, report_path=str(report_path))


__all__ = ["GateOptions", "evaluate", "gpu_name", "check_plan", "compile_checked", "cpu_stage",
           "prepare_inputs"]
