"""PR numbers as text: the one way every message and table lists them."""

from __future__ import annotations

from collections.abc import Iterable


def join_prs(prs: Iterable[int]) -> str:
    """`26521, 24856` in the given order; `none` for no PR."""
    text = ", ".join(str(pr) for pr in prs)
    return text or "none"
