"""OptiML-G in the web app: the configured experts write a first kernel from an intent.

The pure pipeline is `search/generation/`; here are its settings, its record in the
database (GenerationAttempt rows: who wrote what, what the gate said) and the router's
training from those rows. Who writes, in order of preference:

1. the experts of OPTIML_GENERATION_EXPERTS: local ones in latent space when a trained
   fusion exists (OPTIML_GENERATION_MOT), else all of them in text;
2. else the LLM judge's model (OPTIML_LLM_*), alone, through the same loop;
3. else nobody: RunError says that free-form generation needs an endpoint or a local
   model, and the caller starts from the task's naive kernel.

Writing for the browser (a job on a CPU worker: search/writing_jobs.py) checks each
kernel up to nvcc (policy, plan, compile) and repairs compile errors; it never takes the
GPU. The run's root then gets the full gate.
"""

from __future__ import annotations

import importlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from profiling import services as gate_services
from profiling.harness import tasks as task_registry
from search.engine.types import Proposal
from search.generation.experts import ExpertConfigError, ExpertSpec, build_experts, parse_experts
from search.generation.loop import Attempt, Checker, GateChecker, Generation, generate
from search.generation.routing import ConfiguredOrder
from search.generation.text import TextCollaboration, Writer
from search.generation.writing import intent_text
from search.models import GenerationAttempt
from search.services import RunError

NO_WRITER = ("no LLM endpoint is configured: free-form generation needs an endpoint or a local "
             "model (OPTIML_GENERATION_EXPERTS, or the LLM judge's OPTIML_LLM_BASE_URL and "
             "OPTIML_LLM_MODEL)")


def experts_configured() -> list[ExpertSpec]:
    """The configured experts; ExpertConfigError says what is wrong."""
    raw = settings.OPTIML_GENERATION_EXPERTS.strip()
    if not raw:
        return []
    if raw.startswith("@"):
        try:
            raw = Path(raw[1:]).read_text()
        except OSError as error:
            raise ExpertConfigError(f"OPTIML_GENERATION_EXPERTS names {raw[1:]}: {error.strerror}") from None
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ExpertConfigError(f"OPTIML_GENERATION_EXPERTS is not JSON: {error.msg} "
                                f"at char {error.pos}") from None
    return parse_experts(entries)


def _judge_expert() -> ExpertSpec | None:
    """The LLM judge's model as the one expert, when the judge is configured."""
    from search.engine.judges import LLMConfigError, LLMJudge

    try:
        judge = LLMJudge.from_env()
    except LLMConfigError:
        return None
    return ExpertSpec(name=judge.name, kind="api", base_url=os.environ["OPTIML_LLM_BASE_URL"].strip(),
                      model=judge.model, api_key=judge._client.api_key, timeout_s=judge.timeout_s,
                      max_retries=judge.max_retries)


def writer_for(specs: list[ExpertSpec]) -> Writer:
    names = [s.name for s in specs]
    if all(s.kind == "local" for s in specs) and settings.OPTIML_GENERATION_MOT.exists():
        from search.generation.experts import load_local
        from search.generation.loop import MoTWriter
        from search.generation.mot import Expert, MixtureOfThoughts

        experts = [Expert(s.name, *load_local(s.path)) for s in specs]
        try:
            return MoTWriter(MixtureOfThoughts.trained(settings.OPTIML_GENERATION_MOT, experts))
        except Exception as error:  # noqa: BLE001 (a stale or corrupt file is a message, not a 500)
            raise ExpertConfigError(f"the trained fusion at {settings.OPTIML_GENERATION_MOT} is unusable: "
                                    f"{str(error)[:200]}") from None
    return TextCollaboration(build_experts(specs), _router(names), k=settings.OPTIML_GENERATION_K)


def _router(names: list[str]):
    path = settings.OPTIML_GENERATION_ROUTER
    if not path.exists():
        return ConfiguredOrder(names, "the configured order (no router trained yet: "
                                      "manage.py generation train-router)")
    try:
        from search.generation.router import HashingEncoder, Router
    except ImportError:
        return ConfiguredOrder(names, "the configured order (torch is not installed for the router)")
    try:
        return Router.load(path, names, HashingEncoder())
    except Exception as error:  # noqa: BLE001 (a stale or corrupt file must not stop writing)
        return ConfiguredOrder(names, f"the configured order (the router at {path} is unusable: "
                                      f"{str(error)[:200]})")


