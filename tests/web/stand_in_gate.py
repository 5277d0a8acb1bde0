"""A stand-in for the GPU gate, for tests on a host without one: the real H200 recordings,
served the way the gate serves a verdict now that verdicts say how and on what seeds they
were measured.

What it changes in a recorded verdict, each as the gate does it:
- `settings` = the asked options' identity (gate.evaluate: verdict.settings);
- `seeds` = {"base_seed": the asked seed, or a fresh one from the OS when none is given}
  (worker.Session.base_seed, sent back in the worker's result);
- every correctness record's seed re-derived from that base seed, keeping the record's
  own offset (inputs.check_plan: base * 1000 + shape * 100 + seed index);
- a rejection's message names the failing run's seed (worker.Session: "L1 {...} seed N
  (normal): ...");
- no profile when the options say profile=False.
The times, checks and profiles are the recording's.
"""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path

from profiling.evaluators import RecordedEvaluator
from profiling.harness.gate import GateOptions
from profiling.harness.seeds import SEED_BITS
from profiling.harness.verdict import Verdict

SEED_STEP = 1000  # inputs.check_plan: base_seed * 1000 + shape_index * 100 + seed_index


class GateLikeRecorded:
    """Serves `path`'s recordings as the gate would (module docstring). `asked` lists the
    options of every `evaluate`, in order."""

    source = "recorded"

    def __init__(self, path: Path | str) -> None:
        self.inner = RecordedEvaluator(path)
        self.asked: list[GateOptions] = []

    def gpu(self) -> str:
        return self.inner.gpu()

    def evaluate(self, task_name, candidate, options: GateOptions) -> tuple[Verdict, str]:
        self.asked.append(options)
        verdict, source = self.inner.evaluate(task_name, candidate, options)
        return as_the_gate_measures(verdict, options), source


class ScreeningGateLikeRecorded(GateLikeRecorded):
    """The same, screening too: the recorded full verdict as the screen reports it (level
    "screen", no profile), with the screen's seeds. `screened` lists the options of every
    `screen`."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(path)
        self.screened: list[GateOptions] = []

    def screen(self, task_name, candidate, options: GateOptions) -> Verdict | None:
        self.screened.append(options)
        verdict, _ = self.inner.evaluate(task_name, candidate, options)
        verdict = as_the_gate_measures(verdict, dataclasses.replace(options, profile=False))
        verdict.level, verdict.stage = "screen", "screened"
        return verdict


def as_the_gate_measures(verdict: Verdict, options: GateOptions) -> Verdict:
    base = options.seed if options.seed is not None else secrets.randbits(SEED_BITS)
    for record in verdict.correctness:
        record.seed = base * SEED_STEP + record.seed % SEED_STEP
    failing = next((r for r in verdict.correctness if not r.passed), None)
    if failing is not None and verdict.guard == failing.guard:
        verdict.message = (f"{failing.level} {failing.sizes} seed {failing.seed} "
                           f"({failing.distribution}): {verdict.message}")
    verdict.seeds = {"base_seed": base}
    verdict.settings = options.identity()
    if not options.profile:
        verdict.profile = None
    return verdict


def seeds_in(verdict: dict) -> set[int]:
    """Every seed a stored verdict names: its base seed and each correctness run's."""
    named = {record["seed"] for record in verdict.get("correctness") or [] if record.get("seed") is not None}
    base = (verdict.get("seeds") or {}).get("base_seed")
    return named | ({base} if base is not None else set())
