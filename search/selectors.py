"""Reads for optimisation runs: who may see which run, its nodes, events and summary."""

from __future__ import annotations

import difflib
import re
import uuid

from django.db.models import Q, QuerySet

from accounts.models import Membership
from accounts.selectors import user_team_ids
from profiling import selectors as gate_selectors
from profiling.harness import declared
from profiling.harness.candidate import Candidate
from search.engine.explain import why_faster
from search.engine.tree import Tree
from search.inspector import source_plan_diff
from search.models import GenerationAttempt, Run, RunEvent, RunNode, ShareLink
from search.node_table import run_vendor
from search.state import state_of


def runs_visible_to(*, user) -> QuerySet[Run]:
    """A run is visible to its creator and to every member of its team."""
    if not user.is_authenticated:
        return Run.objects.none()
    return Run.objects.filter(Q(created_by=user) | Q(team_id__in=user_team_ids(user=user)))


def run_list(*, user, task: str = "", status: str = "", mine: bool = False,
             team: int | None = None) -> QuerySet[Run]:
    runs = runs_visible_to(user=user).select_related("task", "created_by")
    if task:
        runs = runs.filter(task__name=task)
    if status:
        runs = runs.filter(status=status)
    if mine:
        runs = runs.filter(created_by=user)
    if team is not None:
        runs = runs.filter(team_id=team)
    return runs.order_by("-created", "-pk")


def task_names_usable_by(*, user) -> set[str]:
    """The tasks a run of `user` may be on, made or imported: the suite's (and task
    modules'), and the declared tasks of their own and their teams'. Anyone else's
    declared task is, to them, a task that does not exist."""
    from profiling.harness import tasks as task_registry

    suite = {spec.name for spec in task_registry.all_tasks() if not declared.is_declared_name(spec.name)}
    return suite | set(gate_selectors.declared_tasks_visible_to(user=user).values_list("name", flat=True))


def run_visible(*, user, run_id: int) -> Run | None:
    """The run if `user` may see it; None both when it does not exist and when it is not
    theirs to see, so a stranger cannot tell the two apart."""
    return runs_visible_to(user=user).select_related("task", "created_by").filter(pk=run_id).first()


def run_controllable_by(*, run: Run, user) -> bool:
    """Pausing, stopping and sharing: the creator, or an admin of the run's team. An
    imported run is a record, not a search: nobody drives it."""
    return not run.imported and run_shareable_by(run=run, user=user)


def run_shareable_by(*, run: Run, user) -> bool:
    """Sharing by link: the creator, or an admin of the run's team; an imported run too
    (it is read-only, but its owner may show it to others)."""
    if not user.is_authenticated:
        return False
    if run.created_by_id == user.pk:
        return True
    return run.team_id is not None and run.team_id in user_team_ids(user=user, role=Membership.Role.ADMIN)


def share_open(*, token: str) -> ShareLink | None:
    """The open share link with this token; None for an unknown or revoked one."""
    if not token:
        return None
    return (ShareLink.objects.select_related("run__task", "run__created_by")
            .filter(token_hash=ShareLink.digest(token), revoked_at__isnull=True).first())


def run_for_share_token(*, token: str) -> Run | None:
    """The run an open share link points at; None for an unknown or revoked token."""
    link = share_open(token=token)
    return link.run if link else None


def share_list(*, run: Run) -> list[ShareLink]:
    return list(ShareLink.objects.filter(run=run).select_related("created_by").order_by("-created"))


def run_nodes(*, run: Run) -> list[RunNode]:
    return list(RunNode.objects.filter(run=run).order_by("node_id"))


def run_node(*, run: Run, node_id: int) -> RunNode | None:
    return (RunNode.objects.select_related("candidate", "evaluation")
            .filter(run=run, node_id=node_id).first())


def run_events_after(*, run: Run | int, seq: int, limit: int | None = None) -> list[RunEvent]:
    """Everything a client that has seen up to `seq` missed, in order (the first `limit`)."""
    events = RunEvent.objects.filter(run=run, seq__gt=seq).order_by("seq")
    return list(events[:limit] if limit else events)


def run_last_seq(*, run_id: int) -> int:
    """The sequence number of a run's latest event (0 for none, or no such run)."""
    next_seq = Run.objects.filter(pk=run_id).values_list("next_seq", flat=True).first()
    return (next_seq or 1) - 1


def run_outcome(*, run: Run) -> str:
    """improved | no_gain | nothing_passed for a finished run, from its columns; "" otherwise."""
    if run.status != Run.Status.FINISHED:
        return ""
    if run.best_node is None:
        return "nothing_passed"
    return "no_gain" if run.best_node == 0 else "improved"


def run_why(*, run: Run) -> list[dict]:
    """search.engine.explain.why_faster over the stored tree: the steps root -> best."""
    tree_data = state_of(run).get("tree")
    return why_faster(Tree.from_dict(tree_data)) if tree_data else []


