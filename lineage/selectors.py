"""Reads of the lineage app."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db.models import Count, QuerySet

from lineage.models import Lineage, SkillCard, SkillCardVersion, WalkRequest


def lineage_list(*, task: str | None = None) -> QuerySet[Lineage]:
    rows = Lineage.objects.select_related("task").annotate(
        state_count=Count("states", distinct=True), transition_count=Count("transitions", distinct=True),
        rejected_count=Count("rejected", distinct=True))
    return rows.filter(task__name=task) if task else rows


def lineage_get(*, pk: int) -> Lineage | None:
    return Lineage.objects.select_related("task").filter(pk=pk).first()


def walk_request_get(*, pk: int) -> WalkRequest | None:
    return WalkRequest.objects.select_related("task", "lineage").filter(pk=pk).first()


@dataclass(frozen=True)
class Library:
    """A skill library: the project's default one (team None) or a team's."""

    team: Any = None  # accounts.Team

    @property
    def team_id(self) -> int | None:
        return self.team.pk if self.team is not None else None

    @property
    def label(self) -> str:
        """As a run records it (SkillCard.library): "default" or "team:<id>"."""
        return f"team:{self.team.pk}" if self.team is not None else "default"

    @property
    def name(self) -> str:
        return f"{self.team.name}'s library" if self.team is not None else "the default library"


def skill_library_open(*, user, team_id: int | None) -> Library | None:
    """The library `user` may read: the default one (anyone signed in), or the team's when
    `user` is one of its members (any role). None otherwise (a 404: a team's library is
    not even said to exist to others)."""
    from accounts.models import Team

    if not user.is_authenticated:
        return None
    if team_id is None:
        return Library()
    team = Team.objects.filter(pk=team_id, memberships__user=user).first()
    return Library(team) if team is not None else None


def skill_libraries_of(*, user) -> list[dict]:
    """The libraries `user` reads, for the library page's chooser: the default one, then
    each of their teams', with how many cards it holds and the user's role there."""
    from accounts.models import Membership

    counts = dict(SkillCard.objects.filter(team__memberships__user=user).values_list("team_id")
                  .annotate(n=Count("pk", distinct=True)))
    rows = [{"team": None, "name": "Default library", "cards": SkillCard.objects.filter(team=None).count(),
             "role": "staff" if user.is_staff else "reader"}]
    for membership in Membership.objects.filter(user=user).select_related("team").order_by("team__name"):
        rows.append({"team": membership.team_id, "name": membership.team.name,
                     "cards": counts.get(membership.team_id, 0), "role": membership.role})
    return rows


def skill_card_list(*, intent: str | None = None, team: Any = None) -> QuerySet[SkillCard]:
    rows = SkillCard.objects.filter(team=team).annotate(lineage_count=Count("lineages", distinct=True))
    return rows.filter(intent=intent) if intent else rows


SKILL_SORTS = ("intent", "effect", "evidence")


def skill_library(*, intent: str = "", task: str = "", status: str = "", arch: str = "",
                  sort: str = "intent", team: Any = None, user=None) -> list[SkillCard]:
    """The library as its page lists it: filtered by intent, task family (a task in the
    card's scope), architecture and status; sorted by intent, by effect (the median
    measured speed-up, best first) or by evidence (lineages, then steps, most first).
    A few dozen cards: the scope filters read the card's data here."""
    rows = skill_card_list(intent=intent or None, team=team).annotate(
        review_count=Count("reviews", distinct=True), comment_count=Count("comments", distinct=True))
    if status:
        rows = rows.filter(status=status)
    cards = [c for c in rows
             if (not task or task in c.data.get("scope", {}).get("tasks", []))
             and (not arch or arch == c.data.get("scope", {}).get("arch"))]
    cards.sort(key=lambda c: (c.intent, c.card_id))
    runs = skill_runs_behind(user=user, team=team) if user is not None else {}
    for card in cards:
        card.run_count = len(runs.get(card.card_id, ()))
    if sort == "effect":
        cards.sort(key=lambda c: (-(c.data["effects"]["speedup"].get("median") or 0), c.card_id))
    elif sort == "evidence":
        cards.sort(key=lambda c: (-c.data["evidence"]["lineages"], -c.data["evidence"]["transitions"],
                                  c.card_id))
    return cards


