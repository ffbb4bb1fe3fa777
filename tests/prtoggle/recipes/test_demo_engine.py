"""The checkout's demo engine: importable by prtoggle run from the checkout, and only there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prtoggle.recipes import demo_engine

CHECKOUT = Path(__file__).resolve().parents[3]
PROBE = """\
import importlib.util
from prtoggle.recipes.demo_engine import make_importable
print(make_importable())
for name in ("fixes", "tests", "bench"):
    print(name, importlib.util.find_spec(name) is not None)
"""


def _python_safe_path(cwd: Path) -> subprocess.CompletedProcess[str]:
    """PROBE in `python -P` (no current directory on sys.path), without the suite's
    PYTHONPATH: what the `prtoggle` console script sees."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-P", "-c", PROBE],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_checkout_is_found_next_to_the_package() -> None:
    assert demo_engine.checkout_root() == str(CHECKOUT)


def test_from_the_checkout_root_the_demo_engine_alone_becomes_importable() -> None:
    done = _python_safe_path(CHECKOUT)
    assert (done.returncode, done.stdout) == (0, "True\nfixes True\ntests False\nbench False\n")


def test_from_another_folder_nothing_becomes_importable(tmp_path: Path) -> None:
    done = _python_safe_path(tmp_path)
    assert (done.returncode, done.stdout) == (0, "False\nfixes False\ntests False\nbench False\n")


def test_the_console_script_reproduces_a_demo_fix_from_the_checkout() -> None:
    prtoggle = shutil.which("prtoggle", path=os.path.dirname(sys.executable))
    assert prtoggle is not None
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [prtoggle, "repro", "--cold", "24856"],
        env=env,
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PR 24856 reverted: OOBDetected" in done.stderr


def test_forget_takes_the_finder_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHECKOUT)
    before = list(sys.meta_path)
    assert demo_engine.make_importable()
    assert len(sys.meta_path) == len(before) + 1
    demo_engine.make_importable()  # once only
    assert len(sys.meta_path) == len(before) + 1
    demo_engine.forget()
    assert sys.meta_path == before
