"""Tests for prtoggle.patching.editor: matching, re-indentation, line origins, diagnostics."""

from __future__ import annotations

import pytest

from prtoggle.errors import EditMatchError, PatchApplicationError
from prtoggle.patching.editor import (
    EditContext,
    edit_numbered,
    edit_text,
    edits_apply,
    insert_preamble,
    number_lines,
)
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


def test_a_match_ambiguous_without_blank_lines_but_unique_as_written_is_used() -> None:
    source = "def f(x):\n    y = x\n\n    z = y\n    y = x\n    z = y\n    return z\n"
    edited = edit_numbered(
        number_lines(source, first_line=10),
        [edit("y = x\nz = y", text="y = -x\nz = y")],
        context=CONTEXT,
    )
    assert edited.text.splitlines()[4:6] == ["    y = -x", "    z = y"]
    assert edited.origins == (10, 11, 12, 13, 14, 14, 16)


@pytest.mark.parametrize("kind", ["replacement", "prepend", "append"])
def test_an_edit_with_blank_text_deletes_the_matched_lines_whatever_its_kind(kind: str) -> None:
    edited = edit_numbered(
        number_lines(SOURCE, first_line=40),
        [edit("return z", kind=kind, text="\n")],
        context=CONTEXT,
    )
    assert edited.origins == (40, 41, 42, 43, 44, 45)
    assert "return z" not in edited.text


def test_edit_text_takes_source_text_and_gives_edited_text() -> None:
    assert edit_text(
        source="def f():\n    return 1\n", edits=[edit("return 1", text="return 2")]
    ) == ("def f():\n    return 2\n")
    with pytest.raises(EditMatchError) as caught:
        edit_text(source="def f():\n    return 1\n", edits=[edit("return 3")])
    assert str(caught.value).startswith(
        "<source>: edit 1 of 1 (line 9) matched 0 times in <source>:1-2; expected exactly 1."
    )


def test_edit_text_that_deletes_every_line_gives_empty_text() -> None:
    assert edit_text(source="x = 1\ny = 2\n", edits=[edit("x = 1\ny = 2")]) == ""


@pytest.mark.parametrize(
    ("edits", "applies"),
    [
        ([edit("if y > 0:", text="if y >= 0:")], True),
        ([edit("y = x + 1")], False),  # two windows
        ([edit("return w")], False),  # none
        ([edit("return z", text="return y"), edit("return z")], False),  # gone after the first
        ([edit("if y > 0:", text="if y < 0:"), edit("if y < 0:", text="if y >= 0:")], True),
    ],
)
def test_edits_apply_says_what_edit_text_would_do(edits: list[Edit], applies: bool) -> None:
    assert edits_apply(source=SOURCE, edits=edits) is applies
    if applies:
        edit_text(source=SOURCE, edits=edits)
    else:
        with pytest.raises(EditMatchError):
            edit_text(source=SOURCE, edits=edits)


DOCUMENTED = '''\
    def forward(self, x):
        """Run.

        More.
        """
        # a comment
        y = x + 1
        return y
'''


def test_preamble_goes_after_the_docstring_indented_like_the_body() -> None:
    edited = insert_preamble(
        number_lines(DOCUMENTED, first_line=20), "import math\nx = math.floor(x)\n", context=CONTEXT
    )
    assert edited.text.splitlines()[4:8] == [
        '        """',
        "        # a comment",
        "        import math",
        "        x = math.floor(x)",
    ]
    assert edited.origins == (20, 21, 22, 23, 24, 25, 26, 26, 26, 27)


def test_preamble_without_a_docstring_goes_before_the_first_statement() -> None:
    edited = insert_preamble(number_lines(SOURCE, first_line=40), "x = 0", context=CONTEXT)
    assert edited.text.splitlines()[:3] == [
        "    def forward(self, x):",
        "        x = 0",
        "        y = x + 1",
    ]
    assert edited.origins[:3] == (40, 41, 41)


def test_preamble_after_a_docstring_only_body_takes_the_docstring_line() -> None:
    edited = insert_preamble(
        number_lines('def f():\n    """Doc."""\n', first_line=5), "return 1", context=CONTEXT
    )
    assert edited.text == 'def f():\n    """Doc."""\n    return 1\n'
    assert edited.origins == (5, 6, 6)


def test_preamble_for_a_body_on_the_def_line_is_refused() -> None:
    with pytest.raises(PatchApplicationError) as caught:
        insert_preamble(number_lines("def f(): return 1\n", first_line=5), "x = 1", context=CONTEXT)
    assert str(caught.value) == (
        "pkg.mod.C.forward: preamble (/reg/7.yaml): the function body starts on its def line "
        "(/src/pkg/mod.py:5); expected the body on lines of its own"
    )
