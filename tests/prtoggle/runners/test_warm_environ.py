"""A warm run whose program sets a variable the preload read at import gets a fresh answer."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_fakes import ANSWER_FIX, TARGET_MODULE, FakeProject, fake_project
from test_warm_worker import stable_env

from prtoggle.runners.child_process import run_child
from prtoggle.runners.warm_client import WarmWorker

__all__ = ["fake_project"]

READER_MODULE = "prtoggle_env_reader"
READER_SOURCE = """\
import os

MODE = os.environ.get("READER_MODE", "unset")  # read once, at import, like triton's knobs
LEVEL = os.environ.get("READER_LEVEL", "0")
"""
SETS_THEN_IMPORTS = (
    "import os; os.environ['READER_MODE'] = 'interpret'; "
    f"import {READER_MODULE}; print({READER_MODULE}.MODE)"
)


@pytest.fixture
def worker(fake_project: FakeProject) -> Iterator[WarmWorker]:
    (fake_project.source_dir / f"{READER_MODULE}.py").write_text(READER_SOURCE)
    env = {k: v for k, v in stable_env().items() if k not in ("READER_MODE", "READER_LEVEL")}
    with WarmWorker(preload=(READER_MODULE,), base_env=env) as warm:
        yield warm


def test_a_run_that_sets_a_variable_the_preload_read_gets_a_worker_built_with_that_value(
    worker: WarmWorker, caplog: pytest.LogCaptureFixture
) -> None:
    argv = [sys.executable, "-c", SETS_THEN_IMPORTS]
    env = worker.base_env
    assert run_child(argv, env=env).stdout == "interpret\n"  # what a fresh process says
    with caplog.at_level(logging.WARNING, logger="prtoggle.runners.warm_client"):
        first = worker.run(argv, env=env)
        first_server = worker.server_pid
        second = worker.run(argv, env=env)
    assert (first.returncode, first.stdout, second.stdout) == (0, "interpret\n", "interpret\n")
    assert (worker.warm_runs, worker.cold_runs, worker.stepped_aside) == (2, 0, None)
    assert (worker.adopted, worker.rebuilds) == ({"READER_MODE": "interpret"}, 1)
    assert worker.server_pid == first_server  # the second run needed no new worker
    assert worker.server_env()["READER_MODE"] == "interpret"
    assert "READER_MODE" not in worker.base_env  # the command's own env is unchanged
    assert caplog.records == []


def test_two_runs_at_once_that_set_the_variable_share_one_rebuilt_worker(
    worker: WarmWorker,
) -> None:
    argv = [sys.executable, "-c", SETS_THEN_IMPORTS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda _: worker.run(argv, env=worker.base_env), range(2)))
    assert [(run.returncode, run.stdout) for run in runs] == [(0, "interpret\n")] * 2
    assert (worker.stepped_aside, worker.rebuilds, worker.cold_runs) == (None, 1, 0)


def test_runs_that_set_a_preloaded_variable_to_different_values_run_fresh_after_one_line(
    worker: WarmWorker, caplog: pytest.LogCaptureFixture
) -> None:
    def sets(value: str) -> list[str]:
        code = SETS_THEN_IMPORTS.replace("'interpret'", repr(value))
        return [sys.executable, "-c", code]

    with caplog.at_level(logging.WARNING, logger="prtoggle.runners.warm_client"):
        answers = [worker.run(sets(value), env=worker.base_env).stdout for value in "abc"]
    assert answers == ["a\n", "b\n", "c\n"]
    reason = "runs set READER_MODE to different values"
    assert worker.stepped_aside == reason
    assert (worker.warm_runs, worker.cold_runs) == (2, 2)  # the third: plain from the start
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [f"prtoggle: no warm worker from here: {reason}"]
    assert len(messages[0]) < 100


def test_a_run_that_leaves_out_the_variable_the_worker_was_built_with_runs_on_the_one_before(
    worker: WarmWorker,
) -> None:
    worker.run([sys.executable, "-c", SETS_THEN_IMPORTS], env=worker.base_env)
    leaves_it = f"import {READER_MODULE}; print({READER_MODULE}.MODE)"
    runs = [worker.run([sys.executable, "-c", leaves_it], env=worker.base_env) for _ in "abcd"]
    assert [(run.returncode, run.stdout) for run in runs] == [(0, "unset\n")] * 4  # as fresh
    # each made again, warm, on the server built before READER_MODE was adopted
    assert (worker.base_runs, worker.unset_runs, worker.stepped_aside) == (4, 0, None)
    again = worker.run([sys.executable, "-c", SETS_THEN_IMPORTS], env=worker.base_env)
    assert (again.returncode, again.stdout) == (0, "interpret\n")
    assert (worker.warm_runs, worker.cold_runs) == (6, 0)


def test_with_two_variables_adopted_a_run_leaving_them_out_is_fresh_and_three_step_aside(
    worker: WarmWorker,
) -> None:
    sets_both = (
        "import os; os.environ['READER_MODE'] = 'interpret'; os.environ['READER_LEVEL'] = '2'; "
        f"import {READER_MODULE} as r; print(r.MODE, r.LEVEL)"
    )
    first = worker.run([sys.executable, "-c", sets_both], env=worker.base_env)
    assert (first.stdout, worker.rebuilds) == ("interpret 2\n", 2)
    leaves_them = f"import {READER_MODULE} as r; print(r.MODE, r.LEVEL)"
    runs = [worker.run([sys.executable, "-c", leaves_them], env=worker.base_env) for _ in "abcd"]
    assert [(run.returncode, run.stdout) for run in runs] == [(0, "unset 0\n")] * 4
    assert worker.stepped_aside == "3 runs did not set READER_LEVEL as the first did"
    assert (worker.warm_runs, worker.cold_runs, worker.base_runs) == (4, 4, 0)


def test_a_run_that_sets_other_variables_or_the_same_value_stays_warm(worker: WarmWorker) -> None:
    code = (
        "import os; os.environ['UNRELATED'] = '1'; os.environ.pop('READER_MODE', None); "
        f"import {READER_MODULE}; print({READER_MODULE}.MODE)"
    )
    run = worker.run([sys.executable, "-c", code], env=worker.base_env)
    assert (run.returncode, run.stdout) == (0, "unset\n")
    assert (worker.warm_runs, worker.cold_runs, worker.stepped_aside) == (1, 0, None)


TRITON_CONFTEST = 'import os\nos.environ["TRITON_INTERPRET"] = "1"\n'
TRITON_TEST = """
import torch
import triton
import triton.language as tl
import {TARGET} as target


