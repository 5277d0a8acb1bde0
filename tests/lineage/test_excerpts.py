"""A step's anchor in the code it acted on (lineage/engine/excerpts.py)."""

import difflib

from lineage.engine.excerpts import anchor_lines, excerpt

BEFORE = "".join(f"line {n}\n" for n in range(1, 21))


def diff(before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        "before.cu", "after.cu"))


def test_changed_lines_are_the_anchor():
    after = BEFORE.replace("line 7\n", "line seven\n").replace("line 15\n", "")
    assert anchor_lines(diff(BEFORE, after)) == [7, 15]


def test_a_pure_insertion_anchors_on_the_line_it_follows():
    after = BEFORE.replace("line 9\n", "line 9\n#pragma unroll\n")
    assert anchor_lines(diff(BEFORE, after)) == [9]
    assert anchor_lines(diff(BEFORE, "first\n" + BEFORE)) == [1]


def test_the_excerpt_is_the_anchor_with_its_context():
    shown = excerpt(BEFORE, [7, 9], context=2)
    assert shown["first_line"] == 5 and shown["marked"] == [7, 9]
    assert shown["text"].splitlines() == [f"line {n}" for n in range(5, 12)]
    assert excerpt(BEFORE, [], context=2)["text"] == ""
    assert excerpt(BEFORE, [1, 20], context=3, max_lines=5)["marked"] == [1]
