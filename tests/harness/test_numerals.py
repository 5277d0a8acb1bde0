"""One rule for a number a person types (profiling/harness/numerals.py): ASCII digits, no
underscores, spaces, prefixes or other digits, in query parameters, JSON bodies and
every expression the harness reads (launch plans, shapes, references). An outside audit
found plan expressions taking `1_000` that the query parameters refuse."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.exceptions import ValidationError

from optiml_web import params
from profiling.harness import expr, numerals, tasks
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.gate import compile_checked
from profiling.harness.refexpr import Expression, ExpressionRefused

WRITTEN_OTHERWISE = ["1_000", "10_0 * n", "0x10", "0o7", "0b11", "1_0.5", " 12", "12 ", "\u00a012",
                     "\u0661\u0662", "n * \u0662", "\uff4e * 2", "cdiv(n, 1_024)"]
WRITTEN_SO = [("1000", 1000), ("n * 2", 20), ("n  *  2", 20), ("0.5 * n", 5.0), ("1e3", 1000.0),
              ("cdiv(n, 4)", 3), ("-3 + n", 7)]


@pytest.mark.parametrize("expression", WRITTEN_OTHERWISE)
def test_an_expression_with_a_number_written_otherwise_than_in_ascii_digits_is_refused(expression):
    with pytest.raises(expr.ExpressionError) as refused:
        expr.evaluate(expression, {"n": 10})

    message = str(refused.value)
    assert "ASCII" in message or "spaces" in message or "underscores" in message, message
    assert "Constant(" not in message and "invalid decimal literal" not in message


@pytest.mark.parametrize("expression", ["007", "n * 010"])
def test_a_whole_number_with_a_leading_zero_is_refused_without_pointing_at_an_octal_prefix(expression):
    with pytest.raises(expr.ExpressionError, match="does not begin with 0") as refused:
        expr.evaluate(expression, {"n": 10})

    assert "0o" not in str(refused.value)


@pytest.mark.parametrize(("expression", "value"), WRITTEN_SO)
def test_an_expression_in_ascii_digits_and_names_is_evaluated(expression, value):
    assert expr.evaluate(expression, {"n": 10}) == value


@pytest.mark.parametrize("expression", WRITTEN_OTHERWISE)
def test_its_names_and_its_folding_refuse_it_alike(expression):
    with pytest.raises(expr.ExpressionError):
        expr.names_in(expression)
    with pytest.raises(expr.ExpressionError):
        expr.fold(expression, {})


def _relu_plan(**launch) -> tuple[tasks.Task, dict]:
    task = tasks.get("relu")
    plan = {**task.naive_plan, "launches": [{**task.naive_plan["launches"][0], **launch}]}
    return task, plan


@pytest.mark.parametrize("launch", [{"grid": ["1_000"]}, {"block": ["2_56"]}, {"shared_bytes": "0x100"},
                                    {"grid": [" 4"]}, {"block": ["\u0662\u0665\u0666"]}])
def test_a_launch_plan_with_such_a_number_is_refused_as_it_is_read(launch):
    task, plan = _relu_plan(**launch)

    with pytest.raises(CandidateError, match="ASCII|spaces|underscores"):
        Candidate.from_source_and_plan(task.naive_source, plan)


def test_the_gate_evaluates_a_plan_under_the_same_rule():
    # Built around the reader, as a stored or generated candidate could be: the gate's own
    # evaluation of the grid still refuses it, as a plan verdict in words.
    task, plan = _relu_plan()
    candidate = Candidate.from_source_and_plan(task.naive_source, plan)
    launch = dataclasses.replace(candidate.launches[0], grid=("cdiv(n, 2_56)",))
    candidate = dataclasses.replace(candidate, launches=(launch,))

    verdict = compile_checked(task, candidate, task.sizes)

    assert verdict.status == "rejected" and verdict.guard == "plan", verdict
    assert "underscores" in verdict.message


@pytest.mark.parametrize("source", ["x * 1_000", "x + 0x1", "x * \u0662", " x", "np.maximum(x, 0_0)"])
def test_a_reference_expression_follows_the_same_rule(source):
    with pytest.raises(ExpressionRefused, match="ASCII|spaces|underscores"):
        Expression(source, arrays={"x"}, sizes={"n"})


@pytest.mark.parametrize("text", ["1_000", " 5", "5 ", "+5", "0x10", "", "\u00b2", "\u0661\u0662", "1.0",
                                  "-", "007", "-07", "00"])
def test_a_whole_number_is_ascii_digits_alone(text):
    assert numerals.whole_number_problem(text, negative=True) is not None


def test_a_whole_number_may_be_negative_only_where_that_is_allowed():
    assert numerals.whole_number_problem("-12", negative=True) is None
    assert numerals.whole_number_problem("-12") is not None
    assert numerals.whole_number_problem("12") is None
    assert numerals.whole_number_problem("0") is None


def test_a_leading_zero_is_refused_in_the_words_an_expression_hears():
    assert numerals.whole_number_problem("007") == "one that does not begin with 0 (7, not 007)"
    with pytest.raises(params.ParameterError, match=r"does not begin with 0 \(7, not 007\)"):
        params.parse_int("007", "after")


def test_the_query_parameters_and_the_bodies_say_the_same_rule():
    with pytest.raises(params.ParameterError) as query:
        params.parse_int("1_000", "team")
    field = params.WholeNumberField(min_value=0)
    with pytest.raises(ValidationError) as body:
        field.run_validation("1_000")

    assert numerals.WHOLE_NUMBER_RULE in query.value.message
    assert numerals.WHOLE_NUMBER_RULE in str(body.value.detail[0])
