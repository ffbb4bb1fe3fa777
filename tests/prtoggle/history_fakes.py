"""A real git repository of a small package whose history a test bisects (`bisect --git`)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CORE = """\
def absval(x):
    return x


def double(x):
    return x * 2


def triple(x):
    return x * 3
"""

TESTS = """\
from calc.core import absval, double


def test_absval():
    assert absval(-3) == 3


def test_double():
    assert double(2) == 4
"""


@dataclass
class HistoryRepo:
    """`root`: a git repository with the package `calc` under python/ and its tests under
    test/; `shas`: subject -> full hash of each commit made."""

    root: Path
    shas: dict[str, str] = field(default_factory=dict)

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(self.root), *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def edit(self, relative: str, old: str, new: str) -> None:
        text = (self.root / relative).read_text()
        assert old in text, f"{old!r} not in {relative}"
        self.write(relative, text.replace(old, new, 1))

    def commit(self, subject: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", subject)
        sha = self.git("rev-parse", "HEAD").strip()
        self.shas[subject] = sha
        return sha

    def prtoggle(
        self, *args: str, cache: Path, timeout: float = 300, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`prtoggle ARGS` run in the repository, the package importable from python/."""
        environ = {
            **os.environ,
            "PYTHONPATH": str(self.root / "python"),
            "PRTOGGLE_CACHE_DIR": str(cache),
            **(env or {}),
        }
        environ.pop("SGLANG_DEBUG_REVERT_PR", None)
        return subprocess.run(
            [sys.executable, "-m", "prtoggle", *args],
            cwd=self.root,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def history_repo(root: Path) -> HistoryRepo:
    """20 commits: the start, 7 chores, the fix `absval of negatives (#200)`, 9 refactors
    of `triple` after it, one docs-only and one test-only commit (19 after the start)."""
    repo = HistoryRepo(root)
    root.mkdir(parents=True)
    repo.git("init", "-q")
    repo.git("config", "user.email", "dev@example.com")
    repo.git("config", "user.name", "dev")
    repo.git("config", "commit.gpgsign", "false")
    repo.write("python/calc/__init__.py", "")
    repo.write("python/calc/core.py", CORE)
    repo.write("test/test_calc.py", TESTS)
    repo.commit("start")
    for number in range(1, 8):
        repo.write("python/calc/__init__.py", "".join(f"# note {i}\n" for i in range(number)))
        repo.commit(f"chore: note {number} (#10{number})")
    repo.edit(
        "python/calc/core.py",
        "def absval(x):\n    return x\n",
        "def absval(x):\n    if x < 0:\n        return -x\n    return x\n",
    )
    repo.commit("fix: absval of negatives (#200)")
    previous = "return x * 3"
    for number in range(1, 10):
        repo.edit("python/calc/core.py", previous, f"return x * 3  # v{number}")
        previous = f"return x * 3  # v{number}"
        repo.commit(f"refactor: triple v{number} (#30{number})")
    repo.write("README.md", "calc\n")
    repo.commit("docs: readme (#400)")
    repo.write("test/test_calc.py", TESTS + "\n# more\n")
    repo.commit("test: comment (#401)")
    return repo
