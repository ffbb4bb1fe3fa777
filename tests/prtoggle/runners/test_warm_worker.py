"""Tests for the warm worker: each warm run must look exactly like a fresh child process."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_fakes import (
    ANSWER_FIX,
    BROKEN_FIX,
    FIRST_HALF_FIX,
    SECOND_HALF_FIX,
    FakeProject,
    fake_project,
    without_in_force_lines,
)
from process_checks import alive, assert_signal_ends_all, parent_of

from prtoggle.errors import RunnerError
from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE
from prtoggle.revert.toggle import child_env
from prtoggle.runners.child_outcome import classify_exit
from prtoggle.runners.child_process import CommandRun, run_child
from prtoggle.runners.warm_client import WarmWorker, warm_enabled
from prtoggle.runners.warm_eligibility import python_invocation

__all__ = ["fake_project"]

DIRTY_MODULE = "prtoggle_dirty_preload"
DIRTY_SOURCE = """\
import os, signal
from prtoggle.revert import toggle
from prtoggle.detect import config
from prtoggle.detect.probes import clock
from prtoggle.detect.probes import witness

config.set_mode("record")
witness.witness_tables().slot_for("nan", "dirty.site")
clock.phase("replay").__enter__()  # entered, never left: the phase stays "replay"
clock.set_step(7)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda number, frame: None)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
os.environ["DIRTY_VARIABLE"] = "set at import"
os.chdir("/")
toggle.apply_revert(90003)
"""
"""A preloaded module that changes every kind of process-global state at import."""

PROBE_SOURCE = """\
import gc, json, os, signal, sys
import prtoggle_fake_target as target
from prtoggle import detect
from prtoggle.revert import toggle
from prtoggle.detect.probes import clock
from prtoggle.detect.probes import witness

names = ("SIGINT", "SIGTERM", "SIGPIPE", "SIGHUP", "SIGUSR1", "SIGCHLD", "SIGXFSZ")
print(json.dumps({
    "name": __name__,
    "file": globals().get("__file__"),
    "argv": sys.argv,
    "path0": sys.path[0],
    "python_path_in_sys_path": [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                if p in sys.path],
    "cwd": os.getcwd(),
    "probe_value": os.environ.get("PROBE_VALUE"),
    "dirty_variable": os.environ.get("DIRTY_VARIABLE"),
    "revert_env": os.environ.get("SGLANG_DEBUG_REVERT_PR"),
    "answer": target.answer(),
    "halves": [target.first_half(), target.second_half()],
    "active_reverts": list(toggle.active_reverts()),
    "signals": {name: repr(signal.getsignal(getattr(signal, name))) for name in names},
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "session_leader": os.getsid(0) == os.getpid(),
    "mode": detect.current_mode(),
    "nan_detection": detect.nan_detection_enabled(),
    "sites": sorted(map(list, witness.witness_tables().site_names().values())),
    "phase": detect.current_phase(),
    "step": detect.current_step(),
    "stdin": sys.stdin.read(),
    "collections": gc.isenabled(),
}, sort_keys=True))
"""


@pytest.fixture
def project(fake_project: FakeProject, monkeypatch: pytest.MonkeyPatch) -> FakeProject:
    """The fake project plus the dirty preload module and the probe, all on PYTHONPATH."""
    (fake_project.source_dir / f"{DIRTY_MODULE}.py").write_text(DIRTY_SOURCE)
    (fake_project.source_dir / "probe_main.py").write_text(PROBE_SOURCE)
    monkeypatch.setenv("PROBE_VALUE", "from the parent")
    return fake_project


@pytest.fixture
def worker(project: FakeProject) -> Iterator[WarmWorker]:
    preload = ("prtoggle.revert.toggle", "prtoggle.detect", DIRTY_MODULE)
    with WarmWorker(preload=preload, base_env=stable_env()) as warm:
        yield warm


def stable_env(**extra: str) -> dict[str, str]:
    """os.environ without PYTEST_CURRENT_TEST (which pytest changes between phases)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}
    return {**env, **extra}


