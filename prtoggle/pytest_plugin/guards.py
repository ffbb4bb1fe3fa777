"""`@pytest.mark.guards_pr` read and checked: the fix, the failure it must bring back, and how."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from prtoggle.errors import PrToggleError
from prtoggle.recipes.registry import default_registry

MARKER = "guards_pr"
DEFAULT_CHILD_TIMEOUT = 900.0
_MARKER_KEYWORDS = ("expect", "subprocess", "timeout")


@dataclass(frozen=True)
class Guard:
    """One guards_pr marker, validated: the fix, the failure it must bring back, and how."""

    pr: int
    expect: re.Pattern[str] | None
    """None: no expect= and the recipe has none (a drafted one): any failure counts."""
    subprocess: bool = False
    timeout: float = DEFAULT_CHILD_TIMEOUT

    @property
    def variant_id(self) -> str:
        return f"reverted-{self.pr}"


def guards_of(definition: pytest.Item) -> list[Guard]:
    """The test's guards, closest marker first, one per PR."""
    guards: dict[int, Guard] = {}
    for marker in definition.iter_markers(MARKER):
        guard = _guard_from_marker(marker, nodeid=definition.nodeid)
        guards.setdefault(guard.pr, guard)
    return list(guards.values())


def _guard_from_marker(marker: pytest.Mark, *, nodeid: str) -> Guard:
    where = f"{nodeid}: @pytest.mark.{MARKER}{_call_text(marker)}"
    kwargs = dict(marker.kwargs)
    unknown = sorted(set(kwargs) - {"pr", *_MARKER_KEYWORDS})
    if unknown:
        raise _collect_error(
            where, f"unknown keyword {unknown[0]!r}; expected pr, " + ", ".join(_MARKER_KEYWORDS)
        )
    args = [*marker.args, *([kwargs.pop("pr")] if "pr" in kwargs else [])]
    if len(args) != 1 or not isinstance(args[0], int) or isinstance(args[0], bool):
        raise _collect_error(where, "expected one PR number, e.g. guards_pr(26521)")
    pr = args[0]
    try:
        recipes = default_registry().find(pr)  # one per collection holding PR
        recipe = next((candidate for candidate in recipes if candidate.expect), recipes[0])
    except PrToggleError as exc:
        raise _collect_error(where, str(exc)) from exc
    expect = kwargs.get("expect", recipe.expect)
    if "expect" in kwargs and (not isinstance(expect, str) or not expect):
        raise _collect_error(where, f"expect={expect!r}: expected a non-empty regex")
    try:
        pattern = re.compile(expect) if expect else None
    except re.error as exc:
        raise _collect_error(where, f"expect={expect!r} is not a valid regex: {exc}") from exc
    timeout = kwargs.get("timeout", DEFAULT_CHILD_TIMEOUT)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise _collect_error(where, f"timeout={timeout!r}: expected a positive number of seconds")
    return Guard(
        pr=pr,
        expect=pattern,
        subprocess=bool(kwargs.get("subprocess", False)),
        timeout=float(timeout),
    )


def _call_text(marker: pytest.Mark) -> str:
    parts = [repr(a) for a in marker.args] + [f"{k}={v!r}" for k, v in marker.kwargs.items()]
    return f"({', '.join(parts)})"


def _collect_error(where: str, problem: str) -> pytest.Collector.CollectError:
    return pytest.Collector.CollectError(f"{where}: {problem}")
