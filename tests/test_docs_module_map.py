"""docs/internals.md's generated module map is the one the code gives today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_module_map_matches_the_modules_and_their_docstrings() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "module_map.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_every_module_of_the_package_has_a_line_in_the_map() -> None:
    page = (ROOT / "docs" / "internals.md").read_text()
    for path in (ROOT / "prtoggle").rglob("*.py"):
        assert f"\n{path.relative_to(ROOT)} " in page
