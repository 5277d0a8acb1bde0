"""Generate -> gate (policy, compile, L0) -> repair, until a kernel passes.

`generate` asks the writer for a first kernel, puts it through the checker, and on a
failure feeds the gate's own words (the compiler's errors with their lines, the
checker's mismatch) back to the writer, up to `rounds` repairs. Every attempt is kept
with who wrote it, where it stopped and what the gate said; the first kernel that
passes is what the search starts from.

The checker is the product's gate (`GateChecker`) with L0 only: policy, nvcc and the
plan on any host, L0 correctness where there is a GPU. On a host without one, a kernel
that compiles is as far as anyone can go: the loop stops there and says so rather than
"repairing" a kernel nobody has run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from profiling.harness.candidate import Candidate
from profiling.harness.spec import Task
from profiling.harness.verdict import INCOMPLETE, PASSED, Verdict

from .text import Step, Writer, describe
from .writing import Written, fenced_prompt, read_fenced


@dataclass(frozen=True)
class Check:
    passed: bool
    stage: str  # where it ended: plan, policy, compile, L0, passed; or "compiled" (no GPU here)
    message: str = ""
    guard: str | None = None
    conclusive: bool = True  # False: the gate could not run L0 here (no GPU)


class Checker(Protocol):
    def check(self, task: Task, candidate: Candidate) -> Check: ...


class GateChecker:
    """The gate with L0 only: small odd sizes, two seeds, no profile, memcheck.
    `run_l0=False` stops after the policy, the plan and nvcc even on a GPU host: for a
    web request, which must not take the GPU (the run's root then gets the full gate)."""

    def __init__(self, *, run_l0: bool = True, **options: Any) -> None:
        from profiling.harness.gate import GateOptions

        defaults = {"levels": ("L0",), "seeds": 2, "warmup_runs": 1, "timing_runs": 3, "profile": False,
                    "sanitize": ("memcheck",), "spot_checks": 1, "time_limit_s": 180.0}
        self.options = GateOptions(**{**defaults, **options})
        self.run_l0 = run_l0

    def check(self, task: Task, candidate: Candidate) -> Check:
        from profiling.harness import gate

        if not self.run_l0:
            found = gate.compile_checked(task, candidate, task.sizes)
            if not isinstance(found, Verdict) or found.status == INCOMPLETE:
                return Check(False, "compiled", "compiled and checked; L0 runs in the search's "
                             "first full gate", conclusive=False)
            return check_from_verdict(found)
        return check_from_verdict(gate.evaluate(task.name, candidate, self.options))


def check_from_verdict(verdict: Verdict) -> Check:
    if verdict.status == PASSED:
        return Check(True, "passed", "passed L0")
    if verdict.status == INCOMPLETE and verdict.stage == "compile":
        return Check(False, "compiled", verdict.message, conclusive=False)
    # The worker's stage reads "correctness L0 sizes {...} seed ...": the level is enough.
    stage = "L0" if verdict.stage.startswith("correctness") else (verdict.stage.split(" ")[0] or "gate")
    if verdict.guard in ("source_policy", "compile_policy"):
        stage = "policy"
    # The seeds are the operator's (they would make the inputs public): never fed back.
    message = re.sub(r"\s*seed \d+", "", verdict.message)
    if verdict.compile and verdict.compile.errors:
        message = "\n".join(f"line {e.line}: {e.message}" if e.line else e.message
                            for e in verdict.compile.errors[:10])
    return Check(False, stage, message, verdict.guard, conclusive=verdict.status != "error")


@dataclass
class Attempt:
    round: int  # 0: the first kernel; 1..: repairs
    writer: str  # whose kernel it is
    experts: list[str]  # everyone who contributed, the writer first
    stage: str  # endpoint, reply, plan, policy, compile, L0, passed, compiled
    passed: bool
    message: str
    guard: str | None = None
    candidate: dict[str, Any] | None = None
    candidate_hash: str = ""
    title: str = ""
    seconds: float = 0.0  # writing and checking
    record: dict[str, Any] = field(default_factory=dict)  # drafts, routing, prompts

    def feedback(self) -> str:
        where = {"compile": "nvcc rejected it", "L0": "the correctness check at small sizes failed",
                 "plan": "the launch plan is wrong", "policy": "the source breaks the gate's policy"}
        return f"{where.get(self.stage, self.stage)} ({self.guard or self.stage}):\n{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "writer": self.writer, "experts": self.experts, "stage": self.stage,
                "passed": self.passed, "message": self.message, "guard": self.guard,
                "candidate": self.candidate, "candidate_hash": self.candidate_hash, "title": self.title,
                "seconds": round(self.seconds, 3), "record": self.record}


