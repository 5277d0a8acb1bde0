"""The screen: a cheaper first look at many candidates of one task, for searches.

    with Screener(ScreenOptions(seed=0, input_cache="/tmp/inputs")) as screener:
        verdict = screener.screen("relu", candidate)    # verdict.level == "screen"

A full gate evaluation costs ~18 s on the H200 at the suite's sizes: a new process and
CUDA context per candidate, five seeds at full size compared on the host, thirty timed
runs with spot checks, then Nsight Compute. A search mostly needs to know whether a
candidate is wrong or slower, so the screen checks less, in one long-lived process:

- the same compile, plan and policy checks as the gate (gate.compile_checked);
- L0 at every edge-case shape with `l0_seeds` seeds, and L1 at full size with
  `l1_seeds` (default 1), under every guard of a one-shot run (fresh canaried buffers,
  poison, inputs checked bit for bit, host reference);
- `timing_runs` timed runs (default 10), L2 flushed and inputs re-randomised on the GPU
  before each, and the physics floor; no spot checks, no profile.

The L1 seed is drawn on the GPU by the harness's generator, as the full gate's are, once
per serving process, and kept there with its reference (worker.Session.resident_seed_drawn).

What the screen says is never what a search keeps as its best: a candidate the screen
finds faster is evaluated again by the full gate, in a fresh process
(search/engine/evaluators.py, ScreeningEvaluator). So a kernel that cheats only when it
shares a process with earlier candidates, or only on the seeds the screen skips, is
still caught before it counts; the screen can only cost it a second look.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import HARNESS_VERSION, tasks
from .candidate import Candidate
from .gate import child_env, compile_checked, prepare_inputs, verdict_from_result, worker_request
from .sandbox import PersistentChild
from .verdict import PASSED, Verdict


@dataclass(frozen=True)
class ScreenOptions:
    l0_seeds: int = 2  # both distributions at every edge-case shape
    l1_seeds: int = 1
    warmup_runs: int = 2
    timing_runs: int = 10
    time_limit_s: float = 120.0  # per candidate; the worker is killed and restarted past it
    l1_sizes: dict[str, int] | None = None
    seed: int | None = None  # fixed base seed, as GateOptions.seed; a search fixes it
    input_cache: str | None = None  # shared with the full gate of the same search
    workdir: str | None = None
    # L1 seeds drawn on the GPU, as the full gate's (GateOptions.gpu_inputs); the screen's
    # is the full gate's first, so either may compute its reference for the other
    gpu_inputs: bool = True


class Screener:
    """Screens candidates in one long-lived GPU process (see the module docstring)."""

    def __init__(self, options: ScreenOptions | None = None) -> None:
        self.options = options or ScreenOptions()
        self.workdir = Path(self.options.workdir or tempfile.mkdtemp(prefix="optiml-screen-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.child = PersistentChild([sys.executable, "-m", "profiling.harness.worker", "--serve"],
                                     log_path=self.workdir / "screen-worker.log", env=child_env())

    def screen(self, task_name: str, candidate: Candidate, options: ScreenOptions | None = None) -> Verdict:
        """`options` for this candidate only (the web worker's one screener serves runs
        with their own seeds and input caches); the screener's own when None. Its
        workdir is always the screener's."""
        started = time.monotonic()
        task = tasks.get(task_name)
        options = options or self.options
        compiled = compile_checked(task, candidate, options.l1_sizes or task.sizes)
        if isinstance(compiled, Verdict):
            verdict = compiled
        else:
            request = worker_request(task, candidate, compiled, {
                "levels": ["L0", "L1"], "seeds": options.l1_seeds,
                "l0_seeds": options.l0_seeds, "l1_seeds": options.l1_seeds,
                "warmup_runs": options.warmup_runs, "timing_runs": options.timing_runs,
                "l1_sizes": options.l1_sizes, "seed": options.seed,
                "input_cache": options.input_cache if options.seed is not None else None,
                "spot_checks": 0, "adversary": {}, "gpu_inputs": options.gpu_inputs})
            prepare_inputs(task, ["L0", "L1"], options.l1_sizes or task.sizes,
                           {"L0": options.l0_seeds, "L1": options.l1_seeds}, options.seed,
                           options.input_cache, gpu_inputs=options.gpu_inputs)
            result = self.child.request(request, time_limit_s=options.time_limit_s)
            verdict = verdict_from_result(task.name, candidate.content_hash(), compiled, result,
                                          options.time_limit_s)
            if verdict.status == PASSED:
                verdict.stage = "screened"
        verdict.level = "screen"
        verdict.seconds = time.monotonic() - started
        verdict.environment.harness_version = HARNESS_VERSION
        return verdict

    def close(self) -> None:
        self.child.close()

    def __enter__(self) -> Screener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ScreenOptions", "Screener"]
