"""Tests for recipes.from_sglang and `prtoggle import-sglang`: parse, write, idempotence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prtoggle.cli.main import cli
from prtoggle.recipes.from_sglang import SglangImportError, read_recipes, recipe_file_text
from prtoggle.recipes.schema import load_recipe

TOGGLE_TEXT = '''\
"""Reverse-apply historical PR fixes."""
from typing import Dict

_PR_REVERT_YAML_111 = """
patches:
  - target: pkg.mod.f
    edits:
      - match: |
          a = 1
        replacement: |
          a = 2
"""

_PR_REVERT_YAML_22 = """
patches:
  - target: pkg.mod.g
    edits:
      - match: |
          b = 1
        replacement: ""
"""

_PR_FIX_REVERT_YAML: Dict[int, str] = {
    111: _PR_REVERT_YAML_111,
    22: _PR_REVERT_YAML_22,
}
'''


@pytest.fixture
def toggle_file(tmp_path: Path) -> Path:
    path = tmp_path / "pr_fix_toggle.py"
    path.write_text(TOGGLE_TEXT)
    return path


def test_read_recipes_finds_every_registration_by_parsing_in_pr_order(toggle_file: Path) -> None:
    recipes = read_recipes(toggle_file)
    assert [recipe.pr for recipe in recipes] == [22, 111]
    assert recipes[1].text.startswith("\npatches:\n  - target: pkg.mod.f\n")


def test_a_written_recipe_is_sglangs_text_unchanged_after_pr_title_url(
    toggle_file: Path, tmp_path: Path
) -> None:
    recipe = read_recipes(toggle_file)[1]
    text = recipe_file_text(recipe)
    assert text.endswith(recipe.text)
    path = tmp_path / "out" / "111.yaml"
    path.parent.mkdir()
    path.write_text(text)
    fix = load_recipe(path)
    assert (fix.pr, fix.url) == (111, "https://github.com/sgl-project/sglang/pull/111")
    assert [patch.target for patch in fix.patches] == ["pkg.mod.f"]


def test_the_command_writes_once_and_leaves_identical_files_untouched(
    toggle_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "upstream"
    runner = CliRunner()
    first = runner.invoke(cli, ["import-sglang", "--from", str(toggle_file), "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert first.output.splitlines()[-1] == f"2 recipes from {toggle_file}: 2 written, 0 unchanged"
    stamp = (out / "22.yaml").stat().st_mtime_ns
    second = runner.invoke(cli, ["import-sglang", "--from", str(toggle_file), "--out", str(out)])
    assert second.output.splitlines()[-1] == f"2 recipes from {toggle_file}: 0 written, 2 unchanged"
    assert (out / "22.yaml").stat().st_mtime_ns == stamp


def test_a_file_without_registrations_is_an_error_naming_what_was_expected(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pr_fix_toggle.py"
    path.write_text("X = 1\n")
    with pytest.raises(SglangImportError, match="no recipe registrations found; expected"):
        read_recipes(path)


def test_a_registration_that_is_not_a_string_constant_is_an_error_with_its_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pr_fix_toggle.py"
    path.write_text("REG = {\n    5: make_yaml(),\n}\n")
    with pytest.raises(SglangImportError, match=r"pr_fix_toggle.py:2: the recipe of PR 5 is"):
        read_recipes(path)


def test_a_missing_file_and_bad_python_are_one_line_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def (:\n")
    runner = CliRunner()
    missing = runner.invoke(
        cli, ["import-sglang", "--from", str(tmp_path / "nope.py"), "--out", str(tmp_path)]
    )
    broken = runner.invoke(cli, ["import-sglang", "--from", str(bad), "--out", str(tmp_path)])
    assert missing.exit_code == broken.exit_code == 2
    assert "cannot read sglang's recipe module" in missing.output
    assert f"error: {bad}:1: not valid Python" in broken.output


def test_the_installed_sglang_is_located_without_importing_it(tmp_path: Path) -> None:
    package = tmp_path / "sglang"
    (package / "srt" / "debug_utils").mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('sglang was imported')\n")
    (package / "srt" / "debug_utils" / "pr_fix_toggle.py").write_text(TOGGLE_TEXT)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "prtoggle", "import-sglang", "--out", str(out)],
        env={"PYTHONPATH": f"{tmp_path}:{Path(__file__).parents[3]}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == ["111.yaml", "22.yaml"]