def both(worker: WarmWorker, argv: list[str], **options: object) -> tuple[CommandRun, CommandRun]:
    """The same command run fresh and warm; asserts the warm one really ran warm."""
    options.setdefault("env", stable_env())
    assert worker.cold_reason(argv, options["env"]) is None  # type: ignore[arg-type]
    fresh = run_child(argv, **options)  # type: ignore[arg-type]
    before = worker.warm_runs
    warm = worker.run(argv, **options)  # type: ignore[arg-type]
    assert worker.warm_runs == before + 1
    return fresh, warm


@pytest.mark.parametrize(
    "reverted", [(), (ANSWER_FIX,), (FIRST_HALF_FIX, SECOND_HALF_FIX)], ids=["none", "one", "two"]
)
def test_a_warm_run_sees_the_same_process_state_as_a_fresh_one(
    worker: WarmWorker, project: FakeProject, tmp_path: Path, reverted: tuple[int, ...]
) -> None:
    env = child_env(reverted, base=stable_env(SGLANG_SPEC_NAN_DETECTION="1"))
    argv = [sys.executable, str(project.source_dir / "probe_main.py"), "--flag", "x y"]
    fresh, warm = both(worker, argv, env=env, cwd=str(tmp_path))
    warm_err, fresh_err = without_in_force_lines(warm.stderr), without_in_force_lines(fresh.stderr)
    assert (warm.returncode, warm_err) == (fresh.returncode, fresh_err) == (0, "")
    fresh_state, warm_state = json.loads(fresh.stdout), json.loads(warm.stdout)
    assert warm_state == fresh_state
    assert warm_state["active_reverts"] == sorted(reverted)
    assert warm_state["cwd"] == str(tmp_path)
    assert warm_state["dirty_variable"] is None
    assert warm_state["mode"] == "raise"
    assert warm_state["sites"] == []
    assert (warm_state["phase"], warm_state["step"]) == ("eager", 0)
    assert warm_state["signals"]["SIGTERM"] == "<Handlers.SIG_DFL: 0>"
    assert warm_state["blocked"] == []


@pytest.mark.parametrize("form", ["module", "script", "code"])
def test_each_python_form_runs_its_main_like_the_interpreter(
    worker: WarmWorker, project: FakeProject, tmp_path: Path, form: str
) -> None:
    main = {
        "module": ["-m", "probe_main"],
        "script": [str(project.source_dir / "probe_main.py")],
        "code": ["-c", PROBE_SOURCE],
    }[form]
    argv = [sys.executable, *main, "arg"]
    fresh, warm = both(worker, argv, cwd=str(tmp_path))
    assert warm.returncode == fresh.returncode == 0, warm.stderr
    fresh_state, warm_state = json.loads(fresh.stdout), json.loads(warm.stdout)
    assert warm_state == fresh_state
    assert warm_state["name"] == "__main__"
    assert warm_state["argv"][1:] == ["arg"]


EXIT_PROGRAMS = {
    "exit 3": "import sys; sys.exit(3)",
    "exit None": "import sys; print('out'); sys.exit()",
    "exit message": "import sys; sys.exit('a message')",
    "exit 256": "import sys; sys.exit(256)",
    "uncaught error": "def f():\n    raise ValueError('bad value')\nf()",
    "os._exit": "import os, sys; print('lost', end=''); os._exit(7)",
    "SIGTERM": "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
    "KeyboardInterrupt": "raise KeyboardInterrupt",
    "atexit and thread": (
        "import atexit, threading, time\n"
        "atexit.register(print, 'atexit ran')\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "print('main done')"
    ),
    "stderr and stdout": "import sys; sys.stderr.write('to stderr\\n'); print('to stdout')",
}


@pytest.mark.parametrize("name", list(EXIT_PROGRAMS))
def test_exit_status_and_output_are_those_of_a_fresh_process(worker: WarmWorker, name: str) -> None:
    fresh, warm = both(worker, [sys.executable, "-c", EXIT_PROGRAMS[name]])
    assert warm.returncode == fresh.returncode
    assert warm.stdout == fresh.stdout
    assert warm.stderr == fresh.stderr


