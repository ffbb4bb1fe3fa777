"""Tests of prtoggle.detect.findings.hits: message format and severity order."""

from __future__ import annotations

from dataclasses import replace

from prtoggle.detect.findings.hits import (
    RedzoneHit,
    RedzoneReadHit,
    SiteHit,
    format_hits,
    make_report,
)
from prtoggle.errors import InfDetected, NaNDetected, OOBDetected, RedzoneRead, RedzoneViolation

NAN_HIT = SiteHit(
    kind="nan",
    site="attn.out",
    device="cpu",
    count=4096,
    lowest_index=0,
    phase="capture-warmup",
    step=0,
)
INF_HIT = SiteHit(
    kind="inf",
    site="logits",
    device="cpu",
    count=1,
    lowest_index=9,
    phase="eager",
    step=2,
    min_value=1,
    max_value=1,
)
OOB_HIT = SiteHit(
    kind="oob",
    site="kv.indices",
    device="cpu",
    count=2,
    lowest_index=3,
    phase="replay",
    step=4,
    min_value=7,
    max_value=9,
    low=0,
    high=5,
)
REDZONE_HIT = RedzoneHit(
    name="kv_indices",
    device="cpu",
    buffer_bytes=64,
    redzone_bytes=4096,
    first_offset=0,
    changed_bytes=12,
)


def test_each_kind_has_its_own_item_format() -> None:
    assert format_hits([NAN_HIT]) == (
        "1 site hit: nan at attn.out: 4096 elements, first hit in phase capture-warmup "
        "at step 0, lowest flat index 0"
    )
    assert format_hits([INF_HIT]) == (
        "1 site hit: inf at logits: 1 element (+inf), first hit in phase eager at step 2, "
        "lowest flat index 9"
    )
    assert format_hits([OOB_HIT]) == (
        "1 site hit: oob at kv.indices: 2 elements, values 7..9 outside [0, 5), first hit in "
        "phase replay at step 4, lowest flat index 3"
    )
    assert format_hits([REDZONE_HIT]) == (
        "1 site hit: redzone of buffer kv_indices: 12 bytes overwritten, first at byte 0 "
        "past its end (64-byte buffer on cpu)"
    )


def test_inf_signs_and_a_single_oob_value_are_spelled_out() -> None:
    both = SiteHit(
        kind="inf",
        site="x",
        device="cpu",
        count=2,
        lowest_index=0,
        phase="eager",
        step=0,
        min_value=-1,
        max_value=1,
    )
    one_value = SiteHit(
        kind="oob",
        site="y",
        device="cpu",
        count=1,
        lowest_index=0,
        phase="eager",
        step=0,
        min_value=-1,
        max_value=-1,
        low=0,
        high=8,
    )
    assert format_hits([both, one_value]) == (
        "2 sites hit, in first-hit order: inf at x: 2 elements (+inf and -inf), first hit in "
        "phase eager at step 0, lowest flat index 0; oob at y: 1 element, value -1 outside "
        "[0, 8), first hit in phase eager at step 0, lowest flat index 0"
    )


def test_items_name_their_device_when_hits_span_devices() -> None:
    on_gpu = SiteHit(
        kind="nan",
        site="attn.out",
        device="cuda:1",
        count=1,
        lowest_index=5,
        phase="replay",
        step=1,
    )
    assert format_hits([NAN_HIT, on_gpu]) == (
        "2 sites hit, in first-hit order: nan at attn.out [cpu]: 4096 elements, first hit in "
        "phase capture-warmup at step 0, lowest flat index 0; nan at attn.out [cuda:1]: 1 "
        "element, first hit in phase replay at step 1, lowest flat index 5"
    )


def test_report_orders_by_first_hit_and_raises_the_most_severe_class() -> None:
    ordered = [replace(hit, order=order) for order, hit in enumerate([INF_HIT, NAN_HIT, OOB_HIT])]
    report = make_report([REDZONE_HIT, ordered[2], ordered[0], ordered[1]])
    assert [hit.kind for hit in report.hits] == ["inf", "nan", "oob", "redzone"]
    assert report.first is ordered[0]
    error = report.error()
    assert isinstance(error, RedzoneViolation)
    assert str(error) == format_hits(list(report.hits))
    assert error.sites == ("logits", "attn.out", "kv.indices", "kv_indices")
    assert error.first is ordered[0]
    assert type(make_report([INF_HIT, OOB_HIT]).error()) is OOBDetected
    assert type(make_report([INF_HIT, NAN_HIT]).error()) is NaNDetected
    assert type(make_report([INF_HIT]).error()) is InfDetected


def test_rows_are_named_when_recorded() -> None:
    one_row = replace(NAN_HIT, first_row=1, last_row=1)
    rows = replace(NAN_HIT, first_row=1, last_row=4)
    assert format_hits([one_row]) == (
        "1 site hit: nan at attn.out: 4096 elements in row 1, first hit in phase capture-warmup "
        "at step 0, lowest flat index 0"
    )
    assert "4096 elements in rows 1..4, first hit" in format_hits([rows])


def test_a_clean_report_has_no_message_and_no_error() -> None:
    report = make_report([])
    assert report.clean
    assert report.message() == ""
    assert report.error() is None


def test_a_redzone_read_has_its_own_item_and_error_class() -> None:
    read = RedzoneReadHit(
        name="cu_q",
        device="cpu",
        buffer_bytes=12,
        redzone_bytes=4096,
        first_offset=0,
        read_bytes=4,
        reader="context kernel: cu_q[3]",
    )
    assert format_hits([read]) == (
        "1 site hit: redzone of buffer cu_q: 4 bytes read by context kernel: cu_q[3], first at "
        "byte 0 past its end (12-byte buffer on cpu)"
    )
    assert type(make_report([NAN_HIT, read]).error()) is RedzoneRead
    assert type(make_report([REDZONE_HIT, read]).error()) is RedzoneViolation
