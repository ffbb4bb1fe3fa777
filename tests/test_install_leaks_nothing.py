"""An install of prtoggle, wheel or editable, makes `prtoggle` importable and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECKOUT_TOP_LEVEL = ("tests", "bench", "docs", "examples", "fixes")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def editable_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (system site packages: click, PyYAML) with this checkout installed editable
    and the empty `prtoggle/_shipped_yaml` folder an older install leaves behind."""
    root = tmp_path_factory.mktemp("editable")
    venv.create(root / "venv", with_pip=True, system_site_packages=True)
    python = root / "venv" / "bin" / "python"
    _checked([python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)])
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    (Path(site.stdout.strip()) / "prtoggle" / "_shipped_yaml").mkdir(parents=True, exist_ok=True)
    return python


def test_an_editable_install_makes_prtoggle_importable_and_no_other_top_level_name(
    editable_venv: Path,
) -> None:
    found = _run(editable_venv, "-c", "import prtoggle; print(prtoggle.__file__)")
    assert (found.returncode, found.stdout) == (0, f"{REPO / 'prtoggle' / '__init__.py'}\n")
    for name in CHECKOUT_TOP_LEVEL:
        done = _run(editable_venv, "-c", f"import {name}")
        assert done.returncode == 1, (name, done.stdout)
        assert done.stderr.splitlines()[-1] == f"ModuleNotFoundError: No module named '{name}'"


def test_an_editable_install_runs_prtoggle_from_anywhere(editable_venv: Path) -> None:
    done = _run(editable_venv.parent / "prtoggle", "list", "--collection", "fixes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[:2] == ["21649", "fixes"]


def test_pytest_in_the_editable_install_loads_the_plugin_without_a_warning(
    editable_venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    done = subprocess.run(
        [editable_venv, "-m", "pytest", "-p", "no:cacheprovider", "test_one.py"],
        env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert "plugins: prtoggle" in done.stdout
    assert "warning" not in done.stdout.lower()


def test_a_regular_prtoggle_package_on_pythonpath_still_wins_over_the_editable_install(
    editable_venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "prtoggle").mkdir()
    (tmp_path / "prtoggle" / "__init__.py").write_text("")
    done = _run(
        editable_venv, "-c", "import prtoggle; print(prtoggle.__file__)", pythonpath=tmp_path
    )
    assert done.stdout == f"{tmp_path / 'prtoggle' / '__init__.py'}\n"


def test_the_wheel_holds_only_the_prtoggle_package(tmp_path: Path) -> None:
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", tmp_path])
    with zipfile.ZipFile(next(tmp_path.glob("prtoggle-*.whl"))) as wheel:
        tops = {name.split("/", 1)[0] for name in wheel.namelist()}
        names = wheel.namelist()
    assert tops == {"prtoggle", "prtoggle-0.1.0.dist-info"}
    assert "prtoggle/_shipped_yaml/fixes/24856.yaml" in names


def _run(
    program: Path, *args: str, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`program ARGS` from an empty folder, without the suite's PYTHONPATH (the checkout)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cwd = program.parent.parent  # the venv: holds none of the checkout's names
    return subprocess.run(
        [str(program), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _checked(argv: list[object]) -> None:
    done = subprocess.run(
        [str(arg) for arg in argv], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
