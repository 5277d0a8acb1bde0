"""Verdicts as strict JSON.

A verdict may hold NaN or infinity (the relative error against a zero reference is
infinite). PostgreSQL's jsonb and strict JSON readers refuse those tokens, so they are
written as the strings "nan", "inf" and "-inf", which float() reads back.
"""

from __future__ import annotations

import dataclasses
import math
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
