"""The wheel built from this tree, installed as a user would in a fresh venv without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only the prtoggle wheel and what it requires (pip fetches hatchling)."""
    root = tmp_path_factory.mktemp("light-wheel")
    wheels = root / "wheels"
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", wheels])
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    _checked([python, "-m", "pip", "install", "-q", next(wheels.glob("prtoggle-*.whl"))])
    return root / "venv" / "bin"


def test_the_plain_install_brings_only_click_pyyaml_and_packaging(fresh_venv: Path) -> None:
    listed = _run(fresh_venv / "python", "-m", "pip", "list", "--format=freeze")
    names = sorted(line.split("==")[0].lower() for line in listed.stdout.split())
    assert names == ["click", "packaging", "pip", "prtoggle", "pyyaml", "setuptools"]


def test_list_and_check_of_the_sglang_wheel_work_without_torch(
    fresh_venv: Path, sglang_wheel: Path
) -> None:
    listed = _run(fresh_venv / "prtoggle", "list", "--collection", "fixes")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == [
        *("PR", "COLLECTION", "MERGED", "SYMPTOM", "APPLIES", "TITLE")
    ]
    checked = _run(
        fresh_venv / "prtoggle", "check", "--collection", "sglang", "--source-root", sglang_wheel
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "FlashInferMLAMultiStepDraftBackend.init_cuda_graph_state: ok" in checked.stdout


def test_repro_without_torch_nor_the_demo_engine_is_one_error_line(fresh_venv: Path) -> None:
    done = _run(fresh_venv / "prtoggle", "repro", "--all")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: `prtoggle repro` needs torch, triton, numpy (missing here: torch, triton, "
        "numpy): install them with `pip install 'prtoggle[detect]'`; and `prtoggle repro` "
        "runs modules of package fixes, which is not importable here (the demo engine "
        "`fixes` is found from the root of prtoggle's source checkout only: run prtoggle "
        "there)\n"
    )


def test_bare_prtoggle_prints_its_usage(fresh_venv: Path) -> None:
    done = _run(fresh_venv / "prtoggle")
    assert done.returncode == 2
    assert done.stderr.startswith("Usage: prtoggle [OPTIONS] COMMAND [ARGS]...\n")
    assert "\nCommands:\n" in done.stderr
    assert not done.stderr.startswith("error:")
    assert len(done.stderr.splitlines()) > 20


COMMANDS = (
    *("list", "show", "check", "run", "repro", "bisect", "bench", "coverage"),
    *("import-sglang", "new", "rebase"),
)


@pytest.mark.parametrize("command", COMMANDS)
def test_the_help_of_every_command_works_without_any_extra(fresh_venv: Path, command: str) -> None:
    done = _run(fresh_venv / "prtoggle", command, "--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"Usage: prtoggle {command} [OPTIONS]")
    assert "Examples:" in done.stdout


def test_coverage_without_pytest_is_one_error_line_naming_the_extra(fresh_venv: Path) -> None:
    done = _run(fresh_venv / "prtoggle", "coverage", "--", "pytest", "-q")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: `prtoggle coverage` needs pytest, which is not installed here: "
        "`pip install 'prtoggle[pytest]'`\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("list", "--collection", "sglang"),
        ("show", "27460", "--collection", "sglang"),
        ("check", "--collection", "sglang", "--json"),
        ("run", "-r", "sglang:27460", "--", "python", "-c", "pass"),
        ("bisect", "-r", "sglang:27460", "--", "python", "-c", "pass"),
        ("new", "--from-diff", "-", "--out", "drafts"),
        ("rebase", "27460", "--collection", "sglang", "--out", "drafts"),
        ("import-sglang", "--out", "drafts"),
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_that_needs_no_extra_runs_without_a_traceback(
    fresh_venv: Path, argv: tuple[str, ...], tmp_path: Path
) -> None:
    done = _run(fresh_venv / "prtoggle", *argv, cwd=tmp_path, stdin="")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1, 2, 78), done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1, done.stderr


def test_type_checkers_see_the_public_api_typed(fresh_venv: Path, tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text("import prtoggle\nreveal_type(prtoggle.reverted)\n")
    done = _run(
        sys.executable, "-m", "mypy", "--python-executable", fresh_venv / "python",
        "--cache-dir", tmp_path / "cache", "user.py", cwd=tmp_path,
    )  # fmt: skip
    assert 'Revealed type is "def (*prs: int | str, ' in done.stdout, done.stdout
    assert '-> prtoggle.revert.toggle.RevertedBlock"' in done.stdout


def _run(
    *argv: str | Path, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env.pop("PRTOGGLE_YAML_PATH", None)
    return subprocess.run(
        [str(arg) for arg in argv],
        capture_output=True,
        input=stdin,
        text=True,
        timeout=300,
        check=False,
        env=env,
        cwd=cwd or Path(argv[0]).parent,
    )


def _checked(argv: list[str | Path]) -> None:
    done = _run(*argv, cwd=REPO)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} failed: {done.stderr[-1500:]}", pytrace=False)
