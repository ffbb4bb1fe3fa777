"""Tests of detect.findings.requests: token rows of a hit mapped to the requests owning them."""

from __future__ import annotations

import pytest
import torch

from prtoggle import detect
from prtoggle.detect.findings.hits import RedzoneHit, SiteHit
from prtoggle.errors import DetectUsageError


def _hit(first_row: int | None, last_row: int | None) -> SiteHit:
    return SiteHit(
        kind="nan",
        site="s",
        device="cpu",
        count=1,
        lowest_index=0,
        phase="eager",
        step=0,
        first_row=first_row,
        last_row=last_row,
    )


def test_cu_seq_lens_name_every_request_whose_rows_meet_the_range() -> None:
    cu = torch.tensor([0, 2, 5, 6], dtype=torch.int32)
    assert detect.requests_for_rows(0, 1, cu_seq_lens=cu) == (0,)
    assert detect.requests_for_rows(1, 2, cu_seq_lens=cu) == (0, 1)
    assert detect.requests_for_rows(4, 9, cu_seq_lens=cu) == (1, 2)
    assert detect.requests_for_rows(6, 7, cu_seq_lens=cu) == ()  # padding rows only
    assert detect.requests_hit(_hit(5, 5), cu_seq_lens=[0, 2, 5, 6]) == (2,)


def test_row_owner_names_owners_and_skips_padding() -> None:
    owner = torch.tensor([3, 3, 0, 7, -1, -1])
    assert detect.requests_for_rows(1, 5, row_owner=owner) == (0, 3, 7)
    assert detect.requests_hit(_hit(4, 5), row_owner=owner) == ()


def test_hits_without_rows_name_no_request() -> None:
    redzone = RedzoneHit("b", "cpu", 8, 8, 0, 1)
    assert detect.requests_hit(_hit(None, None), cu_seq_lens=[0, 1]) == ()
    assert detect.requests_hit(redzone, cu_seq_lens=[0, 1]) == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {},
            "requests_for_rows(): pass exactly one of cu_seq_lens= (B + 1 cumulative token "
            "counts) or row_owner= (a request id per row)",
        ),
        (
            {"cu_seq_lens": [1, 2]},
            "requests_for_rows(): cu_seq_lens must start at 0 and never decrease, got [1, 2]",
        ),
        (
            {"cu_seq_lens": [0, 3, 2]},
            "requests_for_rows(): cu_seq_lens must start at 0 and never decrease, got [0, 3, 2]",
        ),
        (
            {"row_owner": [0.5]},
            "requests_for_rows(): row_owner must hold integers (1-D), got [0.5]",
        ),
    ],
)
def test_bad_layouts_are_refused_with_what_was_expected(kwargs: dict, message: str) -> None:
    with pytest.raises(DetectUsageError) as excinfo:
        detect.requests_for_rows(0, 0, **kwargs)
    assert str(excinfo.value) == message
