"""The warm worker runs what `python ARGS` would, in real processes: directories and zip apps."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MAIN = "import calc, sys\nsys.exit(0 if calc.value() == 1 else 1)\n"
RECIPE = """\
pr: 905
patches:
  - target: calc.value
    edits:
      - match: return 1
        replacement: return 2
"""


def project(tmp_path: Path) -> dict[str, str]:
    """calc.value() (905 reverts it to a failing value), a program dir and its zip app."""
    for name in ("src", "recipes", "program"):
        (tmp_path / name).mkdir()
    (tmp_path / "src" / "calc.py").write_text("def value():\n    return 1\n")
    (tmp_path / "recipes" / "905.yaml").write_text(RECIPE)
    (tmp_path / "program" / "__main__.py").write_text(MAIN)
    with zipfile.ZipFile(tmp_path / "app.pyz", "w") as archive:
        archive.writestr("__main__.py", MAIN)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "src"), str(REPO_ROOT)]),
        "PRTOGGLE_YAML_PATH": str(tmp_path / "recipes"),
    }
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    env.pop("PRTOGGLE_WARM", None)
    return env


@pytest.mark.parametrize("program", ["program", "app.pyz"])
@pytest.mark.parametrize("cold", [[], ["--cold"]])
def test_bisect_names_the_culprit_of_a_directory_or_zip_program_warm_or_cold(
    tmp_path: Path, program: str, cold: list[str]
) -> None:
    env = project(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "prtoggle",
            "bisect",
            *cold,
            "-r",
            "905",
            "--",
            sys.executable,
            program,
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert "culprit: 905 (attribute, 2 runs)\n" in result.stdout
