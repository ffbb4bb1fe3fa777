"""pytest plugin: `--revert-pr`, a header naming active reverts, and `@pytest.mark.guards_pr`.

A test marked `@pytest.mark.guards_pr(N, expect="regex")` runs as usual and again as
`<name>[reverted-N]`, with fix N reverted: that variant passes only if the test then fails
with an exception whose `Type: message` matches `expect` (default: the fix's `expect`).
With `subprocess=True` the reverted variant runs in a child pytest, so a real crash cannot
take the session down.

When the session already reverts N (SGLANG_DEBUG_REVERT_PR, `--revert-pr`, or a parent
`prtoggle run`/`prtoggle bisect`), no reverted variant is made: the plain test runs with N
reverted and fails by itself. That is what lets `prtoggle bisect -- pytest <file>` name
the fix a regression test guards.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from prtoggle.errors import PrToggleError
from prtoggle.protocol import REVERT_ENV

MARKER = "guards_pr"
RESULT_FILE_ENV = "PRTOGGLE_PYTEST_RESULT"
"""Set for the child of a subprocess variant: where its plugin writes each test's outcome."""

DEFAULT_CHILD_TIMEOUT = 900.0
_MARKER_KEYWORDS = ("expect", "subprocess", "timeout")
_OUTCOME_PASSTHROUGH = (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception)


@dataclass(frozen=True)
class Guard:
    """One guards_pr marker, validated: the fix, the failure it must bring back, and how."""

    pr: int
    expect: re.Pattern[str]
    subprocess: bool = False
    timeout: float = DEFAULT_CHILD_TIMEOUT


@dataclass
class _SessionReverts:
    """The PRs this session runs reverted, what to undo at the end, and child-run results."""

    prs: tuple[int, ...] = ()
    applied: tuple[int, ...] = ()
    previous_env: str | None = None
    env_changed: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)


