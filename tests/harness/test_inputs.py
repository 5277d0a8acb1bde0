"""Inputs and references kept on disk between candidates are the ones made fresh."""

import numpy as np

from profiling.harness import tasks
from profiling.harness.inputs import inputs_and_reference


def test_a_cached_entry_holds_exactly_what_a_fresh_computation_makes(tmp_path):
    task, sizes = tasks.get("layernorm"), {"M": 7, "N": 33}
    fresh_inputs, fresh_reference = inputs_and_reference(task, sizes, 42, "heavy_tailed", None)
    first = inputs_and_reference(task, sizes, 42, "heavy_tailed", str(tmp_path))
    again = inputs_and_reference(task, sizes, 42, "heavy_tailed", str(tmp_path))
    for (inputs, reference) in (first, again):
        assert inputs.keys() == fresh_inputs.keys() and reference.keys() == fresh_reference.keys()
        for name in inputs:
            np.testing.assert_array_equal(inputs[name], fresh_inputs[name])
        for name in reference:
            np.testing.assert_array_equal(reference[name], fresh_reference[name])
    assert len(list(tmp_path.iterdir())) == 1  # one entry, no leftover staging directories


def test_cached_arrays_are_read_only_so_nothing_can_alter_them(tmp_path):
    task = tasks.get("relu")
    inputs, reference = inputs_and_reference(task, {"n": 1000}, 1, "normal", str(tmp_path))
    assert not inputs["x"].flags.writeable and not reference["y"].flags.writeable


def test_other_seeds_and_distributions_get_their_own_entries(tmp_path):
    task = tasks.get("relu")
    a, _ = inputs_and_reference(task, {"n": 100}, 1, "normal", str(tmp_path))
    b, _ = inputs_and_reference(task, {"n": 100}, 2, "normal", str(tmp_path))
    c, _ = inputs_and_reference(task, {"n": 100}, 1, "heavy_tailed", str(tmp_path))
    assert not np.array_equal(a["x"], b["x"]) and not np.array_equal(a["x"], c["x"])
    assert len(list(tmp_path.iterdir())) == 3
