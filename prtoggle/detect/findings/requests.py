"""Map the token rows a hit covers (first_row..last_row along dim 0) to the requests owning them.

    hit = excinfo.value.first
    detect.requests_hit(hit, cu_seq_lens=forward_batch.cu_seq_lens)   # e.g. (1,)

Two layouts: `cu_seq_lens` (B + 1 cumulative token counts starting at 0: request b owns
rows cu_seq_lens[b] .. cu_seq_lens[b+1]-1; rows at or past cu_seq_lens[-1] are padding) or
`row_owner` (one request id per row, negative for padding). A hit only records its first
and last offending row, so every request with a row in that range is named: clean rows in
between may add requests. Reads the layout on the host (call it after check(), not inside
a captured region).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from prtoggle.detect.findings.hits import Hit, SiteHit
from prtoggle.errors import DetectUsageError

if TYPE_CHECKING:
    import torch


def requests_hit(
    hit: Hit,
    *,
    cu_seq_lens: Sequence[int] | torch.Tensor | None = None,
    row_owner: Sequence[int] | torch.Tensor | None = None,
) -> tuple[int, ...]:
    """The requests owning rows hit.first_row..hit.last_row (() when the hit has no rows)."""
    if not isinstance(hit, SiteHit) or hit.first_row is None or hit.last_row is None:
        return ()
    return requests_for_rows(
        hit.first_row, hit.last_row, cu_seq_lens=cu_seq_lens, row_owner=row_owner
    )


def requests_for_rows(
    first_row: int,
    last_row: int,
    *,
    cu_seq_lens: Sequence[int] | torch.Tensor | None = None,
    row_owner: Sequence[int] | torch.Tensor | None = None,
) -> tuple[int, ...]:
    """The sorted request ids owning any row in first_row..last_row (inclusive)."""
    if (cu_seq_lens is None) == (row_owner is None):
        raise DetectUsageError(
            "requests_for_rows(): pass exactly one of cu_seq_lens= (B + 1 cumulative token "
            "counts) or row_owner= (a request id per row)"
        )
    if first_row > last_row or first_row < 0:
        raise DetectUsageError(
            f"requests_for_rows(): rows {first_row}..{last_row} are not a range of row indices"
        )
    if cu_seq_lens is None:
        owners = _ints(row_owner if row_owner is not None else [], "row_owner")
        owners = owners[first_row : last_row + 1]
        return tuple(sorted({owner for owner in owners if owner >= 0}))
    bounds = _ints(cu_seq_lens, "cu_seq_lens")
    if not bounds or bounds[0] != 0 or any(a > b for a, b in pairwise(bounds)):
        raise DetectUsageError(
            f"requests_for_rows(): cu_seq_lens must start at 0 and never decrease, got {bounds}"
        )
    return tuple(
        request
        for request, (start, end) in enumerate(pairwise(bounds))
        if start <= last_row and first_row < end
    )


def _ints(values: Sequence[int] | torch.Tensor, name: str) -> list[int]:
    """`values` as a list of Python ints (a tensor is copied to the host)."""
    tolist = getattr(values, "tolist", None)
    listed = tolist() if callable(tolist) else list(values)
    if any(isinstance(v, bool) or not isinstance(v, int) for v in listed):
        raise DetectUsageError(
            f"requests_for_rows(): {name} must hold integers (1-D), got {listed[:8]!r}"
        )
    return listed
