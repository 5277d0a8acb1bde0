"""How a run's step measures one candidate: the screen first, then the full gate.

The CLI's policy (search/engine/evaluators.py, ScreeningEvaluator; docs/gate.md "The screen"),
over the web path's rows. Until a run has a best (always a full-gate node), every
candidate gets the full gate. After that a candidate is screened in the evaluator's
long-lived GPU process; only one the screen finds more than PROMOTE_MARGIN faster than
the best gets the full gate, through profiling.services.evaluation_run (one Evaluation
per kernel, task, harness, GPU and gate settings), and its measurement keeps what the
screen saw in `screen`. A screened verdict is never an Evaluation row: those are the full
gate's, served as such to every later caller with the same settings. It lives in the
search state and the node's row.

The gate's seed is the run's own secret one (run_gate_seed), never the user's `seed`,
which steers only the search (SearchConfig.seed). What a measurement keeps of a verdict
(in the search state, the node's row, the export) is the verdict as users may see it:
without the seeds (profiling.serialization.verdict_for_users); the Evaluation row keeps
them for the operator.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from django.conf import settings

from profiling import selectors as gate_selectors
from profiling import services as gate_services
from profiling.evaluators import Evaluator, can_screen, evaluator_identity, options_from_dict
from profiling.harness.candidate import Candidate as HarnessCandidate
from profiling.harness.gate import GateOptions
from profiling.harness.seeds import gate_seed
from profiling.models import Candidate, Evaluation
from profiling.serialization import text_for_users, verdict_for_users
from search.engine.binaries import compiled_binary, gate_sizes
from search.engine.evaluators import measurement_from_verdict, promoted
from search.engine.types import Measurement
from search.models import Run

logger = logging.getLogger(__name__)

Measured = tuple[str, Measurement, Evaluation | None]  # (candidate hash, measurement, full gate's row)


def candidate_binary(*, run: Run, candidate: HarnessCandidate) -> str:
    """What the candidate compiles to, compiled here (a CPU is enough; nvcc's result is
    cached by content, so the GPU worker's gate finds it compiled) with every launch
    resolved at the task's sizes (search.engine.binaries). "" when it cannot be told: nvcc
    refused it, the policy did, or this host cannot compile. The gate then says why."""
    if not settings.OPTIML_COMPILE_AHEAD:
        return ""
    return compiled_binary(candidate, gate_sizes(gate_services.task_spec(name=run.task.name))) or ""


def screening_for(*, run: Run, evaluator: Evaluator) -> bool:
    """Whether this run's candidates may be screened by this evaluator."""
    return bool(settings.OPTIML_SCREEN and run.screen and can_screen(evaluator))


def run_gate_seed(*, run: Run) -> int:
    """The gate's base seed for every candidate of `run`: derived from the server's secret
    and the run's id, so nobody without the secret can know a run's inputs, and two runs
    (the same user seed or not) never share them. One per run, not per candidate, so the
    run's inputs are built once and kept for its next candidates (inputs.py; five 1 GB
    seeds cost up to 70 s to build)."""
    return gate_seed(gate_services.gate_secret(), "run", str(run.pk))


def run_gate_options(*, run: Run, screening: bool) -> GateOptions:
    """The run's gate options, with the run's secret gate seed. A screened run keeps its
    seeded inputs and references on this host, shared by the screen and the full gate (as
    the CLI's --workdir inputs/): each candidate then skips generating them, seconds per
    1 GB seed. `screening`: whether the run screens at all (screening_for), the root's
    full gate included: it builds the inputs first, and every later gate reads them (on
    the H200, relu's root spent ~51 s building inputs that the first promoted candidate
    then built again). One folder per run, since no other run has its seed: what a
    finished run leaves there (gigabytes) is never read again, and the folder says whose
    it is."""
    options = dataclasses.replace(options_from_dict(run.gate_options), seed=run_gate_seed(run=run))
    if screening and options.input_cache is None:
        folder = Path(settings.OPTIML_WORKDIR) / "inputs" / run.task.name / f"run-{run.pk}"
        options = dataclasses.replace(options, input_cache=str(folder))
    return options


def candidate_measure(*, run: Run, candidate: HarnessCandidate, options: GateOptions,
                      evaluator: Evaluator, best_full_ms: float | None) -> Measured | None:
    """Measure one candidate of `run`; None while another worker holds its full gate (it
    is told on a later step). `best_full_ms` is the run's best full-gate time, or None to
    skip the screen (no best yet, or screening off)."""
    row = gate_services.candidate_get_or_create(source=candidate.source, plan=candidate.plan_dict())
    screened = None
    if best_full_ms is not None and not _full_verdict_known(run=run, row=row, options=options,
                                                            evaluator=evaluator):
        screened = _screen(task_name=run.task.name, candidate=candidate, options=options, evaluator=evaluator)
        if screened is not None and not promoted(screened, best_full_ms):
            return candidate.content_hash(), screened, None
    evaluation = gate_services.evaluation_run(task_name=run.task.name, candidate=row,
                                              options=options, evaluator=evaluator)
    if evaluation.status == Evaluation.Status.RUNNING:
        return None
    if evaluation.verdict:
        measurement = measurement_from_verdict(verdict_for_users(evaluation.verdict),
                                               replayed=evaluation.source == Evaluation.Source.RECORDED)
    else:  # the evaluator failed: a state the search records, not a crash
        message = text_for_users(evaluation.message or evaluation.status)
        measurement = Measurement(status="error", message=message)
    if screened is not None:
        measurement = measurement.after_screen(screened)
    return candidate.content_hash(), measurement, evaluation


def _full_verdict_known(*, run: Run, row: Candidate, options: GateOptions, evaluator: Evaluator) -> bool:
    """A full-gate row for this kernel with the run's settings exists (finished, or under
    way elsewhere): using it costs nothing, so screening it first would only spend GPU time."""
    existing = gate_selectors.evaluation_for(candidate=row, task=run.task, gpu=evaluator.gpu(),
                                             settings_key=gate_selectors.settings_key_for(options),
                                             evaluator=evaluator_identity(evaluator))
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
    return measurement_from_verdict(verdict_for_users(verdict.to_dict()), replayed=recorded)
