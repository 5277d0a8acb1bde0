"""Untrusted source cannot make nvcc read and echo a file, exhaust the host, or see secrets.

Each attack runs in both confinements the host offers (bwrap, and the rlimits fallback),
and the property checked is the one that matters: the secret's text appears nowhere in
the verdict's JSON, whichever guard refused it.
"""

import json
import os
import shutil
import time
import uuid

import pytest

from profiling.harness import compile as compile_module
from profiling.harness import confine, policy, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.compile import compile_candidate
from profiling.harness.gate import compile_checked

pytestmark = pytest.mark.nvcc
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
MODES = [
    pytest.param(confine.BWRAP, marks=pytest.mark.skipif(
        not confine.bwrap_usable()[0], reason=f"bwrap unusable: {confine.bwrap_usable()[1]}")),
    confine.RLIMITS,
]
RELU = tasks.get("relu")
README = confine.PROJECT_ROOT / "README.md"
README_SECRET = "finds faster CUDA kernels and shows why they are faster"  # README's first line


@pytest.fixture
def secrets(tmp_path):
    """A secret outside the project (tmp) and one inside its tree (under the ignored var/)."""
    token = f"SECRET{uuid.uuid4().hex}"
    outside = tmp_path / "outside-secret.txt"
    outside.write_text(f"{token}_OUT first line\nsecond line\n")
    inside = confine.PROJECT_ROOT / "var" / f"confinement-test-{uuid.uuid4().hex}.txt"
    inside.parent.mkdir(exist_ok=True)
    inside.write_text(f"{token}_IN first line\n")
    yield {"outside": str(outside), "inside": str(inside), "readme": str(README), "token": token}
    inside.unlink()


@pytest.fixture(params=MODES)
def mode(request, monkeypatch, tmp_path):
    monkeypatch.setenv(confine.SANDBOX_VARIABLE, request.param)
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path / "cache"))
    return request.param


def spellings(path: str) -> dict[str, str]:
    return {
        "plain": f'#include "{path}"\n',
        "brackets": f"#include <{path}>\n",
        "comment between": f'# /**/ include /* x */ "{path}"\n',
        "spliced": f'#\\\ninclude "{path}"\n',
        "spliced after spaces": f'#inc\\   \nlude "{path}"\n',
        "digraph": f'%:include "{path}"\n',
        "digraph spliced": f'%\\\n:include "{path}"\n',
        "trigraph": f'??=include "{path}"\n',
        "macro name": f'#define F "{path}"\n#include F\n',
        "pasted macro": f'#define S(x) #x\n#define T(x) S(x)\n#include T({path})\n',
        "expands to a directive": f'#define H #\nH include "{path}"\n',
        "expands to a digraph directive": f'#define H %:\nH include "{path}"\n',
        "device pass only": f'#ifdef __CUDA_ARCH__\n#include "{path}"\n#endif\n',
        "include_next": f'#include_next "{path}"\n',
        "import": f'#import "{path}"\n',
        "dot dot": f'#include "/usr/include/../..{path}"\n',
        "proc detour": f'#include "/proc/self/root{path}"\n',
        "block comment first": f'/* a\n b */ #include "{path}"\n',
    }


def attack(prefix: str) -> Candidate:
    return Candidate.from_source_and_plan(prefix + RELU.naive_source, RELU.naive_plan)


def verdict_json(candidate: Candidate) -> tuple[dict, str]:
    verdict = compile_checked(RELU, candidate, RELU.sizes)
    data = verdict.to_dict() if hasattr(verdict, "to_dict") else {"compile": verdict.__dict__}
    return data, json.dumps(data, default=str)


def assert_secret_absent(text: str, secrets: dict) -> None:
    assert secrets["token"] not in text
    assert README_SECRET not in text
    assert "root:x:0:0" not in text  # /etc/passwd's first line


@needs_nvcc
@pytest.mark.parametrize("target", ["outside", "inside", "readme", "/etc/passwd"])
def test_every_spelling_of_an_include_of_a_foreign_file_is_refused_and_nothing_of_it_is_shown(
        mode, secrets, target):
    path = secrets.get(target, target)
    for name, prefix in spellings(path).items():
        data, text = verdict_json(attack(prefix))
        assert data["status"] == "rejected", (name, data["message"])
        assert data["guard"] == "source_policy", (name, data["message"])
        assert_secret_absent(text, secrets)


@needs_nvcc
def test_a_foreign_include_followed_by_an_error_is_refused_without_its_text(mode, secrets):
    data, text = verdict_json(attack(f'#include "{secrets["inside"]}"\n#error {secrets["token"][:6]}\n'))
    assert data["status"] == "rejected" and data["guard"] in ("source_policy", "compile")
    assert_secret_absent(text, secrets)


