"""Which checks the full gate may pass on the GPU (gpu_compare.py), decided without one:
the comparison on the GPU judges float32 outputs against the elementwise tolerance only,
when asked for, after the canaries and inputs were found intact; everything else goes
to the host's guards as before."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from profiling.harness import tasks
from profiling.harness.checks import CANARY_BYTE, GUARD_BYTES
from profiling.harness.gpu_compare import check_on_gpu, comparable, within_on_gpu


def session(task_name: str, *, on: bool = True, harness: object = object()):
    return SimpleNamespace(task=tasks.get(task_name), options={"compare_on_gpu": on},
                           harness_module=harness, add_seconds=lambda stage, started: None)


class Guarded:
    """A buffer whose canaries are intact, or overwritten on one side."""

    def __init__(self, spoilt: bool = False) -> None:
        self.spoilt = spoilt

    def guards(self):
        before = np.full(GUARD_BYTES, CANARY_BYTE, np.uint8)
        after = before.copy()
        if self.spoilt:
            after[0] = 0
        return before, after


def test_only_float32_outputs_under_the_tolerance_or_an_allowance_and_only_when_asked():
    assert comparable(session("relu"))
    assert comparable(session("softmax"))
    assert comparable(session("sgemm")), "an allowance is compared on the GPU too"
    assert not comparable(session("relu", on=False)), "off unless GateOptions.compare_on_gpu"
    assert not comparable(session("relu", harness=None)), "no harness module: no GPU comparison"
    assert not comparable(session("reduce_sum")), "a task's own comparison is the host's"
    assert not comparable(session("topk")), "a task's own comparison and integer outputs are the host's"


def test_a_check_with_changed_inputs_spoilt_canaries_or_another_task_goes_to_the_host():
    """Each returns None before anything would touch a GPU (there is none here)."""
    buffers = {"x": Guarded(), "y": Guarded()}
    assert check_on_gpu(session("relu"), buffers, False, {}) is None
    assert check_on_gpu(session("relu"), {"x": Guarded(), "y": Guarded(spoilt=True)}, True, {}) is None
    assert check_on_gpu(session("reduce_sum"), buffers, True, {}) is None
    assert check_on_gpu(session("relu", on=False), buffers, True, {}) is None
    # An allowance not kept with the reference is worked out on the host, from the inputs.
    assert within_on_gpu(session("sgemm"), {}, {}) is None
