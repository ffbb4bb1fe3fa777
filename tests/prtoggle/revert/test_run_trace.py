"""run_trace: a real child process, started with prtoggle's start-up hook and
PRTOGGLE_TRACE_DIR, records the modules it imported and the functions it ran (threads and
its own child processes included); the parent reads their union."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from prtoggle.protocol import TRACE_ENV, TRACE_PACKAGES_ENV
from prtoggle.revert.run_trace import RunTrace, outer_name, read_traces
from prtoggle.revert.toggle import child_env
from prtoggle.runners.warm_client import WarmWorker
from prtoggle.runners.warm_eligibility import env_without_revert

PACKAGE = {
    "shop/__init__.py": "",
    "shop/prices.py": textwrap.dedent(
        """\
        import dataclasses
        import threading


        class Cart:
            def total(self, items):
                def add(a, b):
                    return a + b

                out = 0
                for item in items:
                    out = add(out, item)
                return out

            def never(self):
                return 0


        def in_thread():
            return 1


        def run_in_thread():
            worker = threading.Thread(target=in_thread)
            worker.start()
            worker.join()


        def unused():
            return 2


        @dataclasses.dataclass(frozen=True)
        class Line:
            price: int


        @dataclasses.dataclass
        class Unmade:
            size: int
        """
    ),
    "shop/unimported.py": "def f():\n    return 3\n\n\nf()\n",
}

OTHER = {
    "other/__init__.py": textwrap.dedent(
        """\
        def at_import():
            return 1


        def later():
            return 2


        at_import()
        import shop.unimported
        """
    ),
}
"""A package the range does not change: its import calls a function and imports one of
`shop`'s modules, whose import calls one of its own."""

OTHERS_PROGRAM = "import other\nother.later()\n"

PROGRAM = """\
import subprocess, sys
from shop.prices import Cart, Line, run_in_thread
assert Cart().total([1, 2]) == 3
assert Line(price=2) != Line(price=3)
run_in_thread()
if sys.argv[1:] == ["parent"]:
    subprocess.run([sys.executable, "-c", "import shop.unimported"], check=True)
"""


def _run(
    tmp_path: Path, *args: str, program: str = PROGRAM, packages: str | None = None
) -> RunTrace:
    for relative, text in {**PACKAGE, **OTHER}.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    traces = tmp_path / "traces"
    traces.mkdir()
    env = child_env([], base={**os.environ, "PYTHONPATH": str(tmp_path)})
    env[TRACE_ENV] = str(traces)
    if packages is not None:
        env[TRACE_PACKAGES_ENV] = packages
    done = subprocess.run(
        [sys.executable, "-c", program, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return read_traces(traces)


def test_a_traced_run_names_the_functions_it_ran_with_threads_and_nested_defs_folded(
    tmp_path: Path,
) -> None:
    trace = _run(tmp_path)
    assert trace.processes == 1
    located = trace.located(["shop/prices.py", "shop/unimported.py", "shop/absent.py"])
    assert located == {"shop/prices.py": str(tmp_path / "shop" / "prices.py")}
    ran = trace.ran(located["shop/prices.py"])
    assert {"Cart.total", "in_thread", "run_in_thread"} <= ran
    assert not ran & {"Cart.never", "unused", "Cart.total.<locals>.add"}
    # a dataclass's generated methods ran: they are its body's fields, in its own file
    assert "Line.<body>" in ran and "Unmade.<body>" not in ran
    assert trace.names.index("shop") < trace.names.index("shop.prices")


def test_an_import_of_another_package_runs_untraced_and_its_imports_of_ours_traced(
    tmp_path: Path,
) -> None:
    trace = _run(tmp_path, program=OTHERS_PROGRAM, packages="shop")
    located = trace.located(["other/__init__.py", "shop/unimported.py"])
    assert set(located) == {"other/__init__.py", "shop/unimported.py"}  # both imported
    assert trace.ran(located["other/__init__.py"]) == {"later"}  # called after the import
    assert trace.ran(located["shop/unimported.py"]) == {"f", "<module>"}
    everything = _run(tmp_path / "all", program=OTHERS_PROGRAM)
    other = everything.located(["other/__init__.py"])["other/__init__.py"]
    assert everything.ran(other) == {"at_import", "later", "<module>"}


def test_the_traces_of_a_runs_child_processes_are_read_as_one(tmp_path: Path) -> None:
    trace = _run(tmp_path, "parent")
    assert trace.processes == 2
    assert set(trace.located(["shop/unimported.py"])) == {"shop/unimported.py"}


def test_no_trace_folder_content_reads_as_an_empty_trace_and_junk_is_skipped(
    tmp_path: Path,
) -> None:
    (tmp_path / "1.trace.json").write_text("{not json")
    trace = read_traces(tmp_path)
    assert (trace.processes, trace.modules, trace.functions) == (0, set(), {})


def test_a_nested_function_counts_as_the_def_around_it() -> None:
    assert outer_name("Cart.total.<locals>.add") == "Cart.total"
    assert outer_name("f.<locals>.g.<locals>.h") == "f"
    assert outer_name("Cart.total") == "Cart.total"


def test_a_warm_worker_traces_its_preload_and_a_forked_run_that_asks(tmp_path: Path) -> None:
    for relative, text in PACKAGE.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    traces = tmp_path / "traces"
    traces.mkdir()
    base = {**env_without_revert(os.environ), "PYTHONPATH": str(tmp_path)}
    worker = WarmWorker(preload=("shop.prices",), base_env={**base, TRACE_ENV: str(traces)})
    with worker:
        untraced = worker.run(
            [sys.executable, "-c", "import shop.prices"], env=base, cwd=str(tmp_path)
        )
        assert untraced.returncode == 0, untraced.stderr
        assert len(list(traces.iterdir())) == 1  # the preload's trace only
        done = worker.run(
            [
                sys.executable,
                "-c",
                "import colorsys\nfrom shop.prices import Cart; Cart().total([1])",
            ],
            env={**base, TRACE_ENV: str(traces)},
            cwd=str(tmp_path),
        )
    assert done.returncode == 0, done.stderr
    assert worker.warm_runs == 2
    trace = read_traces(traces)
    assert trace.processes == 2
    path = trace.located(["shop/prices.py"])["shop/prices.py"]
    assert "Cart.total" in trace.ran(path)
    assert "shop.prices" in trace.names
    assert "shop.prices" in trace.preloaded  # the server's trace says it is the preload's
    assert "colorsys" in trace.names and "colorsys" not in trace.preloaded  # the run's own


def test_a_warm_worker_imports_its_untraced_modules_before_the_preload_trace_starts(
    tmp_path: Path,
) -> None:
    boot = "def setup():\n    return 1\n\n\nsetup()\n"
    for relative, text in {**PACKAGE, "shop/boot.py": boot, "shop/late.py": boot}.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    traces = tmp_path / "traces"
    traces.mkdir()
    base = {**env_without_revert(os.environ), "PYTHONPATH": str(tmp_path)}
    worker = WarmWorker(
        untraced=("shop.boot",),
        preload=("shop.late",),
        base_env={**base, TRACE_ENV: str(traces)},
    )
    with worker:
        done = worker.run([sys.executable, "-c", "import shop.boot, shop.late"], env=base)
    assert done.returncode == 0, done.stderr
    trace = read_traces(traces)  # the preload's: both imported, only shop.late traced
    located = trace.located(["shop/boot.py", "shop/late.py"])
    assert set(located) == {"shop/boot.py", "shop/late.py"}
    assert trace.ran(located["shop/late.py"]) == {"<module>", "setup"}
    assert trace.ran(located["shop/boot.py"]) == set()
