"""The card cache (lineage/engine/card_cache.py) over a tiny induction of tiny files."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from lineage.engine import card_cache


class CountedInduction:
    """A stand-in for cards.induce: one card per recording, counting its calls."""

    def __init__(self, recordings: list[Path]) -> None:
        self.recordings = recordings
        self.calls = 0

    def __call__(self) -> list[dict]:
        self.calls += 1
        return [{"intent": path.stem.upper(), "steps": [path.read_text()]} for path in self.recordings]


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    files = {"lineage": tmp_path / "tree" / "results" / "lineage-relu.json",
             "probe": tmp_path / "tree" / "results" / "probes-relu.json",
             "code": tmp_path / "tree" / "engine" / "cards.py"}
    for name, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name} v1\n")
    return files


@pytest.fixture(autouse=True)
def cache_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPTIML_CARD_CACHE", raising=False)


def cards_of(tree: dict[str, Path], induce: CountedInduction, directory: Path) -> list[dict]:
    return card_cache.cached([tree["lineage"], tree["probe"]], [tree["code"]], induce, directory)


def test_a_second_call_with_the_same_inputs_reads_the_file_without_inducing(tree, tmp_path):
    induce = CountedInduction([tree["lineage"], tree["probe"]])
    first = cards_of(tree, induce, tmp_path / "cache")
    second = cards_of(tree, CountedInduction([]), tmp_path / "cache")  # would give no cards
    assert induce.calls == 1
    assert second == first == [{"intent": "LINEAGE-RELU", "steps": ["lineage v1\n"]},
                               {"intent": "PROBES-RELU", "steps": ["probe v1\n"]}]
    (written,) = (tmp_path / "cache").iterdir()
    data = json.loads(gzip.decompress(written.read_bytes()))
    assert written.name == f"{data['key']}.json.gz" and data["format"] == card_cache.FORMAT


@pytest.mark.parametrize("changed", ["lineage", "probe", "code"])
def test_changing_any_input_files_bytes_changes_the_key_and_induces_again(tree, tmp_path, changed):
    induce = CountedInduction([tree["lineage"], tree["probe"]])
    before = card_cache.cache_key([tree["lineage"], tree["probe"]], [tree["code"]])
    cards_of(tree, induce, tmp_path / "cache")
    tree[changed].write_text(f"{changed} v2\n")
    after = card_cache.cache_key([tree["lineage"], tree["probe"]], [tree["code"]])
    cards = cards_of(tree, induce, tmp_path / "cache")
    assert after != before
    assert induce.calls == 2
    assert len(list((tmp_path / "cache").iterdir())) == 2
    if changed != "code":
        assert f"{changed} v2\n" in [card["steps"][0] for card in cards]


def test_the_salt_is_part_of_the_key(tree):
    inputs, code = [tree["lineage"]], [tree["code"]]
    assert card_cache.cache_key(inputs, code, "tree-sitter 0.26") != \
        card_cache.cache_key(inputs, code, "tree-sitter 0.27")


def test_the_key_is_the_same_in_another_checkout_of_the_same_files(tree, tmp_path):
    shutil.copytree(tmp_path / "tree", tmp_path / "elsewhere")
    moved = {name: tmp_path / "elsewhere" / path.relative_to(tmp_path / "tree")
             for name, path in tree.items()}
    assert card_cache.cache_key([tree["lineage"], tree["probe"]], [tree["code"]]) == \
        card_cache.cache_key([moved["lineage"], moved["probe"]], [moved["code"]])


def test_a_file_moved_between_the_recordings_and_the_code_changes_the_key(tree):
    assert card_cache.cache_key([tree["lineage"], tree["probe"]], [tree["code"]]) != \
        card_cache.cache_key([tree["lineage"]], [tree["probe"], tree["code"]])


@pytest.mark.parametrize("damage", ["garbage", "truncated", "another key", "not gzip"])
def test_a_damaged_cache_file_is_induced_again_and_replaced(tree, tmp_path, damage):
    induce = CountedInduction([tree["lineage"], tree["probe"]])
    first = cards_of(tree, induce, tmp_path / "cache")
    (written,) = (tmp_path / "cache").iterdir()
    whole = written.read_bytes()
    written.write_bytes({"garbage": b"\x00not a cache file" * 4, "truncated": whole[: len(whole) // 2],
                         "another key": gzip.compress(json.dumps(
                             {"format": card_cache.FORMAT, "key": "0" * 64, "cards": []}).encode()),
                         "not gzip": b'{"format": 1}'}[damage])
    assert cards_of(tree, induce, tmp_path / "cache") == first
    assert induce.calls == 2
    assert written.read_bytes() == whole  # replaced by the whole file again
    assert cards_of(tree, induce, tmp_path / "cache") == first
    assert induce.calls == 2


def test_an_unwritable_cache_directory_still_gives_the_cards(tree, tmp_path):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o500)
    try:
        if os.access(read_only, os.W_OK):
            pytest.skip("this user (root?) may write to a 0o500 directory")
        induce = CountedInduction([tree["lineage"], tree["probe"]])
        for directory in (read_only, read_only / "cards"):  # can't write into, can't create
            assert [card["intent"] for card in cards_of(tree, induce, directory)] == \
                ["LINEAGE-RELU", "PROBES-RELU"]
        assert induce.calls == 2
        assert list(read_only.iterdir()) == []
    finally:
        read_only.chmod(0o700)


def test_a_cache_directory_that_cannot_be_created_still_gives_the_cards(tree, tmp_path):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory\n")  # refused even to root, unlike a chmod
    induce = CountedInduction([tree["lineage"], tree["probe"]])
    for directory in (in_the_way, in_the_way / "cards"):
        assert len(cards_of(tree, induce, directory)) == 2
    assert induce.calls == 2
    assert in_the_way.read_text() == "not a directory\n"


def test_optiml_card_cache_0_always_induces_and_never_writes(tree, tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_CARD_CACHE", "0")
    induce = CountedInduction([tree["lineage"], tree["probe"]])
    for _ in range(2):
        assert len(cards_of(tree, induce, tmp_path / "cache")) == 2
    assert induce.calls == 2
    assert not (tmp_path / "cache").exists()


def test_the_default_directory_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTIML_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert card_cache.default_directory() == tmp_path / "mine" / "cards"
    monkeypatch.delenv("OPTIML_CACHE_DIR")
    assert card_cache.default_directory() == tmp_path / "xdg" / "optiml-studio" / "cards"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert card_cache.default_directory() == tmp_path / "home" / ".cache" / "optiml-studio" / "cards"