def skill_runs_behind(*, user, team: Any = None) -> dict[str, set[int]]:
    """Card id -> the runs `user` may see where that library's copy of the card made a
    node (as each node recorded its card's library), in one query."""
    from search.models import RunNode
    from search.selectors import runs_visible_to

    label = Library(team).label
    runs = runs_visible_to(user=user)
    if team is not None:
        runs = runs.filter(team=team)
    found: dict[str, set[int]] = {}
    nodes = RunNode.objects.filter(run__in=runs, source__startswith="skill:")
    for source, run_id, library in nodes.values_list("source", "run_id",
                                                     "detail__params__card_version__library"):
        if (library or "default") == label:
            found.setdefault(source.removeprefix("skill:"), set()).add(run_id)
    return found


def skill_card_get(*, card_id: str, team: Any = None) -> SkillCard | None:
    return SkillCard.objects.filter(team=team, card_id=card_id).first()


def skill_library_for_run(*, team_id: int | None) -> Library:
    """Which library a run's searches use: its team's, when the run belongs to a team whose
    library holds cards; else the default one (a team that never copied or imported a
    card searches with the project's)."""
    from accounts.models import Team

    if team_id is not None and SkillCard.objects.filter(team_id=team_id).exists():
        return Library(Team.objects.get(pk=team_id))
    return Library()


def skill_cards_for_search(*, statuses: tuple[str, ...] = ("approved",),
                           default_library_statuses: tuple[str, ...] | None = None,
                           team_id: int | None = None) -> tuple[list[dict], dict[str, dict]]:
    """The cards a search may use (those of the run's library, skill_library_for_run, with
    a status in `statuses`, or in `default_library_statuses` when given and the library is
    the default one), as plain data, and for each what a run records of it: its library,
    its text version (1 when never edited), its status and the SHA-256 of its data."""
    from django.db.models import Max

    library = skill_library_for_run(team_id=team_id)
    if library.team is None and default_library_statuses is not None:
        statuses = default_library_statuses
    rows = (SkillCard.objects.filter(team=library.team, status__in=statuses)
            .annotate(text_version=Max("versions__number")))
    cards, versions = [], {}
    for row in rows:
        cards.append(row.data)
        digest = hashlib.sha256(json.dumps(row.data, sort_keys=True).encode()).hexdigest()
        versions[row.card_id] = {"library": library.label, "version": row.text_version or 1,
                                 "status": row.status, "sha256": digest}
    return cards, versions


def skill_card_history(*, card: SkillCard) -> list[dict]:
    """The card's text versions, oldest first, each with the unified diff from the one
    before it (the first: from nothing). A card never edited has one: its induced text."""
    versions = list(card.versions.select_related("author"))
    if not versions:
        versions = [SkillCardVersion(card=card, number=1, sentence=card.data.get("sentence", ""),
                                     notes=card.data.get("notes", ""), created_at=card.created_at)]
    rows, before = [], ""
    for version in versions:
        text = version_text(version.sentence, version.notes)
        rows.append({"number": version.number, "author": version.author.username if version.author else None,
                     "created_at": version.created_at, "sentence": version.sentence, "notes": version.notes,
                     "diff": text_diff(before, text, f"v{version.number - 1}", f"v{version.number}")})
        before = text
    return rows


def version_text(sentence: str, notes: str) -> str:
    return f"{sentence}\n\n{notes}\n" if notes else f"{sentence}\n"


def text_diff(before: str, after: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))


def skill_card_usage(*, card: SkillCard, user) -> list[dict]:
    """Where the card was applied: the nodes this card (of its library: a team's copy is
    another card) made in the runs `user` may see, newest
    run first, each with its outcome (status, time, and its speed-up over its parent)."""
    from search.models import RunNode
    from search.selectors import runs_visible_to

    runs = runs_visible_to(user=user)
    if card.team_id is not None:
        runs = runs.filter(team_id=card.team_id)
    nodes = [node for node in RunNode.objects.filter(run__in=runs, source=f"skill:{card.card_id}")
             .select_related("run__task").order_by("-run_id", "node_id")[:500]
             if _used_library(node) == card.library]
    parent_ids = {n.parent_id for n in nodes if n.parent_id is not None}
    parents = {(n.run_id, n.node_id): n.time_ms for n in RunNode.objects.filter(
        run_id__in={n.run_id for n in nodes}, node_id__in=parent_ids)}
    rows = []
    for node in nodes:
        before = parents.get((node.run_id, node.parent_id))
        rows.append({"run": node.run_id, "task": node.run.task.name, "intent": node.run.intent,
                     "node": node.node_id, "title": node.title, "status": node.status, "guard": node.guard,
                     "level": node.level, "time_ms": node.time_ms, "parent_time_ms": before,
                     "card_version": (node.detail or {}).get("params", {}).get("card_version"),
                     "deltas_vs_parent": (node.detail or {}).get("deltas_vs_parent") or {},
                     "speedup_vs_parent": before / node.time_ms if before and node.time_ms else None,
                     "page": f"/runs/{node.run_id}/",
                     "api": f"/api/runs/{node.run_id}/nodes/{node.node_id}/"})
    return rows


