"""Writes for an optimisation run's life: create, step, drive, pause/resume/stop, fail.

A run's truth is its rows: `Run.state` is the engine's serialised Search; each step
loads it under a row lock, asks for candidates, measures them (search.measuring: once
the run has a full-gate best, the screen first; the full gate through the gate's
services, one Evaluation per kernel, task, harness, GPU and gate settings, so a kernel
seen before costs nothing), tells the engine, mirrors the changed nodes and appends
events, and saves. A run's `seed` steers the search's own choices (SearchConfig.seed);
the gate's seed is the run's secret one (search.measuring.run_gate_seed), and what the
run's rows keep of a verdict has no seeds in it (verdict_for_users).
A worker that dies mid-step loses only that step's uncommitted work. On the worker a
run is driven one step per Celery message, each queuing the next (run_advance).
A node's compile and evaluation on the workers are search.node_services; share links and
imports search.sharing_services; the input caches' sweep search.input_caches.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from optiml_web.limits import MAX_PARALLEL
from profiling import services as gate_services
from profiling.evaluators import Evaluator, options_from_dict, options_to_dict
from profiling.harness import preflight
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.gate import GateOptions
from profiling.serialization import json_safe
from search import broadcast, demo_runs
from search.demo import DemoRecordingError
from search.engine.binaries import gate_sizes
from search.engine.explain import why_it_ended
from search.engine.search import Search, SearchConfig
from search.engine.sources import fast_math_allowed
from search.engine.types import Measurement
from search.measuring import candidate_measure, run_gate_options, screening_for
from search.models import Run, RunEvent, RunNode
from search.node_services import node_binary_ensure, node_result_store
from search.state import search_load, search_save

EventSink = Callable[[RunEvent], None]


class RunError(ValueError):
    """A run cannot be created or moved as asked; the message says why, and `field` which
    input it is about (None when it is about the run's state)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def judges_for(choice: str):
    """(judge, fallback) for "rules" or "llm"; the rule judge always stands behind an LLM.
    An LLM judge the environment does not configure is a RunError on the judge field. The
    LLM's module (and the openai package) is imported only when an LLM judge is asked for."""
    from search.engine.judges import RuleJudge

    rules = RuleJudge()
    if choice == "rules":
        return rules, rules
    if choice == "llm":
        from search.engine.judges import LLMConfigError, LLMJudge

        try:
            return LLMJudge.from_env(), rules
        except LLMConfigError as error:
            raise RunError(str(error), field="judge") from None
    raise RunError(f"unknown judge {choice!r}: use 'rules' or 'llm'", field="judge")


def kernel_write(*, task_name: str, intent: str, user=None):
    """A first kernel for the task, written from the intent by OptiML-G's experts (or the
    LLM judge's model when no experts are configured), checked up to nvcc and repaired
    with the compiler's messages. The person reviews it in the editor before a run starts
    from it. Raises RunError on the intent field: no intent, nobody configured to write,
    or no usable kernel after the repairs. Returns the Proposal (source = the writer)."""
    from search import generation_services

    proposal, _ = generation_services.kernel_generate(task_name=task_name, intent=intent, user=user)
    return proposal


def configured_sources(names: list[str] | None = None, *, team_id: int | None = None) -> list:
    """Proposal sources named in settings (dotted paths), e.g. a skill-card source that
    the lineage app provides: search never imports lineage itself. With `names`, only
    those (by their `name`); an unknown name is a RunError. A source with a
    `scope_to_team(team_id)` method is told the run's team (the skill source then reads
    the team's library)."""
    sources = []
    for path in settings.OPTIML_PROPOSAL_SOURCES:
        module_name, _, class_name = path.rpartition(".")
        source = getattr(importlib.import_module(module_name), class_name)()
        if hasattr(source, "scope_to_team"):
            source.scope_to_team(team_id)
        sources.append(source)
    if names is None:
        return sources
    unknown = set(names) - {source.name for source in sources}
    if unknown:
        known = ", ".join(source.name for source in sources)
        raise RunError(f"unknown proposal source {', '.join(sorted(unknown))}; configured: {known}",
                       field="sources")
    return [source for source in sources if source.name in names]


def _parts_for(run: Run):
    """(judge, fallback, sources) for rebuilding the run's search: the sources the run was
    made with, as long as they are still configured (a demo run's: its recording's)."""
    judge, fallback = judges_for(run.judge.split(":")[0])
    demo = demo_runs.demo_of(run)
    if demo is not None:
        return judge, fallback, demo_runs.demo_sources(demo)
    return judge, fallback, [source for source in configured_sources(team_id=run.team_id)
                             if source.name in run.sources]


def _search_for(run: Run, pending: list[PendingRow] | None = None) -> Search:
    """The run's search (under the run's row lock when it is to be changed and saved):
    the one this process saved last, while nobody else saved the run since, else rebuilt
    from the rows (search.state). A pending node handed out less than a gate's time limit
    ago (RunNode.issued_at; evaluation_time_limit_s) is not handed out again while its
    message waits in the queue, or while a worker measures it under a live lease
    (RunNode.lease_expires_at, profiling/leases.py); the others are, a dead worker's as
    soon as its lease runs out.
    `pending`: the run's pending rows, when the caller has read them (_pending_rows)."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=evaluation_time_limit_s(run))
    rows = _pending_rows(run) if pending is None else pending
    in_flight = {row.node_id for row in rows if _in_flight(row, now=now, issued_after=cutoff)}
    search = search_load(run, parts=lambda: _parts_for(run), issued=in_flight)
    search.release([node_id for node_id in search.in_flight() if node_id not in in_flight])
    return search


def _in_flight(row: PendingRow, *, now, issued_after) -> bool:
    issued = row.issued_at is not None and row.issued_at >= issued_after
    if row.lease_expires_at is not None:  # a worker took it: in flight while it renews its lease
        return issued and row.lease_expires_at >= now
    return issued


@dataclasses.dataclass(frozen=True)
class PendingRow:
    node_id: int
    issued_at: object
    result: dict | None
    binary: str | None
    lease_expires_at: object


def _pending_rows(run: Run) -> list[PendingRow]:
    """What a step reads of the run's pending nodes, in one query (a few rows: at most the
    evaluations in flight and the nodes waiting for their twin)."""
    return [PendingRow(*row) for row in RunNode.objects.filter(run=run, state="pending").order_by("node_id")
            .values_list("node_id", "issued_at", "result", "binary", "lease_expires_at")]


def evaluation_time_limit_s(run: Run) -> float:
    """How long a handed-out evaluation may take before its message counts as lost and the
    node is handed out again: the gate's time limit, the screen's, and a claim's grace."""
    limit = options_from_dict(run.gate_options).time_limit_s
    return 2 * limit + settings.OPTIML_CLAIM_GRACE_S


