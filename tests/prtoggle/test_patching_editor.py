"""Tests for prtoggle.patching.editor: matching, re-indentation, line origins, diagnostics."""

from __future__ import annotations

import pytest

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.editor import EditContext, edit_numbered, number_lines
from prtoggle.patching.types import Edit

SOURCE = """\
    def forward(self, x):
        y = x + 1
        if y > 0:
            z = y * 2

        y = x + 1
        return z
"""
CONTEXT = EditContext(
    target="pkg.mod.C.forward", filename="/src/pkg/mod.py", yaml_path="/reg/7.yaml"
)


def edit(match: str, kind: str = "replacement", text: str = "", line: int = 9) -> Edit:
    return Edit(match=match, kind=kind, text=text, line=line)  # type: ignore[arg-type]


def test_replacement_is_reindented_to_the_matched_line_keeping_relative_indentation() -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=40),
        [edit("z = y * 2", text="if y > 5:\n    z = 0\nelse:\n    z = 1\n")],
        context=CONTEXT,
    )
    assert edited.text.splitlines()[3:7] == [
        "            if y > 5:",
        "                z = 0",
        "            else:",
        "                z = 1",
    ]


def test_empty_replacement_deletes_the_matched_lines() -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=40),
        [edit("if y > 0:\n    z = y * 2", text="")],
        context=CONTEXT,
    )
    assert edited.text == (
        "    def forward(self, x):\n        y = x + 1\n\n        y = x + 1\n        return z\n"
    )
    assert edited.origins == (40, 41, 44, 45, 46)


def test_prepend_and_append_keep_the_match_and_use_its_indentation() -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=40),
        [
            edit("return z", kind="prepend", text="z = -z"),
            edit("z = y * 2", kind="append", text="z += 1"),
        ],
        context=CONTEXT,
    )
    lines = edited.text.splitlines()
    assert lines[2:5] == ["        if y > 0:", "            z = y * 2", "            z += 1"]
    assert lines[-2:] == ["        z = -z", "        return z"]


def test_inserted_lines_are_attributed_to_the_first_line_of_the_match() -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=40),
        [edit("return z", kind="prepend", text="a = 1\nb = 2")],
        context=CONTEXT,
    )
    assert edited.origins == (40, 41, 42, 43, 44, 45, 46, 46, 46)


def test_match_ignores_indentation_and_blank_lines_on_both_sides() -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=1),
        [edit("z = y * 2\n\n\n      y = x + 1\n", text="z = 3")],
        context=CONTEXT,
    )
    assert edited.text.splitlines()[3:] == ["            z = 3", "        return z"]


def test_edits_apply_in_order_and_later_edits_see_earlier_results() -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=1),
        [edit("return z", text="return w"), edit("return w", text="return w + 1")],
        context=CONTEXT,
    )
    assert edited.text.splitlines()[-1] == "        return w + 1"


def test_missing_match_shows_the_nearest_windows_with_real_line_numbers() -> None:
    with pytest.raises(PatchApplicationError) as caught:
        edit_numbered(
            number_lines(SOURCE, first_line=40), [edit("z = y * 3\ny = x + 1")], context=CONTEXT
        )
    assert str(caught.value) == (
        "pkg.mod.C.forward: edit 1 of 1 (/reg/7.yaml:9) matched 0 times in "
        "/src/pkg/mod.py:40-46; expected exactly 1.\n"
        "match (whitespace-stripped, blank lines ignored):\n"
        "    z = y * 3\n"
        "    y = x + 1\n"
        "nearest windows:\n"
        "  /src/pkg/mod.py:43-45 (similarity 94%)\n"
        "      43 |             z = y * 2\n"
        "      45 |         y = x + 1\n"
        "  /src/pkg/mod.py:40-41 (similarity 57%)\n"
        "      40 |     def forward(self, x):\n"
        "      41 |         y = x + 1\n"
        "  /src/pkg/mod.py:42-43 (similarity 50%)\n"
        "      42 |         if y > 0:\n"
        "      43 |             z = y * 2"
    )


def test_ambiguous_match_lists_every_window() -> None:
    with pytest.raises(PatchApplicationError) as caught:
        edit_numbered(
            number_lines(SOURCE, first_line=40),
            [edit("z = y * 2", kind="append", text="pass"), edit("y = x + 1", line=12)],
            context=CONTEXT,
        )
    assert str(caught.value) == (
        "pkg.mod.C.forward: edit 2 of 2 (/reg/7.yaml:12) matched 2 times in "
        "/src/pkg/mod.py:40-46; expected exactly 1.\n"
        "match (whitespace-stripped, blank lines ignored):\n"
        "    y = x + 1\n"
        "matching windows:\n"
        "  /src/pkg/mod.py:41\n"
        "      41 |         y = x + 1\n"
        "  /src/pkg/mod.py:45\n"
        "      45 |         y = x + 1"
    )


def test_blank_match_is_refused() -> None:
    with pytest.raises(PatchApplicationError) as caught:
        edit_numbered(
            number_lines(SOURCE, first_line=1),
            [edit("  \n\n")],
            context=EditContext(target="m.f", filename="m.py"),
        )
    assert str(caught.value) == (
        "m.f: edit 1 of 1 (line 9): the match has no non-blank line; expected code to match"
    )


def test_match_against_blank_source_says_so() -> None:
    with pytest.raises(PatchApplicationError) as caught:
        edit_numbered(
            number_lines("\n\n", first_line=3),
            [edit("x = 1")],
            context=EditContext(target="m.f", filename="m.py"),
        )
    assert str(caught.value) == (
        "m.f: edit 1 of 1 (line 9) matched 0 times in m.py:3-4; expected exactly 1.\n"
        "match (whitespace-stripped, blank lines ignored):\n"
        "    x = 1\n"
        "nearest windows: none (source is empty)"
    )
