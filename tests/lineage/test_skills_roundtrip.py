"""bench/skills_roundtrip.py's pure parts: the expert's recorded time and the rule for
"reproduced" (the run itself is on the GPU host)."""

import json
from pathlib import Path

import pytest

from bench.skills_roundtrip import SHARE, SKILLS, recorded_expert_ms, roundtrip_verdict, search_argv


def test_the_experts_time_comes_from_its_newest_recorded_lineage():
    assert recorded_expert_ms("relu") == pytest.approx(0.5113, abs=1e-4)  # the swept wave's walk
    assert recorded_expert_ms("sgemm") == pytest.approx(2.9607, abs=1e-4)


def test_reproduced_means_at_least_the_share_of_the_experts_speed():
    assert SHARE == 0.9
    assert roundtrip_verdict(1.0, 0.9) == {"reproduced": True, "share_of_expert_speed": pytest.approx(0.9)}
    assert roundtrip_verdict(1.2, 0.9)["reproduced"] is False
    assert roundtrip_verdict(None, 0.9) == {"reproduced": None, "share_of_expert_speed": None}


def test_the_search_runs_on_skills_alone_from_the_plain_attempt():
    from search.engine.__main__ import build_parser

    argv = search_argv("relu", Path("plain.cu"), Path("plan.json"), 60, Path("w"), Path("r"))
    args = build_parser().parse_args(argv)
    assert (args.sources, args.judge, args.budget, str(args.source)) == (SKILLS, "rules", 60, "plain.cu")


# -- the transfer benchmark's pure parts (bench/skills_transfer.py) --------------------------


def test_cards_without_a_task_know_nothing_of_its_expert():
    from bench.skills_transfer import cards_without

    left_out = cards_without("softmax")
    assert left_out and all("softmax" not in c["scope"]["tasks"] for c in left_out)
    assert all(s["task"] != "softmax" for c in left_out for s in c["anchor"].get("steps", []))
    assert {c["intent"] for c in left_out} >= {"VEC4", "RESTRICT", "BLOCK_PER_ROW"}  # others had them


def test_the_transfer_summary_is_a_geometric_mean_and_a_count_at_the_expert_share():
    from bench.skills_transfer import suite_summary

    rows = {"a": {"vs_vendor": 2.0, "share_of_expert_speed": 0.8, "through_own_lineage": True},
            "b": {"vs_vendor": 0.5, "share_of_expert_speed": 0.69},
            "c": {"error": "RuntimeError: no GPU"}}
    summary = suite_summary(rows)
    assert summary["geomean_vs_vendor"] == pytest.approx(1.0)
    assert summary["at_0.7_of_expert"] == ["a"] and summary["measured"] == 2 and summary["tasks"] == 3
    assert summary["through_own_lineage"] == ["a"]  # reuse of a's lineage, said apart


def test_the_transfer_takes_cards_induced_earlier_only_if_they_left_out_what_the_run_needs(tmp_path):
    import argparse

    from bench.skills_transfer import cards_facts, cards_file
    from lineage.engine.cards import CARDS_FORMAT

    earlier, work = tmp_path / "earlier", tmp_path / "work"
    earlier.mkdir(), work.mkdir()
    (earlier / "cards-without-softmax.json").write_text(json.dumps(
        {"format": CARDS_FORMAT, "left_out": None, "cards": [{"id": "vec4-v1"}]}))
    args = argparse.Namespace(leave_own_out=True, workdir=str(work), cards_from=str(earlier))
    with pytest.raises(ValueError, match="left out: None, wanted 'softmax'"):
        cards_file("softmax", args)
    (earlier / "cards-without-softmax.json").write_text(json.dumps(
        {"format": CARDS_FORMAT, "left_out": "softmax", "cards": [{"id": "vec4-v1"}]}))
    path = cards_file("softmax", args)
    assert path == work / "cards-without-softmax.json"
    facts = cards_facts(path)
    assert facts["left_out"] == "softmax" and facts["cards"] == ["vec4-v1"] and len(facts["sha256"]) == 64
