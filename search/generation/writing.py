"""What a writer is asked, and the strict reading of what it answers.

Every writer (an API expert, a local model, the latent Mixture-of-Thoughts) answers with
a `Written` kernel or raises `WriteFailed` saying why. The prompts carry the task's
contract (tensors, sizes, tolerance), never its reference code or naive kernel.

Two answer formats, one reading: API experts are asked for a JSON object (JSON mode);
local models are trained on, and asked for, a fenced format that is easier to learn
than CUDA escaped inside JSON:

    title: <one line>
    approach: <a few sentences>
    ```cuda
    <the full source>
    ```
    ```json
    <the full launch plan>
    ```
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.spec import Task
from search.engine.judges.prompts import (
    CANDIDATE_RULES,
    WRITER,
    MalformedReply,
    parse_object,
    strip_fences,
    task_facts,
)


class WriteFailed(RuntimeError):
    """A writer could not produce a candidate; `stage` says where it stopped ("endpoint":
    no answer, "reply": an answer that is not a candidate)."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class Written:
    """A kernel a writer produced: the candidate, its title, and the approach in words
    (a draft's "thought", which the primary reads)."""

    writer: str
    title: str
    approach: str
    candidate: Candidate
    text: str = ""  # the reply as it came, for the session's record

    def summary(self) -> dict[str, Any]:
        return {"writer": self.writer, "title": self.title, "approach": self.approach,
                "source": self.candidate.source, "plan": self.candidate.plan_dict()}


@dataclass(frozen=True)
class Draft:
    """One active expert's contribution in text collaboration: its kernel, or the
    reason it gave none (an expert that is down does not stop the others)."""

    expert: str
    written: Written | None = None
    error: str = ""
    seconds: float = 0.0
    prompt: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"expert": self.expert, "seconds": round(self.seconds, 3),
                                "prompt": self.prompt}
        if self.written is not None:
            data.update(self.written.summary())
        else:
            data["error"] = self.error
        return data


def intent_text(task: Task, intent: str) -> str:
    """What the router embeds and every writer reads: the user's words and the contract."""
    return f"The user's intent: {intent.strip()}\n\n{task_facts(task)}"


# --- API experts: JSON ----------------------------------------------------------------------

JSON_SHAPE = {"title": "short title", "approach": "the approach in two or three sentences",
              "source": "the FULL CUDA source", "plan": "the FULL launch plan"}


def first_messages(task: Task, intent: str) -> list[dict[str, str]]:
    prompt = (f"Write a fast, correct CUDA kernel for this task, as the user describes it.\n\n"
              f"{intent_text(task, intent)}\n\n{CANDIDATE_RULES}\n\n"
              f"Answer with JSON of this shape: {json.dumps(JSON_SHAPE)}")
    return [{"role": "system", "content": WRITER}, {"role": "user", "content": prompt}]


def compose_messages(task: Task, intent: str, drafts: list[Draft]) -> list[dict[str, str]]:
    """The primary's request: the task, then each peer's draft as a thought to weigh
    (what it proposes and why), then its own final answer."""
    thoughts = []
    for draft in drafts:
        if draft.written is None:
            continue
        w = draft.written
        thoughts.append(f"### Draft by {draft.expert}: {w.title}\nApproach: {w.approach}\n"
                        f"```cuda\n{w.candidate.source}\n```\nLaunch plan: "
                        f"{json.dumps(w.candidate.plan_dict(), separators=(',', ':'))}")
    prompt = (f"Write the final CUDA kernel for this task. Other engineers drafted the "
              f"approaches below: take what is right in each, fix what is wrong, and write one "
              f"complete candidate.\n\n{intent_text(task, intent)}\n\n" + "\n\n".join(thoughts)
              + f"\n\n{CANDIDATE_RULES}\n\nAnswer with JSON of this shape: {json.dumps(JSON_SHAPE)}")
    return [{"role": "system", "content": WRITER}, {"role": "user", "content": prompt}]


