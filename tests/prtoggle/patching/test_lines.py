"""Tests for prtoggle.patching.lines: lines split as Python's tokenizer splits them."""

from __future__ import annotations

import pytest

from prtoggle.patching.lines import split_lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("\n", ["\n"]),
        ("a\nb", ["a\n", "b"]),
        ("a\n\n", ["a\n", "\n"]),
        ("a\x0cb\x0bc\x1cd\x85e\u2028f\n", ["a\x0cb\x0bc\x1cd\x85e\u2028f\n"]),
        ("a\r\nb\rc\x0cd\n", ["a\r\n", "b\r", "c\x0cd\n"]),
    ],
)
def test_lines_end_at_newlines_and_carriage_returns_only(text: str, expected: list[str]) -> None:
    assert split_lines(text, keepends=True) == expected
    assert split_lines(text) == [line.rstrip("\r\n") for line in expected]
