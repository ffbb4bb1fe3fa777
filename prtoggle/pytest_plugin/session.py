"""The reverts a pytest session asked for: `--revert-pr`, an ini opt-in, or `prtoggle run`.

Installing prtoggle must not change a suite that did not ask for it: an exported
SGLANG_DEBUG_REVERT_PR alone is not a request to the plugin. The session reverts

- what its process already holds in force when pytest configures (the start-up hook of
  `prtoggle run`/`bisect`/`coverage`, or the program's own `maybe_revert_pr_fix()`),
- plus `--revert-pr SPEC`,
- plus SGLANG_DEBUG_REVERT_PR when the ini file sets `prtoggle_env_reverts = true`, or
  when a `prtoggle run`/`bisect`/`coverage` parent asked for it (its run-report directory
  is set) and no start-up hook ran here (`python -I -m pytest`).

A variable that is set but not asked for is left alone: the header says so in one line.
Process-global: the reverts applied here stay in force until `undo` (pytest_unconfigure).
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field

from prtoggle.errors import PrToggleError
from prtoggle.protocol import REVERT_ENV, RUN_REPORT_ENV
from prtoggle.pytest_plugin.outcomes import NodeOutcome
from prtoggle.recipes.registry import default_registry
from prtoggle.revert.toggle import active_reverts, maybe_revert_pr_fix, parse_revert_spec, restore

ENV_INI = "prtoggle_env_reverts"
HEADER_WIDTH = 100
"""The report header's prtoggle lines are wrapped to fit this many columns."""
"""The ini setting by which a suite asks the plugin to apply SGLANG_DEBUG_REVERT_PR."""


@dataclass
class SessionState:
    """The PRs this session reverts, what to undo at the end, and the outcomes it saw."""

    prs: tuple[int, ...] = ()
    applied: tuple[int, ...] = ()
    ignored_env: str | None = None
    previous_env: str | None = None
    env_changed: bool = False
    plain_outcomes: dict[str, NodeOutcome] = field(default_factory=dict)

    def header(self) -> str | None:
        """The report header's prtoggle line, None when the session is none of its business."""
        if self.prs:
            line = "prtoggle: reverted PRs: " + ", ".join(str(pr) for pr in self.prs)
            return _wrapped(line)
        if self.ignored_env is not None:
            line = (
                f"prtoggle: {REVERT_ENV}={self.ignored_env!r} not applied (see "
                f"--revert-pr or ini {ENV_INI})"
            )
            return _wrapped(line)
        return None


def start_session(*, option: str, env_asked: bool) -> SessionState:
    """Apply what the session asked for (see the module's docstring); PrToggleError if it
    cannot be (nothing is left applied then)."""
    state = SessionState()
    held = active_reverts()
    env_asked = env_asked or bool(os.environ.get(RUN_REPORT_ENV))  # a prtoggle parent asked
    env_value = os.environ.get(REVERT_ENV, "")
    env_set = env_value.strip() not in ("", "0")
    if option.strip() or env_asked:
        # under a parent that already reverts (held), its value is kept and extended
        keep_env = env_asked or bool(held)
        _apply(state, option=option, env_value=env_value if keep_env else "")
    elif env_set and not held:
        state.ignored_env = env_value
    state.prs = tuple(sorted({*held, *state.prs}))
    return state


def undo(state: SessionState) -> None:
    """Restore what start_session reverted and the variable it set."""
    if state.applied:
        for pr in reversed(state.applied):
            restore(pr)
        state.applied = ()
    _restore_env(state)


def _apply(state: SessionState, *, option: str, env_value: str) -> None:
    registered = default_registry().prs()
    env_prs = parse_revert_spec(env_value, registered=registered)
    option_prs = parse_revert_spec(option, registered=registered, source="--revert-pr")
    state.prs = tuple(sorted(set(env_prs) | set(option_prs)))
    given = [text for text in (env_value.strip(), option.strip()) if text not in ("", "0")]
    everything = any(text.lower() == "all" for text in given)
    state.previous_env, state.env_changed = os.environ.get(REVERT_ENV), True
    # as written (C:N kept); children inherit it
    os.environ[REVERT_ENV] = "all" if everything else ",".join(given)
    before = set(active_reverts())
    try:
        maybe_revert_pr_fix()
    except PrToggleError:
        _restore_env(state)
        raise
    # in force now: `all` names every registered PR, not only those whose recipe applies
    state.prs = tuple(sorted(set(active_reverts())))
    state.applied = tuple(pr for pr in state.prs if pr not in before)


def _restore_env(state: SessionState) -> None:
    if not state.env_changed:
        return
    if state.previous_env is None:
        os.environ.pop(REVERT_ENV, None)
    else:
        os.environ[REVERT_ENV] = state.previous_env
    state.env_changed = False


def _wrapped(line: str) -> str:
    """`line` in lines of HEADER_WIDTH columns at most (words kept whole), indented after."""
    return textwrap.fill(
        line,
        width=HEADER_WIDTH,
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
