"""The fan-out report's checks (bench/fanout_analysis.py), on turns and trees made up to
be right and wrong: an overlap of two GPU turns on one device is found, turns on two
devices are not one, and a candidate judged differently in two runs is named."""

from bench.fanout_analysis import compare_trees, turn_check


def turn(pid: int, taken: float, released: float, device: str = "0") -> dict:
    return {"pid": pid, "device": device, "asked": taken - 0.5, "taken": taken, "released": released,
            "kind": "evaluate", "worker": f"gpu{pid}", "candidate": f"c{pid}{taken}"}


def test_turns_taken_in_turn_do_not_overlap_and_one_taken_early_does():
    fine = turn_check([turn(1, 0.0, 1.0), turn(2, 1.0, 2.0), turn(1, 2.5, 3.0)], t0=0.0)
    assert fine["overlaps"] == 0 and fine["most_at_once"] == 1 and fine["smallest_gap_s"] == 0.0
    # A long turn, then one taken inside it by another process: found, with both windows.
    bad = turn_check([turn(1, 0.0, 3.0), turn(2, 1.0, 1.5), turn(1, 4.0, 5.0)], t0=0.0)
    assert bad["overlaps"] == 1 and bad["overlapping"][0]["overlap_s"] == 2.0
    assert bad["overlapping"][0]["first"]["pid"] == 1 and bad["overlapping"][0]["second"]["pid"] == 2
    # The same times on two devices are two GPUs each taking turns: no overlap.
    two = turn_check([turn(1, 0.0, 3.0, "0"), turn(2, 1.0, 1.5, "1")], t0=0.0)
    assert two["overlaps"] == 0 and two["devices"] == ["0", "1"]


def test_a_candidate_judged_differently_by_its_neighbours_run_is_named():
    def node(id_, parent, digest, status, guard="", time_ms=1.0):
        return {"id": id_, "parent": parent, "candidate": digest, "status": status, "guard": guard,
                "level": "full", "time_ms": time_ms, "title": digest}

    reference = {"run": {"best_node": 1}, "nodes": [node(0, None, "root", "passed", time_ms=2.0),
                                                     node(1, 0, "fast", "passed", time_ms=1.0),
                                                     node(2, 0, "racy", "failed", "race")]}
    other = {"run": {"best_node": 1}, "nodes": [node(0, None, "root", "passed", time_ms=2.002),
                                                 node(1, 0, "fast", "passed", time_ms=1.0),
                                                 node(2, 0, "racy", "passed", time_ms=0.9)]}
    compared = compare_trees(reference, other)
    assert compared["common"] == 3 and compared["verdicts_agree"] == 2
    assert compared["verdicts_disagree"][0]["candidate"] == "racy"
    assert compared["same_parent"] == 3 and compared["same_best_candidate"] is True
    assert compared["time_rel_diff_same_level"]["max"] == 0.001