@transaction.atomic
def run_create(*, task_name: str, source: str, plan: dict, budget: int, judge: str = "rules",
               seed: int = 0, gate_options: GateOptions | None = None, user=None,
               team=None, intent: str = "", source_names: list[str] | None = None,
               screen: bool = True, written=None, parallel: int = 1, writing_job=None,
               evaluator: str = demo_runs.SERVER) -> Run:
    """`written`: the Proposal kernel_write returned, when the run starts from it (its
    candidate is `source` and `plan`): the root node then names the model that wrote it.
    `evaluator`: "gate" (the server's) or "demo", a replay of the task's demo recording
    (search.demo_runs), which then sets the judge, seed, sources and at most the budget.
    `writing_job`: the WritingJob the kernel came from, kept with the run even when its
    creator edited the kernel first (then `written` is None).
    `parallel`: how many candidates may be evaluated at once (one per GPU worker)."""
    spec = gate_services.task_spec(name=task_name)  # UnknownTask names the known ones
    try:  # a demo run: the recorded search, as it was run; anything else asks for unrecorded kernels
        demo = demo_runs.demo_for_new_run(spec=spec, evaluator=evaluator, source=source, plan=plan)
    except DemoRecordingError as error:
        raise RunError(str(error), field=error.field) from None
    if demo is not None:
        judge, seed, screen, parallel, budget = demo.judge, demo.seed, False, 1, min(budget, demo.budget)
    if budget < 1:
        raise RunError("the budget must be at least one evaluation", field="budget")
    if not 1 <= parallel <= MAX_PARALLEL:
        raise RunError(f"parallel must be from 1 to {MAX_PARALLEL}", field="parallel")
    root = HarnessCandidate.from_source_and_plan(source, plan)  # CandidateError says which field
    problem = preflight.plan_problem(spec, root)  # what the gate would refuse on any GPU
    if problem:
        raise RunError(f"launch plan: {problem}", field="plan")
    judge_obj, fallback = judges_for(judge)
    if written is not None and written.candidate != root:
        raise RunError("the written kernel is not the run's starting kernel", field="source")
    sources = demo_runs.demo_sources(demo) if demo is not None else \
        configured_sources(source_names, team_id=getattr(team, "pk", team))
    search = Search(task_name, root, judge=judge_obj, sources=sources,
                    fallback_judge=fallback, config=SearchConfig(budget=budget, seed=seed),
                    tolerance_allows_fast_math=fast_math_allowed(spec), root_proposal=written,
                    binary_sizes=gate_sizes(spec))  # a binary is refined once
    # `seed` steers the search only. The gate's seed is the run's secret one, derived at
    # each step (search.measuring.run_gate_seed) and never stored here or chosen by a user:
    # whoever knew it would know the inputs every candidate of the run is checked on.
    options = dataclasses.replace(gate_options or GateOptions(), seed=None)
    run = Run.objects.create(
        task=gate_services.task_get_or_sync(name=task_name),
        root_candidate=gate_services.candidate_get_or_create(source=source, plan=plan),
        judge=judge_obj.name, sources=[s.name for s in search.sources], budget=budget, seed=seed,
        gate_options=options_to_dict(options), state=json_safe(search.header()), created_by=user,
        team=team, intent=intent, screen=screen, parallel=parallel, writing_job=writing_job,
        evaluator=f"{demo_runs.DEMO_PREFIX}{demo.key}" if demo is not None else "")
    _append(run, "run_created", {"task": task_name, "budget": budget, "judge": judge_obj.name,
                                 "parallel": parallel, "demo": demo is not None})
    search_save(run, search)  # the root's row
    return run


