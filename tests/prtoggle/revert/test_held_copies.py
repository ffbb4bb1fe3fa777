"""Tests for what a landed revert says it cannot reach: a replaced function held by a
`functools.partial` or a default argument in a loaded module of its package, and a module
imported under two names. Real processes: `prtoggle run`, and `reverted()` in a child."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CORE = 'def helper():\n    return "fixed"\n\n\ndef compute():\n    return 1\n'
OTHER = """\
import functools

from app import core

P = functools.partial(core.helper)


def uses(h=core.helper):
    return h()


class Holder:
    @staticmethod
    def kw(*, h=core.helper):
        return h()
"""
RECIPE = """\
pr: 931
title: helper and compute
patches:
  - target: app.core.compute
    edits:
      - match: return 1
        replacement: return 0
names:
  - scope: app.core
    define: |
      def helper():
          return "pre"
"""
PREFIX = "PartialRevertWarning: PR 931 reverted in part in this process: "


def run(tmp_path: Path, code: str, *, api: bool = False) -> subprocess.CompletedProcess[str]:
    """`code` run in a child on package `app`: under `prtoggle run -r 931`, or (`api`) as
    is, where it calls `prtoggle.reverted(931)` itself."""
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "app" / "__init__.py").write_text("")
    (src / "app" / "core.py").write_text(CORE)
    (src / "app" / "other.py").write_text(OTHER)
    (tmp_path / "reg").mkdir()
    (tmp_path / "reg" / "931.yaml").write_text(RECIPE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRTOGGLE_", "SGLANG_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(src), str(src / "app")])
    env |= {"PRTOGGLE_YAML_PATH": str(tmp_path / "reg"), "PRTOGGLE_WARM": "0"}
    command = [] if api else [sys.executable, "-m", "prtoggle", "run", "-r", "931", "--"]
    return subprocess.run(
        [*command, sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def said(stderr: str) -> list[str]:
    return [line.split(PREFIX, 1)[1] for line in stderr.splitlines() if PREFIX in line]


def test_a_partial_and_default_arguments_holding_a_replaced_function_are_said(
    tmp_path: Path,
) -> None:
    code = """\
        import app.other, app.core, prtoggle
        with prtoggle.reverted(931):  # the copies were made with the fix: they keep it
            print(app.core.helper(), app.other.P(), app.other.uses())
        """
    done = run(tmp_path, code, api=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pre fixed fixed\n"
    assert said(done.stderr) == [
        "app.other.P, a functools.partial, holds the post-fix app.core.helper (the revert "
        "rebinds app.core.helper only)",
        "a default argument of app.other.uses holds the post-fix app.core.helper",
        "a default argument of app.other.Holder.kw holds the post-fix app.core.helper",
    ]


def test_a_module_imported_under_two_names_is_said(tmp_path: Path) -> None:
    done = run(tmp_path, "import core, app.core\nprint(core.compute(), app.core.compute())\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 0\n"  # the second module object keeps the fixed code: said
    assert said(done.stderr) == [
        "module app.core is also imported as core (the same file, another module object): "
        "the revert changes app.core only"
    ]


def test_copies_made_after_the_revert_landed_are_reverted_and_nothing_is_said(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, "import app.other, app.core\nprint(app.core.helper(), app.other.P())\n")
    assert (done.returncode, done.stdout, said(done.stderr)) == (0, "pre pre\n", [])
