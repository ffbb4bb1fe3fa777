"""Lines as Python's tokenizer sees them: split at `\\n`, `\\r\\n` and `\\r` only."""

from __future__ import annotations

import re

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