def run_step(*, run_id: int, evaluator: Evaluator | None = None, parallel: int | None = None,
             on_event: EventSink | None = None) -> Run:
    """One round of ask -> evaluate -> tell in this process (the `optimize` command, tests,
    benchmarks): up to `parallel` candidates (default: the run's), measured one after
    another here. Returns the run as it stands after it. A worker steps a run through
    run_advance instead, which hands each evaluation to the `gpu` queue."""
    evaluator = evaluator or demo_runs.evaluator_for_run_id(run_id)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status != Run.Status.RUNNING:
            return run
        asked, best_full_ms, new_events = _step_ask(run, parallel or run.parallel, evaluator)
        _announce(run, new_events)
    options = run_gate_options(run=run, screening=screening_for(run=run, evaluator=evaluator))
    unmeasured = []
    for node_id, candidate in asked:
        binary = node_binary_ensure(run_id=run_id, node_id=node_id) if settings.OPTIML_COMPILE_AHEAD else ""
        if binary and RunNode.objects.filter(run_id=run_id, binary=binary, node_id__lt=node_id).exists():
            continue  # a duplicate: told from its twin's measurement below, not measured
        measured = candidate_measure(run=run, candidate=candidate, options=options,
                                     evaluator=evaluator, best_full_ms=best_full_ms)
        if measured is None:  # another worker holds its full gate: told on a later step
            unmeasured.append(node_id)
        else:
            node_result_store(run_id=run_id, node_id=node_id, measured=measured)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        pending = _pending_rows(run)
        search = _search_for(run, pending)
        search.release(unmeasured)
        told = _step_tell(run, search, pending)
        if run.status == Run.Status.RUNNING and search.evaluations >= run.budget:
            told.append(_finish(run, search))
        search_save(run, search)
        _announce(run, told)
        new_events += told
    for event in new_events if on_event else ():
        on_event(event)
    return run


