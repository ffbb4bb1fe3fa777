"""Tests for a fix's test files in `new`: never reverted, never partial, recorded as `guards`;
`not_reverted` paths relative to the source root `check` reads (a real git checkout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prtoggle.cli.main import cli

CORE_BEFORE = "def scale(x):\n    return x * 2\n"
CORE_AFTER = "def scale(x):\n    return x * 3\n"
TESTS_BEFORE = """\
import pytest


def helper():
    return 1


def test_kept():
    assert helper() == 1


class TestScale:
    def setup_method(self):
        self.x = 1

    def test_old(self):
        assert self.x == 1
"""
TESTS_AFTER = """\
import pytest


def helper():
    return 1


def test_kept():
    assert helper() == 1


@pytest.mark.parametrize("x", [1, 2])
def test_new_function(x):
    assert x


class TestScale:
    def setup_method(self):
        self.x = 1

    def test_old(self):
        assert self.x == 1  # changed by the fix
        assert self.x

    def test_new_method(self):
        assert self.x == 1


class TestAddedWhole:
    def setup_method(self):
        self.y = 2

    def test_y(self):
        assert self.y == 2
"""
ADDED_TEST = "from app.core import scale\n\n\ndef test_scale():\n    assert scale(1) == 3\n"


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e.com", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout: python/app (the package, with a CUDA source), test/unit; one fix commit
    that changes the package, its kernel source, one test module and adds another."""
    root = tmp_path / "repo"
    write(
        root,
        {
            "python/app/__init__.py": "",
            "python/app/core.py": CORE_BEFORE,
            "python/app/kernel.cu": "int k = 1;\n",
            "test/unit/test_core.py": TESTS_BEFORE,
            "test/unit/conftest.py": "X = 1\n",
        },
    )
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    write(
        root,
        {
            "python/app/core.py": CORE_AFTER,
            "python/app/kernel.cu": "int k = 2;\n",
            "test/unit/test_core.py": TESTS_AFTER,
            "test/unit/test_added.py": ADDED_TEST,
            "test/unit/conftest.py": "X = 2\n",
        },
    )
    git(root, "add", ".")
    git(root, "commit", "-qm", "Fix the scale (#4242)")
    return root


def run_new(*args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["new", *args, "--json"], prog_name="prtoggle")
    return result.exit_code, json.loads(result.stdout)


GUARDS = [
    "test/unit/test_added.py",
    "test/unit/test_core.py::test_new_function",
    "test/unit/test_core.py::TestScale::test_old",
    "test/unit/test_core.py::TestScale::test_new_method",
    "test/unit/test_core.py::TestAddedWhole::test_y",
]


def test_a_fix_s_tests_are_its_guards_never_reverted_and_never_make_it_partial(
    repo: Path, tmp_path: Path
) -> None:
    code, record = run_new("--from-git", "HEAD", "--repo", str(repo), "--out", str(tmp_path))
    assert code == 1  # partial: the kernel source stays
    assert record["targets"] == ["app.core.scale"]
    assert (record["names"], record["skipped"]) == ([], [])
    assert record["not_reverted"] == [
        {"file": "app/kernel.cu", "line": 1, "code": "int k = 2;", "reason": "not Python source"}
    ]
    assert record["guards"] == GUARDS
    text = (tmp_path / "4242.yaml").read_text()
    assert text.endswith("guards:\n" + "".join(f"- {guard}\n" for guard in GUARDS))
    assert "test" not in text.split("guards:")[0].split("not_reverted:")[0]


def test_a_fix_of_code_and_tests_is_whole(repo: Path, tmp_path: Path) -> None:
    helper = TESTS_AFTER.replace("    return 1\n", "    return 2 - 1\n")
    write(repo, {"python/app/core.py": CORE_BEFORE, "test/unit/test_core.py": helper})
    git(repo, "commit", "-qam", "Fix the scale back (#4243)")
    code, record = run_new("--from-git", "HEAD", "--repo", str(repo), "--out", str(tmp_path))
    assert code == 0
    assert (record["targets"], record["not_reverted"]) == (["app.core.scale"], [])
    assert record["guards"] == ["test/unit/test_core.py"]  # a helper changed: the whole file


