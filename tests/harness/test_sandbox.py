"""Process isolation: hangs, crashes and stdout noise become results, never exceptions."""

import contextlib
import sys
import textwrap

from profiling.harness.sandbox import run_isolated


def child(tmp_path, body: str, time_limit_s: float = 20.0):
    code = textwrap.dedent("""
        import json, os, sys
        fd = int(sys.argv[1])
        def send(**m):
            os.write(fd, (json.dumps(m) + "\\n").encode())
    """) + textwrap.dedent(body)
    return run_isolated(
        [sys.executable, "-c", code], time_limit_s=time_limit_s, log_path=tmp_path / "child.log"
    )


def test_messages_arrive_on_the_private_channel_and_stdout_is_ignored(tmp_path):
    result = child(
        tmp_path,
        """
        print(json.dumps({"type": "result", "status": "passed"}))  # forged, on stdout
        send(type="stage", stage="timing")
        send(type="result", status="rejected", guard="wrong_values")
    """,
    )
    assert [m["type"] for m in result.messages] == ["stage", "result"]
    assert result.last("result")["status"] == "rejected"
    assert "forged" not in str(result.messages) and '"passed"' in result.log_tail


def test_a_hang_is_killed_at_the_time_limit_and_reported_with_its_stage(tmp_path):
    result = child(
        tmp_path,
        """
        send(type="stage", stage="correctness")
        import time
        time.sleep(600)
    """,
        time_limit_s=2,
    )
    assert result.timed_out
    assert result.last("stage")["stage"] == "correctness"
    assert result.seconds < 30


def test_the_whole_process_group_dies_with_the_child(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    result = child(
        tmp_path,
        f"""
        import subprocess, time
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(p.pid))
        time.sleep(600)
    """,
        time_limit_s=3,
    )
    assert result.timed_out
    import os
    import time

    grandchild = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        with contextlib.suppress(ChildProcessError):  # reap it if it became our zombie
            os.waitpid(grandchild, os.WNOHANG)
        time.sleep(0.1)
    else:
        raise AssertionError("the grandchild outlived its process group")


def test_a_crash_is_a_result_with_the_signal_and_no_verdict(tmp_path):
    result = child(
        tmp_path,
        """
        send(type="stage", stage="correctness")
        os.abort()
    """,
    )
    assert result.last("result") is None
    assert result.died_by_signal == "SIGABRT"
    assert not result.timed_out


def test_garbage_on_the_channel_is_reported_not_trusted(tmp_path):
    result = child(
        tmp_path,
        """
        os.write(fd, b"not json\\n[1, 2]\\n")
    """,
    )
    assert [m["type"] for m in result.messages] == ["error", "error"]
    assert result.last("result") is None
