"""Guard regions around every buffer, checked without a GPU: where a buffer lies in its
reserved range, what a fault is named, what the verdict says about the buffers, and that
the ctypes structures handed to the driver are laid out as cuda.h lays them out."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from profiling.harness import tasks, vmm
from profiling.harness.checks import CANARY_BYTE, check_canaries
from profiling.harness.faults import CONTEXT_LOST, ILLEGAL_ADDRESS, OUT_OF_BOUNDS_ACCESS, guard_for_fault
from profiling.harness.gate import GateOptions, worker_options
from profiling.harness.guard_layout import (
    CANARY_BYTES,
    GUARD_FLOOR_BYTES,
    USER_ALIGNMENT,
    footprint,
    guarded_layout,
)
from profiling.harness.verdict import GUARDS
from profiling.harness.worker import Session

MiB = 1 << 20
H100_GRANULARITY = 2 * MiB  # cuMemGetAllocationGranularity(MINIMUM) on Hopper
SIZES = [0, 1, 4, 255, 256, 1000, 4096, 2 * MiB - 8192, 2 * MiB, 4 << 24, (1 << 28) * 4 + 12]


@pytest.mark.parametrize("nbytes", SIZES)
def test_a_buffer_sits_at_the_end_of_its_mapping_between_canaries_and_unmapped_guards(nbytes):
    layout = guarded_layout(nbytes, H100_GRANULARITY)

    assert layout.mapped_bytes % H100_GRANULARITY == 0 and layout.guard_bytes % H100_GRANULARITY == 0
    assert layout.reserved_bytes == layout.mapped_bytes + 2 * layout.guard_bytes
    # The pointer a kernel gets is as aligned as cudaMalloc's, wherever the mapping starts
    assert (layout.mapped_offset + layout.user_offset) % USER_ALIGNMENT == 0
    before, after = layout.canary_before, layout.canary_after
    assert before == (0, layout.user_offset) and before[1] >= CANARY_BYTES
    assert after[0] == layout.user_offset + nbytes
    assert CANARY_BYTES <= after[1] < CANARY_BYTES + USER_ALIGNMENT
    assert before[1] + nbytes + after[1] == layout.mapped_bytes
    # Less than one granule of canary before: the smallest mapping that holds it all
    assert layout.mapped_bytes - H100_GRANULARITY < CANARY_BYTES + nbytes + after[1]


@pytest.mark.parametrize("nbytes", SIZES)
def test_the_guards_are_at_least_the_floor_and_at_least_the_mapping(nbytes):
    layout = guarded_layout(nbytes, H100_GRANULARITY)

    assert layout.guard_bytes >= GUARD_FLOOR_BYTES and layout.guard_bytes >= layout.mapped_bytes
    assert layout.guard_bytes < max(GUARD_FLOOR_BYTES, layout.mapped_bytes) + H100_GRANULARITY


def test_the_far_write_of_issue_33_lands_in_a_guard_and_a_near_one_on_a_canary():
    n = 1 << 24  # the timed size where the relu writes one float 1 MiB past its output
    layout = guarded_layout(4 * n, H100_GRANULARITY)

    far = 1 * MiB  # bytes past the end of the output
    assert far in layout.faults_past_end()
    assert 0 not in layout.faults_past_end() and CANARY_BYTES - 1 not in layout.faults_past_end()
    assert layout.canary_after[1] in layout.faults_past_end()  # the first byte after the mapping
    # An index off by a whole buffer length faults on either side
    assert 4 * n in layout.faults_past_end() and 4 * n in layout.faults_before_start()
    assert 1 not in layout.faults_before_start()  # the byte before the start: a canary
    assert layout.user_offset + 1 in layout.faults_before_start()


def test_an_odd_granularity_or_canary_is_refused():
    with pytest.raises(ValueError):
        guarded_layout(1024, 3000)
    with pytest.raises(ValueError):
        guarded_layout(1024, H100_GRANULARITY, canary_bytes=100)
    with pytest.raises(ValueError):
        guarded_layout(-1, H100_GRANULARITY)


def test_memory_needed_counts_whole_granules_when_guarded_and_two_canaries_when_not():
    assert footprint(1000, H100_GRANULARITY) == H100_GRANULARITY
    assert footprint(2 * MiB, H100_GRANULARITY) == 4 * MiB  # the canaries need a second granule
    assert footprint(1000, None) == 1000 + 2 * CANARY_BYTES


def test_a_write_anywhere_in_the_mapping_before_the_buffer_is_named_with_its_distance():
    layout = guarded_layout(1000, H100_GRANULARITY)
    before = np.full(layout.canary_before[1], CANARY_BYTE, np.uint8)
    after = np.full(layout.canary_after[1], CANARY_BYTE, np.uint8)
    before[-100_000] = 0  # 100 000 bytes before the start: past the old 4 KiB canary

    failure = check_canaries("y", before, after)

    assert failure is not None and failure.guard == "out_of_bounds_write"
    assert "up to 100000 bytes past its start" in failure.message
    after[300] = 1
    assert "up to 301 bytes past its end" in check_canaries("y", np.full(8, CANARY_BYTE, np.uint8),
                                                            after).message


def test_an_illegal_address_is_an_out_of_bounds_access_and_names_the_guard_regions():
    guard, message = guard_for_fault(ILLEGAL_ADDRESS, "cuCtxSynchronize failed: ...", guard_regions=True)

    assert guard == OUT_OF_BOUNDS_ACCESS and guard in GUARDS
    assert "guard region" in message and "context is lost" in message


def test_pycudas_text_alone_is_enough_to_name_the_fault():
    text = "cuCtxSynchronize failed: an illegal memory access was encountered"
    guard, message = guard_for_fault(None, text, guard_regions=False)

    assert guard == OUT_OF_BOUNDS_ACCESS and "canaries only" in message and text in message


def test_other_faults_are_not_named_out_of_bounds():
    assert guard_for_fault(719, "cuCtxSynchronize failed: unspecified launch failure", True) is None
    assert guard_for_fault(0, "cuModuleGetFunction failed: named symbol not found", True) is None
    assert ILLEGAL_ADDRESS in CONTEXT_LOST and 2 not in CONTEXT_LOST  # out of memory is not sticky


# -- what the worker does with them ------------------------------------------------------------

def session(options: dict | None = None, *, ranges=None) -> Session:
    relu = tasks.get("relu")
    request = {"task": "relu", "candidate": {"source": relu.naive_source, **relu.naive_plan},
               "options": {"levels": ["L0", "L1"], "seeds": 1, **(options or {})}}
    gpu = SimpleNamespace(ranges=ranges, buffers_evidence="guard regions: (the device's words)",
                          free_bytes=lambda: 1 << 40)
    return Session(request, channel=None, gpu=gpu)


def test_checked_and_timed_runs_get_the_devices_guarded_ranges_and_the_verdict_says_so():
    ranges = SimpleNamespace(granularity=H100_GRANULARITY)
    s = session(ranges=ranges)

    assert s.choose_buffers() == "guard regions: (the device's words)"
    assert s.guard_regions is ranges  # Session.allocate hands it to every buffer


def test_a_device_without_guarded_ranges_says_why_in_the_verdict():
    s = session(ranges=None)
    s.gpu.buffers_evidence = "canaries only: ... (the device reports ... = 0)"

    assert s.choose_buffers().startswith("canaries only") and s.guard_regions is None


def test_guard_regions_turned_off_by_the_request_are_reported_and_not_standard():
    s = session({"guard_regions": False}, ranges=SimpleNamespace(granularity=H100_GRANULARITY))

    assert "turned off by the request" in s.choose_buffers() and s.guard_regions is None
    off = GateOptions(guard_regions=False)
    assert worker_options(off, seed=None)["guard_regions"] is False
    assert not off.is_standard() and GateOptions().is_standard()
    assert "guard_regions" not in GateOptions().identity()  # stored verdicts' keys unchanged


def test_sanitizer_runs_keep_exact_size_allocations():
    s = session({"mode": "sanitize"}, ranges=SimpleNamespace(granularity=H100_GRANULARITY))

    assert s.choose_buffers().startswith("exact-size") and s.guard_regions is None


def test_memory_is_refused_by_what_guarded_buffers_take():
    s = session(ranges=SimpleNamespace(granularity=H100_GRANULARITY))
    s.choose_buffers()
    sizes = {"n": 1000}  # two buffers of 4000 bytes: two whole granules
    s.gpu.free_bytes = lambda: 2 * H100_GRANULARITY
    s.require_memory(sizes)
    s.gpu.free_bytes = lambda: 2 * H100_GRANULARITY - 1
    with pytest.raises(Exception, match="device memory"):
        s.require_memory(sizes)


# -- the structures handed to libcuda ------------------------------------------------------------

CUDA_H = Path("/usr/local/cuda/include/cuda.h")
LAYOUT_PROGRAM = r"""
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu\n", sizeof(CUmemAllocationProp),
           offsetof(CUmemAllocationProp, location), offsetof(CUmemAllocationProp, win32HandleMetaData),
           offsetof(CUmemAllocationProp, allocFlags), sizeof(CUmemAccessDesc),
           offsetof(CUmemAccessDesc, flags));
    printf("%d %d %d %d %d %d\n", CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
           CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_HANDLE_TYPE_NONE,
           CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    printf("%d %d\n", CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_OUT_OF_MEMORY);
    return 0;
}
"""


def cuda_header() -> Path | None:
    for candidate in (CUDA_H, *sorted(Path("/usr/local").glob("cuda-*/include/cuda.h"))):
        if candidate.exists():
            return candidate
    return None


@pytest.mark.skipif(shutil.which("gcc") is None or cuda_header() is None, reason="needs gcc and cuda.h")
def test_the_ctypes_structures_and_constants_match_cuda_h(tmp_path):
    source = tmp_path / "layout.c"
    source.write_text(LAYOUT_PROGRAM)
    subprocess.run(["gcc", f"-I{cuda_header().parent}", str(source), "-o", str(tmp_path / "layout")],
                   check=True, capture_output=True, timeout=60)
    printed = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout
    structures, constants, errors = (list(map(int, line.split())) for line in printed.splitlines())

    prop, access = vmm._AllocationProp, vmm._AccessDesc
    assert structures == [ctypes.sizeof(prop), prop.location.offset, prop.win32HandleMetaData.offset,
                          prop.allocFlags.offset, ctypes.sizeof(access), access.flags.offset]
    assert constants == [vmm.ATTRIBUTE_VMM_SUPPORTED, vmm.ALLOCATION_TYPE_PINNED, vmm.LOCATION_TYPE_DEVICE,
                         vmm.HANDLE_TYPE_NONE, vmm.GRANULARITY_MINIMUM, vmm.ACCESS_READWRITE]
    assert errors == [ILLEGAL_ADDRESS, 2]


def test_without_a_driver_the_reason_is_given_not_raised(monkeypatch):
    def no_driver():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(vmm, "_driver", no_driver)
    assert vmm.unavailable() == ("libcuda.so.1 could not be loaded: "
                                 "libcuda.so.1: cannot open shared object file")


class FakeDriver:
    """libcuda's VMM calls, recorded; `fail` maps a call's name to the CUresult it returns,
    `vmm_supported` is what the device attribute says."""

    def __init__(self, fail: dict[str, int] | None = None, vmm_supported: int = 1):
        self.fail, self.calls, self.vmm_supported = fail or {}, [], vmm_supported

    def __getattr__(self, name: str):
        def call(*args):
            if name == "cuGetErrorName":  # what a DriverError's message asks: not a VMM step
                return 1
            self.calls.append(name)
            if name == "cuMemAddressReserve":
                args[0]._obj.value = 0x7F00_0000_0000
            if name == "cuMemCreate":
                args[0]._obj.value = 42
            if name == "cuDeviceGetAttribute":
                args[0]._obj.value = self.vmm_supported
            if name == "cuMemGetAllocationGranularity":
                args[0]._obj.value = H100_GRANULARITY
            return self.fail.get(name, 0)
        return call


def test_a_range_is_reserved_backed_mapped_and_opened_to_the_device_in_that_order(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(vmm, "_driver", lambda: driver)
    layout = guarded_layout(1000, H100_GRANULARITY)

    mapping = vmm.map_in_reservation(layout.reserved_bytes, layout.mapped_offset, layout.mapped_bytes, 0,
                                     H100_GRANULARITY)

    assert driver.calls == ["cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess"]
    assert mapping.mapped == 0x7F00_0000_0000 + layout.guard_bytes and mapping.handle == 42
    mapping.release()
    assert driver.calls[4:] == ["cuMemUnmap", "cuMemRelease", "cuMemAddressFree"]


def test_a_failed_map_gives_back_the_memory_and_the_range_and_raises_the_drivers_error(monkeypatch):
    driver = FakeDriver({"cuMemMap": 2})
    monkeypatch.setattr(vmm, "_driver", lambda: driver)

    with pytest.raises(vmm.DriverError) as raised:
        vmm.map_in_reservation(3 * H100_GRANULARITY, H100_GRANULARITY, H100_GRANULARITY, 0, H100_GRANULARITY)

    assert raised.value.code == 2 and raised.value.call == "cuMemMap"
    assert driver.calls[3:] == ["cuMemRelease", "cuMemAddressFree"]


def test_releasing_after_a_fault_is_quiet_but_any_other_failure_is_raised(monkeypatch):
    lost = FakeDriver({"cuMemUnmap": ILLEGAL_ADDRESS, "cuMemRelease": ILLEGAL_ADDRESS,
                       "cuMemAddressFree": ILLEGAL_ADDRESS})
    monkeypatch.setattr(vmm, "_driver", lambda: lost)
    vmm.Mapping(1 << 40, 3 * MiB, (1 << 40) + MiB, MiB, 7).release()
    assert lost.calls[-3:] == ["cuMemUnmap", "cuMemRelease", "cuMemAddressFree"]  # every step tried

    broken = FakeDriver({"cuMemRelease": 1})  # CUDA_ERROR_INVALID_VALUE: our bug, not the kernel's
    monkeypatch.setattr(vmm, "_driver", lambda: broken)
    with pytest.raises(vmm.DriverError):
        vmm.Mapping(1 << 40, 3 * MiB, (1 << 40) + MiB, MiB, 7).release()
    assert broken.calls[-3:] == ["cuMemUnmap", "cuMemRelease", "cuMemAddressFree"]


# -- the worker's classification of errors, with pycuda's exception classes stood in for -----------------

@pytest.fixture
def fake_pycuda(monkeypatch):
    """A stand-in pycuda.driver (its exception classes as pycuda declares them: every one
    a subclass of Error); the harness modules imported under it are dropped afterwards."""
    import sys
    import types

    driver = types.ModuleType("pycuda.driver")
    driver.Error = type("Error", (Exception,), {})
    for name in ("LogicError", "LaunchError", "RuntimeError"):
        setattr(driver, name, type(name, (driver.Error,), {}))
    driver.MemoryError = type("MemoryError", (driver.Error, MemoryError), {})
    package = types.ModuleType("pycuda")
    package.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    yield driver
    for name in ("profiling.harness.device", "profiling.harness.buffers"):
        sys.modules.pop(name, None)


@pytest.fixture
def classify(fake_pycuda, monkeypatch):
    """faults.classify_exception, with the context's sticky error set by the test."""
    from profiling.harness.faults import classify_exception

    sticky = {"code": 0}
    monkeypatch.setattr(vmm, "context_error", lambda: sticky["code"])
    return SimpleNamespace(run=classify_exception, cuda=fake_pycuda, sticky=sticky)