def skill_card_effects(*, card: SkillCard, user) -> dict:
    """The card's measured effects, for its chart: `groups`, one per source of evidence,
    each with its points (a speed-up, what it was, and where to look):
    - each lineage it was induced from: every step of its intent there (the expert's
      kernel with that one optimization turned on, over the state before it);
    - each run `user` may see where the card made a node: that node over its parent;
    - its roundtrip's failed trials, where it kept them (the measured speed-up, or none
      when the trial failed the gate);
    - a skeleton card's admission trials (each over the trial kernel it started from).
    And `metrics`: per lineage and per run, the median over its steps (nodes) of each
    Nsight Compute metric's ratio after / before, from the states' (nodes') profiles;
    those without profiles have none."""
    from lineage.models import LineageState, Transition

    groups, metrics = [], []
    steps = (Transition.objects.filter(lineage__in=card.lineages.all(), intent=card.intent)
             .select_related("lineage__task").order_by("lineage__task__name", "lineage_id", "pk"))
    by_lineage: dict[int, list] = {}
    for step in steps:
        by_lineage.setdefault(step.lineage_id, []).append(step)
    profiles = {(s.lineage_id, s.key): (s.measurement or {}).get("metrics") or {}
                for s in LineageState.objects.filter(lineage_id__in=list(by_lineage))}
    for lineage_id, found in by_lineage.items():
        task = found[0].lineage.task.name
        groups.append({"kind": "lineage", "label": f"{task}'s lineage", "link": f"/lineages/{lineage_id}/",
                       "points": [{"speedup": s.speedup, "what": f"{{{s.before or 'plain'}}} + {s.flag}",
                                   "link": f"/lineages/{lineage_id}/#state={s.after}"} for s in found]})
        ratios = [_ratios(profiles.get((lineage_id, step.before), {}),
                          profiles.get((lineage_id, step.after), {})) for step in found]
        if any(ratios):
            metrics.append({"label": f"{task}'s lineage", "steps": len(found),
                            "median": _median_each(ratios)})
    by_run: dict[int, list] = {}
    for use in skill_card_usage(card=card, user=user):
        by_run.setdefault(use["run"], []).append(use)
    for run_id, uses in by_run.items():
        ratios = [u.get("deltas_vs_parent") or {} for u in uses]
        if any(ratios):
            metrics.append({"label": f"run {run_id} ({uses[0]['task']})", "steps": len(uses),
                            "median": _median_each(ratios)})
        groups.append({"kind": "run", "label": f"run {run_id} ({uses[0]['task']})", "link": uses[0]["page"],
                       "points": [{"speedup": u["speedup_vs_parent"],
                                   "what": f"node #{u['node']}: {u['status'] or 'pending'}",
                                   "link": f"{u['page']}#node-{u['node']}"} for u in uses]})
    trials = (card.data.get("admission") or {}).get("trials") or []  # a skeleton card's
    if trials:
        groups.append({"kind": "admission", "label": "admission by transfer", "link": None,
                       "points": [{"speedup": t.get("speedup"), "what": _trial_text(t), "link": None}
                                  for t in trials]})
    failed = (card.data.get("roundtrip") or {}).get("failed_trials") or []
    if failed:
        groups.append({"kind": "roundtrip", "label": "roundtrip, failed trials", "link": None,
                       "points": [{"speedup": t.get("measured"), "what": f"{t.get('task')}: {t.get('status')}"
                                   f"{' (' + t['guard'] + ')' if t.get('guard') else ''}", "link": None}
                                  for t in failed]})
    return {"groups": groups, "metrics": metrics}


def _trial_text(trial: dict) -> str:
    """A skeleton card's transfer trial in a few words: where, and what came of it."""
    from lineage.engine.skeleton_cards import shortfall

    return f"{trial.get('task')}: {'reproduced' if trial.get('reproduced') else shortfall(trial)}"


