"""What compared runs were set up with, side by side (issue 35; the compare page).

One row per setting a person chose for the run (budget, the gate's time limit, proposal
sources, judge, evaluator, search seed, screen, parallel), then one per tunable of each
run's best kernel and its compile options, each row with every run's value and whether
they differ. A tunable only one best kernel has is None for the others: that kernel's
source has no such knob.
"""

from __future__ import annotations

from typing import Any

from profiling.evaluators import options_from_dict
from profiling.harness.candidate import Candidate as HarnessCandidate
from search import demo_runs
from search.models import Run


def run_settings_rows(*, runs: list[Run], kernels: list[HarnessCandidate]) -> list[dict[str, Any]]:
    """The rows of the compare page's settings table for `runs`, whose best kernels (the
    root's while none passed) are `kernels`, in the same order: {"group": "settings" or
    "tunables", "name", "unit" ("" when none), "values": one per run, "differs"}."""
    settings = [_settings_of(run) for run in runs]
    rows = [_row("settings", name, unit, [values[name] for values in settings])
            for name, unit in SETTINGS]
    names = sorted({name for kernel in kernels for name in kernel.tunables})
    rows += [_row("tunables", name, "", [kernel.tunables.get(name) for kernel in kernels]) for name in names]
    rows.append(_row("tunables", "compile options", "", [list(kernel.compile_options) for kernel in kernels]))
    return rows


# (name, unit) in the order the table shows them.
SETTINGS = (("budget", "evaluations"), ("time limit", "s"), ("sources", ""), ("judge", ""),
            ("evaluator", ""), ("search seed", ""), ("screen", ""), ("parallel", "at once"))


def _settings_of(run: Run) -> dict[str, Any]:
    return {"budget": run.budget, "time limit": options_from_dict(run.gate_options).time_limit_s,
            "sources": list(run.sources), "judge": run.judge, "evaluator": _evaluator_of(run),
            "search seed": run.seed, "screen": run.screen, "parallel": run.parallel}


def _evaluator_of(run: Run) -> str:
    """"gate" (a GPU worker measures it), or the demo recording it replays, in words."""
    demo = demo_runs.demo_view(run)
    if demo is None:
        return "gate"
    if demo["gpu"] is None:
        return "demo (recording gone)"
    return f"demo (recorded on the {demo['gpu']}, {demo['recorded_at']})"


def _row(group: str, name: str, unit: str, values: list[Any]) -> dict[str, Any]:
    return {"group": group, "name": name, "unit": unit, "values": values,
            "differs": any(value != values[0] for value in values[1:])}
