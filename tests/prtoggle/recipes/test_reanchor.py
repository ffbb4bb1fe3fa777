"""Re-anchoring one drifted edit: merged where the drift is elsewhere, declined when in doubt."""

from __future__ import annotations

from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.reanchor import reanchor

EDIT = Edit(
    match="total = count + 1\nlimit = total * 2\nstore(limit)\n",
    kind="replacement",
    text="total = count\nlimit = total * 2\nstore(limit)\n",
    line=1,
)


def test_a_drift_on_other_lines_of_the_match_is_merged_with_the_edit() -> None:
    text = "def f(count):\n    total = count + 1\n    limit = total * 2\n    save(limit)\n"
    anchored = reanchor(text, EDIT)
    assert anchored.edit is not None
    assert (anchored.edit.match, anchored.edit.text) == (
        "total = count + 1\nlimit = total * 2\nsave(limit)\n",
        "total = count\nlimit = total * 2\nsave(limit)\n",
    )


def test_a_drift_on_the_line_the_edit_changes_is_declined() -> None:
    text = "def f(count):\n    total = count + 2\n    limit = total * 2\n    store(limit)\n"
    assert reanchor(text, EDIT).edit is None


def test_two_windows_as_similar_are_declined() -> None:
    block = "    total = count + 1\n    limit = total * 2\n    save(limit)\n"
    text = f"def f(count):\n{block}    other()\n{block}"
    assert reanchor(text, EDIT).edit is None


def test_a_window_too_unlike_the_match_is_declined() -> None:
    text = "def f(count):\n    return count\n"
    anchored = reanchor(text, EDIT)
    assert anchored.edit is None
    assert anchored.similarity < 0.6