def test_a_fault_out_of_a_candidates_run_is_named_out_of_bounds_access(classify):
    classify.sticky["code"] = ILLEGAL_ADDRESS
    error = classify.cuda.LogicError("cuCtxSynchronize failed: an illegal memory access was encountered")

    guard, message = classify.run(error, guard_regions=True)

    assert guard == OUT_OF_BOUNDS_ACCESS and "guard regions" in message


def test_the_sticky_code_names_the_fault_even_when_the_text_does_not(classify):
    classify.sticky["code"] = ILLEGAL_ADDRESS
    guard, _ = classify.run(classify.cuda.Error("cuMemcpyDtoH failed: (text of another driver)"),
                            guard_regions=True)
    assert guard == OUT_OF_BOUNDS_ACCESS


def test_a_trap_stays_a_launch_failure_and_the_drivers_errors_are_resources_or_ours(classify):
    classify.sticky["code"] = 719
    assert classify.run(classify.cuda.LaunchError("unspecified launch failure"))[0] == "launch"
    classify.sticky["code"] = 0
    assert classify.run(vmm.DriverError("cuMemCreate", 2))[0] == "resources"
    assert classify.run(vmm.DriverError("cuMemMap", 1))[0] == "internal"
    assert classify.run(vmm.DriverError("cuMemUnmap", ILLEGAL_ADDRESS))[0] == OUT_OF_BOUNDS_ACCESS