def _step_ask(run: Run, parallel: int, evaluator: Evaluator) -> tuple[list, float | None, list[RunEvent]]:
    """Under the run's lock: tell what arrived, ask for up to `parallel` candidates in
    flight in all, and save. Returns the asked (node id, candidate) pairs, the best
    full-gate time the screen has to beat (None: no screen for these), and the events."""
    pending = _pending_rows(run)
    search = _search_for(run, pending)
    new_events = _step_tell(run, search, pending)
    if run.status == Run.Status.RUNNING and search.evaluations >= run.budget:
        new_events.append(_finish(run, search))
    in_flight = len(search.in_flight())
    asked = []
    if run.status == Run.Status.RUNNING and search.evaluations < run.budget:
        room = min(parallel - in_flight, run.budget - search.evaluations - in_flight)
        asked = search.ask(room) if room > 0 else []
        if not asked and not search.tree.pending():  # every proposal tried: nothing left
            new_events += _events(run, search)
            new_events.append(_finish(run, search, exhausted=True))
    new_events += _events(run, search)
    search_save(run, search)
    if asked:
        RunNode.objects.filter(run=run, node_id__in=[node_id for node_id, _ in asked]).update(
            issued_at=timezone.now(), started_at=None, worker="", lease_expires_at=None)
    best = search.tree.best  # always a full-gate node: what the screen has to beat
    screening = screening_for(run=run, evaluator=evaluator)
    best_full_ms = best.measurement.time_ms if screening and best is not None else None
    return asked, best_full_ms, new_events


def _step_tell(run: Run, search: Search, pending: list[PendingRow] | None = None) -> list[RunEvent]:
    """Tell the search every result that arrived for its pending nodes (node_services.node_result_store),
    then the binaries compiled ahead (a duplicate whose twin is measured is done now);
    returns the events. The caller saves. `pending`: as _pending_rows read them."""
    rows = _pending_rows(run) if pending is None else pending
    for row in rows:
        if row.result is not None:
            if row.binary:  # compiled and measured in one step (run_step): its binary first, so
                # a later node running it is its duplicate, as the rows say (else it waits forever)
                search.tell_binary(search.tree[row.node_id].candidate_hash, row.binary)
            measurement = Measurement.from_dict(row.result)
            if search.tell(search.tree[row.node_id].candidate_hash, measurement) is not None:
                run.gpu_seconds += measurement.seconds  # the screen's and the full gate's
    for row in rows:
        if row.result is None and row.binary:
            search.tell_binary(search.tree[row.node_id].candidate_hash, row.binary)
    return _events(run, search)


def _finish(run: Run, search: Search, *, exhausted: bool = False) -> RunEvent:
    """The run is done: its status, and in its message how it ended (explain.why_it_ended)."""
    run.status = Run.Status.FINISHED
    run.message = why_it_ended(search.tree, evaluations=search.evaluations, budget=run.budget,
                               exhausted=exhausted)
    return _append(run, "run_finished", {**search.summary(), "exhausted": exhausted, "message": run.message},
                   announce=False)


def _events(run: Run, search: Search) -> list[RunEvent]:
    """The search's new events as rows; the step announces them together (_announce)."""
    return [_append(run, kind, data, announce=False) for kind, data in search.pop_events()]


def _append(run: Run, kind: str, data: dict, *, announce: bool = True) -> RunEvent:
    """Append under the run's row lock (held by the caller): seq has no gaps or repeats.
    Viewers hear of it once it commits (announce=False: the caller announces it with the
    rest of its transaction's events, _announce)."""
    event = RunEvent.objects.create(run=run, seq=run.next_seq, kind=kind, data=json_safe(data))
    run.next_seq += 1
    if announce:
        broadcast.event_after_commit(run_id=run.pk, seq=event.seq, kind=kind, data=event.data)
    return event


def _announce(run: Run, events: list[RunEvent]) -> None:
    broadcast.events_after_commit(run_id=run.pk, events=[(e.seq, e.kind, e.data) for e in events])


def run_drive(*, run_id: int, evaluator: Evaluator | None = None, parallel: int = 1,
              on_event: EventSink | None = None) -> Run:
    """Step in this process until the budget is spent, or someone pauses or stops the run
    (the `optimize` command, benchmarks). The worker steps through run_advance instead."""
    run = Run.objects.get(pk=run_id)
    while run.status == Run.Status.RUNNING:
        run = run_step(run_id=run_id, evaluator=evaluator, parallel=parallel, on_event=on_event)
    return run


# How long a run's driver chain waits before looking again while its evaluations are out
# on the GPU workers. Each evaluation's result wakes the run at once (node_services.node_evaluate), so
# this is only the bound on how long a lost wake-up can delay the run; an H200 candidate
# takes about 18 s (docs/benchmarks.md, 2026-11-29 suite).
IDLE_STEP_DELAY_S = 5.0