@needs_nvcc
def test_an_include_of_dev_zero_ends_in_bounded_time_with_a_clean_rejection(mode):
    started = time.monotonic()
    data, _ = verdict_json(attack('#include "/dev/zero"\n'))
    assert time.monotonic() - started < 60
    assert data["status"] == "rejected" and data["guard"] in ("source_policy", "compile")
    if data["guard"] == "compile":  # the rlimits host: /dev/zero exists and is read until the limit
        assert "address space" in data["message"]
    else:
        assert "'/dev/zero'" in data["message"]


@needs_nvcc
@pytest.mark.parametrize("device", ["/dev/urandom", "/dev/stdin", "/proc/self/environ"])
def test_includes_of_devices_and_proc_files_are_refused(mode, monkeypatch, device):
    monkeypatch.setenv("OPTIML_SECRET_KEY", "hunter2-secret-key")
    data, text = verdict_json(attack(f'#include "{device}"\n'))
    assert data["status"] == "rejected" and data["guard"] in ("source_policy", "compile")
    assert "hunter2" not in text


@needs_nvcc
def test_the_sandbox_alone_keeps_a_file_out_when_the_include_checks_are_bypassed(
        monkeypatch, secrets, tmp_path):
    """bwrap without the include decision: the file is not in its view, so nvcc cannot read it."""
    if not confine.bwrap_usable()[0]:
        pytest.skip("bwrap unusable here")
    monkeypatch.setenv(confine.SANDBOX_VARIABLE, confine.BWRAP)
    _bypass_include_checks(monkeypatch)
    for target in ("outside", "inside", "readme"):
        for name, prefix in spellings(secrets[target]).items():
            report = compile_candidate(attack(prefix), cache_dir=tmp_path / target / name.replace(" ", "-"))
            assert not report.ok, name
            assert_secret_absent(json.dumps(report.__dict__, default=str), secrets)


@needs_nvcc
def test_the_log_filter_alone_keeps_a_file_out_when_the_include_checks_are_bypassed(
        monkeypatch, secrets, tmp_path):
    """No sandbox and no include decision: nvcc reads the file, and what it says about it is
    dropped, because only kernel.cu's own lines are kept."""
    monkeypatch.setenv(confine.SANDBOX_VARIABLE, confine.RLIMITS)
    _bypass_include_checks(monkeypatch)
    report = compile_candidate(attack(f'#include "{secrets["outside"]}"\n'), cache_dir=tmp_path)
    assert not report.ok and "other files left out" in report.log
    assert_secret_absent(json.dumps(report.__dict__, default=str), secrets)


def _bypass_include_checks(monkeypatch):
    monkeypatch.setattr(compile_module, "check_source", lambda source: None)
    monkeypatch.setattr(compile_module, "check_dependencies", lambda *args: None)
    monkeypatch.setattr(compile_module, "check_preprocessed", lambda text: None)


@needs_nvcc
def test_the_report_says_which_confinement_compiled_it(mode, tmp_path):
    report = compile_candidate(attack(""), cache_dir=tmp_path)
    assert report.ok and report.sandbox == mode


@needs_nvcc
def test_the_candidates_own_error_and_warning_texts_are_kept(mode, tmp_path):
    report = compile_candidate(attack("#warning my own warning\n"), cache_dir=tmp_path)
    assert report.ok and "kernel.cu(1): warning: #warning my own warning" in report.log
    report = compile_candidate(attack("#error my own words\n"), cache_dir=tmp_path)
    assert not report.ok and (report.errors[0].line, report.errors[0].message) == (1, "#error my own words")
    report = compile_candidate(attack('static_assert(sizeof(int) == 2, "ints are two bytes");\n'),
                               cache_dir=tmp_path)
    assert not report.ok and "ints are two bytes" in report.errors[0].message


@needs_nvcc
def test_a_missing_header_is_a_compile_error_naming_it(mode, tmp_path):
    report = compile_candidate(attack("#include <no_such_header.h>\n"), cache_dir=tmp_path)
    assert not report.ok
    assert (report.errors[0].line, report.errors[0].message) == (
        1, "cannot include no_such_header.h: no such file or directory")


@needs_nvcc
def test_a_host_that_requires_bwrap_without_it_cannot_compile(monkeypatch, tmp_path):
    monkeypatch.setenv(confine.SANDBOX_VARIABLE, confine.BWRAP)
    monkeypatch.setattr(confine, "bwrap_usable", lambda: (False, "bwrap is not installed"))
    with pytest.raises(compile_module.CompilerUnavailable, match="bwrap is not installed"):
        compile_candidate(attack(""), cache_dir=tmp_path)


# --- the runner itself: environment, view, limits ---


def test_the_minimal_environment_holds_only_the_toolchains_path_its_folder_and_the_locale(tmp_path):
    env = confine.minimal_env(tmp_path)
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG"}
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path) and env["LANG"] == "C"


