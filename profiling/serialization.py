"""Verdicts as strict JSON.

A verdict may hold NaN or infinity (the relative error against a zero reference is
infinite). PostgreSQL's jsonb and strict JSON readers refuse those tokens, so they are
written as the strings "nan", "inf" and "-inf", which float() reads back.

Also: the key a verdict's settings are stored under (settings_key), and the verdict as
users may see it (verdict_for_users: without the gate's seeds).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from typing import Any

from profiling.harness.verdict import Verdict


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def verdict_from_json(data: dict[str, Any]) -> Verdict:
    """The inverse of json_safe(verdict.to_dict()): "nan"/"inf" back to floats, but only
    in fields declared as floats, so that a kernel named "inf" stays a name."""
    verdict = Verdict.from_dict(data)
    _restore_floats(verdict)
    return verdict


def _restore_floats(record: Any) -> None:
    for spec in dataclasses.fields(record):
        value = getattr(record, spec.name)
        declared = str(spec.type)
        if isinstance(value, str) and declared.startswith("float"):
            setattr(record, spec.name, float(value))
        elif isinstance(value, dict) and declared == "dict[str, float]":
            setattr(record, spec.name, {k: _float(v) for k, v in value.items()})
        elif dataclasses.is_dataclass(value):
            _restore_floats(value)
        elif isinstance(value, list):
            for item in value:
                if dataclasses.is_dataclass(item):
                    _restore_floats(item)


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, str) else value


# -- verdict identity ---------------------------------------------------------------------

# The settings key of a row measured before verdicts said how they were measured: matches
# no GateOptions (a real key is 64 hex digits), so it never stands in for any gate.
LEGACY_SETTINGS_KEY = "legacy"


def settings_key(settings: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a verdict's settings (GateOptions.identity()):
    part of the key an Evaluation is stored and looked up under. Canonical: keys sorted,
    no spaces, so equal settings give one key whatever their order."""
    canonical = json.dumps(json_safe(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- what users may see of a verdict --------------------------------------------------------

# "seed 1234000", "seed=7", "seed: 7": how the harness names a correctness run's seed in
# a stage or a rejection message (gate.verdict_from_result, worker.Session).
_SEED_IN_TEXT = re.compile(r"\b(seed)(\s*[:=]?\s*)-?\d+", re.IGNORECASE)
HIDDEN_SEED = "(hidden)"


# Files the gate wrote on its host: the operator's (the Evaluation row keeps them, and the
# report is served from there, search.inspector.ncu_report_path), never a user's to read.
SERVER_PATHS = (("compile", "cubin_path"), ("profile", "report_path"))


def verdict_for_users(verdict: dict[str, Any]) -> dict[str, Any]:
    """A stored verdict as anyone but the operator may see it: a copy without the seeds,
    nor the paths of the files the gate wrote on its host (SERVER_PATHS).

    The gate's correctness seeds decide its inputs; whoever knows them can write a kernel
    for those inputs. So `seeds` (operator-only, Verdict.seeds) is dropped, every
    correctness record's `seed` (derived from the base seed, inputs.check_plan) becomes
    None, and a seed named in any text (a stage, a rejection message) is replaced by
    "(hidden)". Everything else, `settings` included, is kept."""
    public = _without_seed_text(verdict)  # a new dict, lists and dicts rebuilt
    public.pop("seeds", None)
    for part, key in SERVER_PATHS:
        if isinstance(public.get(part), dict) and public[part].get(key) is not None:
            public[part][key] = None
    for record in public.get("correctness") or []:
        if isinstance(record, dict) and "seed" in record:
            record["seed"] = None
    return public


def text_for_users(text: str) -> str:
    """A text from the gate (a stage, a message of a row without a verdict) with any seed
    it names replaced by "(hidden)", as in verdict_for_users."""
    return _SEED_IN_TEXT.sub(rf"\g<1>\g<2>{HIDDEN_SEED}", text)


def data_for_users(value: Any) -> Any:
    """Any stored data (a skill card's trials and risks quote gate messages) with every
    seed its texts name hidden, as text_for_users; a new value, the stored one untouched."""
    return _without_seed_text(value)


def _without_seed_text(value: Any) -> Any:
    if isinstance(value, str):
        return text_for_users(value)
    if isinstance(value, dict):
        return {key: _without_seed_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_seed_text(item) for item in value]
    return value
