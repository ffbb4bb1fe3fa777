"""Source text as Python reads it: decoded as an import does, lines split as it splits them."""

from __future__ import annotations

import importlib.util
import re

BYTE_ORDER_MARK = "\ufeff"
_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, *, keepends: bool = False) -> list[str]:
    """`text.splitlines()` for source code: `\\x0c`, `\\x85`, U+2028 ... stay inside a line.

    `str.splitlines` also breaks at form feeds, NEL and the Unicode line and paragraph
    separators, which Python source may hold inside a line (a string literal, a form
    feed before indentation); splitting there corrupts the text and shifts line numbers.
    """
    if "\r" not in text:  # only \n ends a line: str.split does it without a regex
        parts = text.split("\n")
        last = parts.pop()
        lines = [f"{part}\n" for part in parts] if keepends else parts
        return [*lines, last] if last else lines
    lines = []
    start = 0
    for end in _LINE_END.finditer(text):
        lines.append(text[start : end.end() if keepends else end.start()])
        start = end.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def decode_python_source(data: bytes) -> str:
    """A Python file's bytes as an import reads them: its coding cookie (else UTF-8), a
    leading byte-order mark dropped, universal newlines. Every prtoggle reader of a
    source file decodes through here (raises UnicodeDecodeError, SyntaxError or
    LookupError as the import would fail)."""
    return importlib.util.decode_source(data)


def without_byte_order_mark(first_line: str) -> str:
    """A file's first line as Python reads it: a UTF-8 byte-order mark is not source.

    For text read without decode_python_source, e.g. the first line of a file in a diff.
    """
    return first_line.removeprefix(BYTE_ORDER_MARK)
