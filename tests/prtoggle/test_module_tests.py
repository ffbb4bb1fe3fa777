"""Every module has a test named after it, or a row of docs/internals.md naming its tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "prtoggle"


def named_test(module: Path) -> Path:
    """tests/prtoggle/<package>/test_<module>.py; tests/prtoggle/cli/test_cli_<command>.py."""
    relative = module.relative_to(PACKAGE)
    folder = ROOT / "tests" / "prtoggle" / Path(*relative.parts[:-1])
    prefix = "test_cli_" if relative.parts[0] == "cli" and len(relative.parts) > 1 else "test_"
    return folder / f"{prefix}{relative.stem}.py"


def documented_rows() -> dict[str, list[str]]:
    """Module -> the tests that cover it, from the table of docs/internals.md."""
    text = (ROOT / "docs" / "internals.md").read_text(encoding="utf-8")
    table = text.split("| module | covered by |", 1)[1].split("\n\n", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in table.strip().splitlines()[1:]:
        module, tests = (cell.strip() for cell in line.strip("|").split("|"))
        rows[module.strip("`")] = re.findall(r"`([^`]+)`", tests)
    return rows


def _modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__init__.py" or path.parent == PACKAGE
    ]


def test_every_module_has_a_test_named_after_it_or_a_row_naming_its_tests() -> None:
    rows = documented_rows()
    untested = {
        str(module.relative_to(ROOT))
        for module in _modules()
        if not named_test(module).exists() and str(module.relative_to(ROOT)) not in rows
    }
    assert untested == set()


def test_every_row_names_tests_that_exist_for_a_module_without_its_own() -> None:
    rows = documented_rows()
    missing = {test for tests in rows.values() for test in tests if not (ROOT / test).is_file()}
    own = {module for module in rows if named_test(ROOT / module).exists()}
    assert (missing, own) == (set(), set())
    assert all(tests for tests in rows.values())


def test_the_name_of_a_commands_test_carries_cli() -> None:
    assert named_test(PACKAGE / "cli" / "run.py") == ROOT / "tests/prtoggle/cli/test_cli_run.py"
    assert named_test(PACKAGE / "errors.py") == ROOT / "tests/prtoggle/test_errors.py"
