"""The LLM judge: diagnosis and patches from any OpenAI-compatible chat endpoint.

Every request is counted (tokens, seconds, cost) and logged in `transcript`, so the UI
can show what the model was asked and what it said. Timeouts, connection errors, 429
and 5xx replies, and malformed JSON are retried here (the openai client's own retries
are off, so that each one is counted) with exponential backoff; when the retries run
out the judge raises JudgeError, and stays usable for the next call.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, NoReturn, TypeVar

import openai

from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.spec import Task

from ..diffs import candidate_diff
from ..types import FAMILIES, Diagnosis, JudgeError, NodeContext, Proposal
from . import prompts
from .prompts import MalformedReply
from .rules import evidence_weight

T = TypeVar("T")


class LLMConfigError(ValueError):
    """The environment does not configure an LLM endpoint; the message names the variable."""


@dataclass
class LLMUsage:
    calls: int = 0  # requests sent, each attempt counted
    retries: int = 0  # requests that repeated a failed one
    failures: int = 0  # judge calls that gave up with JudgeError
    rate_limited: int = 0  # HTTP 429 replies among the calls
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0  # wall time spent waiting on the endpoint
    cost: float = 0.0  # in the currency of the prices given (per 1,000 tokens)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Retry(Exception):
    """One failed attempt worth repeating, with the delay the endpoint asked for."""

    def __init__(self, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LLMJudge:
    """Judge over an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp, ...).

    backoff_s: delay before the first retry, doubled after each (capped at
        max_backoff_s); small, because a judge call sits on the search's critical path.
    max_proposals: the K asked for in `propose`.
    reply_chars: how much of each reply the transcript keeps.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        price_per_1k_input: float = 0.0,
        price_per_1k_output: float = 0.0,
        client: Any = None,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_proposals: int = 3,
        reply_chars: int = 4000,
    ) -> None:
        if max_retries < 0 or timeout_s <= 0:
            raise ValueError("max_retries must be >= 0 and timeout_s > 0")
        self.model = model
        self.name = f"llm:{model}"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.price_per_1k_input = price_per_1k_input
        self.price_per_1k_output = price_per_1k_output
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_proposals = max_proposals
        self.reply_chars = reply_chars
        self._client = client or openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0
        )
        self._usage = LLMUsage()
        self.transcript: list[dict[str, Any]] = []
        self.dropped: list[dict[str, str]] = []  # proposals not materialised, and why
        self._priors: dict[str, float] = {}  # candidate hash or title -> the LLM's own prior

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMJudge:
        """OPTIML_LLM_BASE_URL, _MODEL, _API_KEY (or _API_KEY_FILE), _TIMEOUT_S,
        _MAX_RETRIES, _PRICE_IN and _PRICE_OUT (per 1,000 tokens)."""
        env = os.environ if environ is None else environ
        settings: dict[str, Any] = {
            "base_url": _required(env, "OPTIML_LLM_BASE_URL"),
            "model": _required(env, "OPTIML_LLM_MODEL"),
            "api_key": _secret(env, "OPTIML_LLM_API_KEY"),
            "timeout_s": _number(env, "OPTIML_LLM_TIMEOUT_S", 60.0),
            "max_retries": int(_number(env, "OPTIML_LLM_MAX_RETRIES", 2)),
            "price_per_1k_input": _number(env, "OPTIML_LLM_PRICE_IN", 0.0),
            "price_per_1k_output": _number(env, "OPTIML_LLM_PRICE_OUT", 0.0),
        }
        return cls(**{**settings, **overrides})

    @property
    def usage(self) -> LLMUsage:
        return replace(self._usage)  # a copy: callers read it, only the judge counts

    # --- the Judge protocol ---------------------------------------------------------------

    def diagnose(self, context: NodeContext) -> Diagnosis:
        messages = prompts.diagnose_messages(context)
        return self._ask("diagnose", messages, lambda text: prompts.to_diagnosis(text, self.name))

    def propose(self, context: NodeContext, diagnosis: Diagnosis) -> list[Proposal]:
        messages = prompts.propose_messages(context, diagnosis, self.max_proposals)
        items = self._ask("propose", messages, prompts.to_proposal_items)
        for extra in items[self.max_proposals:]:
            self._drop(str(extra.get("title") or "?"), f"beyond the {self.max_proposals} asked for")
        items = items[: self.max_proposals]
        proposals: list[Proposal] = []
        seen = {context.candidate.content_hash()}
        for rank, item in enumerate(items):
            title = str(item.get("title") or f"proposal {rank + 1}")
            try:
                proposal = self._materialise(context.candidate, item, title)
            except CandidateError as exc:
                self._drop(title, str(exc))
                continue
            digest = proposal.candidate.content_hash()
            if digest in seen:
                self._drop(title, "duplicate of another proposal in the same reply")
                continue
            seen.add(digest)
            prior = _prior(item.get("confidence"), rank, len(items))
            self._priors[digest] = self._priors[title] = prior
            proposals.append(replace(proposal, params={**proposal.params, "rank": rank, "prior": prior}))
        return proposals

    def score(self, proposal: Proposal, diagnosis: Diagnosis) -> float:
        """The LLM's own prior for a proposal it made (see `_prior`), else 0.5 scaled by
        the proposer's measured expectation against none (rules.evidence_weight): it has
        no opinion on proposals from other sources, so an unmeasured one stays at 0.5, a
        card measured faster elsewhere rises (to 1 at 4x), one measured slower falls."""
        prior = self._priors.get(proposal.candidate.content_hash())
        if prior is not None:
            return prior
        relative = evidence_weight(proposal.best_expectation()) / evidence_weight(None)
        return self._priors.get(proposal.title, 0.5 * relative)

    # --- writing a first kernel (no Mixture-of-Thoughts: one model, one answer) -----------

    def write_kernel(self, task: Task, intent: str) -> Proposal:
        """A starting kernel written from the user's intent, labelled as this model's.
        Raises JudgeError when no usable candidate comes back (after the retries)."""
        if not intent.strip():
            raise JudgeError("there is no intent to write a kernel from")

        def parse(text: str) -> Proposal:
            item = prompts.to_written_kernel(text)
            try:
                candidate = Candidate.from_source_and_plan(prompts.strip_fences(item["source"]),
                                                           item["plan"])
            except CandidateError as exc:  # a malformed plan: worth asking again, with the reason
                raise MalformedReply(f"the written kernel is not a candidate: {exc}") from exc
            return Proposal(source=self.name, title=str(item.get("title") or "written from the intent"),
                            rationale=str(item.get("rationale") or ""), candidate=candidate,
                            params={"model": self.model, "intent": intent.strip()})

        return self._ask("write", prompts.write_messages(task, intent), parse)

    # --- requests, retries and accounting -------------------------------------------------

    def ask(self, purpose: str, messages: list[dict[str, str]], parse: Callable[[str], T]) -> T:
        """One request with this client's retries, backoff, timeouts, token accounting and
        transcript; `parse` turns the reply into a value (raising MalformedReply to ask
        again). For other parts of the product that talk to the same model (the lineage
        de-optimizer). Raises JudgeError when the endpoint cannot answer."""
        return self._ask(purpose, messages, parse)

    def _ask(self, purpose: str, messages: list[dict[str, str]], parse: Callable[[str], T]) -> T:
        delay, last = 0.0, ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._usage.retries += 1
                time.sleep(delay)
            entry = self._entry(purpose, attempt, messages)
            try:
                return parse(self._complete(messages, entry))
            except (_Retry, MalformedReply) as exc:
                last = entry["error"] = str(exc)
                wait = exc.retry_after_s if isinstance(exc, _Retry) else 0.0
                delay = min(self.max_backoff_s, max(self.backoff_s * 2**attempt, wait))
        self._usage.failures += 1
        raise JudgeError(f"{self.name} could not {purpose} after {self.max_retries + 1} attempts: {last}")

    def _complete(self, messages: list[dict[str, str]], entry: dict[str, Any]) -> str:
        """One request: the reply text, or _Retry for a transient failure, or JudgeError
        for one that repeating cannot fix (a bad key, an unknown model)."""
        self._usage.calls += 1
        started = time.monotonic()
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, response_format={"type": "json_object"}
            )
        except openai.APIStatusError as exc:
            self._account_time(entry, started)
            self._raise_for_status(exc, entry)
        except openai.APITimeoutError as exc:
            self._account_time(entry, started)
            raise _Retry(f"no reply within {self.timeout_s:g} s") from exc
        except openai.APIConnectionError as exc:
            self._account_time(entry, started)
            raise _Retry(f"connection failed: {exc}") from exc
        except openai.OpenAIError as exc:  # anything else the client raises: not transient
            self._account_time(entry, started)
            entry["error"] = f"{type(exc).__name__}: {exc}"
            self._usage.failures += 1
            raise JudgeError(f"{self.name} failed: {entry['error']}") from exc
        self._account(entry, started, response)
        if not response.choices:
            raise MalformedReply("the reply has no choices")
        text = response.choices[0].message.content or ""
        entry["reply"] = text[: self.reply_chars]
        return text

    def _raise_for_status(self, exc: openai.APIStatusError, entry: dict[str, Any]) -> NoReturn:
        status = exc.status_code
        message = f"HTTP {status}: {_error_message(exc)}"
        if status == 429:
            self._usage.rate_limited += 1
            raise _Retry(message, _retry_after(exc)) from exc
        if status >= 500 or status == 408:
            raise _Retry(message) from exc
        entry["error"] = message
        self._usage.failures += 1
        raise JudgeError(f"{self.name} was refused ({message}); retrying cannot fix this") from exc

    def _entry(self, purpose: str, attempt: int, messages: list[dict[str, str]]) -> dict[str, Any]:
        prompt = messages[-1]["content"]
        entry = {
            "purpose": purpose, "attempt": attempt + 1, "model": self.model,
            "request": {"messages": len(messages), "chars": sum(len(m["content"]) for m in messages),
                        "prompt": prompt[: self.reply_chars]},
            "reply": "", "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "error": None,
        }
        self.transcript.append(entry)
        return entry

    def _account(self, entry: dict[str, Any], started: float, response: Any) -> None:
        self._account_time(entry, started)
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        entry.update(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        self._usage.prompt_tokens += prompt_tokens
        self._usage.completion_tokens += completion_tokens
        self._usage.cost += (prompt_tokens * self.price_per_1k_input
                             + completion_tokens * self.price_per_1k_output) / 1000.0

    def _account_time(self, entry: dict[str, Any], started: float) -> None:
        seconds = time.monotonic() - started
        entry["seconds"] = seconds
        self._usage.seconds += seconds

    # --- proposals ------------------------------------------------------------------------

    def _materialise(self, parent: Candidate, item: dict[str, Any], title: str) -> Proposal:
        """A full candidate from one reply item; CandidateError says why it cannot be one."""
        source, plan = item.get("source"), item.get("plan")
        if not isinstance(source, str) or not source.strip():
            raise CandidateError("no source: a proposal must carry the full new CUDA source")
        if plan is not None and not isinstance(plan, dict):
            raise CandidateError("'plan' must be a JSON object (the full launch plan)")
        source = prompts.strip_fences(source)
        child = Candidate.from_source_and_plan(source, plan if plan is not None else parent.plan_dict())
        if child.source.strip() == parent.source.strip() and child.plan_dict() == parent.plan_dict():
            raise CandidateError("unchanged: the source and plan are the parent's")
        families = item.get("families") or []
        families = [families] if isinstance(families, str) else families  # "tile" for ["tile"]
        families = [f for f in families if isinstance(f, str)] if isinstance(families, list) else []
        ignored = [f for f in families if f not in FAMILIES]
        params = {"model": self.model, **({"ignored_families": ignored} if ignored else {})}
        return Proposal(
            source=self.name, title=title, rationale=str(item.get("rationale") or ""),
            candidate=child, families=tuple(dict.fromkeys(f for f in families if f in FAMILIES)),
            diff=candidate_diff(parent, child), params=params,
        )

    def _drop(self, title: str, reason: str) -> None:
        self.dropped.append({"title": title, "reason": reason})
        if self.transcript:  # the reply this came from: the UI shows it beside the reply
            self.transcript[-1].setdefault("dropped", []).append({"title": title, "reason": reason})


def _prior(confidence: Any, rank: int, count: int) -> float:
    """The LLM's confidence when it gave one in [0, 1] (floored at 0.01 so the prior
    stays positive); else linear in its ranking: the first of n proposals 1.0, the
    last 1/n."""
    if isinstance(confidence, int | float) and not isinstance(confidence, bool) and 0 <= confidence <= 1:
        return max(0.01, float(confidence))
    return (count - rank) / count


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    text = error.get("message") if isinstance(error, dict) else None
    return str(text or exc.message)[:300]


def _retry_after(exc: openai.APIStatusError) -> float:
    """Seconds the endpoint asked us to wait (Retry-After), 0 when it did not say."""
    try:
        return max(0.0, float(exc.response.headers.get("retry-after", 0)))
    except (TypeError, ValueError):
        return 0.0  # an HTTP date instead of seconds: fall back to our own backoff


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise LLMConfigError(f"{name} is not set: the LLM judge needs it (see docker/.env.example)")
    return value


def _secret(env: Mapping[str, str], name: str) -> str:
    """The value of NAME, or the contents of the file NAME_FILE (Docker secrets)."""
    path = env.get(f"{name}_FILE", "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                value = handle.read().strip()
        except OSError as exc:
            raise LLMConfigError(f"{name}_FILE={path} cannot be read: {exc.strerror}") from exc
        if not value:
            raise LLMConfigError(f"{name}_FILE={path} is empty")
        return value
    if not env.get(name, "").strip():
        raise LLMConfigError(f"{name} (or {name}_FILE) is not set: the LLM judge needs an API key "
                             "(any text for an endpoint that checks none)")
    return env[name].strip()


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise LLMConfigError(f"{name}={raw!r} is not a number") from exc
