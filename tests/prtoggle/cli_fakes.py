"""Fake registries, target modules and scenarios for the CLI and plugin tests."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import prtoggle.recipes.registry
from prtoggle.cli.main import cli

TARGET_MODULE = "prtoggle_fake_target"
IN_FORCE_LINE = re.compile(r"^prtoggle: pid \d+: PRs? [\d, ]+ in force \([^)\n]*\)\n", re.MULTILINE)
"""The line each process logs on stderr when reverts are put in force in it (run's children)."""
SCENARIO_MODULE = "prtoggle_fake_scenario"

TARGET_SOURCE = """\
def answer():
    value = 42
    return value


def first_half():
    half = 21
    return half


def second_half():
    half = 21
    return half
"""

SCENARIO_SOURCE = '''\
"""A fake scenario: clean when answer() is 42, a named failure otherwise."""
from fixes.scenarios.common import ScenarioOptions, ScenarioOutcome, run_scenario_main

import prtoggle_fake_target


def run(options: ScenarioOptions) -> ScenarioOutcome:
    value = prtoggle_fake_target.answer()
    if value == 42:
        return ScenarioOutcome(outcome="clean", message=f"answer {value} on {options.device}")
    return ScenarioOutcome(outcome="failure", error="WrongAnswer", site="fake.answer",
                           message=f"got {value}, expected 42")


if __name__ == "__main__":
    run_scenario_main(run, description="fake")
'''

FIX_TEMPLATE = """\
pr: {pr}
title: {title}
merged: {merged}
component: {module}
symptom: wrong-output
expect: "{expect}"
{repro}patches:
  - target: {module}.{function}
    edits:
      - match: "{match}"
        replacement: "{replacement}"
"""

ANSWER_FIX = 90001  # answer(): 42 -> 41; its scenario reproduces
BROKEN_FIX = 90002  # matches nothing: its revert does not apply
FIRST_HALF_FIX = 90003  # first_half(): 21 -> 0
SECOND_HALF_FIX = 90004  # second_half(): 21 -> 0
HARMLESS_FIX = 90005  # second_half(): `return half` -> `return (half)`
REGISTERED = f"{ANSWER_FIX}, {BROKEN_FIX}, {FIRST_HALF_FIX}, {SECOND_HALF_FIX}, {HARMLESS_FIX}"
"""The fake project's PRs as the CLI lists them in its choices."""


@dataclass(frozen=True)
class FakeProject:
    """A fake registry directory plus the source directory of its target and scenario."""

    registry_dir: Path
    source_dir: Path

    def env(self) -> dict[str, str]:
        """os.environ plus the fake registry and sources, for a child process."""
        python_path = os.pathsep.join([str(self.source_dir), os.environ.get("PYTHONPATH", "")])
        return {
            **os.environ,
            "PRTOGGLE_YAML_PATH": str(self.registry_dir),
            "PRTOGGLE_SGLANG_UPSTREAM": "0",  # no built-in sglang-upstream collection
            "PYTHONPATH": python_path.rstrip(os.pathsep),
        }


def write_fake_project(root: Path) -> FakeProject:
    registry_dir, source_dir = root / "registry", root / "src"
    registry_dir.mkdir()
    source_dir.mkdir()
    (source_dir / f"{TARGET_MODULE}.py").write_text(TARGET_SOURCE)
    (source_dir / f"{SCENARIO_MODULE}.py").write_text(SCENARIO_SOURCE)
    fixes = [
        (ANSWER_FIX, "answer", "value = 42", "value = 41", "2026-03-01", "WrongAnswer", True),
        (BROKEN_FIX, "answer", "value = 7", "value = 8", "2026-01-01", "Never", False),
        (FIRST_HALF_FIX, "first_half", "half = 21", "half = 0", "2026-02-01", "x", False),
        (SECOND_HALF_FIX, "second_half", "half = 21", "half = 0", "2026-04-01", "x", False),
        (HARMLESS_FIX, "second_half", "return half", "return (half)", "2026-05-01", "x", False),
    ]
    for pr, function, match, replacement, merged, expect, with_repro in fixes:
        text = FIX_TEMPLATE.format(
            pr=pr,
            title=f"fake fix {pr}",
            merged=merged,
            module=TARGET_MODULE,
            function=function,
            match=match,
            replacement=replacement,
            expect=expect,
            repro=f"repro: {SCENARIO_MODULE}\n" if with_repro else "",
        )
        (registry_dir / f"{pr}.yaml").write_text(text)
    return FakeProject(registry_dir=registry_dir, source_dir=source_dir)


@pytest.fixture
def fake_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProject]:
    """The fake project as the only registry (the shipped one replaced by an empty dir).

    The built-in collection of an installed sglang's own recipes is left out too.
    """
    project = write_fake_project(tmp_path)
    empty = tmp_path / "no-shipped-fixes"
    empty.mkdir()
    monkeypatch.setattr(prtoggle.recipes.registry, "shipped_yaml_dir", lambda: empty)
    for key, value in project.env().items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(project.source_dir))
    yield project
    for module in (TARGET_MODULE, SCENARIO_MODULE):
        sys.modules.pop(module, None)


def invoke(*args: str) -> Result:
    """`prtoggle ARGS...` run in this process through click's test runner."""
    return CliRunner().invoke(cli, list(args), prog_name="prtoggle")


def python_command(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def without_in_force_lines(stderr: str) -> str:
    """`stderr` less the in-force lines of the reverting processes (IN_FORCE_LINE)."""
    return IN_FORCE_LINE.sub("", stderr)


def second_collection(fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A collection `sglang` holding ANSWER_FIX again (sglang's text: patches only)."""
    directory = fake_project.registry_dir.parent / "sglang"
    directory.mkdir()
    (directory / f"{ANSWER_FIX}.yaml").write_text(
        f"patches:\n  - target: {TARGET_MODULE}.answer\n    edits:\n"
        "      - match: value = 42\n        replacement: value = 40\n"
        "  - target: absent_engine.layers.forward\n    edits:\n      - match: x = 1\n"
    )
    monkeypatch.setenv(
        "PRTOGGLE_YAML_PATH", os.pathsep.join([str(fake_project.registry_dir), str(directory)])
    )
    return directory


def absent_engine_collection(fake_project: FakeProject) -> Path:
    """Collection `demo` (not on PRTOGGLE_YAML_PATH yet): ANSWER_FIX and FIRST_HALF_FIX for
    a package not importable here, as the demo engine's are in a real engine's environment."""
    demo = fake_project.registry_dir.parent / "demo"
    demo.mkdir()
    for pr in (ANSWER_FIX, FIRST_HALF_FIX):
        (demo / f"{pr}.yaml").write_text(
            "patches:\n  - target: prtoggle_no_such_engine.answer\n    edits:\n"
            "      - match: value = 42\n        replacement: value = 41\n"
        )
    return demo
