"""Tool errors and detection findings: two roots, so catching one never swallows the other."""

from __future__ import annotations

import pytest

from prtoggle import errors
from prtoggle.detect import findings
from prtoggle.errors import Finding, NaNDetected, PrToggleError

FINDINGS = [
    "InfDetected",
    "NaNDetected",
    "OOBDetected",
    "PaddingLeakDetected",
    "RedzoneRead",
    "RedzoneViolation",
]


@pytest.mark.parametrize("name", FINDINGS)
def test_each_finding_is_a_finding_and_not_a_tool_error(name: str) -> None:
    kind = getattr(errors, name)
    assert issubclass(kind, Finding)
    assert not issubclass(kind, PrToggleError)


@pytest.mark.parametrize("name", ["Finding", *FINDINGS])
def test_findings_are_importable_from_errors_and_from_detect_findings_alike(name: str) -> None:
    assert getattr(findings, name) is getattr(errors, name)


def test_except_prtoggle_error_around_a_run_lets_a_finding_through() -> None:
    def run() -> None:
        raise NaNDetected("1 site hit: nan at x", sites=("x",), hits=("hit",))

    with pytest.raises(NaNDetected) as caught:
        try:
            run()
        except PrToggleError:
            pytest.fail("a finding was caught as a tool error")
    assert (caught.value.sites, caught.value.first) == (("x",), "hit")


def test_the_old_name_detection_error_is_the_finding_root() -> None:
    assert errors.DetectionError is Finding


def test_every_error_class_is_a_tool_error_or_a_finding_never_both() -> None:
    classes = {
        v
        for v in vars(errors).values()
        if isinstance(v, type) and issubclass(v, Exception) and not issubclass(v, Warning)
    }
    tool = {c.__name__ for c in classes if issubclass(c, PrToggleError)}
    found = {c.__name__ for c in classes if issubclass(c, Finding)}
    assert tool & found == set()
    assert found == {"Finding", *FINDINGS}
    assert len(tool) + len(found) == len(classes)