def test_a_revert_that_cannot_apply_stops_the_run_as_in_a_fresh_process(
    worker: WarmWorker,
) -> None:
    env = child_env((BROKEN_FIX,), base=stable_env())
    argv = [sys.executable, "-c", "import prtoggle_fake_target; print('ran unreverted')"]
    fresh, warm = both(worker, argv, env=env)
    assert warm.returncode == fresh.returncode == BOOTSTRAP_FAILURE_EXIT_CODE
    assert warm.stdout == fresh.stdout == ""
    assert without_in_force_lines(warm.stderr) == without_in_force_lines(fresh.stderr)
    assert without_in_force_lines(warm.stderr).startswith(
        "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: PR 90002 could not be reverted when "
        "prtoggle_fake_target was imported"
    )
    assert classify_exit(warm) == classify_exit(fresh) == "skip"


def test_a_revert_of_a_preloaded_target_that_cannot_apply_is_a_start_up_skip(
    project: FakeProject,
) -> None:
    env = child_env((BROKEN_FIX,), base=stable_env())
    argv = [sys.executable, "-c", "import prtoggle_fake_target; print('ran unreverted')"]
    with WarmWorker(preload=("prtoggle_fake_target",), base_env=stable_env()) as worker:
        warm = worker.run(argv, env=env)
    assert warm.returncode == 78
    assert warm.stdout == ""
    assert warm.stderr.startswith(
        "prtoggle: cannot apply SGLANG_DEBUG_REVERT_PR: prtoggle_fake_target.answer: edit 1 of 1"
    )
    assert classify_exit(warm) == classify_exit(run_child(argv, env=env)) == "skip"


def test_a_run_past_its_timeout_is_killed_with_its_group(worker: WarmWorker) -> None:
    code = (
        "import subprocess, time; subprocess.Popen(['sleep', '30']); "
        "print('up', flush=True); time.sleep(30)"
    )
    started = time.monotonic()
    run = worker.run([sys.executable, "-c", code], env=stable_env(), timeout=2.0)
    assert run.timed_out
    assert run.stdout == "up\n"
    assert time.monotonic() - started < 10


def test_commands_that_are_not_this_python_run_as_plain_children(worker: WarmWorker) -> None:
    run = worker.run(["/bin/sh", "-c", "echo $PROBE_VALUE; exit 4"])
    assert (run.returncode, run.stdout) == (4, "from the parent\n")
    assert (worker.warm_runs, worker.cold_runs) == (0, 1)
    assert worker.server_pid is None


def test_an_environment_that_differs_at_import_time_runs_cold(worker: WarmWorker) -> None:
    env = stable_env(OMP_NUM_THREADS="3", SGLANG_DEBUG_POISON="1")
    argv = [sys.executable, "-c", "import os; print(os.environ['OMP_NUM_THREADS'])"]
    assert worker.cold_reason(argv, env) == (
        "its environment differs from the worker's in OMP_NUM_THREADS"
    )
    assert worker.run(argv, env=env).stdout == "3\n"
    assert worker.cold_runs == 1
    assert worker.cold_reason(argv, stable_env(SGLANG_DEBUG_POISON="1")) is None


def test_recipe_folders_and_a_trace_folder_are_read_after_the_fork_so_runs_stay_warm(
    worker: WarmWorker, tmp_path: Path
) -> None:
    env = stable_env(PRTOGGLE_YAML_PATH=str(tmp_path), PRTOGGLE_TRACE_DIR=str(tmp_path))
    argv = [sys.executable, "-c", "print(1)"]
    assert worker.cold_reason(argv, env) is None


def test_python_invocation_accepts_only_option_free_forms() -> None:
    python = sys.executable
    assert python_invocation([python, "-m", "pytest", "-q"]) is not None
    assert python_invocation([python, "-c", "pass"]) is not None
    assert python_invocation([python, "script.py"]) is not None
    assert python_invocation([python, "-u", "script.py"]) is None
    assert python_invocation([python, "-m"]) is None
    assert python_invocation(["pytest", "-q"]) is None
    assert python_invocation(["./script.sh"]) is None


def test_warm_enabled_reads_the_switch_and_rejects_other_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRTOGGLE_WARM", "0")
    assert not warm_enabled()
    monkeypatch.setenv("PRTOGGLE_WARM", "1")
    assert warm_enabled() and not warm_enabled(cold=True)
    monkeypatch.setenv("PRTOGGLE_WARM", "maybe")
    with pytest.raises(Exception, match=r"PRTOGGLE_WARM='maybe' is not a boolean"):
        warm_enabled()


