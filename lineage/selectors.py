"""Reads of the lineage app."""

from __future__ import annotations

import difflib
import hashlib
import json

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


def skill_card_list(*, intent: str | None = None) -> QuerySet[SkillCard]:
    rows = SkillCard.objects.annotate(lineage_count=Count("lineages", distinct=True))
    return rows.filter(intent=intent) if intent else rows


SKILL_SORTS = ("intent", "effect", "evidence")


def skill_library(*, intent: str = "", task: str = "", status: str = "", arch: str = "",
                  sort: str = "intent") -> list[SkillCard]:
    """The library as its page lists it: filtered by intent, task family (a task in the
    card's scope), architecture and status; sorted by intent, by effect (the median
    measured speed-up, best first) or by evidence (lineages, then steps, most first).
    A few dozen cards: the scope filters read the card's data here."""
    rows = skill_card_list(intent=intent or None).annotate(
        review_count=Count("reviews", distinct=True), comment_count=Count("comments", distinct=True))
    if status:
        rows = rows.filter(status=status)
    cards = [c for c in rows
             if (not task or task in c.data.get("scope", {}).get("tasks", []))
             and (not arch or arch == c.data.get("scope", {}).get("arch"))]
    cards.sort(key=lambda c: (c.intent, c.card_id))
    if sort == "effect":
        cards.sort(key=lambda c: (-(c.data["effects"]["speedup"].get("median") or 0), c.card_id))
    elif sort == "evidence":
        cards.sort(key=lambda c: (-c.data["evidence"]["lineages"], -c.data["evidence"]["transitions"],
                                  c.card_id))
    return cards


def skill_card_get(*, card_id: str) -> SkillCard | None:
    return SkillCard.objects.filter(card_id=card_id).first()


def skill_cards_for_search(*, statuses: tuple[str, ...] = ("approved",)
                           ) -> tuple[list[dict], dict[str, dict]]:
    """The cards a search may use, as plain data, and for each what a run records of it:
    its text version (1 when never edited), its status and the SHA-256 of its data."""
    from django.db.models import Max

    rows = SkillCard.objects.filter(status__in=statuses).annotate(text_version=Max("versions__number"))
    cards, versions = [], {}
    for row in rows:
        cards.append(row.data)
        digest = hashlib.sha256(json.dumps(row.data, sort_keys=True).encode()).hexdigest()
        versions[row.card_id] = {"version": row.text_version or 1, "status": row.status, "sha256": digest}
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
    """Where the card was applied: the nodes it made in the runs `user` may see, newest
    run first, each with its outcome (status, time, and its speed-up over its parent)."""
    from search.models import RunNode
    from search.selectors import runs_visible_to

    nodes = list(RunNode.objects.filter(run__in=runs_visible_to(user=user), source=f"skill:{card.card_id}")
                 .select_related("run__task").order_by("-run_id", "node_id")[:500])
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
                     "speedup_vs_parent": before / node.time_ms if before and node.time_ms else None,
                     "page": f"/runs/{node.run_id}/",
                     "api": f"/api/runs/{node.run_id}/nodes/{node.node_id}/"})
    return rows


def skill_library_export() -> dict:
    """The whole library as a file another team can import (lineage/engine/library.py):
    every card as stored, its status and its data, the machine's parts included (the
    search needs them)."""
    from django.utils import timezone

    from lineage.engine.library import library_dict

    cards = [{"card_id": c.card_id, "intent": c.intent, "status": c.status, "data": c.data}
             for c in SkillCard.objects.order_by("card_id")]
    return library_dict(cards, timezone.now().isoformat(timespec="seconds"))


def lineage_graph(*, lineage: Lineage) -> dict:
    """A stored lineage as the tree view draws it (lineage/engine/graph.py), with every
    gate seed in its messages hidden."""
    from lineage.engine import experts
    from lineage.engine.graph import lineage_rows
    from lineage.engine.walker import Lineage as LineageData
    from profiling.serialization import data_for_users

    data = LineageData.from_dict(lineage.data)
    try:
        expert = ",".join(sorted(experts.load(lineage.task.name).all_on()))
    except experts.ExpertError:  # an uploaded kernel's walk: its top state is its first
        expert = data.order[0] if data.order else ""
    graph = lineage_rows(data, expert)
    return data_for_users({"id": lineage.pk, "task": lineage.task.name, "gpu": lineage.gpu,
                           "origin": lineage.origin, "complete": lineage.complete, "stopped": lineage.stopped,
                           "expert_state": expert, **graph})
