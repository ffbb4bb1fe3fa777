"""The files `prtoggle new` writes: atomically, never through a link, errors as one line."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
DIFF = """\
diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f(x):
-    return x + 1
+    return x + 2
"""
OLD_RECIPE = "# an older recipe of PR 5, kept by hand\npr: 5\n"


@pytest.fixture
def fix(tmp_path: Path) -> tuple[Path, Path]:
    """A diff of pkg/mod.py and the post-fix source root it applies to."""
    root = tmp_path / "post"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("def f(x):\n    return x + 2\n")
    diff = tmp_path / "fix.diff"
    diff.write_text(DIFF)
    return diff, root


LIMITED = """\
import os, resource, runpy, signal, sys

if os.environ["LIMIT_KILLS"] == "1":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: writes fail instead
LIMITED_DIR = os.environ["LIMIT_IN"]


def limit_writes_in_out(event, args):
    # From the first file opened in LIMIT_IN on, no file may grow past 64 bytes.
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        if os.path.dirname(os.path.abspath(os.fsdecode(args[0]))) == LIMITED_DIR:
            resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))


sys.addaudithook(limit_writes_in_out)
runpy.run_module("prtoggle", run_name="__main__", alter_sys=True)
"""
"""`python -m prtoggle` whose writes into LIMIT_IN stop at 64 bytes: EFBIG, or killed
by SIGXFSZ mid-write with LIMIT_KILLS=1."""


def new(
    fix: tuple[Path, Path],
    out: Path,
    *extra: str,
    pr: str = "5",
    before: Callable[[], None] | None = None,
    limit: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m prtoggle new` as a real process (`before` runs in the child first);
    `limit` "fail" or "kill": writes into `out` stop at 64 bytes, as LIMITED says."""
    diff, root = fix
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LIMIT_IN": str(out)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env["LIMIT_KILLS"] = "1" if limit == "kill" else "0"
    python = [sys.executable, "-c", LIMITED] if limit else [sys.executable, "-m", "prtoggle"]
    argv = [*python, "new", "--from-diff", str(diff), "--pr", pr]
    argv += ["--source-root", str(root), "--out", str(out), *extra]
    return subprocess.run(
        argv, check=False, env=env, capture_output=True, text=True, timeout=60, preexec_fn=before
    )


def test_a_symlink_named_like_the_recipe_is_refused_and_its_target_left_alone(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("not a recipe\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "5.yaml").symlink_to("../precious.txt")
    result = new(fix, out)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {out / '5.yaml'}: is a symbolic link (to ../precious.txt); refused: prtoggle "
        "never writes through a link; remove it or choose another --out\n"
    )
    assert precious.read_text() == "not a recipe\n"
    assert (out / "5.yaml").is_symlink()


def test_a_fifo_named_like_the_recipe_is_refused_at_once_never_opened(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "5.yaml")
    result = new(fix, out)  # a write through the FIFO would block: the timeout fails it
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {out / '5.yaml'}: is a FIFO, not a regular file; refused (a recipe is written "
        "as a regular file); remove it or choose another --out\n"
    )


def test_a_directory_named_like_the_recipe_is_one_error_line_exit_2(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    (out / "5.yaml").mkdir(parents=True)
    result = new(fix, out)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {out / '5.yaml'}: is a directory, not a regular file; refused (a recipe is "
        "written as a regular file); remove it or choose another --out\n"
    )


def test_out_below_a_file_is_one_error_line_exit_2(fix: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "recipes"
    result = new(fix, out)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error: --out {out}: cannot create the directory: Not a directory\n")


def test_a_write_error_is_one_error_line_exit_2_and_the_old_recipe_is_intact(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "5.yaml").write_text(OLD_RECIPE)
    result = new(fix, out, limit="fail")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {out / '5.yaml'}: cannot write the recipe: File too large; nothing written "
        "(a file already there is unchanged)\n"
    )
    assert (out / "5.yaml").read_text() == OLD_RECIPE
    assert sorted(p.name for p in out.iterdir()) == ["5.yaml"]


def test_a_process_killed_mid_write_leaves_the_old_recipe_whole(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "5.yaml").write_text(OLD_RECIPE)
    result = new(fix, out, limit="kill")
    assert result.returncode == -signal.SIGXFSZ
    assert (out / "5.yaml").read_text() == OLD_RECIPE


def test_the_recipe_gets_the_mode_a_plain_write_gives_umask_or_the_old_files(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    fresh = new(fix, out, before=lambda: os.umask(0o027) and None)
    assert (fresh.returncode, fresh.stderr) == (0, "")
    assert stat.S_IMODE((out / "5.yaml").stat().st_mode) == 0o640
    (out / "5.yaml").chmod(0o604)
    again = new(fix, out, before=lambda: os.umask(0o077) and None)
    assert (again.returncode, again.stderr) == (0, "")
    assert stat.S_IMODE((out / "5.yaml").stat().st_mode) == 0o604
    assert sorted(p.name for p in out.iterdir()) == ["5.yaml"]


def test_a_pr_number_out_of_range_names_the_option_and_the_range_not_a_scratch_file(
    fix: tuple[Path, Path], tmp_path: Path
) -> None:
    result = new(fix, tmp_path / "out", pr="99999999999")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "error: Invalid value for '--pr': 99999999999 is not in the range 1<=x<=10000000 "
        "(see `prtoggle new --help`)\n"
    )
    assert not (tmp_path / "out").exists()
