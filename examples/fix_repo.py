"""Build a small git repository whose last commit is a fix with its own test (PR 90301).

`python examples/fix_repo.py DIR`: DIR gets `src/widthlib` (the package) and `test/`;
the fix adds `widthlib/validation.py`, makes `core.width` refuse negative widths through
it, and adds the test that fails before the fix. README's "Reproduce a real fix's
failure" drafts its recipe with `prtoggle new --from-git` and reproduces it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BEFORE = {
    "src/widthlib/__init__.py": "",
    "src/widthlib/core.py": "def width(n):\n    return n * 2\n",
}
FIX = {
    "src/widthlib/core.py": (
        "from widthlib.validation import check_width\n\n\n"
        "def width(n):\n    return check_width(n) * 2\n"
    ),
    "src/widthlib/validation.py": (
        "def check_width(n):\n    if n < 0:\n"
        '        raise ValueError(f"negative width {n}")\n    return n\n'
    ),
    "test/test_validation.py": (
        "import pytest\nfrom widthlib.core import width\n\n"
        "from widthlib.validation import check_width\n\n\n"
        "def test_a_negative_width_is_refused():\n"
        "    with pytest.raises(ValueError):\n        check_width(-1)\n"
        "    assert width(3) == 6\n"
    ),
}


def main(directory: str) -> None:
    root = Path(directory)
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    _commit(root, BEFORE, "widthlib: width()")
    _commit(root, FIX, "refuse negative widths (#90301)")
    sys.stdout.write(f"{root}: the last commit fixes PR 90301\n")


def _commit(root: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    _git(root, "add", "-A")
    _git(
        root,
        "-c",
        "user.name=example",
        "-c",
        "user.email=example@invalid",
        "commit",
        "-qm",
        message,
    )


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True)


if __name__ == "__main__":
    main(sys.argv[1])
