"""`python -m search.generation train-mot`, the GPU host's command (no Django), on tiny
random experts and pairs from the suite."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from search.generation.dataset import save, suite_pairs  # noqa: E402
from search.generation.training import main  # noqa: E402


def test_train_mot_trains_saves_and_reports(tmp_path, capsys):
    save(suite_pairs(["relu"]), tmp_path / "pairs.json")

    code = main(["train-mot", "--pairs", str(tmp_path / "pairs.json"),
                 "--out", str(tmp_path / "mot.safetensors"), "--tiny", "--steps", "3", "--shared", "32",
                 "--report", str(tmp_path / "report.json")])

    assert code == 0 and (tmp_path / "mot.safetensors").stat().st_size > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["steps"] == 3 and report["pairs"] == 1 and len(report["losses"]) >= 1
    assert json.loads(capsys.readouterr().out)["tokens"] > 0


def test_train_mot_refuses_bad_input_with_a_message(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{}")
    assert main(["train-mot", "--pairs", str(tmp_path / "bad.json"), "--out", "x", "--tiny"]) == 2
    assert "each pair needs" in capsys.readouterr().err
    save(suite_pairs(["relu"]), tmp_path / "pairs.json")
    assert main(["train-mot", "--pairs", str(tmp_path / "pairs.json"), "--out", "x"]) == 2
    assert "give --tiny or at least one --expert" in capsys.readouterr().err
    assert main(["train-mot", "--pairs", str(tmp_path / "pairs.json"), "--out", "x",
                 "--expert", "q=/nonexistent/model"]) == 2
    assert "cannot be loaded from local files" in capsys.readouterr().err