def run_advance(*, run_id: int, token: int, evaluator: Evaluator | None = None) -> Run | None:
    """One link of a run's driver chain (the Celery task `search.drive_run`, on a CPU
    worker): tell the search what arrived, hand up to the run's `parallel` evaluations out
    to the `gpu` queue (search.tasks.evaluate_node, after commit), then queue the chain's
    next message while the run runs and has budget left.

    The message carries the run's `drive_token`. A message whose token is no longer the
    run's (a redelivery of a step already handed on, a message queued before a pause,
    stop or resume, the wake-up of a result the chain has already seen) does nothing and
    returns None. A worker killed mid-step leaves the token as it was, so the broker's
    redelivery takes the step up again. Only the step that moves the token queues a
    successor, so even a twin running at the same time cannot fork the chain."""
    if not Run.objects.filter(pk=run_id, drive_token=token, status=Run.Status.RUNNING).exists():
        return None
    run_dispatch(run_id=run_id, evaluator=evaluator)
    return _run_hand_on(run_id=run_id, token=token)


@transaction.atomic
def run_dispatch(*, run_id: int, evaluator: Evaluator | None = None) -> Run:
    """Under the run's lock: tell what arrived, ask for candidates up to `parallel` in
    flight, and queue one message per asked node once this commits: its compile on a CPU
    worker (search.compile_node, which then queues its evaluation), or with
    OPTIML_COMPILE_AHEAD off its evaluation on the `gpu` queue. A run on the server's
    evaluator that needs a GPU worker while none is live waits instead (search.gpu_queue)."""
    from search.gpu_queue import run_waits_for_gpu_worker  # it imports this module
    from search.tasks import compile_node_enqueue, evaluate_node_enqueue  # tasks import services

    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != Run.Status.RUNNING:
        return run
    if evaluator is None and run_waits_for_gpu_worker(run):
        return run  # queued, nothing handed out: the chain looks again after IDLE_STEP_DELAY_S
    asked, best_full_ms, events = _step_ask(run, run.parallel, evaluator or demo_runs.evaluator_for_run(run))
    _announce(run, events)
    for node_id, _candidate in asked:
        if settings.OPTIML_COMPILE_AHEAD:
            compile_node_enqueue(run=run, node_id=node_id, best_full_ms=best_full_ms)
        else:
            evaluate_node_enqueue(run=run, node_id=node_id, best_full_ms=best_full_ms)
    return run


@transaction.atomic
def _run_hand_on(*, run_id: int, token: int) -> Run | None:
    from search.tasks import drive_run_enqueue  # tasks import services: import here

    # Conditional update: of two holders of one token, one moves it; the other stops here.
    if not Run.objects.filter(pk=run_id, drive_token=token).update(drive_token=token + 1):
        return None
    run = Run.objects.get(pk=run_id)  # locked by the update until this commits
    if run.status == Run.Status.RUNNING and run.evaluated < run.budget:
        drive_run_enqueue(run_id=run.pk, token=run.drive_token, countdown_s=IDLE_STEP_DELAY_S)
    return run


@transaction.atomic
def run_launch(*, task_name: str, source: str, plan: dict, budget: int, judge: str = "rules",
               seed: int = 0, user=None, team=None, intent: str = "",
               source_names: list[str] | None = None, screen: bool = True, parallel: int = 1,
               writing_job=None, evaluator: str = demo_runs.SERVER) -> Run:
    """Create a run and queue its first step once the run is committed. `writing_job`:
    the done WritingJob the starting kernel was written by; its kernel, when the run starts
    from it unchanged, is the root's proposal (the root names its writer)."""
    from search import writing_jobs
    from search.tasks import drive_run_enqueue  # tasks import services: import here

    written = None
    if writing_job is not None:
        proposal = writing_jobs.written_proposal(job=writing_job)
        if proposal.candidate == HarnessCandidate.from_source_and_plan(source, plan):
            written = proposal
    run = run_create(task_name=task_name, source=source, plan=plan, budget=budget, judge=judge,
                     seed=seed, user=user, team=team, intent=intent, source_names=source_names,
                     screen=screen, parallel=parallel, written=written, writing_job=writing_job,
                     evaluator=evaluator)
    drive_run_enqueue(run_id=run.pk, token=run.drive_token)
    return run
