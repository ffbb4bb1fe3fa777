"""Tests for drafting a long function: a 5,000-line one-function diff drafts the edits it
always did (linear now, not timed here: bench/draft_scaling.py), and the line opcodes."""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest

from prtoggle.patching.editor import edit_text
from prtoggle.patching.source_files import open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring import opcodes
from prtoggle.recipes.authoring.from_diff import draft_from_diff
from prtoggle.recipes.authoring.opcodes import line_opcodes

LINES = 5000


def fix_texts(lines: int) -> tuple[str, str]:
    """One function whose fix changes `lines` lines; every tenth change a line that occurs
    many times (its edit needs a context line)."""
    pre, post = ["def f0(total):\n"], ["def f0(total):\n"]
    for i in range(lines):
        if i % 10 == 9:
            pre.append("    total += 2\n")
            post.append("    total += 1\n")
        else:
            pre.append(f"    a{i} = {i}\n")
            post.append(f"    a{i} = {i} + 1\n")
        pre.append(f"    b{i} = total * 2\n")
        post.append(f"    b{i} = total * 2\n")
    pre.append("    return total\n")
    post.append("    return total\n")
    return "".join(pre), "".join(post)


def expected_edits(lines: int) -> list[Edit]:
    """The edits `new` drafted for fix_texts before drafting was made linear (seen equal,
    byte for byte, to the recipe the quadratic drafter wrote for 5,000 lines)."""
    edits = []
    for i in range(lines):
        if i == lines - 1 and i % 10 == 9:  # the one `total += 1` left: no context needed
            match, text = "total += 1\n", "total += 2\n"
        elif i % 10 == 9:
            match, text = f"total += 1\nb{i} = total * 2\n", f"total += 2\nb{i} = total * 2\n"
        else:
            match, text = f"a{i} = {i} + 1\n", f"a{i} = {i}\n"
        edits.append(Edit(match=match, kind="replacement", text=text, line=0))
    return edits


def test_a_5000_line_one_function_diff_drafts_the_edits_it_always_did(tmp_path: Path) -> None:
    pre, post = fix_texts(LINES)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text(post)
    hunks = difflib.unified_diff(
        pre.splitlines(keepends=True), post.splitlines(keepends=True), "a/pkg/m.py", "b/pkg/m.py"
    )
    tree = open_source_tree(tmp_path)
    draft = draft_from_diff("".join(hunks), source="fix.diff", roots=[tree])
    [target] = draft.targets
    assert (target.target, list(target.edits)) == ("pkg.m.f0", expected_edits(LINES))
    function = find_in_source_tree("pkg.m.f0", source_root=tree).text
    assert edit_text(source=function, edits=target.edits) == pre


def alignment_ok(a: list[str], b: list[str], found: list[opcodes.Opcode]) -> bool:
    """Opcodes that cover both sides in order, `equal` ones on equal lines, and give `b`."""
    made: list[str] = []
    i = j = 0
    for tag, i1, i2, j1, j2 in found:
        if (i1, j1) != (i, j) or (tag == "equal" and a[i1:i2] != b[j1:j2]):
            return False
        made += b[j1:j2]
        i, j = i2, j2
    return (i, j, made) == (len(a), len(b), b)


def test_line_opcodes_are_difflib_s_for_a_function_of_ordinary_size() -> None:
    rng = random.Random(7)
    for _ in range(500):
        a = [rng.choice("abcdefg") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcdefg") for _ in range(rng.randint(0, 30))]
        expected = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        assert line_opcodes(a, b) == expected


def test_line_opcodes_past_difflib_s_size_align_on_unique_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(opcodes, "DIFFLIB_LINES", 6)
    rng = random.Random(11)
    for _ in range(500):
        a = [rng.choice("abcdefghijklmnop") for _ in range(rng.randint(0, 40))]
        b = [rng.choice("abcdefghijklmnop") for _ in range(rng.randint(0, 40))]
        assert alignment_ok(a, b, line_opcodes(a, b))
    a = ["u1", "x", "u2", "x", "u3"]
    b = ["u1", "y", "u2", "y", "u3"]
    assert line_opcodes(a, b) == [
        ("equal", 0, 1, 0, 1),
        ("replace", 1, 2, 1, 2),
        ("equal", 2, 3, 2, 3),
        ("replace", 3, 4, 3, 4),
        ("equal", 4, 5, 4, 5),
    ]