def writers_check(*, task_name: str, intent: str) -> list[ExpertSpec]:
    """Who would write a kernel for the task from the intent, found without calling
    anyone: what a request checks before it queues a writing job. Raises RunError on the
    intent field (no intent, nobody configured, a misconfigured expert list) and
    UnknownTask (which names the known ones)."""
    if not intent.strip():
        raise RunError("say what the kernel should do first", field="intent")
    gate_services.task_spec(name=task_name)
    try:
        specs = experts_configured()
    except ExpertConfigError as error:
        raise RunError(f"the experts are misconfigured: {error}", field="intent") from None
    if not specs:
        judge = _judge_expert()
        specs = [judge] if judge else []
    if not specs:
        raise RunError(NO_WRITER, field="intent")
    return specs


def kernel_generate(*, task_name: str, intent: str, user=None, checker: Checker | None = None,
                    specs: list[ExpertSpec] | None = None, generation_id: uuid.UUID | None = None,
                    on_attempt: Callable[[], None] | None = None) -> tuple[Proposal, Generation]:
    """A first kernel for the task from the intent: the Proposal a run can start from
    (its source names the writer) and the whole generation. Every attempt is stored as
    soon as it is checked, under `generation_id` (a new one when None), and then
    `on_attempt` is called. Raises RunError on the intent field when nobody can write or
    nothing usable came."""
    spec = gate_services.task_spec(name=task_name)  # UnknownTask names the known ones
    if specs is None:
        specs = writers_check(task_name=task_name, intent=intent)
    elif not intent.strip():
        raise RunError("say what the kernel should do first", field="intent")
    try:
        writer = writer_for(specs)
    except ExpertConfigError as error:
        raise RunError(f"the experts are misconfigured: {error}", field="intent") from None
    generation_id = generation_id or uuid.uuid4()

    def record(attempt: Attempt) -> None:
        attempt_record(attempt, task=task_name, intent=intent.strip(), generation_id=generation_id, user=user)
        if on_attempt is not None:
            on_attempt()

    generation = generate(spec, intent.strip(), writer, checker or GateChecker(run_l0=False),
                          rounds=settings.OPTIML_GENERATION_ROUNDS, on_attempt=record)
    if generation.written is None:
        last = generation.attempts[-1]
        raise RunError(f"the experts could not write a kernel ({len(generation.attempts)} attempts; the last "
                       f"by {last.writer} ended at {last.stage}: {last.message[:300]})", field="intent")
    written = generation.written
    digest = written.candidate.content_hash()
    kept = next(a for a in reversed(generation.attempts) if a.candidate_hash == digest)
    params: dict[str, Any] = {
        "intent": intent.strip(), "experts": kept.experts, "generation": str(generation_id),
        "rounds": kept.round, "checked": kept.stage,
        "attempts": [{"round": a.round, "writer": a.writer, "stage": a.stage, "message": a.message[:300]}
                     for a in generation.attempts]}
    if len(specs) == 1 and specs[0].kind == "api":
        params["model"] = specs[0].model
    return Proposal(source=written.writer, title=written.title, rationale=written.approach,
                    candidate=written.candidate, params=params), generation


def attempt_record(attempt: Attempt, *, task: str, intent: str, generation_id: uuid.UUID,
                   user=None) -> GenerationAttempt:
    """One attempt of a generation, stored as it is made."""
    row = _attempt_row(attempt, task=task, intent=intent, generation_id=generation_id, user=user)
    row.save()
    return row


@transaction.atomic
def attempts_record(generation: Generation, *, user=None) -> uuid.UUID:
    """A whole generation's attempts at once (`manage.py generation evaluate`)."""
    generation_id = uuid.uuid4()
    GenerationAttempt.objects.bulk_create(
        _attempt_row(a, task=generation.task, intent=generation.intent, generation_id=generation_id,
                     user=user) for a in generation.attempts)
    return generation_id


