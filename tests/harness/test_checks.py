"""The correctness guards on plain arrays: each one fires on its cheat and on nothing else."""

import numpy as np
import pytest

from profiling.harness.checks import (
    CANARY_BYTE,
    GUARD_BYTES,
    RunBuffers,
    check_canaries,
    check_input_unchanged,
    check_run,
    check_written,
    compare_values,
    poison_like,
)
from profiling.harness.spec import Tolerance

TOL = Tolerance(atol=1e-5, rtol=1e-5)


def clean_guards():
    return np.full(GUARD_BYTES, CANARY_BYTE, np.uint8), np.full(GUARD_BYTES, CANARY_BYTE, np.uint8)


def run_of(out, ref, inputs_after=None, guards=None):
    x = np.arange(ref.size, dtype=np.float32).reshape(ref.shape)
    return RunBuffers(
        inputs_before={"x": x},
        inputs_after={"x": inputs_after if inputs_after is not None else x.copy()},
        outputs={"y": out},
        reference={"y": ref},
        guards=guards or {"x": clean_guards(), "y": clean_guards()},
    )


def test_a_fully_written_correct_output_passes_every_guard():
    ref = np.linspace(-1, 1, 1000, dtype=np.float32)
    failure, max_abs, _ = check_run(run_of(ref.copy(), ref), lambda dtype: TOL, {})
    assert failure is None and max_abs == 0.0


def test_it_reports_elements_that_still_hold_the_poison():
    ref = np.ones(100, np.float32)
    out = poison_like(np.float32, 100)
    out[:60] = 1.0
    failure = check_written("y", out, ref)
    assert failure.guard == "output_unwritten" and "40 of 100" in failure.message


def test_poison_is_not_confused_with_a_computed_nan():
    ref = np.full(4, np.nan, np.float32)
    out = np.full(4, np.nan, np.float32)  # a computed quiet NaN is 0x7FC00000, not all-ones
    assert check_written("y", out, ref) is None


def test_an_int_output_whose_reference_is_minus_one_is_not_called_unwritten():
    ref = np.array([-1, 3], np.int32)
    assert check_written("i", ref.copy(), ref) is None
    out = poison_like(np.int32, 2)
    out[0] = -1
    assert check_written("i", out, ref).guard == "output_unwritten"


def test_it_catches_a_write_past_the_end_through_the_canary():
    before, after = clean_guards()
    after[:12] = 0
    failure = check_canaries("y", before, after)
    assert failure.guard == "out_of_bounds_write" and "after" in failure.message


def test_it_catches_a_write_before_the_start_through_the_canary():
    before, after = clean_guards()
    before[-4:] = 7
    assert check_canaries("y", before, after).guard == "out_of_bounds_write"


def test_it_catches_a_mutated_input_bit_for_bit():
    x = np.zeros(10, np.float32)
    mutated = x.copy()
    mutated[3] = -0.0  # same value, different bits: still a write
    failure = check_input_unchanged("x", x, mutated)
    assert failure.guard == "input_mutated" and "(3,)" in failure.message


def test_nan_passes_only_where_the_reference_has_nan():
    ref = np.array([1.0, np.nan, np.inf], np.float32)
    assert compare_values("y", ref.copy(), ref, TOL)[0] is None
    stray = np.array([np.nan, np.nan, np.inf], np.float32)
    assert compare_values("y", stray, ref, TOL)[0].guard == "nonfinite"
    missing = np.array([1.0, 0.0, np.inf], np.float32)
    assert compare_values("y", missing, ref, TOL)[0].guard == "wrong_values"
    wrong_sign = np.array([1.0, np.nan, -np.inf], np.float32)
    assert compare_values("y", wrong_sign, ref, TOL)[0].guard == "wrong_values"


def test_values_outside_tolerance_are_wrong_and_the_error_is_reported():
    ref = np.ones(1 << 23, np.float32)  # two chunks, so the threaded path runs
    out = ref.copy()
    out[-1] = 1.5
    failure, max_abs, _ = compare_values("y", out, ref, TOL)
    assert failure.guard == "wrong_values" and max_abs == pytest.approx(0.5)
    assert "1 of" in failure.message


def test_zeros_are_caught_as_wrong_values():
    ref = np.abs(np.random.default_rng(0).standard_normal(1000)).astype(np.float32)
    failure, _, _ = check_run(run_of(np.zeros_like(ref), ref), lambda dtype: TOL, {})
    assert failure.guard == "wrong_values"