def test_check_finds_a_fresh_draft_s_not_reverted_files_on_its_own_commit(
    repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "drafts"
    code, _ = run_new("--from-git", "HEAD", "--repo", str(repo), "--out", str(out))
    assert code == 1
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(out), "PRTOGGLE_SGLANG_UPSTREAM": "0"}
    command = [sys.executable, "-m", "prtoggle", "check", "--collection", "drafts"]
    done = subprocess.run(
        [*command, "--source-root", str(repo / "python")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4242  not_reverted:app/kernel.cu:1: ok" in done.stdout.splitlines()


def test_a_test_folder_inside_the_package_is_the_program(repo: Path, tmp_path: Path) -> None:
    helpers = "def make():\n    return {}\n"
    write(repo, {"python/app/test/__init__.py": "", "python/app/test/test_utils.py": helpers})
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "Add test helpers (#4244)")
    write(repo, {"python/app/test/test_utils.py": helpers.replace("{}", "[]")})
    git(repo, "commit", "-qam", "Fix the test helpers (#4245)")
    code, record = run_new("--from-git", "HEAD", "--repo", str(repo), "--out", str(tmp_path))
    assert (code, record["targets"], record["guards"]) == (0, ["app.test.test_utils.make"], [])


def test_a_source_root_in_a_checkout_finds_the_changed_tests_above_it_and_names_them(
    repo: Path, tmp_path: Path
) -> None:
    source_root = str(repo / "python")
    code, record = run_new(
        "--from-git",
        "HEAD",
        "--repo",
        str(repo),
        "--source-root",
        source_root,
        "--out",
        str(tmp_path),
    )
    assert code == 1  # partial: the kernel source stays
    assert record["guards"] == GUARDS


RATCHET = """\
from pathlib import Path

import app

_ROOT = Path(next(iter(app.__path__)))
_BASELINE = {baseline}


def test_the_writers_do_not_grow():
    count = sum(path.read_text().count("x * ") for path in _ROOT.rglob("*.py"))
    assert count <= _BASELINE
"""


def test_a_guard_reading_the_package_s_source_text_is_listed_at_the_fix_s_first_change(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, {"test/unit/test_ratchet.py": RATCHET.format(baseline=2)})
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "Add the ratchet (#4246)")
    after = {
        "python/app/core.py": CORE_BEFORE,
        "test/unit/test_ratchet.py": RATCHET.format(baseline=1),
    }
    write(repo, after)
    git(repo, "commit", "-qam", "Fix the scale back, one writer less (#4247)")
    code, record = run_new("--from-git", "HEAD", "--repo", str(repo), "--out", str(tmp_path))
    assert code == 1  # partial: the ratchet reads text a revert at run time does not change
    assert (record["targets"], record["guards"]) == (
        ["app.core.scale"],
        ["test/unit/test_ratchet.py"],
    )
    assert record["not_reverted"] == [
        {
            "file": "app/core.py",
            "line": 2,
            "code": "return x * 2",
            "reason": "test/unit/test_ratchet.py reads the source text of the package's files "
            "(`read_text` of files under `app.__path__`): a revert at run time leaves the text "
            "of each file the fix changed as the fix wrote it",
        }
    ]


def test_a_test_file_above_the_source_root_that_the_diff_does_not_match_is_not_read(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, {"test/unit/test_core.py": "def test_other():\n    pass\n"})  # not the commit's
    source_root = str(repo / "python")
    code, record = run_new(
        "--from-git",
        "HEAD",
        "--repo",
        str(repo),
        "--source-root",
        source_root,
        "--out",
        str(tmp_path),
    )
    assert code == 1
    assert record["guards"] == ["test/unit/test_added.py", "test/unit/test_core.py"]