def _attempt_row(attempt: Attempt, *, task: str, intent: str, generation_id: uuid.UUID,
                 user=None) -> GenerationAttempt:
    return GenerationAttempt(
        generation=generation_id, task=task, intent=intent, round=attempt.round, writer=attempt.writer[:200],
        experts=attempt.experts, stage=attempt.stage, passed=attempt.passed, guard=attempt.guard or "",
        message=attempt.message, candidate_hash=attempt.candidate_hash,
        # The attempt's kernel (source and plan), whoever wrote it: a latent writer keeps no
        # drafts, and a failed attempt's kernel is what its repair was told about.
        record={**attempt.record, "candidate": attempt.candidate} if attempt.candidate else attempt.record,
        created_by=user if getattr(user, "is_authenticated", False) else None)


def router_outcomes() -> list:
    """The router's training data from the stored attempts: whose kernel it was, whether
    it compiled and passed (attempts that never reached the gate say nothing of the
    task and are left out; so are tasks no longer known)."""
    from search.generation.router import Outcome

    outcomes = []
    known: dict[str, Any] = {}
    for row in GenerationAttempt.objects.exclude(stage__in=("endpoint", "reply")).iterator():
        if row.task not in known:
            try:
                known[row.task] = task_registry.get(row.task)
            except task_registry.UnknownTask:
                known[row.task] = None
        task = known[row.task]
        if task is None:
            continue
        compiled = row.stage in ("compiled", "L0", "passed")
        writer = row.experts[0] if row.experts and row.writer.startswith("mot:") else row.writer
        outcomes.append(Outcome(intent_text(task, row.intent), writer, compiled, row.passed))
    return outcomes


def router_train(*, epochs: int = 300) -> dict[str, Any]:
    """Train the router on the stored outcomes and save it where settings say."""
    from search.generation.router import MIN_OUTCOMES, HashingEncoder, Router

    specs = experts_configured()
    if not specs:
        raise RunError("no experts are configured (OPTIML_GENERATION_EXPERTS): there is nothing to route")
    outcomes = [o for o in router_outcomes() if o.expert in {s.name for s in specs}]
    if len(outcomes) < MIN_OUTCOMES:
        raise RunError(f"{len(outcomes)} logged outcomes of the configured experts; the router needs "
                       f"{MIN_OUTCOMES} (write kernels from intents, or run `generation evaluate`, first)")
    router = Router([s.name for s in specs], HashingEncoder())
    losses = router.fit(outcomes, epochs=epochs)
    path = settings.OPTIML_GENERATION_ROUTER
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    router.save(partial)
    partial.replace(path)  # never a half-written router
    return {"outcomes": len(outcomes), "first_loss": losses[0], "last_loss": losses[-1], "path": str(path)}


def dataset_pairs() -> list:
    """train-mot's (intent, kernel) pairs: the suite's naive kernels, the kernels of the
    sources in OPTIML_GENERATION_KERNEL_SOURCES (the lineage app's verified states: search
    never imports lineage), and every search node whose full gate passed, once per
    candidate."""
    from profiling.harness.candidate import Candidate
    from search.generation.dataset import pair, suite_pairs
    from search.models import RunNode

    pairs = suite_pairs()
    for path in settings.OPTIML_GENERATION_KERNEL_SOURCES:
        module_name, _, function = path.rpartition(".")
        pairs += getattr(importlib.import_module(module_name), function)()
    seen = {p.target for p in pairs}
    nodes = (RunNode.objects.filter(status="passed", level="full").select_related("candidate", "run__task")
             .order_by("time_ms"))
    for node in nodes.iterator():
        try:
            candidate = Candidate.from_source_and_plan(node.candidate.source, node.candidate.plan)
            found = pair(node.run.task.name, candidate, title=node.title[:200], approach=node.rationale[:500],
                         origin=f"run:{node.run_id}#{node.node_id}")
        except (task_registry.UnknownTask, ValueError):
            continue
        if found.target not in seen:
            seen.add(found.target)
            pairs.append(found)
    return pairs

