"""The New session form's pre-flight (preflight.preflight): the gate's own CPU stage before
any run exists, each problem by its field and, for the compiler's, by the kernel's line."""

from __future__ import annotations

import shutil

import pytest

from profiling.harness import compile as compile_module
from profiling.harness import preflight as preflight_module
from profiling.harness import tasks
from profiling.harness.candidate import Candidate
from profiling.harness.preflight import Finding, Preflight, preflight

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def relu(source_change=lambda s: s, plan_change=lambda p: p) -> tuple:
    task = tasks.get("relu")
    plan = plan_change({**task.naive_plan, "launches": [dict(task.naive_plan["launches"][0])]})
    return task, Candidate.from_source_and_plan(source_change(task.naive_source), plan)


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path))


@needs_nvcc
def test_the_naive_kernel_compiles_and_has_nothing_to_report(fresh_cache):
    assert preflight(*relu()) == Preflight()


@needs_nvcc
def test_each_compile_error_is_reported_at_the_kernels_line(fresh_cache):
    def two_typos(source: str) -> str:
        return source.replace("fmaxf", "fmaxx").replace("blockIdx.x", "blockIdy.x", 1)

    task, candidate = relu(two_typos)
    result = preflight(task, candidate)

    assert not result.ok and result.not_compiled == ""
    assert {f.field for f in result.findings} == {"source"}
    lines = {f.line for f in result.findings}
    assert {line_of(candidate.source, "fmaxx"), line_of(candidate.source, "blockIdy")} <= lines
    assert any("fmaxx" in f.message for f in result.findings)


@needs_nvcc
def test_a_plan_that_launches_a_kernel_the_source_lacks_is_a_plan_finding(fresh_cache):
    def other_kernel(plan: dict) -> dict:
        plan["launches"][0]["kernel"] = "relu2"
        return plan

    result = preflight(*relu(plan_change=other_kernel))

    assert [f.field for f in result.findings] == ["plan"] and "'relu2'" in result.findings[0].message


@needs_nvcc
def test_a_file_include_is_refused_by_the_source_policy_at_its_line(fresh_cache):
    task, candidate = relu(lambda s: '#include "/etc/passwd"\n' + s)
    result = preflight(task, candidate)

    assert [(f.field, f.line) for f in result.findings] == [("source", 1)], result


def test_a_plan_no_gpu_can_launch_is_refused_before_anything_compiles(monkeypatch):
    def huge_block(plan: dict) -> dict:
        plan["launches"][0]["block"] = [2048, 1, 1]
        return plan

    monkeypatch.setattr(preflight_module, "cpu_stage", lambda *args: pytest.fail("compiled a refused plan"))
    result = preflight(*relu(plan_change=huge_block))

    assert result.findings == (Finding("plan", result.findings[0].message),)
    assert "block [2048, 1, 1]" in result.findings[0].message


def test_without_nvcc_it_says_it_could_not_compile_and_finds_nothing(fresh_cache, monkeypatch):
    which = shutil.which
    monkeypatch.setattr(compile_module.shutil, "which", lambda name: None if name == "nvcc" else which(name))

    result = preflight(*relu())

    assert result.ok and "nvcc is not installed" in result.not_compiled


def test_without_nvcc_a_plan_problem_is_still_found(fresh_cache, monkeypatch):
    which = shutil.which
    monkeypatch.setattr(compile_module.shutil, "which", lambda name: None if name == "nvcc" else which(name))

    result = preflight(*relu(plan_change=lambda plan: {**plan, "tunables": {"n": 4}}))

    assert [f.field for f in result.findings] == ["plan"]
    assert "tunables may not reuse" in result.findings[0].message
