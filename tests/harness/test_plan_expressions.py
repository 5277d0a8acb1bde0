"""Plan expressions come from users: every bad one is a `plan` verdict, never an exception."""

import contextlib

import pytest

from profiling.harness import expr, tasks
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import compile_checked

BAD = [
    "cdiv(n, 0)", "n // 0", "n % 0", "min()", "max(n)", "cdiv(n)", "floor()", "ceil(n, 2)",
    "1e308 * 10", "floor(1e308 * 10)", "2.0 ** 2000", "(-8) ** 0.5", "n / 0.0", "(" * 300 + "n" + ")" * 300,
    "+".join(["n"] * 5000),  # deep enough to exhaust the parser's stack: refused by its length first
]


@pytest.mark.parametrize("expression", BAD)
def test_a_bad_expression_is_an_expression_error_that_names_it(expression):
    with pytest.raises(expr.ExpressionError):
        expr.evaluate(expression, {"n": 10})


@pytest.mark.parametrize("expression", BAD)
def test_the_names_of_a_bad_expression_are_an_expression_error_too(expression):
    with contextlib.suppress(expr.ExpressionError):  # refused, or refused when evaluated (above)
        expr.names_in(expression)


@pytest.mark.parametrize("expression", BAD)
def test_a_bad_grid_expression_is_a_plan_verdict(expression):
    task = tasks.get("relu")
    plan = {**task.naive_plan, "launches": [
        {**task.naive_plan["launches"][0], "grid": [expression]}]}
    try:
        candidate = Candidate.from_source_and_plan(task.naive_source, plan)
    except CandidateError:
        return  # refused as it was read, with its field named: as good as a verdict
    verdict = compile_checked(task, candidate, task.sizes)
    assert verdict.status == "rejected" and verdict.guard == "plan", verdict.message


@pytest.mark.parametrize("dims", [{"grid": ["n - n"]}, {"block": [-32]}, {"grid": ["0", 1]}])
def test_a_grid_or_block_that_is_not_positive_at_some_size_is_a_plan_verdict(dims):
    task = tasks.get("relu")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0], **dims}]}
    verdict = compile_checked(task, Candidate.from_source_and_plan(task.naive_source, plan), task.sizes)
    assert verdict.status == "rejected" and verdict.guard == "plan", verdict.message
    assert "positive" in verdict.message


def test_good_functions_still_work():
    assert expr.evaluate("cdiv(n, 256) + min(n, 3, 7) + max(1, 2)", {"n": 1000}) == 4 + 3 + 2


def test_a_negative_scratch_buffer_is_a_plan_verdict():
    task = tasks.get("relu")
    plan = {**task.naive_plan, "scratch": [{"name": "tmp", "dtype": "float32", "count": "n - 2 * n"}]}
    verdict = compile_checked(task, Candidate.from_source_and_plan(task.naive_source, plan), task.sizes)
    assert verdict.status == "rejected" and verdict.guard == "plan", verdict.message


@pytest.mark.parametrize("scratch", [5, "tmp", {"name": "tmp"}])
def test_scratch_that_is_not_a_list_is_a_candidate_error(scratch):
    """(A plan with "scratch": 5 was a TypeError, a 500 at the API: issue 34's audit.)"""
    task = tasks.get("relu")
    with pytest.raises(CandidateError, match="'scratch' must be a list"):
        Candidate.from_source_and_plan(task.naive_source, {**task.naive_plan, "scratch": scratch})


def test_fold_puts_flags_in_and_leaves_the_launch_as_a_person_writes_it():
    from profiling.harness.expr import evaluate, fold

    written = "OPT_B * M + (1 - OPT_B) * cdiv(M, 128)"
    assert fold(written, {"OPT_B": 1}) == "M"
    assert fold(written, {"OPT_B": 0}) == "cdiv(M, 128)"
    assert fold("OPT_A * 4 * (BQ + 4 * OPT_P)", {"OPT_A": 1, "OPT_P": 0}) == "4 * BQ"
    assert fold("2 * (3 + 1)", {}) == 8 and fold(7, {}) == 7
    for m in (1, 127, 128, 129, 4096):  # the same value wherever both are defined
        for flag in (0, 1):
            assert evaluate(fold(written, {"OPT_B": flag}), {"M": m}) == \
                evaluate(written, {"OPT_B": flag, "M": m})
