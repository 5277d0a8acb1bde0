"""What this tree holds of the H200's lineage work under bench/results: which files are the
recorded lineages, the probes and the cards' newest roundtrip admission, the lineages
themselves, and the cards induced from them (once per content of those recordings and of
the code: card_cache keeps them on disk). One place chooses the files, so the CLI's
`skills` source (lineage.engine.skills) and the app's default library
(`manage.py lineage bootstrap`, lineage.services) hold the same cards.
"""

from __future__ import annotations

import importlib.metadata
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from profiling.harness import tasks

from . import card_cache, cards, experts, probes
from .walker import Lineage

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def recorded_lineage_files() -> list[Path]:
    """The newest recorded lineage of each task, `<date>-h200-lineages*/lineage-<task>.json`
    (the folders' names start with the date; bench/skills_roundtrip.newest_lineage reads
    them the same way). Today one a task: the suite's (…-h200-lineages-c/) and layernorm's
    from the day's first run (…-h200-lineages/), docs/lineages-and-skills.md."""
    newest = {path.stem.removeprefix("lineage-"): path  # by folder: …-lineages before …-lineages-c
              for path in sorted(RESULTS.glob("*-h200-lineages*/lineage-*.json"))}
    return sorted(newest.values(), key=str)  # the order the cards were always induced in


def recorded_family_lineage_files() -> list[Path]:
    """The newest recorded lineage of each family expert (lineage/family_experts/:
    families the suite has no task of), `<date>-<gpu>-family-lineages/lineage-<task>.json`.
    They feed the skeleton cards only; the token cards stay induced from the suite's."""
    newest = {path.stem.removeprefix("lineage-"): path
              for path in sorted(RESULTS.glob("*-family-lineages/lineage-*.json"))}
    return sorted(newest.values(), key=str)


def recorded_family_lineages() -> list[Lineage]:
    return [Lineage.from_dict(json.loads(path.read_text())) for path in recorded_family_lineage_files()]


def recorded_probe_files() -> list[Path]:
    return sorted(RESULTS.glob("*-h200-probes/probes-*.json"))


def recorded_admission_file() -> Path | None:
    """The newest roundtrip admission of the token cards (bench/cards_admission.py writes
    it; `manage.py lineage admit` reads it): a `<date>-…-admission.json` summary whose
    `cards` maps each card id to its result, with its status. The skeleton cards'
    admissions (skeleton_cards.recorded reads them) map ids to lists of trials instead.
    None when the tree holds none."""
    for path in sorted(RESULTS.glob("*-admission.json"), reverse=True):  # the names start with the date
        found = json.loads(path.read_text()).get("cards")
        if isinstance(found, dict) and all(isinstance(v, dict) and "status" in v for v in found.values()):
            return path
    return None


def recorded_probes() -> dict[str, list[probes.Probe]]:
    """Task -> the probes of its expert, from every recorded probes file."""
    found: dict[str, list[probes.Probe]] = {}
    for path in recorded_probe_files():
        task, _gpu, items = probes.from_dict(json.loads(path.read_text()))
        found.setdefault(task, []).extend(items)
    return found


def recorded_lineages() -> list[Lineage]:
    """The lineages walked on the H200, as recorded under bench/results."""
    return [Lineage.from_dict(json.loads(path.read_text())) for path in recorded_lineage_files()]


@lru_cache(maxsize=1)
def recorded_cards() -> tuple[dict[str, Any], ...]:
    """The cards induced from the H200 recordings in this tree (once per process, and once
    per content of their inputs on this machine: card_cache)."""

    def induce() -> list[dict[str, Any]]:
        return [card.to_dict() for card in cards.induce(recorded_lineages(), recorded_probes())]

    inputs = [*recorded_lineage_files(), *recorded_probe_files(), *_expert_files()]
    return tuple(card_cache.cached(inputs, _induction_code(), induce, salt=_induction_salt()))


def _expert_files() -> list[Path]:
    """The experts' folders: a state's plain source and plan come from them (expert_sources)."""
    return sorted(p for p in experts.EXPERTS_DIR.rglob("*") if p.is_file())


def _induction_code() -> list[Path]:
    """The code induction runs: lineage/engine, the harness (task specs, candidate hashes,
    launch expressions) and the search modules it parses and diffs with. Whole packages
    rather than the modules induction imports today: safe (a module it comes to import is
    covered already) and simple, at the price of one induction after an edit that did not
    matter to the cards."""
    root = RESULTS.parents[1]
    return [*sorted((root / "lineage" / "engine").glob("*.py")),
            *sorted((root / "profiling" / "harness").rglob("*.py")),
            root / "search" / "engine" / "diffs.py", root / "search" / "engine" / "rewrites" / "syntax.py"]


def _induction_salt() -> str:
    """What induction reads that is no file of this tree: the parser's versions, and every
    task's naive source (a card lists the naive kernels it matches; OPTIML_TASK_PATH adds
    tasks)."""
    return json.dumps({"packages": {name: importlib.metadata.version(name)
                                    for name in ("tree-sitter", "tree-sitter-cuda")},
                       "naive": {t.name: t.naive_source for t in tasks.all_tasks()}}, sort_keys=True)