def repair_messages(task: Task, intent: str, previous: Written, feedback: str) -> list[dict[str, str]]:
    """Ask again with the gate's own words: the compiler's errors or the checker's mismatch."""
    prompt = (f"Your kernel for this task did not pass the gate. Fix it and answer with the "
              f"complete corrected candidate.\n\n{intent_text(task, intent)}\n\n"
              f"Your kernel:\n```cuda\n{previous.candidate.source}\n```\nLaunch plan: "
              f"{json.dumps(previous.candidate.plan_dict(), separators=(',', ':'))}\n\n"
              f"What the gate said:\n{feedback.strip()}\n\n{CANDIDATE_RULES}\n\n"
              f"Answer with JSON of this shape: {json.dumps(JSON_SHAPE)}")
    return [{"role": "system", "content": WRITER}, {"role": "user", "content": prompt}]


def read_json(writer: str, text: str) -> Written:
    """A JSON reply as a Written kernel; MalformedReply says what is wrong (the client
    then asks again)."""
    data = parse_object(text)
    return _written(writer, data, text)


# --- local models: the fenced format ---------------------------------------------------------

_FENCE = re.compile(r"```(\w*)[^\n]*\n(.*?)```", re.S)


def fenced_prompt(task: Task, intent: str, feedback: str = "", previous: Written | None = None) -> str:
    """The plain-text prompt a local model continues (it has no chat API)."""
    parts = [f"{WRITER}\n\nWrite a fast, correct CUDA kernel for this task.", intent_text(task, intent),
             CANDIDATE_RULES]
    if previous is not None:
        parts.append(f"A previous kernel did not pass:\n{fenced(previous)}\n"
                     f"The gate said: {feedback.strip()}")
    parts.append("Answer as: title, approach, the source in a ```cuda fence, the plan in a ```json fence.")
    return "\n\n".join(parts) + "\n\n"


def fenced(written: Written) -> str:
    """A kernel in the fenced format: the training target of the local writers."""
    plan = json.dumps(written.candidate.plan_dict(), separators=(",", ":"))
    return (f"title: {written.title}\napproach: {written.approach}\n```cuda\n"
            f"{written.candidate.source.rstrip()}\n```\n```json\n{plan}\n```\n")


def read_fenced(writer: str, text: str) -> Written:
    blocks = {lang or "": body for lang, body in _FENCE.findall(text)}
    if "cuda" not in blocks:
        raise MalformedReply("no ```cuda block with the source")
    if "json" not in blocks:
        raise MalformedReply("no ```json block with the launch plan")
    try:
        plan = json.loads(blocks["json"])
    except json.JSONDecodeError as exc:
        raise MalformedReply(f"the launch plan is not JSON ({exc.msg})") from exc
    title = re.search(r"^title:\s*(.+)$", text, re.M)
    approach = re.search(r"^approach:\s*(.+)$", text, re.M)
    return _written(writer, {"title": title.group(1) if title else "", "source": blocks["cuda"],
                             "plan": plan, "approach": approach.group(1) if approach else ""}, text)


def _written(writer: str, data: dict[str, Any], text: str) -> Written:
    source, plan = data.get("source"), data.get("plan")
    if not isinstance(source, str) or not source.strip():
        raise MalformedReply("'source' must be the full CUDA source, a non-empty string")
    if not isinstance(plan, dict):
        raise MalformedReply("'plan' must be the full launch plan, a JSON object")
    try:
        candidate = Candidate.from_source_and_plan(strip_fences(source), plan)
    except CandidateError as exc:
        raise MalformedReply(f"the kernel is not a candidate: {exc}") from exc
    return Written(writer=writer, title=str(data.get("title") or "written from the intent").strip(),
                   approach=str(data.get("approach") or data.get("rationale") or "").strip(),
                   candidate=candidate, text=text)


def timed(call: Callable[[], Written]) -> tuple[Written | None, WriteFailed | None, float]:
    """(written, failure, seconds) of one writing call, an expert that fails included."""
    started = time.monotonic()
    try:
        return call(), None, time.monotonic() - started
    except WriteFailed as failure:
        return None, failure, time.monotonic() - started