def run_queue(*, run: Run) -> dict:
    """Progress, its pace, and where its evaluations are in the GPU queue (run_pace).

    What it says of other people's work is one number, `queued_ahead`: how many of their
    evaluations wait in the queue before this run's. Never which runs they are, how many,
    or which GPU workers serve anyone: a share link's anonymous viewer reads this too."""
    pending = RunNode.objects.filter(run=run, state="pending").count()
    return {"pending": pending, "evaluated": run.evaluated, "budget": run.budget, **run_pace(run=run)}


def run_progress(*, run: Run) -> dict:
    """What the run page's progress line, GPU time and vendor comparison show, under the run
    API's own field names (evaluated, gpu_seconds, queue; measured_gpu and the vendor's
    time, which change when the run's first or best kernel is measured): the socket's
    progress frames (search.consumers) carry exactly this, and the API's fields are the
    same columns, run_queue and node_table.run_vendor, so a page's first render and its
    pushed updates cannot disagree. No status: that travels as events, in order with the
    rest of the log."""
    return {"evaluated": run.evaluated, "gpu_seconds": run.gpu_seconds, "queue": run_queue(run=run),
            **run_vendor(run=run)}


PACE_WINDOW_S = 600


def run_pace(*, run: Run, now=None) -> dict:
    """How fast a running run goes: candidates finished per minute over the last ten
    minutes (its nodes' evaluations by their finish times), the minutes its budget then
    still needs, and how many of its evaluations are under way now (issued to a GPU
    worker: one per worker serving it). None where it cannot be told (not running, or
    nothing finished in the window)."""
    from django.utils import timezone

    under_way = RunNode.objects.filter(run=run, state="pending", issued_at__isnull=False).count()
    pace = {"per_minute": None, "minutes_left": None, "under_way": under_way, **_gpu_queue(run)}
    if run.status != Run.Status.RUNNING:
        return pace
    now = now or timezone.now()
    since = now - timezone.timedelta(seconds=PACE_WINDOW_S)
    finished = list(RunNode.objects.filter(run=run, state="done", evaluation__finished_at__gte=since)
                    .values_list("evaluation__finished_at", flat=True))
    if not finished:
        return pace
    span_s = max(60.0, (now - min(finished)).total_seconds())  # a burst is not a rate
    per_minute = len(finished) / span_s * 60.0
    left = max(0, run.budget - run.evaluated)
    return {**pace, "per_minute": round(per_minute, 2), "minutes_left": round(left / per_minute, 1)}


def _gpu_queue(run: Run) -> dict:
    """Where the run's issued evaluations are: `queued`, waiting in the GPU queue (issued,
    no worker has taken them), with `queued_ahead` evaluations of other running runs
    issued before its first waiting one (the queue is first in, first out); and
    `measuring`, how many of them a GPU worker measures now. Counts only: which worker
    measures (RunNode.worker) is for the operator, not for the run's viewers."""
    issued = RunNode.objects.filter(state="pending", result__isnull=True, issued_at__isnull=False)
    waiting = issued.filter(run=run, started_at__isnull=True)
    first = waiting.order_by("issued_at").values_list("issued_at", flat=True).first()
    ahead = 0
    if first is not None and run.status == Run.Status.RUNNING:
        ahead = (issued.filter(started_at__isnull=True, issued_at__lt=first, run__status=Run.Status.RUNNING)
                 .exclude(run=run).count())
    measuring = issued.filter(run=run, started_at__isnull=False).count()
    return {"queued": waiting.count(), "queued_ahead": ahead, "measuring": measuring}


def run_trajectory(*, run: Run) -> dict:
    """The whole run as JSON: what the search did, node by node, for export and sharing.
    search.importing.parse_trajectory reads it back."""
    return {
        "format": "optiml-trajectory", "version": 1,
        "run": {"id": run.pk, "task": run.task.name, "status": run.status, "judge": run.judge,
                "sources": run.sources, "budget": run.budget, "seed": run.seed,
                "evaluated": run.evaluated, "root_ms": run.root_ms, "best_ms": run.best_ms,
                "best_node": run.best_node, "best_found_at": run.best_found_at,
                "speedup": run.speedup, "vendor_ms": run.task.vendor_ms,
                "gpu_seconds": run.gpu_seconds, "intent": run.intent, "screen": run.screen},
        "nodes": [
            {"id": n.node_id, "parentId": n.parent_id, "state": n.state, "source": n.source,
             "title": n.title, "rationale": n.rationale, "diff": n.diff, "status": n.status,
             "guard": n.guard, "level": n.level, "time_ms": n.time_ms, "spread_ms": n.spread_ms,
             "reward": n.reward, "visits": n.visits, "value": n.value, "prior": n.prior,
             "candidate_hash": n.candidate.content_hash, **n.detail}
            for n in RunNode.objects.filter(run=run).select_related("candidate").order_by("node_id")
        ],
        "events": [{"seq": e.seq, "kind": e.kind, "data": e.data}
                   for e in run_events_after(run=run, seq=0)],
        "state": state_of(run),
    }


