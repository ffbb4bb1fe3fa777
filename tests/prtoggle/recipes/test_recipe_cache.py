"""Parsed recipes kept between commands: served only for the same file and text, never trusted."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from prtoggle.recipes import recipe_cache

TITLE = "24856 Fix TRTLLM MHA routing for draft extend"
SHIPPED = Path(__file__).resolve().parents[3] / "yaml" / "fixes"
PROBE = """\
import sys
from pathlib import Path
from prtoggle.recipes.registry import load_registry
registry = load_registry(dirs=[Path(sys.argv[1])])
print(", ".join(f"{r.pr} {r.title}" for r in registry.recipes))
print("parsed" if "yaml" in sys.modules else "cached")
"""


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    folder = tmp_path / "demo"
    folder.mkdir()
    shutil.copy(SHIPPED / "24856.yaml", folder / "24856.yaml")
    return folder


def _load(collection: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A fresh process loads `collection`: its recipes, and whether it parsed them."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PRTOGGLE_CACHE_DIR",)}
    return subprocess.run(
        [sys.executable, "-c", PROBE, str(collection)],
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_second_command_takes_the_parsed_recipe_from_the_cache(
    collection: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    second = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    assert first.stdout.splitlines()[1] == "parsed"
    assert (second.returncode, second.stdout) == (0, first.stdout.replace("parsed", "cached"))
    (written,) = cache.iterdir()
    assert written.name.startswith("recipes-") and written.suffix == ".json"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_a_recipe_changed_to_the_same_size_and_mtime_is_parsed_again(
    collection: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    recipe = collection / "24856.yaml"
    _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    before = recipe.stat()
    text = recipe.read_text()
    changed = text.replace("title: Fix", "title: FIX")
    assert len(changed) == len(text) and changed != text
    recipe.write_text(changed)
    os.utime(recipe, ns=(before.st_atime_ns, before.st_mtime_ns))
    done = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    assert done.stdout.splitlines()[1] == "parsed"
    assert done.stdout.splitlines()[0].startswith("24856 FIX TRTLLM")
    again = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    assert again.stdout.splitlines() == [done.stdout.splitlines()[0], "cached"]


@pytest.mark.parametrize(
    "content",
    [b"\x00garbage{", b'{"format": 1, "files": {"x": 3}}', b"[]", b'{"format": 999}'],
    ids=["not-json", "odd-entry", "not-a-mapping", "other-format"],
)
def test_a_corrupt_cache_is_ignored_and_rewritten(
    collection: Path, tmp_path: Path, content: bytes
) -> None:
    cache = tmp_path / "cache"
    _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    (written,) = cache.iterdir()
    written.write_bytes(content)
    done = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [TITLE, "parsed"]
    assert json.loads(written.read_text())["format"] == recipe_cache.FORMAT
    assert _load(collection, PRTOGGLE_CACHE_DIR=str(cache)).stdout.splitlines()[1] == "cached"


def test_a_forged_entry_for_the_same_text_is_not_served_from_a_file_others_can_write(
    collection: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    (written,) = cache.iterdir()
    written.write_text(written.read_text().replace("Fix TRTLLM", "Forged TRTLLM"))
    written.chmod(0o666)
    done = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
    assert done.stdout.splitlines() == [TITLE, "parsed"]


def test_a_cache_folder_that_cannot_be_written_changes_nothing(
    collection: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for cache in (blocker / "cache", tmp_path / "read-only"):
        if cache.name == "read-only":
            cache.mkdir()
            cache.chmod(0o500)
        first = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
        second = _load(collection, PRTOGGLE_CACHE_DIR=str(cache))
        for done in (first, second):
            assert (done.returncode, done.stderr) == (0, "")
            assert done.stdout.splitlines()[0] == TITLE
        if os.geteuid() != 0:  # root writes into a read-only folder anyway
            assert second.stdout.splitlines()[1] == "parsed"
            assert list(cache.iterdir()) == []


def test_concurrent_writers_leave_one_whole_cache_file(collection: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    others = []
    for index in range(6):
        other = tmp_path / f"c{index}"
        shutil.copytree(collection, other)
        others.append(other)
    environ = {k: v for k, v in os.environ.items() if k != "PRTOGGLE_CACHE_DIR"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", PROBE, str(other)],
            env={**environ, "PRTOGGLE_CACHE_DIR": str(cache)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for other in others
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [(p.returncode, err) for p, (_, err) in zip(processes, outputs, strict=True)] == [
        (0, "")
    ] * 6
    (written,) = cache.iterdir()  # no temporary file left behind
    assert json.loads(written.read_text())["format"] == recipe_cache.FORMAT


def test_the_cache_lives_in_xdg_cache_home_and_can_be_turned_off(
    collection: Path, tmp_path: Path
) -> None:
    xdg = tmp_path / "xdg"
    _load(collection, XDG_CACHE_HOME=str(xdg))
    assert [p.name.startswith("recipes-") for p in (xdg / "prtoggle").iterdir()] == [True]
    off = tmp_path / "off"
    for value in ("0", "off"):
        done = _load(collection, XDG_CACHE_HOME=str(off), PRTOGGLE_CACHE_DIR=value)
        assert done.stdout.splitlines()[1] == "parsed"
    assert not off.exists()


def test_the_cache_file_is_named_after_the_parser_code_and_version(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(SHIPPED.parents[1] / "prtoggle", copy / "prtoggle")
    name = (
        "import os, sys; from prtoggle.recipes import recipe_cache; "
        "print(recipe_cache.cache_file().name)"
    )

    def cache_name() -> str:
        env = {**os.environ, "PYTHONPATH": str(copy), "PRTOGGLE_CACHE_DIR": str(tmp_path)}
        return subprocess.run(
            [sys.executable, "-c", name],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    first = cache_name()
    init = copy / "prtoggle" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9'))
    second = cache_name()
    schema = copy / "prtoggle" / "recipes" / "schema.py"
    schema.write_text(schema.read_text() + "\n# changed\n")
    third = cache_name()
    assert len({first, second, third}) == 3
    assert first.startswith("recipes-")
