"""Tests for prtoggle.protocol: the names both sides of a process boundary share."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from prtoggle import protocol
from prtoggle.revert.toggle import child_env


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (3, 3), (-2, 130), (-15, 143)])
def test_shell_status_turns_a_signal_into_128_plus_its_number(returncode: int, status: int) -> None:
    assert protocol.shell_status(returncode) == status


def test_module_command_passes_device_and_provider() -> None:
    assert protocol.module_command("fixes.scenarios.x", device="cuda", provider="triton") == [
        sys.executable,
        "-m",
        "fixes.scenarios.x",
        "--device",
        "cuda",
        "--provider",
        "triton",
    ]
    assert protocol.module_command("m", device="cpu", provider=None)[-2:] == ["--device", "cpu"]


def test_the_child_bootstrap_imports_no_prtoggle_module_when_nothing_is_reverted() -> None:
    code = "import sys; print(sorted(m for m in sys.modules if m.startswith('prtoggle')))"
    env = child_env((), base={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout == "[]\n"


def test_scenarios_write_the_outcome_prefix_of_the_protocol() -> None:
    from fixes.scenarios import common

    assert common.OUTCOME_PREFIX is protocol.OUTCOME_PREFIX


def test_every_bench_result_key_is_a_field_of_the_benchmarks_result() -> None:
    from fixes.benchmarks.common import BenchResult

    fields = {field.name for field in dataclasses.fields(BenchResult)}
    assert set(protocol.BENCH_RESULT_KEYS) <= fields