def run_gpu(*, run: Run) -> str | None:
    """The GPU that measured the run's kernels: its best node's, else its latest
    measured node's; None before any measurement (or under an evaluator that names none)."""
    nodes = RunNode.objects.filter(run=run, evaluation__isnull=False).exclude(
        evaluation__gpu__in=("", "none"))
    best = nodes.filter(node_id=run.best_node).values_list("evaluation__gpu", flat=True).first() \
        if run.best_node is not None else None
    return best or nodes.order_by("-node_id").values_list("evaluation__gpu", flat=True).first()


def run_floor_ms(*, run: Run) -> float | None:
    """The physics floor of the run's task at its timed sizes on the GPU that measured it
    (that GPU's datasheet ceilings): the least time any correct kernel could take there.
    None if the task is gone, before any measurement, or for a GPU without ceilings."""
    from profiling import services as gate_services

    gpu = run_gpu(run=run)
    return gate_services.task_floor_ms(task=run.task, gpu=gpu) if gpu else None


def run_best_path(*, run: Run) -> list[dict]:
    """The path from the root to the run's best node (the root alone when nothing beat
    it), from the node rows: id, who proposed each step, its title and time."""
    rows = {n["node_id"]: n for n in RunNode.objects.filter(run=run).values(
        "node_id", "parent_id", "source", "title", "time_ms", "level", "status")}
    path, at = [], run.best_node if run.best_node is not None else 0
    while at is not None and at in rows and len(path) <= len(rows):
        row = rows[at]
        path.append({"id": at, "source": row["source"], "title": row["title"], "time_ms": row["time_ms"]})
        at = row["parent_id"]
    return path[::-1]


def run_best_so_far(*, run: Run) -> list[float | None]:
    """The run's best time after each of its evaluations, in evaluation order: the best
    kernel the full gate had passed by then (None before the first). Reused nodes (a
    binary measured already) cost no evaluation and are left out, as on the run's timeline."""
    rows = RunNode.objects.filter(run=run, state="done").values_list("node_id", "detail", "status", "level",
                                                                     "time_ms")
    measured = sorted((row for row in rows if not (row[1] or {}).get("reused")),
                      key=lambda row: ((row[1] or {}).get("evaluation_index") or row[0], row[0]))
    best, curve = None, []
    for _node, _detail, status, level, time_ms in measured:
        if status == "passed" and level == "full" and time_ms and (best is None or time_ms < best):
            best = time_ms
        curve.append(best)
    return curve


def run_comparison(*, a: Run, b: Run) -> dict:
    """Two runs side by side: their outcomes, their best paths, their best times after each
    evaluation (to draw over each other), the diff from run a's best kernel to run b's
    (source, then plan), and their settings and best kernels' tunables side by side
    (search.comparison)."""
    from profiling.harness.candidate import Candidate as HarnessCandidate
    from search.comparison import run_settings_rows
    from search.engine.diffs import candidate_diff

    def side(run: Run) -> tuple[dict, HarnessCandidate]:
        best = run.best_node if run.best_node is not None else 0
        node = RunNode.objects.select_related("candidate").filter(run=run, node_id=best).first()
        row = node.candidate if node else run.root_candidate
        kernel = HarnessCandidate.from_source_and_plan(row.source, row.plan)
        return {"id": run.pk, "task": run.task.name, "status": run.status, "outcome": run_outcome(run=run),
                "judge": run.judge, "sources": run.sources, "budget": run.budget, "evaluated": run.evaluated,
                "root_ms": run.root_ms, "best_ms": run.best_ms, "speedup": run.speedup,
                "best_node": best, "best_found_at": run.best_found_at, "gpu_seconds": run.gpu_seconds,
                "intent": run.intent, "path": run_best_path(run=run),
                "best_so_far": run_best_so_far(run=run)}, kernel

    left, kernel_a = side(a)
    right, kernel_b = side(b)
    return {"a": left, "b": right, "same_task": a.task_id == b.task_id,
            "diff": candidate_diff(kernel_a, kernel_b),
            "settings": run_settings_rows(runs=[a, b], kernels=[kernel_a, kernel_b])}


# The gate's seed is the run's secret (search/measuring.py): a message that quotes one is
# cut before anybody sees it (search/generation/loop.py strips it too; this is the second lock).
_SEED = re.compile(r"\s*seed \d+")