def skill_card_anchor_code(*, card: SkillCard, most: int = 4) -> list[dict]:
    """The card's anchor in the code it came from: for each step of its vector (at most
    `most`), the before-state's source as the project's expert reads now, cut to the
    lines the step changes in it (the diff to the after-state, made here:
    lineage/engine/excerpts.py) and a few around them. A step whose expert is not in this
    project (an imported card's) is left out."""
    shown = []
    for step in (card.data.get("vector") or [])[:most]:
        after = step.get("after")
        found = _step_anchor(str(step.get("task") or ""), str(step.get("before") or ""),
                             after if isinstance(after, str) else None)
        if found is not None:
            shown.append(copy.deepcopy(found))  # the cached one stays as it was
    return shown


@lru_cache(maxsize=256)
def _step_anchor(task: str, before_flags: str, after_flags: str | None) -> dict | None:
    """One step's excerpt. It depends only on the step and the expert's files, which
    change with a deploy, not with a card's revision: worked out once per process (it
    runs unifdef and the macro expansion twice), not at every read of a card."""
    from lineage.engine import experts
    from lineage.engine.excerpts import anchor_lines, excerpt

    try:
        expert = experts.load(task)
    except experts.ExpertError:
        return None
    before, after = (frozenset(f for f in (flags or "").split(",") if f)
                     for flags in (before_flags, after_flags))
    if not (expert.valid(before) and expert.valid(after)):
        return None
    source = expert.plain_source(before)
    lines = anchor_lines(text_diff(source, expert.plain_source(after), "before.cu", "after.cu"))
    if not lines:
        return None
    return {"task": task, "state": before_flags, "after": after_flags, **excerpt(source, lines)}


def _ratios(before: dict, after: dict) -> dict[str, float]:
    """Each metric's after / before, where both are numbers and before is not zero."""
    return {m: after[m] / value for m, value in before.items()
            if isinstance(value, int | float) and value and isinstance(after.get(m), int | float)}


def _median_each(ratios: list[dict[str, float]]) -> dict[str, float]:
    from statistics import median

    found: dict[str, list[float]] = {}
    for one in ratios:
        for metric, value in one.items():
            if isinstance(value, int | float):
                found.setdefault(metric, []).append(float(value))
    return {metric: median(values) for metric, values in sorted(found.items())}


def _used_library(node) -> str:
    """The library a node's card came from, as its run recorded it; nodes made before runs
    recorded it came from the default library (the only one then)."""
    version = (node.detail or {}).get("params", {}).get("card_version") or {}
    return version.get("library", "default")


def skill_library_export(*, team: Any = None) -> dict:
    """The whole library as a file another team can import (lineage/engine/library.py):
    every card as stored, its status and its data, the machine's parts included (the
    search needs them)."""
    from django.utils import timezone

    from lineage.engine.library import library_dict

    cards = [{"card_id": c.card_id, "intent": c.intent, "status": c.status, "data": c.data}
             for c in SkillCard.objects.filter(team=team).order_by("card_id")]
    return library_dict(cards, timezone.now().isoformat(timespec="seconds"))


def lineage_graph(*, lineage: Lineage) -> dict:
    """A stored lineage as the tree view draws it (lineage/engine/graph.py), with every
    gate seed in its messages hidden."""
    from lineage.engine import experts
    from lineage.engine.graph import lineage_rows
    from lineage.engine.walker import Lineage as LineageData
    from profiling import services as gate_services
    from profiling.serialization import data_for_users

    data = LineageData.from_dict(lineage.data)
    try:
        expert = ",".join(sorted(experts.load(lineage.task.name).all_on()))
    except experts.ExpertError:  # an uploaded kernel's walk: its top state is its first
        expert = data.order[0] if data.order else ""
    graph = lineage_rows(data, expert)
    # The share of the ceiling: the physics floor over the state's time (1: at the floor).
    floor_ms = gate_services.task_floor_ms(task=lineage.task, gpu=lineage.gpu)
    for row in graph["rows"]:
        time_ms = row.get("time_ms")
        row["share_of_ceiling"] = floor_ms / time_ms if floor_ms and time_ms else None
    return data_for_users({"id": lineage.pk, "task": lineage.task.name, "gpu": lineage.gpu,
                           "origin": lineage.origin, "complete": lineage.complete, "stopped": lineage.stopped,
                           "expert_state": expert, "floor_ms": floor_ms, **graph})
