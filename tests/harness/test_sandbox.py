"""Process isolation: hangs, crashes and stdout noise become results, never exceptions."""

import contextlib
import os
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


# -- the persistent child (the screen's worker) ------------------------------------------

SERVER = textwrap.dedent("""
    import json, os, sys, time
    fd = int(sys.argv[1])
    def send(**m):
        os.write(fd, (json.dumps(m) + "\\n").encode())
    for line in sys.stdin:
        request = json.loads(line)
        send(type="stage", stage="init", pid=os.getpid())
        what = request["do"]
        if what == "echo":
            print(json.dumps({"type": "result", "status": "passed"}))  # forged, on stdout
            send(type="result", status="ok", value=request["value"], pid=os.getpid())
        elif what == "die":
            os._exit(3)
        elif what == "hang":
            time.sleep(600)
        elif what == "answer_then_leave":
            send(type="result", status="ok", pid=os.getpid())
            break
""")


def server(tmp_path):
    from profiling.harness.sandbox import PersistentChild

    return PersistentChild([sys.executable, "-c", SERVER], log_path=tmp_path / "server.log")


def test_one_persistent_child_answers_many_requests(tmp_path):
    child = server(tmp_path)
    try:
        answers = [child.request({"do": "echo", "value": i}, time_limit_s=20) for i in range(3)]
    finally:
        child.close()
    assert [a.last("result")["value"] for a in answers] == [0, 1, 2]
    assert len({a.last("result")["pid"] for a in answers}) == 1 and child.starts == 1
    assert all(a.last("result")["status"] == "ok" for a in answers)  # not the forged stdout


def test_a_persistent_child_that_dies_is_reported_and_replaced(tmp_path):
    child = server(tmp_path)
    try:
        first = child.request({"do": "echo", "value": 1}, time_limit_s=20)
        died = child.request({"do": "die"}, time_limit_s=20)
        after = child.request({"do": "echo", "value": 2}, time_limit_s=20)
    finally:
        child.close()
    assert died.last("result") is None and died.returncode == 3 and not died.timed_out
    assert died.last("stage")["stage"] == "init"
    assert after.last("result")["value"] == 2
    assert after.last("result")["pid"] != first.last("result")["pid"] and child.starts == 2


def test_a_hung_persistent_child_is_killed_at_the_time_limit(tmp_path):
    child = server(tmp_path)
    try:
        hung = child.request({"do": "hang"}, time_limit_s=2)
        pid = hung.last("stage")["pid"]
        after = child.request({"do": "echo", "value": 5}, time_limit_s=20)
    finally:
        child.close()
    assert hung.timed_out and hung.last("result") is None and hung.seconds < 30
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert not _process_exists(pid)
    assert after.last("result")["value"] == 5


def test_a_child_that_left_after_answering_is_not_blamed_on_the_next_request(tmp_path):
    child = server(tmp_path)
    try:
        left = child.request({"do": "answer_then_leave"}, time_limit_s=20)
        after = child.request({"do": "echo", "value": 7}, time_limit_s=20)
    finally:
        child.close()
    assert left.last("result")["status"] == "ok"
    assert after.last("result")["value"] == 7 and after.returncode is None


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_stage_that_misses_its_own_bound_is_stopped_long_before_the_time_limit(tmp_path):
    result = child(
        tmp_path,
        """
        send(type="stage", stage="launch", limit_s=1.5, bound="one launch of the plan")
        import time
        time.sleep(600)
    """,
        time_limit_s=300,
    )
    assert result.timed_out and result.seconds < 20
    assert result.stage_limit["bound"] == "one launch of the plan"


def test_a_later_message_lifts_the_bound_of_the_stage_before_it(tmp_path):
    result = child(
        tmp_path,
        """
        import time
        send(type="stage", stage="launch", limit_s=1.0)
        send(type="stage", stage="compare")
        time.sleep(2.5)
        send(type="result", status="passed")
    """,
    )
    assert not result.timed_out and result.last("result")["status"] == "passed"


def test_a_flood_of_output_is_capped_in_the_log_and_the_child_is_never_blocked(tmp_path):
    from profiling.harness.sandbox import MAX_LOG_BYTES

    result = child(
        tmp_path,
        """
        line = "x" * 1023 + "\\n"
        for _ in range(20_000):  # 20 MB, more than any pipe buffer
            sys.stdout.write(line)
        sys.stdout.flush()
        send(type="result", status="passed")
    """,
    )
    size = (tmp_path / "child.log").stat().st_size
    assert result.last("result")["status"] == "passed"
    assert MAX_LOG_BYTES <= size < MAX_LOG_BYTES + 1024
    assert "log capped" in (tmp_path / "child.log").read_text()[-200:]
