"""pytest plugin: `--revert-pr`, a header naming active reverts, and `@pytest.mark.guards_pr`.

A test marked `@pytest.mark.guards_pr(N, expect="regex")` is parametrized (through
`pytest_generate_tests`, public pytest API only) into `<name>[fixed]`, the test as
written, and `<name>[reverted-N]`, which reverts fix N before the test's function-scoped
fixtures are set up and passes only if the test then fails with an exception whose
`Type: message` matches `expect` (default: the fix's `expect`; none at all: any failure
counts, and the verdict says so). A parametrized test gets
`[<params>-fixed]` and `[<params>-reverted-N]`. With `subprocess=True` the reverted
variant runs in a child pytest, so a real crash cannot take the session down.

The variant reverts N on top of the session's own reverts and nothing else. When the
plain test fails (known from this process, or, when the session reverts fixes, checked
in a child pytest), the variant is an error naming the session's reverts: a failure that
is already there proves nothing about N.

The session reverts what it asks for (`prtoggle.pytest_plugin.session`): `--revert-pr`,
a parent `prtoggle run`/`bisect`/`coverage`, or SGLANG_DEBUG_REVERT_PR with the ini
setting `prtoggle_env_reverts = true`; an exported variable alone changes nothing (the
header says it was left alone). When the session already reverts N, no variant is made
for N: the plain test runs with N reverted and fails by itself. That is what lets
`prtoggle bisect -- pytest <file>` name the fix a regression test guards. A test with no
variant left keeps its plain node id.

`--prtoggle-report FILE` writes each test's outcome as JSON (the channel `prtoggle
coverage` and subprocess variants read); `--no-guard-variants` runs guarded tests plain.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from prtoggle.errors import PrToggleError
from prtoggle.pytest_plugin.guards import Guard, guards_of
from prtoggle.pytest_plugin.outcomes import (
    ERROR_PROPERTY,
    NO_VARIANTS_OPTION,
    REPORT_OPTION,
    NodeOutcome,
    OutcomeReport,
    merge_phase,
    read_report,
    report_options,
)
from prtoggle.pytest_plugin.session import ENV_INI, SessionState, start_session, undo
from prtoggle.revert.toggle import child_env, reverted
from prtoggle.runners.child_outcome import output_tail
from prtoggle.runners.child_process import run_child

GUARD_FIXTURE = "prtoggle_guard"
FIXED_ID = "fixed"


_STATE_KEY = pytest.StashKey[SessionState]()
_GUARD_KEY = pytest.StashKey[Guard]()
_PLAIN_ID_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prtoggle", "prtoggle: run with historical fixes reverted")
    group.addoption(
        "--revert-pr",
        dest="prtoggle_revert_pr",
        metavar="SPEC",
        default=None,
        help="Revert these fixes for the whole session: 26521, 26521,24856 or all "
        "(parsed like SGLANG_DEBUG_REVERT_PR).",
    )
    parser.addini(
        ENV_INI,
        type="bool",
        default=False,
        help="prtoggle: revert what SGLANG_DEBUG_REVERT_PR names for the whole session "
        "(without it, an exported variable is left alone).",
    )
    group.addoption(
        REPORT_OPTION,
        dest="prtoggle_report",
        metavar="FILE",
        default=None,
        help="Write each test's outcome (node id -> outcome, error) to FILE as JSON.",
    )
    group.addoption(
        NO_VARIANTS_OPTION,
        dest="prtoggle_no_variants",
        action="store_true",
        help="Run guards_pr tests plain only: no [fixed]/[reverted-N] variants.",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register guards_pr and apply the reverts the session asked for (see session.py)."""
    config.addinivalue_line(
        "markers",
        "guards_pr(pr, expect=None, subprocess=False, timeout=900): the test must fail, with an "
        "error matching `expect` (default: the fix's expect; none: any failure), when fix `pr` "
        "is reverted; "
        "a [reverted-PR] variant checks it",
    )
    option = config.getoption("prtoggle_revert_pr") or ""
    try:
        state = start_session(option=option, env_asked=bool(config.getini(ENV_INI)))
    except PrToggleError as exc:
        raise pytest.UsageError(f"prtoggle: {exc}") from exc
    config.stash[_STATE_KEY] = state
    report_path = config.getoption("prtoggle_report")
    if report_path and not hasattr(config, "workerinput"):  # xdist's mark of a worker
        report = OutcomeReport(Path(report_path), prs=state.prs)
        config.pluginmanager.register(report, "prtoggle-report")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Restore what pytest_configure reverted (matters for in-process pytester runs)."""
    state = config.stash.get(_STATE_KEY, None)
    if state is not None:
        undo(state)


def pytest_report_header(config: pytest.Config) -> str | None:
    return config.stash[_STATE_KEY].header()


@pytest.hookimpl(trylast=True)  # after @parametrize marks: the variant id comes last
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize a guarded test into [fixed] and one [reverted-N] per guard."""
    if metafunc.config.getoption("prtoggle_no_variants"):
        return
    guards = guards_of(metafunc.definition)
    session_prs = metafunc.config.stash[_STATE_KEY].prs
    guards = [guard for guard in guards if guard.pr not in session_prs]
    if not guards:
        return
    metafunc.parametrize(
        GUARD_FIXTURE,
        [FIXED_ID, *guards],
        indirect=True,
        ids=[FIXED_ID, *(guard.variant_id for guard in guards)],
    )