@dataclass
class Generation:
    task: str
    intent: str
    writer: str
    attempts: list[Attempt]
    seconds: float
    seconds_to_pass: float | None  # from the start to the first passing kernel
    written: Written | None  # the first passing kernel (or, with no GPU here, the first compiled one)

    @property
    def passed(self) -> bool:
        return any(a.passed for a in self.attempts)

    @property
    def passed_first_try(self) -> bool:
        return bool(self.attempts) and self.attempts[0].passed

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "intent": self.intent, "writer": self.writer, "passed": self.passed,
                "passed_first_try": self.passed_first_try, "seconds": round(self.seconds, 3),
                "seconds_to_pass": None if self.seconds_to_pass is None else round(self.seconds_to_pass, 3),
                "attempts": [a.to_dict() for a in self.attempts]}


def generate(task: Task, intent: str, writer: Writer, checker: Checker, *, rounds: int = 3,
             on_attempt: Callable[[Attempt], None] | None = None) -> Generation:
    """`on_attempt` hears of each attempt as soon as it is checked (a job stores it then, so
    that whoever watches sees the rounds as they come, not only at the end)."""
    started = time.monotonic()
    attempts: list[Attempt] = []
    previous: Written | None = None
    kept: Written | None = None
    to_pass = None
    for number in range(rounds + 1):
        began = time.monotonic()
        if previous is None:
            step = writer.first(task, intent)
        else:
            step = writer.repair(task, intent, previous, attempts[-1].feedback())
        attempt = _attempt(number, step)
        if step.written is not None:
            check = checker.check(task, step.written.candidate)
            attempt.stage, attempt.passed, attempt.message, attempt.guard = (
                check.stage, check.passed, check.message, check.guard)
        attempt.seconds = time.monotonic() - began
        attempts.append(attempt)
        if on_attempt is not None:
            on_attempt(attempt)
        if step.written is None:
            if previous is None or step.stage == "endpoint":
                break  # nothing to repair, or nobody left to repair it
            continue  # a malformed repair: ask again with the same feedback
        previous = step.written
        if attempt.passed:
            kept, to_pass = step.written, time.monotonic() - started
            break
        if attempt.stage == "compiled" or not check.conclusive:
            # no GPU here, or no compiler: as far as this host can check; not the kernel's fault
            kept = step.written
            break
    return Generation(task=task.name, intent=intent, writer=writer.name, attempts=attempts,
                      seconds=time.monotonic() - started, seconds_to_pass=to_pass, written=kept)


def _attempt(number: int, step: Step) -> Attempt:
    record = describe(step)
    if step.written is None:
        return Attempt(round=number, writer=step.writer or (step.experts[0] if step.experts else "?"),
                       experts=list(step.experts), stage=step.stage or "endpoint", passed=False,
                       message=step.error, record=record)
    w = step.written
    return Attempt(round=number, writer=w.writer, experts=list(dict.fromkeys([w.writer, *step.experts])),
                   stage="written", passed=False, message="", candidate=w.candidate.to_dict(),
                   candidate_hash=w.candidate.content_hash(), title=w.title, record=record)


class MoTWriter:
    """The latent Mixture-of-Thoughts as a writer: the primary generates in the fenced
    format with its peers' states fused in; repairs get the gate's words in the prompt."""

    def __init__(self, mot: Any, *, max_new_tokens: int = 2048, seed: int = 0) -> None:
        self.mot, self.max_new_tokens, self.seed = mot, max_new_tokens, seed
        self.name = "mot"

    def first(self, task: Task, intent: str) -> Step:
        return self._write(fenced_prompt(task, intent))

    def repair(self, task: Task, intent: str, previous: Written, feedback: str) -> Step:
        return self._write(fenced_prompt(task, intent, feedback, previous))

    def _write(self, prompt: str) -> Step:
        from search.engine.judges.prompts import MalformedReply

        text, active = self.mot.generate(prompt, max_new_tokens=self.max_new_tokens, seed=self.seed)
        writer = "mot:" + "+".join(active)
        try:
            return Step(read_fenced(writer, text), tuple(active))
        except MalformedReply as error:
            return Step(None, tuple(active), error=f"{writer}: {error}", stage="reply", writer=writer)
