"""Unreadable recipe files, in real processes: one `error:` line naming the file, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prtoggle.protocol import BOOTSTRAP_FAILURE_EXIT_CODE, BOOTSTRAP_FAILURE_PREFIX
from prtoggle.recipes.registry import MAX_RECIPE_BYTES

CORRUPT = {
    "nesting": (
        "905.yaml",
        b"[" * 20_000,
        ": nested too deeply for the YAML loader (RecursionError); a recipe is a mapping of "
        "at most a few levels",
    ),
    "encoding": (
        "905.yaml",
        b"pr: 905\ntitle: caf\xe9\n",
        ":2: not UTF-8 text (byte 0xe9 at offset 18); recipe files must be UTF-8",
    ),
    "size": (
        "905.yaml",
        b"#" * (MAX_RECIPE_BYTES + 1),
        f": recipe file is {MAX_RECIPE_BYTES + 1} bytes, over the limit of 1048576 bytes (1 MiB)",
    ),
    "pr range": (
        "905.yaml",
        b"pr: 99999999999\npatches: [{target: a.f, edits: [{match: x}]}]\n",
        ":1: 'pr' gives PR number 99999999999, outside the supported range 1..10000000",
    ),
}
COMMANDS = {
    "list": ["list"],
    "show": ["show", "26521"],
    "check": ["check"],
    "repro": ["repro", "--all"],
    "bisect": ["bisect", "--", sys.executable, "-c", "pass"],
    "bench": ["bench", "--all"],
    "run": ["run", "-r", "26521", "--", sys.executable, "-c", "print('started')"],
}


def corrupt_registry(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A PRTOGGLE_YAML_PATH directory holding one bad recipe; the expected message."""
    name, data, message = CORRUPT[kind]
    directory = tmp_path / "bad"
    directory.mkdir()
    path = directory / name
    path.write_bytes(data)
    return directory, f"{path}{message}"


def run_python(args: list[str], directory: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(directory), **extra}
    env.pop("SGLANG_DEBUG_REVERT_PR", None)
    env.update(extra)
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=directory.parent,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_prints_one_error_line_for_a_recipe_too_deeply_nested(
    tmp_path: Path, command: str
) -> None:
    directory, message = corrupt_registry(tmp_path, "nesting")
    result = run_python(["-m", "prtoggle", *COMMANDS[command]], directory)
    assert (result.returncode, printed(result, command), result.stderr) == (
        2,
        "",
        f"error: {message}\n",
    )


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_each_kind_of_unreadable_recipe_is_one_error_line_naming_the_file(
    tmp_path: Path, kind: str
) -> None:
    directory, message = corrupt_registry(tmp_path, kind)
    result = run_python(["-m", "prtoggle", "list"], directory)
    assert (result.returncode, printed(result, "list"), result.stderr) == (
        2,
        "",
        f"error: {message}\n",
    )


def unlistable_directory(tmp_path: Path) -> Path:
    """A directory whose listing really fails: mode 000 (as a user), or, where the tests run
    as root (who lists it all the same), another process's /proc/PID/map_files."""
    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0)
    for candidate in (private, Path("/proc/1/map_files")):
        try:
            os.listdir(candidate)
        except PermissionError:
            return candidate
    pytest.skip("no directory whose listing fails here (root with every capability)")


@pytest.mark.parametrize("command", ["check", "list"])
def test_a_registry_directory_that_cannot_be_listed_is_one_error_line_and_status_2(
    tmp_path: Path, command: str
) -> None:
    directory = unlistable_directory(tmp_path)
    result = run_python(["-m", "prtoggle", command], directory)
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"error: registry directory {directory} cannot be read: Permission denied; a "
        "registry directory (shipped, or from PRTOGGLE_YAML_PATH) must be a readable "
        "directory of recipe files\n",
    )


def printed(result: subprocess.CompletedProcess[str], command: str) -> str:
    """What a command printed on stdout, less `list`'s table of the readable recipes, which
    ends with the unreadable one as an ERROR row."""
    if command != "list":
        return result.stdout
    assert _last_row(result.stdout).split()[4] == "ERROR", result.stdout
    return ""


@pytest.mark.parametrize("kind", ["encoding", "nesting"])
def test_a_reverting_child_with_an_unreadable_recipe_stops_before_the_program_runs(
    tmp_path: Path, kind: str
) -> None:
    from prtoggle.revert.toggle import child_env

    directory, message = corrupt_registry(tmp_path, kind)
    env = child_env([], base={**os.environ, "PRTOGGLE_YAML_PATH": str(directory)})
    env["SGLANG_DEBUG_REVERT_PR"] = "26521"
    result = subprocess.run(
        [sys.executable, "-c", "print('ran unreverted')"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        BOOTSTRAP_FAILURE_EXIT_CODE,
        "",
        f"{BOOTSTRAP_FAILURE_PREFIX}: {message}\n",
    )


def test_maybe_revert_pr_fix_raises_on_an_unreadable_recipe(tmp_path: Path) -> None:
    directory, message = corrupt_registry(tmp_path, "encoding")
    code = textwrap.dedent("""\
        import prtoggle
        try:
            prtoggle.maybe_revert_pr_fix()
        except prtoggle.PrToggleError as exc:
            print(type(exc).__name__, exc)
        """)
    result = run_python(["-c", code], directory, SGLANG_DEBUG_REVERT_PR="26521")
    expected = (0, f"RegistryError {message}\n", "")
    assert (result.returncode, result.stdout, result.stderr) == expected


@pytest.mark.parametrize(("option", "status"), [([], 2), (["--revert-pr", "26521"], 4)])
def test_pytest_collection_fails_with_one_clear_line_on_an_unreadable_recipe(
    tmp_path: Path, option: list[str], status: int
) -> None:
    directory, message = corrupt_registry(tmp_path, "nesting")
    test_file = tmp_path / "test_guarded.py"
    test_file.write_text(
        "import pytest\n\n\n@pytest.mark.guards_pr(26521)\ndef test_x():\n    pass\n"
    )
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", *option, str(test_file)]
    result = run_python(args, directory)
    assert result.returncode == status, result.stdout + result.stderr  # errors / usage error
    lines = [line for line in (result.stdout + result.stderr).splitlines() if message in line]
    assert len(lines) == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def _last_row(listing: str) -> str:
    """The last row of `list`'s table (its rows start with a PR number or `?`; footnotes
    saying what `out-of-range` and `stale` mean may follow)."""
    rows = [line for line in listing.splitlines() if line[:1].isdigit() or line[:1] == "?"]
    return rows[-1]