def test_close_kills_a_running_child_and_stops_the_server(worker: WarmWorker) -> None:
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    runs: list[CommandRun] = []
    thread = threading.Thread(
        target=lambda: runs.append(worker.run([sys.executable, "-c", code], env=stable_env()))
    )
    thread.start()
    deadline = time.monotonic() + 120  # the server's start-up under a loaded machine
    while not worker._live and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid,) = worker._live
    server = worker.server_pid
    worker.close()
    thread.join(timeout=10)
    assert runs and runs[0].returncode == -signal.SIGKILL
    assert not alive(pid)
    assert server is not None and not alive(server)


def test_the_server_and_its_runs_die_with_the_process_that_started_them(
    project: FakeProject,
) -> None:
    owner = textwrap.dedent(
        """
        import sys, threading, time
        from prtoggle.runners.warm_client import WarmWorker
        worker = WarmWorker(preload=("prtoggle.revert.toggle",))
        code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
        threading.Thread(target=worker.run, args=([sys.executable, "-c", code],)).start()
        while not worker._live:
            time.sleep(0.05)
        print(worker.server_pid, *worker._live, flush=True)
        time.sleep(60)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", owner], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    pids = [int(pid) for pid in process.stdout.readline().split()]
    process.kill()
    process.wait()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pids) == 2
    assert [pid for pid in pids if alive(pid)] == []


def test_a_preload_that_initialises_cuda_stops_the_server_with_a_clear_error(
    project: FakeProject,
) -> None:
    # On a machine without CUDA, make torch report an initialised context after import.
    (project.source_dir / "cuda_initialising.py").write_text(
        "import torch\ntorch.cuda.is_initialized = lambda: True\n"
    )
    worker = WarmWorker(preload=("cuda_initialising",), base_env=stable_env())
    try:
        with pytest.raises(RunnerError) as raised:
            worker.run([sys.executable, "-c", "pass"], env=stable_env())
        pid = worker.server_pid
    finally:
        worker.close()
    assert str(raised.value) == (
        f"the warm worker (pid {pid}) ended before reporting the run's pid "
        "(one of the modules it preloads (cuda_initialising) initialised CUDA, which a "
        "forked child cannot use); rerun with --cold or PRTOGGLE_WARM=0"
    )


def test_repro_through_the_worker_reports_what_fresh_processes_report(
    fake_project: FakeProject,
) -> None:
    from click.testing import CliRunner

    from prtoggle.cli.main import cli

    def repro(*options: str) -> list[dict[str, object]]:
        result = CliRunner().invoke(cli, ["repro", str(ANSWER_FIX), "--json", *options])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        for entry in answer:
            entry.pop("seconds", None)
            for variant in ("fixed", "reverted"):
                entry[variant].pop("seconds")
        return answer

    warm, cold = repro(), repro("--cold")
    assert warm == cold
    assert warm[0]["reproduced"] is True
    assert warm[0]["reverted"]["error"] == "WrongAnswer"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_cli_ends_the_warm_runs_and_the_server(
    project: FakeProject, tmp_path: Path, signum: int
) -> None:
    marker = tmp_path / "run.pid"
    check = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    cli = [sys.executable, "-m", "prtoggle", "bisect", "-r", str(ANSWER_FIX), "--"]
    process = subprocess.Popen([*cli, sys.executable, "-c", check], env=stable_env(), text=True)
    deadline = time.monotonic() + 120
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    run_pid = int(marker.read_text())
    server_pid = parent_of(run_pid)
    assert server_pid != process.pid  # the run is the server's child, not the CLI's
    assert_signal_ends_all(process, signum, [run_pid, server_pid])


def test_a_warm_run_finds_the_preloaded_objects_frozen_out_of_its_collections(
    worker: WarmWorker,
) -> None:
    code = "import gc; print(gc.get_freeze_count() > 0, gc.isenabled())"
    run = worker.run([sys.executable, "-c", code], env=stable_env())
    assert (run.returncode, run.stdout) == (0, "True True\n")


def test_closing_the_worker_runs_no_exit_handler_of_the_preloaded_modules(
    project: FakeProject, tmp_path: Path
) -> None:
    # the server ends without tearing its modules down; its runs still run theirs
    marker = tmp_path / "exit-handlers.txt"
    (project.source_dir / "prtoggle_exit_preload.py").write_text(
        "import atexit, os\n"
        "def _note():\n"
        f"    with open({str(marker)!r}, 'a') as out:\n"
        "        out.write(str(os.getpid()) + '\\n')\n"
        "atexit.register(_note)\n"
    )
    preload = ("prtoggle_exit_preload",)
    with WarmWorker(preload=preload, base_env=stable_env()) as worker:
        code = "import os; print(os.getpid())"
        run = worker.run([sys.executable, "-c", code], env=stable_env())
        server = worker.server_pid
        assert worker.warm_runs == 1
    assert run.returncode == 0
    assert server is not None and not alive(server)
    assert marker.read_text().split() == [run.stdout.strip()]


LAZY_MODULE = "prtoggle_lazy_import"
WHERE_IMPORTED = "import os, sys; import prtoggle_lazy_import as m; print(m.PID == os.getpid())"


def test_a_widened_worker_forks_runs_that_find_the_new_modules_imported(
    project: FakeProject,
) -> None:
    (project.source_dir / f"{LAZY_MODULE}.py").write_text("import os\nPID = os.getpid()\n")
    argv = [sys.executable, "-c", WHERE_IMPORTED]
    with WarmWorker(preload=("json",), base_env=stable_env()) as worker:
        before = worker.run(argv, env=stable_env())
        first_server = worker.server_pid
        added = worker.widen(["json", LAZY_MODULE, LAZY_MODULE])
        after = worker.run(argv, env=stable_env())
        assert worker.widen([LAZY_MODULE]) == 0  # nothing new
        server = worker.server_pid
    assert (before.returncode, before.stdout) == (0, "True\n")  # imported by the run
    assert (added, worker.preload) == (1, ("json", LAZY_MODULE))
    assert (after.returncode, after.stdout) == (0, "False\n")  # imported before the fork
    assert server == first_server and worker.warm_runs == 2  # imported in place


PREPARED_SIZE = (
    "from prtoggle.patching.freshness import compiled_file\n"
    "print(compiled_file.cache_info().currsize)"
)


def test_files_the_worker_prepared_are_found_read_by_runs_it_forks_later(
    project: FakeProject,
) -> None:
    prepared = project.source_dir / "prepared_mod.py"
    prepared.write_text("def size():\n    return 1\n")
    argv = [sys.executable, "-c", PREPARED_SIZE]
    preload = ("prtoggle.patching.freshness",)
    with WarmWorker(preload=preload, base_env=stable_env()) as worker:
        before = worker.run(argv, env=stable_env())
        worker.prepare_sources([str(prepared), str(project.source_dir / "missing.py")])
        after = worker.run(argv, env=stable_env())
        first = worker.server_pid
        worker.close()  # the next run starts a server again: it prepares them too
        rebuilt = worker.run(argv, env=stable_env())
        assert worker.server_pid != first and worker.warm_runs == 3
    assert [before.stdout, after.stdout, rebuilt.stdout] == ["0\n", "1\n", "1\n"]
    assert worker.prepared == (str(prepared), str(project.source_dir / "missing.py"))


def test_a_widened_preload_that_initialises_cuda_goes_back_to_the_narrower_one(
    project: FakeProject, caplog: pytest.LogCaptureFixture
) -> None:
    (project.source_dir / "cuda_initialising.py").write_text(
        "import torch\ntorch.cuda.is_initialized = lambda: True\n"
    )
    with WarmWorker(preload=("json",), base_env=stable_env()) as worker:
        worker.widen(["cuda_initialising"])
        with caplog.at_level(logging.WARNING, logger="prtoggle.runners.warm_client"):
            run = worker.run([sys.executable, "-c", "print('ran')"], env=stable_env())
    assert (run.returncode, run.stdout) == (0, "ran\n")
    assert worker.preload == ("json",)
    assert [record.getMessage() for record in caplog.records] == [
        "prtoggle: a module the warm worker was asked to preload too initialised CUDA; runs "
        "fork from the narrower preload"
    ]


def test_a_run_in_flight_when_a_widened_preload_initialises_cuda_is_killed_not_orphaned(
    project: FakeProject, tmp_path: Path
) -> None:
    (project.source_dir / "cuda_initialising.py").write_text(
        "import torch\ntorch.cuda.is_initialized = lambda: True\n"
    )
    marker = tmp_path / "first.pid"
    code = (
        "import os, pathlib, time\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if not marker.exists():\n"
        "    marker.write_text(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "print('ran')\n"
    )
    runs: list[CommandRun] = []
    with WarmWorker(preload=("json",), base_env=stable_env()) as worker:
        worker.start()
        thread = threading.Thread(
            target=lambda: runs.append(worker.run([sys.executable, "-c", code], env=stable_env()))
        )
        thread.start()
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.widen(["cuda_initialising"])
        thread.join(timeout=30)
        after = worker.run([sys.executable, "-c", code], env=stable_env())
    assert not thread.is_alive()
    assert [(run.returncode, run.stdout) for run in runs] == [(-signal.SIGKILL, "")]
    assert not alive(int(marker.read_text()))  # killed with the server, not left running
    assert (after.returncode, after.stdout, worker.preload) == (0, "ran\n", ("json",))


def test_a_child_that_gets_sigterm_before_it_resets_its_signals_only_exits() -> None:
    # the server's SIGTERM handler is inherited by a fork until the child resets it: in
    # the child it must not try to reap the server's runs (a traceback, status 1)
    code = textwrap.dedent(
        """
        import os, socket
        from prtoggle.runners.warm_server import _Server, _stop
        mine, theirs = socket.socketpair()
        server = _Server(requests=mine, fresh_signals={}, base_path=[])
        sleeper = os.fork()
        if sleeper == 0:  # a run: the leader of its own session, as the server makes it
            os.setsid()
            os.execv("/bin/sleep", ["sleep", "30"])
        server.children[sleeper] = (os.pidfd_open(sleeper), theirs)
        child = os.fork()
        if child == 0:
            _stop(server)  # as the inherited handler would run it
        _, status = os.waitpid(child, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
        _stop(server)  # the server itself: kills and reaps its run, then exits
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (143, "143\n", "")


PLUGIN_MODULE = "prtoggle_fake_pytest_plugin"


def _installed_pytest_plugin(folder: Path, imports: Path) -> None:
    """A distribution in `folder` whose `pytest11` entry point is PLUGIN_MODULE: it notes
    the pid of each process that imports it in `imports` and offers the fixture `lucky`."""
    (folder / f"{PLUGIN_MODULE}.py").write_text(
        "import os\nimport pytest\n\n"
        f"with open({str(imports)!r}, 'a') as out:\n"
        "    out.write(f'{os.getpid()}\\n')\n\n\n"
        "@pytest.fixture\ndef lucky():\n    return 7\n"
    )
    info = folder / "prtoggle_fake_pytest_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: prtoggle-fake-pytest-plugin\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[pytest11]\nfake = {PLUGIN_MODULE}\n")
    (folder / "test_lucky.py").write_text("def test_lucky(lucky):\n    assert lucky == 7\n")


@pytest.mark.parametrize("autoload", [True, False], ids=["autoload", "no-autoload"])
def test_a_worker_preloading_pytest_imports_the_plugins_pytest_would_import_in_each_run(
    project: FakeProject, tmp_path: Path, autoload: bool
) -> None:
    imports = tmp_path / "imports.txt"
    _installed_pytest_plugin(project.source_dir, imports)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if not autoload:
        argv += ["-p", PLUGIN_MODULE]  # the run loads it by name
    argv.append(str(project.source_dir / "test_lucky.py"))
    env = stable_env() if autoload else stable_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    with WarmWorker(preload=("pytest",), base_env=env) as worker:
        runs = [worker.run(argv, env=env, cwd=str(tmp_path)) for _ in range(2)]
        server = worker.server_pid
    assert [run.returncode for run in runs] == [0, 0], runs[0].stdout + runs[0].stderr
    assert worker.warm_runs == 2
    pids = [int(pid) for pid in imports.read_text().split()]
    if autoload:  # imported once, by the server
        assert pids == [server]
    else:  # by each run that asks for it
        assert len(pids) == 2 and server not in pids