@pytest.fixture(autouse=True)
def prtoggle_guard(request: pytest.FixtureRequest) -> Iterator[Guard | None]:
    """prtoggle's guards_pr variant of this test (None: the test as written).

    Autouse, so that it is set up before the test's other function-scoped fixtures: a
    `[reverted-N]` variant reverts N here, before them.
    """
    param = getattr(request, "param", None)  # FIXED_ID or a Guard where prtoggle parametrized
    node = request.node
    if not isinstance(param, Guard) or not isinstance(node, pytest.Function):
        if param == FIXED_ID and isinstance(node, pytest.Function):
            node.stash[_PLAIN_ID_KEY] = _plain_nodeid(node.nodeid, FIXED_ID)
        yield None
        return
    node.stash[_GUARD_KEY] = param
    _refuse_when_the_plain_test_fails(node, param)
    if param.subprocess:
        yield param
        return
    with reverted(param.pr):
        yield param


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Run an in-process [reverted-N] variant and judge it: it must fail as expected."""
    guard = pyfuncitem.stash.get(_GUARD_KEY, None)
    if guard is None or guard.subprocess:
        return (yield)
    failure = None
    try:
        yield
    except (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception):
        raise
    except (Exception, pytest.fail.Exception) as exc:
        failure = f"{type(exc).__name__}: {exc}"
    _judge(pyfuncitem, guard, failure)  # outside the except block: no "during handling" chain
    return True


@pytest.hookimpl(tryfirst=True, specname="pytest_pyfunc_call")
def pytest_pyfunc_call_in_child(pyfuncitem: pytest.Function) -> object:
    """Run a subprocess [reverted-N] variant in a child pytest instead of here, and judge it."""
    guard = pyfuncitem.stash.get(_GUARD_KEY, None)
    if guard is None or not guard.subprocess:
        return None
    _judge(pyfuncitem, guard, _failure_in_child(pyfuncitem, guard))
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep a plain test's outcome (its variants ask) and, for reports, the error text."""
    report = yield
    error = None
    if call.excinfo is not None and report.failed:
        error = f"{call.excinfo.typename}: {call.excinfo.value}"
    plain_id = item.stash.get(_PLAIN_ID_KEY, None)
    if plain_id is not None:
        state = item.config.stash[_STATE_KEY]
        merge_phase(state.plain_outcomes, plain_id, report, error)
    if error is not None and item.config.getoption("prtoggle_report"):
        report.user_properties.append((ERROR_PROPERTY, error))  # travels with xdist reports
    return report


def _judge(item: pytest.Function, guard: Guard, failure: str | None) -> None:
    pr = guard.pr
    plain = item.stash.get(_PLAIN_ID_KEY, None) or _plain_nodeid(item.nodeid, guard.variant_id)
    if failure is None:
        pytest.fail(f"does not guard PR {pr}: {plain} passed with PR {pr} reverted", pytrace=False)
    if guard.expect is None:
        how = "(judged by the test failing: the recipe has no expect)"
    elif guard.expect.search(failure):
        how = "as expected"
    else:
        pytest.fail(
            f"PR {pr} reverted: expected a failure matching {guard.expect.pattern!r}, "
            f"got:\n{failure}",
            pytrace=False,
        )
    item.add_report_section("call", "prtoggle", f"PR {pr} reverted, failed {how}:\n{failure}")


