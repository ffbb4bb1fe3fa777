"""The JSON outcome report of prtoggle's pytest plugin: node id -> outcome, written and read.

`pytest --prtoggle-report FILE` writes it when the session ends (on the xdist controller,
where every test's reports arrive); `prtoggle coverage` and the plugin's subprocess
variants read it. No pytest import here: `prtoggle coverage` only reads the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from prtoggle.errors import PrToggleError

if TYPE_CHECKING:
    import pytest

REPORT_OPTION = "--prtoggle-report"
NO_VARIANTS_OPTION = "--no-guard-variants"
REPORT_VERSION = 1
ERROR_PROPERTY = "prtoggle_error"
"""The user property by which a failed report carries its `Type: message` (xdist too)."""

OutcomeName = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
FAILING: tuple[OutcomeName, ...] = ("failed", "error")


@dataclass(frozen=True)
class NodeOutcome:
    """A test's outcome over its phases, and the `Type: message` of its failure if any."""

    outcome: OutcomeName
    error: str | None = None

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING


@dataclass(frozen=True)
class PytestReport:
    """What one session's report holds: test outcomes and collectors that failed."""

    tests: Mapping[str, NodeOutcome]
    collect_errors: Mapping[str, str]
    """Node id of a collector that failed (e.g. a module that does not import) -> its error."""


class OutcomeReport:
    """The `--prtoggle-report FILE` writer, registered as a plugin by prtoggle's plugin.

    Only in the xdist controller (or the only process), where every report arrives.
    `prs`: the session's reverts, recorded in the file.
    """

    def __init__(self, path: Path, *, prs: Sequence[int]) -> None:
        self.path = path
        self.prs = tuple(prs)
        self.tests: dict[str, NodeOutcome] = {}
        self.collect_errors: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        error = next((str(v) for k, v in report.user_properties if k == ERROR_PROPERTY), None)
        merge_phase(self.tests, report.nodeid, report, error)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collector that failed (a module that no longer imports) is kept apart."""
        if report.failed:
            self.collect_errors[report.nodeid] = _collect_error_text(report)

    def pytest_sessionstart(self) -> None:
        """Past argument parsing and the initial conftests: a parent waiting on it may go on."""
        started_marker(self.path).touch()

    def pytest_sessionfinish(self) -> None:
        report = PytestReport(tests=self.tests, collect_errors=self.collect_errors)
        write_report(self.path, prs=self.prs, report=report)


def report_options(path: Path) -> list[str]:
    """The pytest options that make a run write its report to `path` with no variants."""
    return [NO_VARIANTS_OPTION, REPORT_OPTION, str(path)]


def started_marker(path: Path) -> Path:
    """The file the report's session creates when it starts (the plugin is loaded, the
    options were understood), before any test runs."""
    return path.with_name(path.name + ".started")


def write_report(path: Path, *, prs: Sequence[int], report: PytestReport) -> None:
    tests = {
        nodeid: {"outcome": outcome.outcome, "error": outcome.error}
        for nodeid, outcome in report.tests.items()
    }
    data = {
        "version": REPORT_VERSION,
        "reverted": list(prs),
        "tests": tests,
        "collect_errors": dict(report.collect_errors),
    }
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def read_report(path: Path) -> PytestReport:
    """The outcomes a report file holds, by node id."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["version"] != REPORT_VERSION:
            raise ValueError(f"version {data['version']!r}, expected {REPORT_VERSION}")
        tests = {
            str(nodeid): NodeOutcome(_outcome(record["outcome"]), record.get("error"))
            for nodeid, record in data["tests"].items()
        }
        errors = {str(nodeid): str(error) for nodeid, error in data["collect_errors"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PrToggleError(
            f"{path}: not a prtoggle pytest report ({type(exc).__name__}: {exc}); expected "
            f"the JSON that `pytest {REPORT_OPTION} FILE` writes"
        ) from exc
    return PytestReport(tests=tests, collect_errors=errors)


def merge_phase(
    outcomes: dict[str, NodeOutcome], nodeid: str, report: pytest.TestReport, error: str | None
) -> None:
    """Fold one phase's report into the test's outcome (a failed teardown spoils a pass)."""
    outcome = _phase_outcome(report)
    if outcome is None:
        return
    current = outcomes.get(nodeid)
    if report.when == "teardown" and current is not None:
        if current.outcome in ("passed", "xpassed"):
            outcomes[nodeid] = NodeOutcome(outcome, error)
        return
    outcomes[nodeid] = NodeOutcome(outcome, error)


def _phase_outcome(report: pytest.TestReport) -> OutcomeName | None:
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpassed" if xfail else "passed"
        if report.failed:
            return "failed"
        return "xfailed" if xfail else "skipped"
    if report.failed:
        return "error"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    return None


def _collect_error_text(report: pytest.CollectReport) -> str:
    """`Type: message` of a collector's failure: the crash line, else the report's last line.

    (pytest reports an ImportError of a test module as text ending in `E   Type: message`.)
    """
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if message:
        return str(message).strip().splitlines()[0]
    lines = [line.strip() for line in report.longreprtext.splitlines() if line.strip()]
    return re.sub(r"^E\s+", "", lines[-1]) if lines else "(no message)"


def _outcome(value: object) -> OutcomeName:
    for outcome in ("passed", "failed", "error", "skipped", "xfailed", "xpassed"):
        if value == outcome:
            return outcome
    raise ValueError(f"unknown outcome {value!r}")
