"""How a run's step measures one candidate: the screen first, then the full gate.

The CLI's policy (search/engine/evaluators.py, ScreeningEvaluator; README "The screen"),
over the web path's rows. Until a run has a best (always a full-gate node), every
candidate gets the full gate. After that a candidate is screened in the evaluator's
long-lived GPU process; only one the screen finds more than PROMOTE_MARGIN faster than
the best gets the full gate, through profiling.services.evaluation_run (one Evaluation
per kernel, task, harness and GPU), and its measurement keeps what the screen saw in
`screen`. A screened verdict is never an Evaluation row: those are the full gate's,
served as such to every later caller. It lives in the search state and the node's row.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from django.conf import settings

from profiling import selectors as gate_selectors
from profiling import services as gate_services
from profiling.evaluators import Evaluator, can_screen, options_from_dict
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.gate import GateOptions
from profiling.models import Candidate, Evaluation
from search.engine.evaluators import measurement_from_verdict, promoted
from search.engine.types import Measurement
from search.models import Run

logger = logging.getLogger(__name__)

Measured = tuple[str, Measurement, Evaluation | None]  # (candidate hash, measurement, full gate's row)


def screening_for(*, run: Run, evaluator: Evaluator) -> bool:
    """Whether this run's candidates may be screened by this evaluator."""
    return bool(settings.OPTIML_SCREEN and run.screen and can_screen(evaluator))


def run_gate_options(*, run: Run, screening: bool) -> GateOptions:
    """The run's gate options. A screened run keeps its seeded inputs and references on
    this host, one folder per task, shared by the screen and the full gate (as the CLI's
    --workdir inputs/): each candidate then skips generating them, seconds per 1 GB seed."""
    options = options_from_dict(run.gate_options)
    if screening and options.seed is not None and options.input_cache is None:
        folder = Path(settings.OPTIML_WORKDIR) / "inputs" / run.task.name
        options = dataclasses.replace(options, input_cache=str(folder))
    return options


def candidate_measure(*, run: Run, candidate: HarnessCandidate, options: GateOptions,
                      evaluator: Evaluator, best_full_ms: float | None) -> Measured | None:
    """Measure one candidate of `run`; None while another worker holds its full gate (it
    is told on a later step). `best_full_ms` is the run's best full-gate time, or None to
    skip the screen (no best yet, or screening off)."""
    row = gate_services.candidate_get_or_create(source=candidate.source, plan=candidate.plan_dict())
    screened = None
    if best_full_ms is not None and not _full_verdict_known(run=run, row=row, evaluator=evaluator):
        screened = _screen(task_name=run.task.name, candidate=candidate, options=options, evaluator=evaluator)
        if screened is not None and not promoted(screened, best_full_ms):
            return candidate.content_hash(), screened, None
    evaluation = gate_services.evaluation_run(task_name=run.task.name, candidate=row,
                                              options=options, evaluator=evaluator)
    if evaluation.status == Evaluation.Status.RUNNING:
        return None
    if evaluation.verdict:
        measurement = measurement_from_verdict(evaluation.verdict,
                                               replayed=evaluation.source == Evaluation.Source.RECORDED)
    else:  # the evaluator failed: a state the search records, not a crash
        measurement = Measurement(status="error", message=evaluation.message or evaluation.status)
    if screened is not None:
        measurement = measurement.after_screen(screened)
    return candidate.content_hash(), measurement, evaluation


def _full_verdict_known(*, run: Run, row: Candidate, evaluator: Evaluator) -> bool:
    """A full-gate row for this kernel exists (finished, or under way elsewhere): using it
    costs nothing, so screening it first would only spend GPU time."""
    existing = gate_selectors.evaluation_for(candidate=row, task=run.task, gpu=evaluator.gpu())
    return existing is not None and not (existing.status == Evaluation.Status.FAILED and existing.retryable)


def _screen(*, task_name: str, candidate: HarnessCandidate, options: GateOptions,
            evaluator: Evaluator) -> Measurement | None:
    """What the screen saw, or None when the evaluator cannot screen here (no GPU, no
    screened recording): the full gate answers instead."""
    gate_services.declared_task_file_ensure(name=task_name)  # the screen looks it up by name too
    try:
        verdict = evaluator.screen(task_name, candidate, options)  # type: ignore[attr-defined]
    except Exception as error:
        # Our bug or the host's, as in ScreeningEvaluator: a state the node shows, logged
        # with its traceback, never a crashed step.
        logger.exception("the screen failed on candidate %s", candidate.content_hash())
        return Measurement(status="error", level="screen",
                           message=f"the screen failed: {type(error).__name__}: {error}")
    if verdict is None:
        return None
    recorded = getattr(evaluator, "source", "") == Evaluation.Source.RECORDED
    return measurement_from_verdict(verdict, replayed=recorded)
