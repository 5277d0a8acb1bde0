"""Writes for optimisation runs: create, step, drive, pause/resume/stop, share, import.

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
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import secrets
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from profiling import services as gate_services
from profiling.evaluators import Evaluator, get_evaluator, options_to_dict
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.gate import GateOptions
from profiling.serialization import json_safe
from search import broadcast
from search.engine.search import Search, SearchConfig
from search.engine.sources import fast_math_allowed
from search.importing import ParsedTrajectory
from search.measuring import candidate_measure, run_gate_options, screening_for
from search.models import Run, RunEvent, RunNode, ShareLink

EventSink = Callable[[RunEvent], None]


class RunError(ValueError):
    """A run cannot be created or moved as asked; the message says why, and `field` which
    input it is about (None when it is about the run's state)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def judges_for(choice: str):
    """(judge, fallback) for "rules" or "llm"; the rule judge always stands behind an LLM."""
    from search.engine.judges import LLMJudge, RuleJudge

    rules = RuleJudge()
    if choice == "rules":
        return rules, rules
    if choice == "llm":
        return LLMJudge.from_env(), rules
    raise RunError(f"unknown judge {choice!r}: use 'rules' or 'llm'", field="judge")


def kernel_write(*, task_name: str, intent: str):
    """A first kernel for the task, written from the intent by the configured LLM (the
    LLM judge's model). The person reviews it in the editor before a run starts from it.
    Raises RunError on the intent field: no intent, no LLM configured, or the LLM could
    not write a usable candidate after its retries. Returns the Proposal (source = the
    model's name)."""
    from search.engine.judges import LLMConfigError, LLMJudge
    from search.engine.types import JudgeError

    if not intent.strip():
        raise RunError("say what the kernel should do first", field="intent")
    spec = gate_services.task_spec(name=task_name)  # UnknownTask names the known ones
    try:
        writer = LLMJudge.from_env()
    except LLMConfigError as error:
        raise RunError(f"no LLM endpoint is configured to write kernels: {error}", field="intent") from None
    try:
        return writer.write_kernel(spec, intent)
    except JudgeError as error:
        raise RunError(f"the LLM could not write a kernel: {error}", field="intent") from None


def configured_sources(names: list[str] | None = None) -> list:
    """Proposal sources named in settings (dotted paths), e.g. a skill-card source that
    the lineage app provides: search never imports lineage itself. With `names`, only
    those (by their `name`); an unknown name is a RunError."""
    sources = []
    for path in settings.OPTIML_PROPOSAL_SOURCES:
        module_name, _, class_name = path.rpartition(".")
        sources.append(getattr(importlib.import_module(module_name), class_name)())
    if names is None:
        return sources
    unknown = set(names) - {source.name for source in sources}
    if unknown:
        known = ", ".join(source.name for source in sources)
        raise RunError(f"unknown proposal source {', '.join(sorted(unknown))}; configured: {known}",
                       field="sources")
    return [source for source in sources if source.name in names]


def _search_for(run: Run) -> Search:
    judge, fallback = judges_for(run.judge.split(":")[0])
    # The sources the run was made with, as long as they are still configured.
    sources = [source for source in configured_sources() if source.name in run.sources]
    return Search.from_dict(run.state, judge, sources, fallback_judge=fallback)


@transaction.atomic
def run_create(*, task_name: str, source: str, plan: dict, budget: int, judge: str = "rules",
               seed: int = 0, gate_options: GateOptions | None = None, user=None,
               team=None, intent: str = "", source_names: list[str] | None = None,
               screen: bool = True, written=None) -> Run:
    """`written`: the Proposal kernel_write returned, when the run starts from it (its
    candidate is `source` and `plan`): the root node then names the model that wrote it."""
    spec = gate_services.task_spec(name=task_name)  # UnknownTask names the known ones
    if budget < 1:
        raise RunError("the budget must be at least one evaluation", field="budget")
    root = HarnessCandidate.from_source_and_plan(source, plan)  # CandidateError says which field
    judge_obj, fallback = judges_for(judge)
    if written is not None and written.candidate != root:
        raise RunError("the written kernel is not the run's starting kernel", field="source")
    search = Search(task_name, root, judge=judge_obj, sources=configured_sources(source_names),
                    fallback_judge=fallback, config=SearchConfig(budget=budget, seed=seed),
                    tolerance_allows_fast_math=fast_math_allowed(spec), root_proposal=written)
    # `seed` steers the search only. The gate's seed is the run's secret one, derived at
    # each step (search.measuring.run_gate_seed) and never stored here or chosen by a user:
    # whoever knew it would know the inputs every candidate of the run is checked on.
    options = dataclasses.replace(gate_options or GateOptions(), seed=None)
    run = Run.objects.create(
        task=gate_services.task_get_or_sync(name=task_name),
        root_candidate=gate_services.candidate_get_or_create(source=source, plan=plan),
        judge=judge_obj.name, sources=[s.name for s in search.sources], budget=budget, seed=seed,
        gate_options=options_to_dict(options), state=json_safe(search.to_dict()), created_by=user,
        team=team, intent=intent, screen=screen)
    _append(run, "run_created", {"task": task_name, "budget": budget, "judge": judge_obj.name})
    run.save()
    return run


def run_step(*, run_id: int, evaluator: Evaluator | None = None, parallel: int = 1,
             on_event: EventSink | None = None) -> Run:
    """One round of ask -> evaluate -> tell. Returns the run as it stands after it."""
    evaluator = evaluator or get_evaluator()
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status != Run.Status.RUNNING:
            return run
        search = _search_for(run)
        best = search.tree.best  # always a full-gate node: what the screen has to beat
        asked = search.ask(max(1, min(parallel, run.budget - search.evaluations)))
        new_events = _record_nodes(run, search, [node_id for node_id, _ in asked])
        if not asked and not search.tree.pending():  # every proposal tried: nothing left
            run.status = Run.Status.FINISHED
            new_events.append(_append(run, "run_finished", {**search.summary(), "exhausted": True}))
        _save(run, search)
    screening = screening_for(run=run, evaluator=evaluator)
    options = run_gate_options(run=run, screening=screening)
    best_full_ms = best.measurement.time_ms if screening and best is not None else None
    # A kernel another worker is still evaluating is told on a later step, not now.
    measured = [m for m in (candidate_measure(run=run, candidate=c, options=options, evaluator=evaluator,
                                              best_full_ms=best_full_ms) for _, c in asked)
                if m is not None]
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        search = _search_for(run)
        touched = []
        for candidate_hash, measurement, evaluation in measured:
            node_id = search.tell(candidate_hash, measurement)
            if node_id is not None:  # None: told before (a repeated step), nothing changes
                touched.append(node_id)
                # None for a node only the screen measured: its verdict is in the node's detail.
                RunNode.objects.filter(run=run, node_id=node_id).update(evaluation=evaluation)
                run.gpu_seconds += measurement.seconds  # the screen's and the full gate's
        new_events += _record_nodes(run, search, _with_ancestors(search, touched))
        if run.status == Run.Status.RUNNING and search.evaluations >= run.budget:
            run.status = Run.Status.FINISHED
            new_events.append(_append(run, "run_finished", search.summary()))
        _save(run, search)
    for event in new_events if on_event else ():
        on_event(event)
    return run


def _with_ancestors(search: Search, node_ids: list[int]) -> list[int]:
    """Backpropagation changed every node on each path to the root."""
    return sorted({node.id for node_id in node_ids for node in search.tree.path(node_id)})


def _record_nodes(run: Run, search: Search, node_ids: list[int]) -> list[RunEvent]:
    for node_id in node_ids:
        _upsert_node(run, search.tree[node_id])
    return [_append(run, kind, data) for kind, data in search.pop_events()]


def _upsert_node(run: Run, node) -> None:
    m = node.measurement
    proposal = node.proposal
    candidate = gate_services.candidate_get_or_create(
        source=proposal.candidate.source, plan=proposal.candidate.plan_dict())
    detail = json_safe({
        "measurement": m.to_dict() if m else None,
        "diagnosis": node.diagnosis.to_dict() if node.diagnosis else None,
        "judge_error": node.judge_error, "reward_terms": node.reward_terms,
        "deltas_vs_parent": node.deltas_vs_parent, "deltas_vs_root": node.deltas_vs_root,
        "families": list(proposal.families), "params": proposal.params,
        "evaluation_index": node.evaluation, "reused": node.reused,
    })
    RunNode.objects.update_or_create(run=run, node_id=node.id, defaults={
        "parent_id": node.parent, "candidate": candidate, "state": node.state,
        "source": proposal.source, "title": proposal.title[:300], "rationale": proposal.rationale,
        "diff": proposal.diff, "status": m.status if m else "", "guard": (m.guard or "") if m else "",
        "level": m.level if m else "",
        "time_ms": m.time_ms if m else None, "spread_ms": m.spread_ms if m else None,
        "reward": node.reward if node.done else None, "visits": node.visits, "value": node.value,
        "prior": node.prior, "detail": detail,
    })


def _append(run: Run, kind: str, data: dict) -> RunEvent:
    """Append under the run's row lock (held by the caller): seq has no gaps or repeats.
    Viewers hear of it once it commits."""
    event = RunEvent.objects.create(run=run, seq=run.next_seq, kind=kind, data=json_safe(data))
    run.next_seq += 1
    broadcast.event_after_commit(run_id=run.pk, seq=event.seq, kind=kind, data=event.data)
    return event


def _save(run: Run, search: Search) -> None:
    summary = search.summary()
    run.state = json_safe(search.to_dict())
    run.evaluated = search.evaluations
    run.root_ms, run.best_ms = summary["root_time_ms"], summary["best_time_ms"]
    run.best_node, run.best_found_at = summary["best_id"], summary["best_found_at_evaluation"]
    run.save()


def run_drive(*, run_id: int, evaluator: Evaluator | None = None, parallel: int = 1,
              on_event: EventSink | None = None) -> Run:
    """Step in this process until the budget is spent, or someone pauses or stops the run
    (the `optimize` command, benchmarks). The worker steps through run_advance instead."""
    run = Run.objects.get(pk=run_id)
    while run.status == Run.Status.RUNNING:
        run = run_step(run_id=run_id, evaluator=evaluator, parallel=parallel, on_event=on_event)
    return run


# A step whose candidates are all being evaluated by other workers changes nothing; the
# next message waits this long rather than spinning through the queue. An H200 candidate
# takes about 18 s (README, 2026-11-29 suite): a few idle messages per such wait.
IDLE_STEP_DELAY_S = 5.0


def run_advance(*, run_id: int, token: int, evaluator: Evaluator | None = None) -> Run | None:
    """One link of a run's driver chain (the Celery task `search.drive_run`): one step,
    then the next message, queued after commit, while the run runs and has budget left.

    The message carries the run's `drive_token`. A message whose token is no longer the
    run's (a redelivery of a step already handed on, a message queued before a pause,
    stop or resume) does nothing and returns None. A worker killed mid-step leaves the
    token as it was, so the broker's redelivery takes the step up again. Only the step
    that moves the token queues a successor, so even a twin running at the same time
    cannot fork the chain."""
    before = (Run.objects.filter(pk=run_id, drive_token=token, status=Run.Status.RUNNING)
              .values_list("evaluated", flat=True).first())
    if before is None:
        return None
    run = run_step(run_id=run_id, evaluator=evaluator)
    return _run_hand_on(run_id=run_id, token=token, idle=run.evaluated == before)


@transaction.atomic
def _run_hand_on(*, run_id: int, token: int, idle: bool) -> Run | None:
    from search.tasks import drive_run_enqueue  # tasks import services: import here

    # Conditional update: of two holders of one token, one moves it; the other stops here.
    if not Run.objects.filter(pk=run_id, drive_token=token).update(drive_token=token + 1):
        return None
    run = Run.objects.get(pk=run_id)  # locked by the update until this commits
    if run.status == Run.Status.RUNNING and run.evaluated < run.budget:
        drive_run_enqueue(run_id=run.pk, token=run.drive_token,
                          countdown_s=IDLE_STEP_DELAY_S if idle else 0.0)
    return run


@transaction.atomic
def run_set_status(*, run_id: int, status: str) -> Run:
    """Pause, resume or stop. A finished or failed run stays as it is."""
    allowed = {Run.Status.PAUSED: {Run.Status.RUNNING}, Run.Status.RUNNING: {Run.Status.PAUSED},
               Run.Status.STOPPED: {Run.Status.RUNNING, Run.Status.PAUSED}}
    run = Run.objects.select_for_update().get(pk=run_id)
    if status not in allowed or run.status not in allowed[status]:
        raise RunError(f"a {run.status} run cannot become {status}")
    run.status = status
    run.drive_token += 1  # whatever message is queued or running now cannot go on
    _append(run, "run_status", {"status": status})
    run.save()
    return run


@transaction.atomic
def run_launch(*, task_name: str, source: str, plan: dict, budget: int, judge: str = "rules",
               seed: int = 0, user=None, team=None, intent: str = "",
               source_names: list[str] | None = None, screen: bool = True) -> Run:
    """Create a run and queue its search on the GPU worker once the run is committed."""
    from search.tasks import drive_run_enqueue  # tasks import services: import here

    run = run_create(task_name=task_name, source=source, plan=plan, budget=budget, judge=judge,
                     seed=seed, user=user, team=team, intent=intent, source_names=source_names,
                     screen=screen)
    drive_run_enqueue(run_id=run.pk, token=run.drive_token)
    return run


CONTROLS = {"pause": Run.Status.PAUSED, "resume": Run.Status.RUNNING, "stop": Run.Status.STOPPED}


@transaction.atomic
def run_control(*, run_id: int, action: str) -> Run:
    """pause, resume or stop. A resumed run starts one new driver chain on the GPU queue;
    the status change moved the drive token, so a step still under way ends its old one."""
    from search.tasks import drive_run_enqueue

    if action not in CONTROLS:
        raise RunError(f"unknown action {action!r}: use pause, resume or stop")
    run = run_set_status(run_id=run_id, status=CONTROLS[action])
    if run.status == Run.Status.RUNNING:
        drive_run_enqueue(run_id=run.pk, token=run.drive_token)
    return run


def run_restart_stalled(*, older_than_s: float) -> list[int]:
    """Start a new driver chain for each running run with budget left whose row has not
    changed for `older_than_s` (its chain was lost). Moving the token first means that
    were the old chain alive after all, its next hand-on finds the token changed and
    ends: a run still has one driver. Returns the ids restarted."""
    from search.tasks import drive_run_enqueue

    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    restarted = []
    for run_id in Run.objects.filter(status=Run.Status.RUNNING, updated__lt=cutoff,
                                     evaluated__lt=F("budget")).values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            if run.status != Run.Status.RUNNING or run.updated >= cutoff:
                continue  # it moved while we looked
            run.drive_token += 1
            run.save(update_fields=["drive_token", "updated"])
            drive_run_enqueue(run_id=run.pk, token=run.drive_token)
            restarted.append(run.pk)
    return restarted


@transaction.atomic
def run_fail(*, run_id: int, message: str) -> Run | None:
    """Record that driving a run broke: a state people can see, not a lost traceback."""
    run = Run.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.status not in (Run.Status.RUNNING, Run.Status.PAUSED):
        return run
    run.status, run.message = Run.Status.FAILED, message
    run.drive_token += 1
    _append(run, "run_status", {"status": Run.Status.FAILED, "message": message})
    run.save()
    return run


# -- share links ------------------------------------------------------------------------


@transaction.atomic
def share_create(*, run: Run, user=None) -> tuple[ShareLink, str]:
    """A new read-only link; returns it and its raw token, which is not stored anywhere."""
    token = secrets.token_urlsafe(32)  # 256 random bits
    link = ShareLink.objects.create(run=run, token_hash=ShareLink.digest(token), created_by=user)
    return link, token


def share_revoke(*, run: Run, share_id: int) -> bool:
    """Revoke a link of `run`; False when it has no such open link."""
    # Conditional update: revoking twice, or from two tabs at once, changes one row once.
    revoked = bool(ShareLink.objects.filter(pk=share_id, run=run, revoked_at__isnull=True)
                   .update(revoked_at=timezone.now()))
    if revoked:
        broadcast.share_revoked_after_commit(run_id=run.pk, share_id=share_id)
    return revoked


# -- import -----------------------------------------------------------------------------


@transaction.atomic
def run_import(*, trajectory: ParsedTrajectory, user=None, team=None) -> Run:
    """A read-only run rebuilt from an exported trajectory (checked by
    search.importing.parse_trajectory): its nodes from the search state, its events from
    the file. One transaction: a failure leaves nothing behind. No Evaluation rows are
    made, so an imported file can never pose as a measurement for later searches."""
    search = trajectory.search
    root = search.tree.root.proposal.candidate
    run = Run.objects.create(
        task=gate_services.task_get_or_sync(name=search.task),
        root_candidate=gate_services.candidate_get_or_create(source=root.source, plan=root.plan_dict()),
        judge=trajectory.judge, sources=trajectory.sources, budget=search.config.budget,
        seed=search.config.seed, gate_options={}, status=Run.Status.FINISHED,
        message=f"imported from run {trajectory.original_id}" if trajectory.original_id else "imported",
        state=trajectory.state, gpu_seconds=trajectory.gpu_seconds, created_by=user, team=team,
        imported=True, intent=trajectory.intent)
    for node_id in sorted(search.tree.nodes):
        _upsert_node(run, search.tree[node_id])
    RunEvent.objects.bulk_create(RunEvent(run=run, seq=seq, kind=kind, data=data)
                                 for seq, (kind, data) in enumerate(trajectory.events, start=1))
    run.next_seq = len(trajectory.events) + 1
    _append(run, "run_imported", {"from_run": trajectory.original_id})
    summary = search.summary()  # the state is kept as given: _save would re-serialise it
    run.evaluated = search.evaluations
    run.root_ms, run.best_ms = summary["root_time_ms"], summary["best_time_ms"]
    run.best_node, run.best_found_at = summary["best_id"], summary["best_found_at_evaluation"]
    run.save()
    return run


# -- inputs kept for a run's candidates -----------------------------------------------------
_RUN_FOLDER = re.compile(r"run-(\d+)")


def run_input_caches_sweep(*, root: Path) -> list[Path]:
    """Delete the input caches (measuring.run_gate_options: `<root>/<task>/run-<id>/`,
    several GB for a 1 GB task) of runs that can no longer ask for them: finished,
    stopped, failed or deleted. A running or paused run keeps its own. Runs where the
    files are (a GPU worker); returns the folders deleted."""
    if not root.is_dir():
        return []
    folders = [(f, int(m.group(1))) for task in root.iterdir() if task.is_dir()
               for f in task.iterdir() if f.is_dir() and (m := _RUN_FOLDER.fullmatch(f.name))]
    live = set(Run.objects.filter(pk__in=[pk for _, pk in folders],
                                  status__in=[Run.Status.RUNNING, Run.Status.PAUSED])
               .values_list("pk", flat=True))
    deleted = []
    for folder, pk in folders:
        if pk not in live:
            shutil.rmtree(folder, ignore_errors=True)
            deleted.append(folder)
    return deleted