@triton.jit
def _softmax_row(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    row = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
    tl.store(out_ptr + offsets, tl.softmax(row), mask=mask)


def test_softmax_kernel_and_the_answer():
    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty_like(x)
    _softmax_row[(1,)](x, out, 8, BLOCK=8)
    torch.testing.assert_close(out, torch.softmax(x, dim=0))
    assert target.answer() == 42
""".replace("{TARGET}", TARGET_MODULE)


def test_coverage_serves_warm_and_gives_the_cold_answer_for_a_suite_setting_triton_interpret(
    fake_project: FakeProject, tmp_path: Path
) -> None:
    suite = tmp_path / "triton_suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (suite / "conftest.py").write_text(TRITON_CONFTEST)
    (suite / "test_kernel.py").write_text(TRITON_TEST)
    env = {k: v for k, v in fake_project.env().items() if k != "TRITON_INTERPRET"}
    argv = [sys.executable, "-m", "prtoggle", "coverage", "-r", str(ANSWER_FIX), "--json"]
    command = ["--", sys.executable, "-m", "pytest", "-q", str(suite)]
    result = subprocess.run(
        [*argv, *command], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr
    assert '"guarded_by": [\n      "test_kernel.py::test_softmax_kernel_and_the_answer"\n    ]' in (
        result.stdout
    )
    assert '"plain_failing": []' in result.stdout
    assert "warm" not in result.stderr  # served warm: no line about the worker
    assert os.environ.get("TRITON_INTERPRET") == "1"  # this session's own, left as it was
