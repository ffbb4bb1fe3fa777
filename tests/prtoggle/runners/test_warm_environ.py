"""A warm run whose program sets a variable the preload read at import gets a fresh answer."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import shutil
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
from prtoggle.runners.warm_environ import native_prefixes

__all__ = ["fake_project"]

READER_MODULE = "prtoggle_env_reader"
READER_SOURCE = """\
import os

MODE = os.environ.get("READER_MODE", "unset")  # read once, at import, like triton's knobs
LEVEL = os.environ.get("READER_LEVEL", "0")
CACHE = os.environ.get("READER_CACHE")  # like torch's cache_dir(): read, set when unset
if CACHE is None:
    os.environ["READER_CACHE"] = CACHE = "/default/cache"
"""
SETS_THEN_IMPORTS = (
    "import os; os.environ['READER_MODE'] = 'interpret'; "
    f"import {READER_MODULE}; print({READER_MODULE}.MODE)"
)


@pytest.fixture
def worker(fake_project: FakeProject) -> Iterator[WarmWorker]:
    (fake_project.source_dir / f"{READER_MODULE}.py").write_text(READER_SOURCE)
    names = ("READER_MODE", "READER_LEVEL", "READER_CACHE")
    env = {k: v for k, v in stable_env().items() if k not in names}
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


def test_runs_that_set_a_variable_of_a_pure_python_package_it_never_read_at_import_stay_warm(
    worker: WarmWorker, caplog: pytest.LogCaptureFixture
) -> None:
    # sglang's tests override SGLANG_* variables its code reads only when called
    def sets(value: str) -> list[str]:
        code = (
            f"import os; os.environ['PRTOGGLE_ENV_READER_FLAG'] = {value!r}; "
            f"import {READER_MODULE}; print(os.environ['PRTOGGLE_ENV_READER_FLAG'])"
        )
        return [sys.executable, "-c", code]

    with caplog.at_level(logging.WARNING, logger="prtoggle.runners.warm_client"):
        answers = [worker.run(sets(value), env=worker.base_env).stdout for value in "abc"]
    assert answers == ["a\n", "b\n", "c\n"]
    assert (worker.warm_runs, worker.cold_runs, worker.rebuilds) == (3, 0, 0)
    assert (worker.stepped_aside, caplog.records) == (None, [])


def test_a_run_that_sets_a_variable_to_the_value_the_preload_set_itself_stays_warm(
    worker: WarmWorker,
) -> None:
    # torch's import reads TORCHINDUCTOR_CACHE_DIR unset and sets its default; so do runs
    def sets(value: str) -> list[str]:
        code = f"import os; os.environ['READER_CACHE'] = {value!r}; import {READER_MODULE} as r"
        return [sys.executable, "-c", code + "; print(r.CACHE)"]

    same = worker.run(sets("/default/cache"), env=worker.base_env)
    assert (same.returncode, same.stdout, worker.rebuilds) == (0, "/default/cache\n", 0)
    other = worker.run(sets("/elsewhere"), env=worker.base_env)  # the preload saw otherwise
    assert (other.returncode, other.stdout, worker.rebuilds) == (0, "/elsewhere\n", 1)
    assert (worker.warm_runs, worker.cold_runs) == (2, 0)


NATIVE_PACKAGE = "prtoggle_native_reader"


def test_runs_that_set_variables_of_a_package_with_native_code_loaded_run_fresh(
    fake_project: FakeProject, caplog: pytest.LogCaptureFixture
) -> None:
    package = fake_project.source_dir / NATIVE_PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("from . import _json  # compiled: reads unseen\n")
    shutil.copy(_extension_file("_json"), package)
    code = "import os; os.environ['PRTOGGLE_NATIVE_READER_MODE'] = {!r}; print('ran')"
    argvs = [[sys.executable, "-c", code.format(value)] for value in "ab"]
    with WarmWorker(preload=(NATIVE_PACKAGE,), base_env=stable_env()) as warm:
        with caplog.at_level(logging.WARNING, logger="prtoggle.runners.warm_client"):
            runs = [warm.run(argv, env=warm.base_env) for argv in argvs]
        assert [run.stdout for run in runs] == ["ran\n", "ran\n"]
        reason = "runs set PRTOGGLE_NATIVE_READER_MODE to different values"
        assert warm.stepped_aside == reason


def test_the_prefixes_watched_are_torch_and_triton_always_and_packages_with_native_modules():
    class Module:
        def __init__(self, file: str | None) -> None:
            self.__file__ = file

    loaded = {
        "pure": Module("/site/pure/__init__.py"),
        "pure.sub": Module("/site/pure/sub.py"),
        "withc": Module("/site/withc/__init__.py"),
        "withc._ops": Module(f"/site/withc/_ops{importlib.machinery.EXTENSION_SUFFIXES[0]}"),
        "nofile": Module(None),
    }
    preloaded = ["torch", "pure.sub", "withc", "nofile", "triton.language", "prtoggle"]
    assert native_prefixes(preloaded, loaded=loaded) == (
        "TORCH_", "TORCHELASTIC_", "PYTORCH_", "CUDA_", "NCCL_", "OMP_", "MKL_", "KMP_",
        "CUBLAS", "CUDNN",
        "WITHC_",
        "TRITON_",
    )  # fmt: skip


def _extension_file(name: str) -> Path:
    """The shared object of a standard-library extension module (copied into a package, it
    loads as that package's own native code)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    return Path(spec.origin)


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