def test_shape_and_dtype_are_checked():
    ref = np.ones((4, 4), np.float32)
    assert compare_values("y", np.ones(16, np.float32), ref, TOL)[0].guard == "wrong_values"
    assert compare_values("y", np.ones((4, 4), np.float64), ref, TOL)[0].guard == "wrong_values"


def test_memory_guards_fire_before_value_checks():
    ref = np.ones(8, np.float32)
    before, after = clean_guards()
    after[0] = 0
    buffers = run_of(np.zeros(8, np.float32), ref, guards={"y": (before, after)})
    assert check_run(buffers, lambda dtype: TOL, {})[0].guard == "out_of_bounds_write"


def test_a_custom_compare_decides_when_the_task_has_one():
    from profiling.harness.spec import Mismatch

    ref = np.ones(8, np.float32)
    calls = []

    def compare(outputs, expected, inputs, sizes):
        calls.append(sizes)
        return Mismatch(output="y", message="custom says no")

    failure, _, _ = check_run(run_of(ref.copy(), ref), lambda dtype: TOL, {"n": 8}, compare)
    assert failure.guard == "wrong_values" and "custom says no" in failure.message
    assert calls == [{"n": 8}]


def test_a_custom_compare_reads_the_inputs_it_is_given_even_when_none_were_checked_here():
    """The screen checks unchanged inputs on the GPU, so inputs_before is empty, and the
    task's comparison still needs them (reduce_sum bounds its error by sum |x|)."""
    import dataclasses

    ref = np.ones(8, np.float32)
    x = np.arange(8, dtype=np.float32)
    seen = []

    def compare(outputs, expected, inputs, sizes):
        seen.append(sorted(inputs))
        return None

    buffers = dataclasses.replace(run_of(ref.copy(), ref), inputs_before={}, inputs_after={},
                                  compare_inputs={"x": x})
    assert check_run(buffers, lambda dtype: TOL, {"n": 8}, compare)[0] is None
    assert seen == [["x"]]


# --- integer outputs (an argmax's indices) ----------------------------------------------------


def test_integer_outputs_are_compared_exactly_without_numpy_refusing_their_division():
    ref = np.array([3, 0, 7, 2**40], dtype=np.int64)
    assert compare_values("idx", ref.copy(), ref, Tolerance(atol=0.0, rtol=0.0))[0] is None
    wrong = ref.copy()
    wrong[1] = 1
    failure, max_abs, _ = compare_values("idx", wrong, ref, Tolerance(atol=0.0, rtol=0.0))
    assert failure is not None and failure.guard == "wrong_values" and max_abs == 1.0
    as_int32 = np.array([5, -1, 9], dtype=np.int32)
    assert compare_values("i", as_int32.copy(), as_int32, Tolerance(atol=0.0, rtol=0.0))[0] is None


def test_integers_that_float64_cannot_tell_apart_are_still_caught():
    ref = np.array([2**60], dtype=np.int64)
    off_by_one = ref + 1  # the same float64
    failure, _, _ = compare_values("big", off_by_one, ref, Tolerance(atol=0.0, rtol=0.0))
    assert failure is not None and failure.guard == "wrong_values"


def test_a_change_is_found_in_any_slice_of_a_large_input_and_an_unwritten_element_in_any_slice_of_an_output():
    """Large arrays are compared in slices on several threads (checks._map_chunks): the
    last slice counts as much as the first."""
    from profiling.harness import checks

    n = 2 * checks._CHUNK + 5  # three slices, the last a short one
    x = np.arange(n, dtype=np.float32)
    assert check_input_unchanged("x", x, x.copy()) is None
    for where in (0, checks._CHUNK + 1, n - 1):
        mutated = x.copy()
        mutated[where] += 1
        failure = check_input_unchanged("x", x, mutated)
        assert failure.guard == "input_mutated" and f"({where},)" in failure.message
        out = x.copy()
        out.view(np.uint32)[where] = 0xFFFFFFFF
        failure = check_written("y", out, x)
        assert failure.guard == "output_unwritten" and f"({where},)" in failure.message
    assert check_input_unchanged("x", x, x[:-1].copy()).guard == "input_mutated"


def test_the_same_array_as_before_and_after_is_unchanged_without_reading_it():
    """The worker passes one array as both when it has shown the input unchanged already;
    an array that would raise if read proves nothing is read."""
    class Unreadable(np.ndarray):
        def __array_finalize__(self, obj):
            pass

        def reshape(self, *args, **kwargs):
            raise AssertionError("read")

        def view(self, *args, **kwargs):
            raise AssertionError("read")

    x = np.zeros(8, np.float32).view(Unreadable)
    assert check_input_unchanged("x", x, x) is None