def _refuse_when_the_plain_test_fails(item: pytest.Function, guard: Guard) -> None:
    """Make the variant an error when the plain test already fails without N reverted."""
    state = item.config.stash[_STATE_KEY]
    plain = _plain_nodeid(item.nodeid, guard.variant_id)
    outcome = state.plain_outcomes.get(plain)
    if outcome is None and state.prs:  # not run here yet (order, xdist): ask a child
        outcome = _outcome_in_child(item, plain, prs=state.prs, timeout=guard.timeout)
    if outcome is None or outcome.outcome not in ("failed", "error"):
        return
    if state.prs:
        already = "with the session's reverts (PR " + ", ".join(map(str, state.prs)) + ")"
    else:
        already = "with every fix in place"
    pytest.fail(
        f"cannot judge whether {plain} guards PR {guard.pr}: it already fails {already}, "
        f"before PR {guard.pr} is reverted:\n{outcome.error}",
        pytrace=False,
    )


def _failure_in_child(item: pytest.Function, guard: Guard) -> str | None:
    """Run the plain test in a child pytest with N (and the session's reverts) reverted."""
    state = item.config.stash[_STATE_KEY]
    plain = _plain_nodeid(item.nodeid, guard.variant_id)
    prs = tuple(sorted({*state.prs, guard.pr}))
    outcome = _outcome_in_child(item, plain, prs=prs, timeout=guard.timeout)
    if outcome.outcome in ("skipped", "xfailed"):
        pytest.skip(f"skipped in the child pytest with PR {guard.pr} reverted")
    if outcome.outcome in ("failed", "error"):
        return outcome.error or f"{outcome.outcome} without an error message"
    return None


def _outcome_in_child(
    item: pytest.Function, nodeid: str, *, prs: tuple[int, ...], timeout: float
) -> NodeOutcome:
    """The outcome of test `nodeid` in a child pytest with `prs` reverted."""
    skip_prefixes = ("PYTEST_XDIST", "PYTEST_CURRENT")
    base = {k: v for k, v in os.environ.items() if not k.startswith(skip_prefixes)}
    with tempfile.TemporaryDirectory(prefix="prtoggle-") as directory:
        report_path = Path(directory) / "report.json"
        run = run_child(
            _child_pytest_argv(item.config, nodeid, report_path=report_path),
            env=child_env(prs, base=base),
            timeout=timeout,
            cwd=str(item.config.rootpath),
        )
        outcomes = read_report(report_path).tests if report_path.exists() else {}
    reverted = ", ".join(map(str, prs))
    item.add_report_section("setup", f"prtoggle child (PR {reverted} reverted)", output_tail(run))
    if run.timed_out:
        return NodeOutcome("error", f"Timeout: the child pytest ran past {timeout:g} s")
    outcome = outcomes.get(nodeid)
    if outcome is None:
        return NodeOutcome("error", f"ChildCrashed: exit status {run.returncode}")
    return outcome


def _child_pytest_argv(config: pytest.Config, nodeid: str, *, report_path: Path) -> list[str]:
    """`python -m pytest <nodeid>` with this session's root and ini file, no -m filter."""
    argv = [sys.executable, "-m", "pytest", nodeid, "-q", "--no-header", "-p", "no:cacheprovider"]
    argv += ["-m", "", "--rootdir", str(config.rootpath)]
    if config.inipath is not None:
        argv += ["-c", str(config.inipath)]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        argv += ["-p", __name__]  # else it loads (once) through its entry point
    if config.pluginmanager.hasplugin("xdist"):
        argv += ["-n", "0"]
    return [*argv, *report_options(report_path)]


def _plain_nodeid(nodeid: str, param_id: str) -> str:
    """The node id the test has without prtoggle's parameter (`[fixed]`, `[reverted-N]`)."""
    for suffix, replacement in ((f"[{param_id}]", ""), (f"-{param_id}]", "]")):
        if nodeid.endswith(suffix):
            return nodeid[: -len(suffix)] + replacement
    raise PrToggleError(
        f"{nodeid}: expected a node id ending in [{param_id}] (prtoggle's parameter last); "
        "another pytest_generate_tests hook parametrized after prtoggle's"
    )