_STATE_KEY = pytest.StashKey[_SessionReverts]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prtoggle", "prtoggle: run with historical fixes reverted")
    group.addoption(
        "--revert-pr",
        dest="prtoggle_revert_pr",
        metavar="SPEC",
        default=None,
        help="Revert these fixes for the whole session: 26521, 26521,24856 or all "
        "(parsed like SGLANG_DEBUG_REVERT_PR, added to it).",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register guards_pr and apply the session's reverts (env var plus --revert-pr)."""
    config.addinivalue_line(
        "markers",
        "guards_pr(pr, expect=None, subprocess=False, timeout=900): the test must fail, with an "
        "error matching `expect` (default: the fix's expect), when fix `pr` is reverted; "
        "a [reverted-PR] variant checks it",
    )
    state = _SessionReverts()
    config.stash[_STATE_KEY] = state
    option = config.getoption("prtoggle_revert_pr")
    env_value = os.environ.get(REVERT_ENV, "")
    if not (option or "").strip() and not env_value.strip():
        return
    try:
        _apply_session_reverts(state, option=option or "", env_value=env_value)
    except PrToggleError as exc:
        raise pytest.UsageError(f"prtoggle: {exc}") from exc


def pytest_unconfigure(config: pytest.Config) -> None:
    """Restore what pytest_configure reverted (matters for in-process pytester runs)."""
    state = config.stash.get(_STATE_KEY, None)
    if state is None:
        return
    if state.applied:
        from prtoggle.toggle import restore

        for pr in reversed(state.applied):
            restore(pr)
    _restore_env(state)


def pytest_report_header(config: pytest.Config) -> str:
    prs = config.stash[_STATE_KEY].prs
    if not prs:
        return "prtoggle: no PR reverted"
    return "prtoggle: reverted PRs: " + ", ".join(str(pr) for pr in prs)


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    """After pytest builds a test function's items, add one reverted variant per guard."""
    result = yield
    if result is None:
        return None
    items = result if isinstance(result, list) else [result]
    collected: list[Any] = []
    for item in items:
        collected.append(item)
        if isinstance(item, pytest.Function) and item.get_closest_marker(MARKER):
            collected.extend(_reverted_variants(item))
    return collected


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """In the child of a subprocess variant, record each phase's outcome for the parent."""
    report = yield
    if os.environ.get(RESULT_FILE_ENV):
        error = None
        if call.excinfo is not None and report.failed:
            error = f"{call.excinfo.typename}: {call.excinfo.value}"
        item.config.stash[_STATE_KEY].results.append(
            {"nodeid": item.nodeid, "when": report.when, "outcome": report.outcome, "error": error}
        )
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(RESULT_FILE_ENV)
    state = session.config.stash.get(_STATE_KEY, None)
    if path and state is not None:
        Path(path).write_text(json.dumps(state.results), encoding="utf-8")


class RevertedFunction(pytest.Function):
    """The `[reverted-N]` variant of a guarded test: passes only if the test fails as expected."""

    guard: Guard
    plain_nodeid: str
    _revert_context: Any = None

    def setup(self) -> None:
        if not self.guard.subprocess:  # revert before fixtures run: capture-time fixes need it
            from prtoggle.toggle import reverted

            self._revert_context = reverted(self.guard.pr)
            self._revert_context.__enter__()
        super().setup()

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            if self._revert_context is not None:
                context, self._revert_context = self._revert_context, None
                context.__exit__(None, None, None)

    def runtest(self) -> None:
        if self.guard.subprocess:
            self._judge(_run_in_child(self))
            return
        failure = None
        try:
            super().runtest()
        except _OUTCOME_PASSTHROUGH:
            raise
        except (Exception, pytest.fail.Exception) as exc:
            failure = f"{type(exc).__name__}: {exc}"
        self._judge(failure)  # outside the except block: no "during handling" chain

    def _judge(self, failure: str | None) -> None:
        pr, pattern = self.guard.pr, self.guard.expect.pattern
        if failure is None:
            pytest.fail(
                f"does not guard PR {pr}: {self.plain_nodeid} passed with PR {pr} reverted",
                pytrace=False,
            )
        if not self.guard.expect.search(failure):
            pytest.fail(
                f"PR {pr} reverted: expected a failure matching {pattern!r}, got:\n{failure}",
                pytrace=False,
            )
        self.add_report_section(
            "call", "prtoggle", f"PR {pr} reverted, failed as expected:\n{failure}"
        )


def _apply_session_reverts(state: _SessionReverts, *, option: str, env_value: str) -> None:
    from prtoggle.registry import default_registry
    from prtoggle.toggle import active_reverts, maybe_revert_pr_fix, parse_revert_spec

    registered = default_registry().prs()
    env_prs = parse_revert_spec(env_value, registered=registered)
    option_prs = parse_revert_spec(option, registered=registered, source="--revert-pr")
    state.prs = tuple(sorted(set(env_prs) | set(option_prs)))
    if set(option_prs) - set(env_prs):
        state.previous_env, state.env_changed = os.environ.get(REVERT_ENV), True
        os.environ[REVERT_ENV] = ",".join(str(pr) for pr in state.prs)  # children inherit it
    before = set(active_reverts())
    try:
        maybe_revert_pr_fix()
    except PrToggleError:
        _restore_env(state)
        raise
    state.applied = tuple(pr for pr in state.prs if pr not in before)


def _restore_env(state: _SessionReverts) -> None:
    if not state.env_changed:
        return
    if state.previous_env is None:
        os.environ.pop(REVERT_ENV, None)
    else:
        os.environ[REVERT_ENV] = state.previous_env
    state.env_changed = False


def _reverted_variants(item: pytest.Function) -> list[RevertedFunction]:
    session_prs = item.config.stash[_STATE_KEY].prs
    variants = []
    for marker in item.iter_markers(MARKER):
        guard = _guard_from_marker(marker, nodeid=item.nodeid)
        if guard.pr in session_prs:
            continue  # the plain test already runs with the fix reverted
        variant = RevertedFunction.from_parent(
            item.parent,
            name=_variant_name(item.name, guard.pr),
            callspec=getattr(item, "callspec", None),
            fixtureinfo=item._fixtureinfo,  # same fixtures as the plain test
            originalname=item.originalname,
        )
        _give_variant_its_own_nodeid(variant, plain=item)
        variant.guard = guard
        variant.plain_nodeid = item.nodeid
        variants.append(variant)
    return variants


def _give_variant_its_own_nodeid(variant: pytest.Function, *, plain: pytest.Function) -> None:
    """Make the variant's node id end in its own name, as it does up to pytest 9.1.

    pytest >= 9.2 builds a Function's node id from `originalname` and the callspec alone,
    which would give the variant the plain test's id (clashing in reports and xdist).
    """
    if variant.nodeid != plain.nodeid:
        return
    node_id = getattr(variant, "_id", None)
    parent_id = getattr(variant.parent, "id", None)
    if node_id is None or parent_id is None or not hasattr(parent_id, "child"):
        raise PrToggleError(
            f"{plain.nodeid}: this pytest ({pytest.__version__}) gives the reverted variant "
            "the plain test's node id, and prtoggle does not know how to rename it"
        )
    params = variant.name[len(variant.originalname) + 1 : -1]
    object.__setattr__(variant, "_id", parent_id.child(variant.originalname).with_params(params))


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
    from prtoggle.registry import default_registry

    try:
        fixes = default_registry().find(pr)  # one per collection holding PR
        fix = next((candidate for candidate in fixes if candidate.expect), fixes[0])
    except PrToggleError as exc:
        raise _collect_error(where, str(exc)) from exc
    expect = kwargs.get("expect", fix.expect)
    if not isinstance(expect, str) or not expect:
        raise _collect_error(where, f"no expect= given and PR {pr} ({fix.path}) has no expect")
    try:
        pattern = re.compile(expect)
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


def _run_in_child(variant: RevertedFunction) -> str | None:
    """Run the plain test in a child pytest with the fix reverted; its failure text or None."""
    from prtoggle.child_process import output_tail, run_command
    from prtoggle.toggle import child_env

    config = variant.config
    skip_prefixes = ("PYTEST_XDIST", "PYTEST_CURRENT")
    base = {k: v for k, v in os.environ.items() if not k.startswith(skip_prefixes)}
    reverts = sorted({*config.stash[_STATE_KEY].prs, variant.guard.pr})  # session's too
    with tempfile.TemporaryDirectory(prefix="prtoggle-") as directory:
        result_path = Path(directory) / "result.json"
        base[RESULT_FILE_ENV] = str(result_path)
        run = run_command(
            _child_pytest_argv(variant),
            env=child_env(reverts, base=base),
            timeout=variant.guard.timeout,
            cwd=str(config.rootpath),
        )
        records = json.loads(result_path.read_text()) if result_path.exists() else []
    variant.add_report_section("call", "prtoggle child", output_tail(run))
    if run.timed_out:
        return f"Timeout: the child pytest ran past {variant.guard.timeout:g} s"
    mine = [record for record in records if record["nodeid"] == variant.plain_nodeid]
    if not mine:
        return f"ChildCrashed: exit status {run.returncode}\n{output_tail(run)}"
    for record in mine:
        if record["outcome"] == "skipped":
            pytest.skip(f"skipped in the child pytest with PR {variant.guard.pr} reverted")
        if record["error"] is not None:
            return str(record["error"])
    return None


def _child_pytest_argv(variant: RevertedFunction) -> list[str]:
    """`python -m pytest <plain nodeid>` with this session's root, ini file and no -m filter."""
    config = variant.config
    argv = [sys.executable, "-m", "pytest", variant.plain_nodeid, "-q", "--no-header"]
    argv += ["-p", "no:cacheprovider", "-m", "", "--rootdir", str(config.rootpath)]
    if config.inipath is not None:
        argv += ["-c", str(config.inipath)]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        argv += ["-p", __name__]  # else it loads (once) through its entry point
    if config.pluginmanager.hasplugin("xdist"):
        argv += ["-n", "0"]
    return argv


def _variant_name(name: str, pr: int) -> str:
    if name.endswith("]"):
        return f"{name[:-1]}-reverted-{pr}]"
    return f"{name}[reverted-{pr}]"


def _call_text(marker: pytest.Mark) -> str:
    parts = [repr(a) for a in marker.args] + [f"{k}={v!r}" for k, v in marker.kwargs.items()]
    return f"({', '.join(parts)})"


def _collect_error(where: str, problem: str) -> pytest.Collector.CollectError:
    return pytest.Collector.CollectError(f"{where}: {problem}")
