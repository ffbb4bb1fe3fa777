"""A target's check result: which statuses fail a check."""

from __future__ import annotations

from prtoggle.recipes.target_checks import CHECK_STATUSES, TargetCheck


def test_only_stale_and_error_fail_a_check() -> None:
    failed = [
        status
        for status in CHECK_STATUSES
        if TargetCheck(pr=1, target="a.b", ok=status == "ok", message="", status=status).failed
    ]
    assert failed == ["stale", "error"]
