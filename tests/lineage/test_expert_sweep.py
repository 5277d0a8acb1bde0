"""bench/expert_sweep.py's pure parts: the grid it reads and the candidates it builds.
(The sweep itself runs on a GPU host; its results are in bench/results/*-sweep-*.json.)"""

import pytest

from bench.expert_sweep import combinations, parse_grid, variant
from lineage.engine import experts


def test_a_grid_is_every_combination_of_its_values():
    grid = parse_grid(["TC_BK=16,32", "ASYNC_STAGES=2,3,4"])
    assert grid == {"TC_BK": [16, 32], "ASYNC_STAGES": [2, 3, 4]}
    found = combinations(grid)
    assert len(found) == 6 and {"ASYNC_STAGES": 4, "TC_BK": 32} in found
    assert combinations({}) == [{}]  # no grid: the manifest's own values, once


@pytest.mark.parametrize("item", ["TC_BK", "TC_BK=", "=16", "TC_BK=16,x", "9X=1"])
def test_a_malformed_grid_item_is_a_clear_error(item):
    with pytest.raises(ValueError, match="--grid"):
        parse_grid([item])


def test_a_variant_overrides_only_the_named_tunables_of_one_state():
    expert = experts.load("sgemm")
    state = expert.all_on()
    swept = variant(expert, state, {"TC_BK": 16}).plan_dict()["tunables"]
    base = expert.candidate(state).plan_dict()["tunables"]
    assert swept == {**base, "TC_BK": 16}
    assert variant(expert, state, {}).content_hash() == expert.candidate(state).content_hash()
    with pytest.raises(ValueError, match="no tunables"):
        variant(expert, state, {"NOT_A_TUNABLE": 1})
