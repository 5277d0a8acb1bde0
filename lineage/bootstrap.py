"""The default skill library filled from the recordings committed in this tree
(`manage.py lineage bootstrap`, run by `make start`): the lineages the CLI's skills
source reads, the cards induced from them, their admission from the newest recorded
roundtrip, and the skeleton cards with their admission by transfer
(lineage.skeleton_services), every row or none."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import time
from typing import Any

from django.db import transaction

from lineage import services, skeleton_services
from lineage.engine.walker import Lineage as LineageData
from lineage.models import Lineage, SkillCard
from profiling.serialization import json_safe


class BootstrapError(ValueError):
    """The recordings cannot fill the default library; the message says why."""


@dataclasses.dataclass(frozen=True)
class LibraryBootstrap:
    """What skill_library_bootstrap did: nothing (`done` False: the library held
    `cards_before` cards), or which lineages it stored, the cards by status, the
    admission it applied and how long it all took."""

    cards_before: int
    done: bool = False
    skeletons_added: int = 0  # skeleton cards stored into a library that held none (done or not)
    lineages_imported: int = 0
    lineages_kept: int = 0  # stored already, by an earlier bootstrap or an import of the same file
    statuses: dict[str, int] = dataclasses.field(default_factory=dict)  # the token cards'
    skeleton_statuses: dict[str, int] = dataclasses.field(default_factory=dict)
    admission: str = ""
    seconds: float = 0.0


def skill_library_bootstrap(*, force: bool = False) -> LibraryBootstrap:
    """Fill the default library from the recordings committed in this tree when it holds
    no card (or `force`): store the lineages the CLI's skills source reads (each once: a
    stored lineage with the same data is kept), store the cards induced from them with
    the recorded probes, and admit them from the newest recorded roundtrip admission;
    every row or none. The cards are lineage.engine.recorded's, the CLI's: induced once
    per content of the recordings and the code and kept on disk, so only a machine's
    first bootstrap spends the induction's half minute. A library that holds cards is
    left as it is (two queries: its skeleton cards are stored if it holds none), so
    `make start` runs this every time."""
    started = time.monotonic()
    held = _token_cards().count()
    if held and not force:
        added = skeleton_services.skeleton_cards_store() if skeleton_services.skeleton_cards_missing() else []
        return LibraryBootstrap(cards_before=held, skeletons_added=len(added))
    from lineage.engine import recorded

    path = recorded.recorded_admission_file()
    if path is None:
        raise BootstrapError(f"no card admission file (<date>-...-admission.json) under {recorded.RESULTS}")
    lineages = recorded.recorded_lineages()
    induced = list(recorded.recorded_cards())  # the slow part, before the transaction opens
    admission = json.loads(path.read_text())
    try:
        with transaction.atomic():
            held = _token_cards().count()
            if held and not force:  # another process filled it while this one induced
                return LibraryBootstrap(cards_before=held)
            rows, imported = _lineages_store_once(lineages)
            stored = services.cards_store(induced, list(zip(rows, lineages, strict=True)))
            services.cards_admit(admission=admission)
            skeletons = skeleton_services.skeleton_cards_store()
    except (services.LineageImportError, services.AdmissionError) as error:
        raise BootstrapError(f"{path.name}: {error}") from error
    return LibraryBootstrap(cards_before=held, done=True, skeletons_added=len(skeletons),
                            skeleton_statuses=counted(skeletons), lineages_imported=imported,
                            lineages_kept=len(lineages) - imported, statuses=counted(stored),
                            admission=str(path.relative_to(recorded.RESULTS.parents[1])),
                            seconds=time.monotonic() - started)


def _token_cards():
    """The default library's token cards (lineage/engine/cards.py): its skeleton cards aside."""
    return SkillCard.objects.filter(team=None).exclude(card_id__startswith="skeleton:")


def counted(rows: list[SkillCard]) -> dict[str, int]:
    """How many of these cards have each status, as stored now."""
    return dict(collections.Counter(SkillCard.objects.filter(pk__in=[row.pk for row in rows])
                                    .values_list("status", flat=True)))


def _lineages_store_once(lineages: list[LineageData]) -> tuple[list[Lineage], int]:
    """Each lineage's row, and how many were stored now: a stored lineage of the same task
    with the same data is that lineage's row; the others are imported."""
    def digest(data: Any) -> str:
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    stored: dict[str, Lineage] = {}
    for row in Lineage.objects.filter(task__name__in={lineage.task for lineage in lineages}).order_by("pk"):
        stored.setdefault(digest(row.data), row)
    rows, imported = [], 0
    for lineage in lineages:
        row = stored.get(digest(json_safe(lineage.to_dict())))
        if row is None:
            row = services.lineage_store(lineage=lineage, origin=Lineage.Origin.IMPORT)
            imported += 1
        rows.append(row)
    return rows, imported


