"""bench/record_demo.py, the GPU host's demo generator, without a GPU: the engine's command
line is stood in for by what it writes (a recording and a trajectory), and what the
generator makes of them is checked against what the app's demo path reads (search.demo)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench import record_demo
from search.demo import read_demo
from search.engine.__main__ import DEFAULT_SOURCES

RELU = Path(__file__).resolve().parents[2] / "search" / "demo_recordings" / "h200" / "relu.json"


def _fake_engine(monkeypatch, *, unrecorded: int = 0) -> list[dict]:
    """Stand in for `python -m search.engine optimize`: write relu's recording and a
    trajectory whose evaluated nodes are its kernels (and `unrecorded` more)."""
    calls: list[dict] = []
    recorded = json.loads(RELU.read_text())["recorded"]

    def run(command, *, cwd, env, check):
        calls.append({"command": command, "env": env})
        rec = Path(command[command.index("--record") + 1])
        out = Path(command[command.index("--json") + 1])
        rec.write_text(json.dumps({"gpu": "NVIDIA H200", "task": "relu", "note": "", "recorded": recorded}))
        hashes = [*recorded, *(f"{i:064x}" for i in range(unrecorded))]
        nodes = [{"id": i, "candidate_hash": h, "evaluation": i + 1, "proposal": {"source": "tunable"},
                  "measurement": {"message": "the gate failed"}} for i, h in enumerate(hashes)]
        nodes.append({"id": len(nodes), "candidate_hash": hashes[0], "evaluation": None,
                      "proposal": {"source": "rewrite:x"}})  # a duplicate: done from its twin
        out.write_text(json.dumps({"search": {"tree": {"nodes": nodes}}}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(record_demo.subprocess, "run", run)
    return calls


def test_it_writes_a_recording_the_demo_path_reads_with_the_searchs_own_settings(tmp_path, monkeypatch):
    calls = _fake_engine(monkeypatch)
    monkeypatch.setenv("OPTIML_LLM_BASE_URL", "http://llm.invalid")

    code = record_demo.main(["--tasks", "relu", "--budget", "9", "--seed", "3", "--out-dir", str(tmp_path)])

    assert code == 0
    (call,) = calls
    assert "--no-screen" in call["command"] and call["command"][call["command"].index("--seed") + 1] == "3"
    assert call["command"][call["command"].index("--sources") + 1] == ",".join(DEFAULT_SOURCES)
    assert "OPTIML_LLM_BASE_URL" not in call["env"]
    demo = read_demo(tmp_path / "h200" / "relu.json")
    recorded = json.loads(RELU.read_text())["recorded"]
    assert (demo.task, demo.gpu, demo.seed, demo.judge) == ("relu", "NVIDIA H200", 3, "rules")
    assert demo.budget == len(recorded)  # the evaluations made, the duplicate not among them
    assert demo.sources == DEFAULT_SOURCES


def test_it_says_which_evaluated_nodes_have_no_recorded_verdict(tmp_path, monkeypatch, capsys):
    _fake_engine(monkeypatch, unrecorded=1)

    code = record_demo.main(["--tasks", "relu", "--out-dir", str(tmp_path)])

    assert code == 1
    assert "has no recorded verdict: the gate failed" in capsys.readouterr().err


def test_check_replays_the_shipped_recordings_with_every_node_measured(capsys):
    assert record_demo.main(["--check", str(RELU.parents[1])]) == 0
    assert "h200/relu.json: 5 nodes, 0 not measured" in capsys.readouterr().out


def test_check_names_the_node_a_recording_no_longer_holds(tmp_path, capsys):
    data = json.loads(RELU.read_text())
    del data["recorded"][sorted(data["recorded"])[0]]  # not the root's: the search goes on past it
    (tmp_path / "h200").mkdir()
    (tmp_path / "h200" / "relu.json").write_text(json.dumps(data))

    assert record_demo.main(["--check", str(tmp_path)]) == 1
    assert "1 not measured" in capsys.readouterr().out
