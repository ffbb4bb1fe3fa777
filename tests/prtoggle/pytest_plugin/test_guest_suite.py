"""The plugin is a quiet guest: a third-party suite's outcomes are the same with it and without.

The suite below is written the way real projects' suites are (sglang's unit tests do each
of these): its conftest.py sets environment variables before anything heavy is imported
(Triton's interpreter mode among them), tests spawn child Pythons and assert on their
exact stderr, one test exports SGLANG_DEBUG_REVERT_PR to a child as sglang's own toggle
tests do, and one calls a Triton kernel in interpret mode. It is run by real pytest
processes with the plugin auto-loaded (its entry point) and with `-p no:prtoggle`, with
and without SGLANG_DEBUG_REVERT_PR exported, and every test's outcome must be the same.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_fakes import ANSWER_FIX, TARGET_MODULE, FakeProject, fake_project

__all__ = ["fake_project"]

CONFTEST = """
import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on CPU
os.environ["GUEST_SUITE_MODE"] = "strict"
"""

TEST_CHILDREN = """
import os
import subprocess
import sys


def _child(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env={**os.environ, **env}, check=False,
    )


def test_a_child_writes_exactly_its_own_stderr():
    done = _child("import sys; sys.stderr.write('child says hi\\\\n')")
    assert done.stderr == "child says hi\\n"
    assert done.returncode == 0


def test_an_override_is_inherited_by_a_subprocess():
    done = _child("import os, sys; sys.stderr.write(os.environ['SGLANG_DEBUG_REVERT_PR'])",
                  SGLANG_DEBUG_REVERT_PR="12345")
    assert done.stderr == "12345"


def test_the_conftest_variables_are_seen():
    assert os.environ["GUEST_SUITE_MODE"] == "strict"
    assert os.environ["TRITON_INTERPRET"] == "1"
"""

TEST_TARGET = f"""
import pytest
import {TARGET_MODULE} as target


def test_the_fixed_code_runs():
    assert target.answer() == 42


@pytest.mark.xfail(reason="known bad", strict=True)
def test_a_known_failure():
    assert target.answer() == 0


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
"""

TEST_TRITON = """
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    row = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
    tl.store(out_ptr + offsets, tl.softmax(row), mask=mask)


def test_a_triton_kernel_in_interpret_mode():
    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty_like(x)
    _softmax_row[(1,)](x, out, 8, BLOCK=8)
    torch.testing.assert_close(out, torch.softmax(x, dim=0))
"""

_OUTCOME = re.compile(r"^\S+::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def write_guest_suite(root: Path) -> Path:
    suite = root / "guest"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_children.py").write_text(TEST_CHILDREN)
    (suite / "test_target.py").write_text(TEST_TARGET)
    (suite / "test_triton.py").write_text(TEST_TRITON)
    return suite


def outcomes(suite: Path, env: dict[str, str], *extra: str) -> tuple[int, dict[str, str], bool]:
    """pytest's exit status, each test's outcome (`-v` lines) and whether prtoggle loaded."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:xdist", *extra, str(suite)],
        env=env,
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = {}
    for line in done.stdout.splitlines():
        match = _OUTCOME.match(line)
        if match:
            found[match.group(1)] = match.group(2)
    plugins = [line for line in done.stdout.splitlines() if line.startswith("plugins:")]
    return done.returncode, found, "prtoggle-" in "".join(plugins)


@pytest.mark.parametrize("exported", [None, "27338", str(ANSWER_FIX)])
def test_a_third_party_suite_has_the_same_outcomes_with_the_plugin_and_without(
    fake_project: FakeProject, tmp_path: Path, exported: str | None
) -> None:
    suite = write_guest_suite(tmp_path)
    skip = ("TRITON_INTERPRET", "PYTEST_", "SGLANG_DEBUG_REVERT_PR")
    env = {k: v for k, v in fake_project.env().items() if not k.startswith(skip)}
    if exported is not None:
        env["SGLANG_DEBUG_REVERT_PR"] = exported
    code, found, loaded = outcomes(suite, env)
    assert loaded, "the plugin must be auto-loaded through its entry point"
    assert (code, found, False) == outcomes(suite, env, "-p", "no:prtoggle")
    assert (code, found) == (
        0,
        {
            "test_the_conftest_variables_are_seen": "PASSED",
            "test_a_child_writes_exactly_its_own_stderr": "PASSED",
            "test_an_override_is_inherited_by_a_subprocess": "PASSED",
            "test_the_fixed_code_runs": "PASSED",
            "test_a_known_failure": "XFAIL",
            "test_skipped": "SKIPPED",
            "test_a_triton_kernel_in_interpret_mode": "PASSED",
        },
    )