def test_the_printed_verdict_says_how_the_buffers_were_guarded():
    from profiling.harness.report import render
    from profiling.harness.verdict import CheckRecord, Environment, Verdict

    record = CheckRecord(level="L0", sizes={"n": 1000}, seed=1, distribution="normal", passed=True)
    verdict = Verdict(task="relu", candidate_hash="ab" * 32, status="passed", correctness=[record],
                      environment=Environment(buffers="canaries only: ... (the device reports ... = 0)"))

    assert "  buffers: canaries only: ... (the device reports ... = 0)" in render(verdict, tasks.get("relu"))


@pytest.mark.parametrize(("driver", "evidence"), [
    (FakeDriver(), "guard regions: every input, output and scratch buffer in its own reserved address range"),
    (FakeDriver(vmm_supported=0), "canaries only: 4 KiB on each side of every buffer in one cuMemAlloc, "
                                  "no guard regions (the device reports CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY"),
    (FakeDriver({"cuMemAddressReserve": 2}), "canaries only: 4 KiB on each side of every buffer in one "
                                             "cuMemAlloc, no guard regions (a first guarded range failed: "
                                             "cuMemAddressReserve failed"),
], ids=["supported", "unsupported", "reserve fails"])
def test_a_gpu_without_working_guarded_ranges_gets_canaries_and_says_why(fake_pycuda, monkeypatch, driver,
                                                                          evidence):
    from profiling.harness.buffers import GuardedRanges

    monkeypatch.setattr(vmm, "_driver", lambda: driver)
    ranges, said = GuardedRanges.open()

    assert said.startswith(evidence), said
    assert (ranges is not None) == said.startswith("guard regions")
    if ranges is not None:
        assert ranges.granularity == H100_GRANULARITY
        # the probe range, given back
        assert driver.calls[-3:] == ["cuMemUnmap", "cuMemRelease", "cuMemAddressFree"]
