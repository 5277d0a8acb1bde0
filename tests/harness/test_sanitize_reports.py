"""Reading compute-sanitizer's reports (the tool runs on GPU hosts: tests/gpu)."""

from profiling.harness.sanitize import GUARD_OF_TOOL, command, parse_report

CLEAN = """========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at relu+0x70
=========     by thread (255,0,0) in block (3,0,0)
=========     Address 0x7f3a2c000400 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a2c000000 of size 1024 bytes
========= ERROR SUMMARY: 1 error
"""
RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at block_sum+0x1b0
=========     and Read access at block_sum+0x230 [248 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
INITCHECK = """========= Uninitialized __global__ memory read of size 4 bytes
=========     at reduce+0x90
========= ERROR SUMMARY: 1 error
"""
SYNCCHECK = """========= Barrier error detected. Divergent thread(s) in warp
=========     at sync_in_branch+0x40
========= ERROR SUMMARY: 1 error
"""


def test_a_clean_report_finds_nothing_under_any_tool():
    assert all(parse_report(tool, CLEAN) is None for tool in GUARD_OF_TOOL)


def test_each_tool_s_finding_is_reported_in_its_own_words():
    assert "Invalid __global__ read" in parse_report("memcheck", MEMCHECK)
    assert "Race reported" in parse_report("racecheck", RACECHECK)
    assert "Uninitialized __global__ memory read" in parse_report("initcheck", INITCHECK)
    assert "Barrier error" in parse_report("synccheck", SYNCCHECK)


def test_the_report_goes_to_a_file_of_its_own_and_errors_set_the_exit_code(tmp_path, monkeypatch):
    from profiling.harness import sanitize

    monkeypatch.setattr(sanitize, "sanitizer_binary", lambda: "/opt/cuda/bin/compute-sanitizer")
    argv = command("racecheck", tmp_path / "report.log", ["python", "-m", "worker"])
    assert argv[argv.index("--log-file") + 1] == str(tmp_path / "report.log")
    assert argv[argv.index("--error-exitcode") + 1] == str(sanitize.ERROR_EXIT_CODE)
    assert argv[argv.index("--tool") + 1] == "racecheck" and argv[-3:] == ["python", "-m", "worker"]


def test_a_summary_that_counts_errors_is_a_finding_even_without_a_recognised_line():
    assert parse_report("memcheck", "========= ERROR SUMMARY: 2 errors\n") is not None
