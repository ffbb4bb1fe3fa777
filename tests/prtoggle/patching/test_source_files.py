"""Source archives read within bounds: a zip bomb is refused unread, in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from prtoggle.patching import source_files
from prtoggle.patching.source_files import open_source_tree

REPO_ROOT = Path(__file__).resolve().parents[3]
RECIPE = """\
pr: 906
title: a target in a huge file
patches:
  - target: bombpkg.mod.f
    edits:
      - match: "return 1"
        replacement: "return 2"
"""
PEAK_REPORTER = """\
import atexit, runpy, sys


def peak():
    # VmHWM: this process's own high-water mark (getrusage's keeps the forking parent's).
    with open("/proc/self/status") as status:
        found = next(line for line in status if line.startswith("VmHWM:"))
    sys.stderr.write(f"peak {found.split()[1]}" + chr(10))


atexit.register(peak)
runpy.run_module("prtoggle", run_name="__main__", alter_sys=True)
"""
"""`python -m prtoggle` that writes its peak resident size (KiB) as its last stderr line."""


def bomb_wheel(path: Path, *, megabytes: int) -> Path:
    """A wheel whose bombpkg/mod.py is a function then `megabytes` MiB of one comment."""
    body = "def f():\n    return 1\n#" + "x" * (megabytes * 1024 * 1024) + "\n"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as wheel:
        wheel.writestr("bombpkg/__init__.py", "")
        wheel.writestr("bombpkg/mod.py", body)
    return path


def test_a_zip_bomb_member_is_refused_unread_naming_archive_and_member(tmp_path: Path) -> None:
    wheel = bomb_wheel(tmp_path / "bombpkg-1.0-py3-none-any.whl", megabytes=300)
    assert wheel.stat().st_size < 1024 * 1024
    collection = tmp_path / "bombs"
    collection.mkdir()
    (collection / "906.yaml").write_text(RECIPE)
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(collection)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-c", PEAK_REPORTER, "check", "--source-root", str(wheel), "906"]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    *_, peak = result.stderr.splitlines()
    assert int(peak.split()[1]) < 150 * 1024, "peak resident size over 150 MiB"
    size = 300 * 1024 * 1024 + len("def f():\n    return 1\n#\n")
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == (
        f"906  bombpkg.mod.f: FAILED: {wheel}!bombpkg/mod.py: {size} bytes uncompressed, over "
        "the limit of 16777216 bytes for one file of an archive; refused unread (a source "
        "file is far smaller: a damaged archive or a zip bomb?)"
    )


def test_the_total_read_from_one_archive_is_bounded_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_files, "MAX_ARCHIVE_BYTES", 100)
    sdist = tmp_path / "many-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name in ("a", "b"):
            source = tmp_path / f"{name}.py"
            source.write_text("x = 1\n" * 10)  # 60 bytes each
            archive.add(source, arcname=f"many-1.0/many/{name}.py")
    tree = open_source_tree(sdist)
    assert tree.read("many/a.py") is not None
    with pytest.raises(source_files.ArchiveTooLarge) as refused:
        tree.read("many/b.py")
    assert str(refused.value) == (
        f"{sdist}!many-1.0/many/b.py: reading it would take {sdist} past 100 bytes read "
        "uncompressed; refused unread (a damaged archive or a zip bomb?)"
    )


def package_with_odd_entries(root: Path) -> Path:
    """pkg/ with a hidden folder, a folder named like a module, a symlinked folder, a
    FIFO named like a module and a module behind a symlink."""
    package = root / "pkg"
    for folder in ("sub/deeper", ".hidden", "named.py"):
        (package / folder).mkdir(parents=True)
    for module in ("__init__.py", "sub/a.py", "sub/deeper/b.py", ".hidden/c.py", "sub/d.txt"):
        (package / module).write_text(f"# {module}\nvalue = 1\r\n")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "e.py").write_text("e = 1\n")
    (package / "linked").symlink_to(elsewhere, target_is_directory=True)
    (package / "alias.py").symlink_to(package / "sub" / "a.py")
    os.mkfifo(package / "pipe.py")
    return root


def test_a_folders_python_files_are_what_rglob_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = package_with_odd_entries(tmp_path)
    expected = sorted(p.relative_to(root).as_posix() for p in (root / "pkg").rglob("*.py"))
    assert "pkg/linked/e.py" not in expected  # rglob does not walk into a linked folder
    assert open_source_tree(root).python_files("pkg") == expected
    assert open_source_tree(root).python_files("absent") == []
    monkeypatch.chdir(root)  # put back after: a later test's `python -c` would look here
    assert open_source_tree(Path(".")).python_files("pkg") == expected


def test_a_folders_file_reads_as_pathlib_reads_it_and_a_fifo_is_never_opened(
    tmp_path: Path,
) -> None:
    root = package_with_odd_entries(tmp_path)
    tree = open_source_tree(root)
    for relative in ["pkg/sub/a.py", "pkg/alias.py", "pkg/./sub//a.py", "pkg/sub/../sub/a.py"]:
        found = tree.read(relative)
        path = root.joinpath(*Path(relative).parts)
        assert found is not None
        assert (found.name, found.text) == (str(path), "# sub/a.py\nvalue = 1\n")
    for absent in ["pkg/pipe.py", "pkg/named.py", "pkg/missing.py", "pkg/sub/a.py/x.py"]:
        assert tree.read(absent) is None  # the FIFO would block a plain open
