"""Tests for prtoggle.patching.lines: lines split as Python's tokenizer splits them."""

from __future__ import annotations

import pytest

from prtoggle.patching.lines import decode_python_source, split_lines, without_byte_order_mark


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


def test_source_bytes_are_decoded_as_an_import_decodes_them() -> None:
    marked = b"\xef\xbb\xbfdef f():\r\n    return '\xc3\xa9'\n"
    latin = b"# -*- coding: latin-1 -*-\nx = '\xe9'\n"
    assert decode_python_source(marked) == "def f():\n    return '\u00e9'\n"
    assert decode_python_source(latin) == "# -*- coding: latin-1 -*-\nx = '\u00e9'\n"
    assert without_byte_order_mark("\ufeffdef f():") == "def f():"
    assert without_byte_order_mark("def f():\ufeff") == "def f():\ufeff"
