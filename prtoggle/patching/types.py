"""The edit types patching works on: what to match in a function and what to put there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EditKind = Literal["replacement", "prepend", "append"]
EDIT_KINDS: tuple[EditKind, ...] = ("replacement", "prepend", "append")


@dataclass(frozen=True)
class Edit:
    """One source edit: `match` lines are replaced by, or get `text` before or after them."""

    match: str
    kind: EditKind
    text: str
    line: int


@dataclass(frozen=True)
class Patch:
    """The edits of one target function, applied in order.

    `preamble` (sglang's key) is text inserted at the top of the body, after the docstring.
    """

    target: str
    edits: tuple[Edit, ...]
    line: int
    preamble: str = ""