def test_the_worker_environment_is_an_allow_list():
    environ = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/cuda/lib", "CUDA_VISIBLE_DEVICES": "1",
               "NVIDIA_VISIBLE_DEVICES": "all", "PYTHONPATH": "/p", "OPTIML_TASK_PATH": "/t",
               "OPTIML_CACHE_DIR": "/c", "HOME": "/home/w", "DATABASE_URL": "postgres://u:pw@h/db",
               "REDIS_URL": "redis://h", "OPTIML_SECRET_KEY": "s", "OPTIML_LLM_API_KEY": "k",
               "AWS_SECRET_ACCESS_KEY": "a", "PGPASSWORD": "p", "CUDA_API_KEY": "c",
               "OPTIML_GATE_SECRET": "g", "SOMETHING_NEW": "x"}
    env = confine.worker_env({"PYTHONUNBUFFERED": "1"}, environ=environ)
    assert env == {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/cuda/lib", "CUDA_VISIBLE_DEVICES": "1",
                   "NVIDIA_VISIBLE_DEVICES": "all", "PYTHONPATH": "/p", "OPTIML_TASK_PATH": "/t",
                   "OPTIML_CACHE_DIR": "/c", "HOME": "/home/w", "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize("sandbox", MODES)
def test_a_confined_process_sees_no_secret_of_the_workers_environment(monkeypatch, tmp_path, sandbox):
    monkeypatch.setenv("OPTIML_SECRET_KEY", "hunter2-secret-key")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:hunter2@db/optiml")
    result = confine.run_confined(["env"], tmp_path, confine.Limits(), sandbox=sandbox)
    assert result.returncode == 0 and "PATH=" in result.output
    assert "hunter2" not in result.output and "DATABASE_URL" not in result.output


def test_the_sandbox_has_no_view_of_the_project_home_or_passwd_and_no_network(tmp_path):
    if not confine.bwrap_usable()[0]:
        pytest.skip("bwrap unusable here")
    (tmp_path / "mine").write_text("visible")
    probe = (f"cat mine; for p in {confine.PROJECT_ROOT}/README.md /etc/passwd /root /home /work /var; "
             "do test -e $p && echo SEEN $p; done; cat /proc/net/dev")
    result = confine.run_confined(["sh", "-c", probe], tmp_path, confine.Limits(), sandbox=confine.BWRAP)
    assert result.returncode == 0, result.output
    assert "visible" in result.output and "SEEN" not in result.output
    interfaces = [line.split(":")[0].strip() for line in result.output.splitlines() if ":" in line]
    assert interfaces == ["lo"]  # a network namespace of its own: no way out


@pytest.mark.parametrize("sandbox", MODES)
def test_the_confined_process_runs_under_the_limits(tmp_path, sandbox):
    limits = confine.Limits(address_space_bytes=3 * confine.GiB, cpu_seconds=77,
                            file_bytes=5 * confine.MiB, open_files=64)
    result = confine.run_confined(["sh", "-c", "ulimit -v; ulimit -t; ulimit -f; ulimit -n; ulimit -c"],
                                  tmp_path, limits, sandbox=sandbox)
    assert result.output.split() == [str(3 * 1024 * 1024), "77", str(5 * 1024 * 2), "64", "0"]


def test_output_is_read_with_a_bound_and_a_flood_is_stopped(tmp_path):
    limits = confine.Limits(output_bytes=10_000, wall_seconds=20, stop_at_output_limit=True)
    started = time.monotonic()
    result = confine.run_confined(["yes"], tmp_path, limits, sandbox=confine.RLIMITS)
    assert result.output_truncated and len(result.output) == 10_000
    assert time.monotonic() - started < 10


def test_a_process_past_its_wall_clock_limit_is_killed_with_its_group(tmp_path):
    limits = confine.Limits(wall_seconds=1)
    started = time.monotonic()
    result = confine.run_confined(["sh", "-c", "sleep 30 & echo started; sleep 30"], tmp_path, limits,
                                  sandbox=confine.RLIMITS)
    assert result.timed_out and "started" in result.output
    assert time.monotonic() - started < 10


def test_an_unknown_sandbox_setting_is_refused(monkeypatch):
    monkeypatch.setenv(confine.SANDBOX_VARIABLE, "docker")
    with pytest.raises(confine.SandboxUnavailable, match="auto, bwrap or rlimits"):
        confine.sandbox_mode()


def test_the_dependency_list_is_parsed_as_gcc_escapes_it():
    rule = "kernel.dep: kernel.cu /usr/include/a\\ b.h \\\n /x/y\\#z $$w /q/back\\\\\\ slash.h"
    assert policy.make_dependencies(rule, "kernel.dep") == [
        "kernel.cu", "/usr/include/a b.h", "/x/y#z", "$w", "/q/back\\ slash.h"]
    assert os.path.basename(compile_module.DEPS_NAME) == "kernel.d"


def test_without_bwrap_the_default_falls_back_to_rlimits(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(confine.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    assert confine.bwrap_usable.__wrapped__() == (
        False, "bwrap is not installed (Debian: apt-get install bubblewrap)")
    monkeypatch.setattr(confine, "bwrap_usable", confine.bwrap_usable.__wrapped__)
    monkeypatch.delenv(confine.SANDBOX_VARIABLE, raising=False)
    assert confine.sandbox_mode() == confine.RLIMITS
