"""Human output of real `prtoggle` processes: hostile recipe text, closed pipes, full disks,
widths, and a bad recipe among good ones."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tty
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
HOSTILE_TITLE = "ok\r21649  fixes  spoofed row\n\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil"
HOSTILE_RECIPE = """\
pr: 9
title: "ok\\r21649  fixes  spoofed row\\n\\e]0;pwned\\a\\e[2J\\x9b31m\\u202eevil"
url: "https://example.org/\\e[31mred"
patches:
  - target: hostile_pkg.answer
    edits:
      - match: "return 42"
        replacement: "return '\\e]0;retitled\\a'"
"""
ESCAPED_TITLE = "ok\\r21649  fixes  spoofed row\\n\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil"


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    """The environment of a collection `hostile` whose recipe 9 is full of control text."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "9.yaml").write_text(HOSTILE_RECIPE)
    source = tmp_path / "src"
    source.mkdir()
    (source / "hostile_pkg.py").write_text("def answer():\n    return 42\n")
    return environment(folder, source)


def environment(collection: Path, *paths: Path) -> dict[str, str]:
    python_path = [str(REPO_ROOT), *map(str, paths), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(python_path),
        "PRTOGGLE_YAML_PATH": str(collection),
    }


def prtoggle(
    *args: str, env: dict[str, str] | None = None, stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "prtoggle", *args]
    return subprocess.run(
        argv, check=False, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120
    )


def on_a_terminal(*args: str, env: dict[str, str]) -> bytes:
    """The bytes `prtoggle ARGS` writes to a terminal (a pty in raw mode: no translation)."""
    leader, follower = pty.openpty()
    tty.setraw(follower)
    process = subprocess.Popen(
        [sys.executable, "-m", "prtoggle", *args], env=env, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks)


def test_a_recipe_cannot_write_control_sequences_to_the_terminal_through_list_or_show(
    hostile: dict[str, str],
) -> None:
    for args in (["list", "--collection", "hostile"], ["show", "9"]):
        written = on_a_terminal(*args, env=hostile)
        assert b"ok" in written, written
        for raw in (b"\x1b", b"\r", b"\x07", b"\xc2\x9b", "\u202e".encode()):
            assert raw not in written, (args, raw, written)


def test_list_and_show_escape_a_recipes_control_characters_on_its_one_line(
    hostile: dict[str, str],
) -> None:
    listed = prtoggle("list", "--collection", "hostile", "--wide", env=hostile)
    assert (listed.returncode, listed.stderr) == (0, "")
    assert listed.stdout.splitlines()[1].endswith(f"  yes      {ESCAPED_TITLE}")
    assert len(listed.stdout.splitlines()) == 2
    shown = prtoggle("show", "9", env=hostile)
    assert (shown.returncode, shown.stderr) == (0, "")
    lines = shown.stdout.splitlines()
    assert lines[:3] == [
        f"PR 9: {ESCAPED_TITLE}",
        "  collection: hostile",
        "  url:       https://example.org/\\x1b[31mred",
    ]
    assert "+    return '\\x1b]0;retitled\\x07'" in lines
    assert json.loads(prtoggle("show", "9", "--json", env=hostile).stdout)[0]["title"] == (
        HOSTILE_TITLE
    )


def test_an_error_line_naming_a_hostile_file_stays_one_escaped_line(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "7\x1b]0;x\x07\n.yaml").write_text("pr: [\n")
    result = prtoggle("list", "--collection", "odd", env=environment(folder))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {folder}/7\\x1b]0;x\\x07\\n.yaml:")
    assert "\x1b" not in result.stdout + result.stderr


def test_list_to_a_full_disk_is_one_error_line_and_status_2() -> None:
    with open("/dev/full", "w") as full:
        result = prtoggle("list", "--collection", "fixes", stdout=full.fileno())
    assert (result.returncode, result.stderr) == (
        2,
        "error: cannot write to standard output: No space left on device\n",
    )


def test_a_reader_that_is_gone_ends_prtoggle_quietly_with_141() -> None:
    reader, writer = os.pipe()
    os.close(reader)  # nobody will ever read: the first write breaks the pipe
    try:
        result = prtoggle("show", "26521", "--collection", "fixes", stdout=writer)
    finally:
        os.close(writer)
    assert (result.returncode, result.stderr) == (141, "")


def test_show_piped_to_head_prints_its_first_line_and_no_error() -> None:
    script = (
        f"{sys.executable} -m prtoggle show 26521 --collection fixes | head -1; "
        'echo "status ${PIPESTATUS[0]}" >&2'
    )
    result = subprocess.run(
        ["bash", "-c", script], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.stdout == (
        "PR 26521: copy seq_lens in TRTLLM MHA draft decode cuda graph capture\n"
    )
    assert result.stderr in ("status 0\n", "status 141\n")


def test_a_bad_recipe_in_one_collection_leaves_the_others_listed_and_exits_2(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "11.yaml").write_text(
        "pr: 11\npatches:\n  - target: __main__.f\n    edits:\n"
        "      - match: return 1\n        replacement: return 2\n"
    )
    (folder / "12.yaml").write_text(
        "pr: 12\ntitle: fine\npatches:\n  - target: nowhere_pkg.f\n    edits:\n"
        "      - match: return 1\n        replacement: return 2\n"
    )
    env = environment(folder)
    result = prtoggle("list", env=env)
    error = (
        f"{folder / '11.yaml'}:3: 'target' __main__.f names __main__, whatever script happens "
        "to run; a revert lands when a target's module is imported, and a script's own code "
        "runs before that could happen; name a module the program imports"
    )
    assert (result.returncode, result.stderr) == (2, f"error: {error}\n")
    table = [line for line in result.stdout.splitlines()[1:] if line.split()[0].isdigit()]
    rows = [line.split()[:2] + line.split()[4:5] for line in table]  # the footnotes follow
    assert ["26521", "fixes", "yes"] in rows
    assert (["12", "mine", "absent"] in rows, rows[-1]) == (True, ["11", "mine", "ERROR"])
    records = json.loads(prtoggle("list", "--collection", "mine", "--json", env=env).stdout)
    assert [(r["pr"], r["title"], r["error"]) for r in records] == [
        (12, "fine", None),
        (11, None, error),
    ]
    assert prtoggle("list", "--collection", "fixes", env=env).returncode == 0


def test_list_fits_100_columns_cutting_titles_and_wide_prints_them_whole(tmp_path: Path) -> None:
    folder = tmp_path / "long"
    folder.mkdir()
    title = "a title far longer than any line of a table should be, " * 3
    (folder / "13.yaml").write_text(
        f"pr: 13\ntitle: {title.strip()}\ncomponent: a.very.long.dotted.component.name.of.x\n"
        "patches:\n  - target: nowhere_pkg.f\n    edits:\n"
        "      - match: return 1\n        replacement: return 2\n"
    )
    env = environment(folder)
    lines = prtoggle("list", "--collection", "long", env=env).stdout.splitlines()
    assert max(len(line) for line in lines) == 100
    cut = "a title far longer than any line of a table should be, a …"
    assert lines[1].endswith(f"  absent   {cut}")
    wide = prtoggle("list", "--collection", "long", "--wide", env=env).stdout.splitlines()
    component = "a.very.long.dotted.component.name.of.x"
    assert wide[1].endswith(f"{component}  -        absent   {title.strip()}")