def run_generation(*, run: Run) -> dict | None:
    """How the run's starting kernel was written from an intent (OptiML-G), for whoever may
    see the run: the intent, who contributed, and every attempt in order (its writer and
    contributors, round, where the gate stopped it, what it said, its kernel and the diff
    from the attempt before), the last one being the root. None when the root was not
    written from an intent. The attempts are those of the writing job the run names (its
    creator may have edited the kernel before starting: `edited` then holds the diff from
    the written kernel to the root), else the stored generation the root's params name
    (a run started with the written Proposal), else the generation of the run's creator
    whose kernel is the root's, on the run's task, made before the run (a run started
    by an older page, which sent the reviewed kernel only)."""
    root = RunNode.objects.filter(run=run, parent_id__isnull=True).select_related("candidate").first()
    params = ((root.detail or {}).get("params") or {}) if root else {}
    edited = None
    job = run.writing_job if run.writing_job_id and not run.imported else None
    if job is not None and root is not None:
        rows = list(GenerationAttempt.objects.filter(generation=job.generation).order_by("created", "round"))
        written = job.written or {}
        as_written = Candidate.from_source_and_plan(written.get("source", ""), written.get("plan") or {})
        if as_written.content_hash() != root.candidate.content_hash:
            edited = {"diff": source_plan_diff(str(written.get("source", "")), written.get("plan"),
                                               root.candidate.source, root.candidate.plan,
                                               from_label="as written", to_label="as the run started")}
    else:
        rows = _generation_rows(run=run, root=root, named=str(params.get("generation") or ""))
    if not rows and not isinstance(params.get("attempts"), list):
        return None
    if rows:
        attempts = [_attempt_view({**vars(a), "source": _attempt_source(a)}) for a in rows]
        intent, experts = rows[-1].intent, rows[-1].experts
    else:  # an imported run: its root's params are all there is
        attempts = [_attempt_view({**a, "source": None}) for a in params["attempts"] if isinstance(a, dict)]
        intent, experts = params.get("intent", run.intent), params.get("experts", [])
    if attempts and root is not None and edited is None:
        attempts[-1]["source"] = root.candidate.source  # the kernel the search started from
    elif attempts and job is not None:
        attempts[-1]["source"] = (job.written or {}).get("source") or attempts[-1]["source"]
    before = None
    for attempt in attempts:
        attempt["diff"] = _source_diff(before, attempt["source"], attempt["round"])
        before = attempt["source"] or before
    return {"intent": intent or run.intent, "experts": list(experts or []), "attempts": attempts,
            "edited": edited}


def _generation_rows(*, run: Run, root: RunNode | None, named: str) -> list[GenerationAttempt]:
    # An imported run's params come from a file anybody could write: it names no stored rows.
    if root is None or run.imported:
        return []
    try:
        named_id = uuid.UUID(named)
    except ValueError:
        named_id = None
    rows = (list(GenerationAttempt.objects.filter(generation=named_id).order_by("created", "round"))
            if named_id else [])
    if rows or run.created_by_id is None:
        return rows
    # Only the run's creator's own generations: a stranger who wrote the same kernel says nothing here.
    kept = (GenerationAttempt.objects.filter(task=run.task.name, candidate_hash=root.candidate.content_hash,
                                             created_by_id=run.created_by_id, created__lte=run.created)
            .order_by("-created").first())
    if kept is None:
        return []
    return list(GenerationAttempt.objects.filter(generation=kept.generation, created__lte=kept.created)
                .order_by("created", "round"))


def _attempt_view(a: dict) -> dict:
    """One attempt as the API shows it, from a stored row's fields or a params entry."""
    return {"round": int(a.get("round") or 0), "writer": str(a.get("writer") or "?"),
            "experts": [str(e) for e in a.get("experts") or []], "stage": str(a.get("stage") or "?"),
            "passed": bool(a.get("passed")), "guard": str(a.get("guard") or ""),
            "message": _SEED.sub("", str(a.get("message") or ""))[:2000], "source": a.get("source")}


def _attempt_source(attempt: GenerationAttempt) -> str | None:
    """The attempt's kernel: the one stored with it (generation_services._attempt_row),
    else, for rows stored before that, its writer's draft in the record (the drafts are
    kept with their kernels, search/generation/text.py); None when neither is there (no
    kernel came: the endpoint did not answer, or the reply held none)."""
    candidate = (attempt.record or {}).get("candidate")
    if isinstance(candidate, dict) and isinstance(candidate.get("source"), str) and candidate["source"]:
        return candidate["source"]
    drafts = (attempt.record or {}).get("drafts") or []
    mine = [d for d in drafts
            if isinstance(d, dict) and d.get("expert") == attempt.writer and d.get("source")]
    return str(mine[-1]["source"]) if mine else None


def _source_diff(before: str | None, after: str | None, round_: int) -> str:
    if not before or not after:
        return ""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile="the attempt before", tofile=f"round {round_}"))
