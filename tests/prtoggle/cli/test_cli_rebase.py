"""Tests for `prtoggle rebase` as a command: where it looks for the code, its JSON answer.

Finding moved targets, re-anchoring and writing the rebased recipe:
tests/prtoggle/commands/test_rebase.py; on real sglang releases: tests/sglang/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli

RECIPE = """\
pr: 5
patches:
  - target: notinstalled_pkg.mod.f
    edits:
      - match: a = 1
        replacement: a = 2
"""


@pytest.fixture(name="recipes")
def recipes_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "5.yaml").write_text(RECIPE)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(directory))
    return directory


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["rebase", *args], prog_name="prtoggle")


def test_a_recipe_whose_package_is_not_installed_asks_for_a_source_root(recipes: Path) -> None:
    result = invoke("5", "--collection", "mine", "--out", str(recipes.parent / "out"))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "error: PR 5: the package of its targets is not installed; expected --source-root "
        "(a directory, wheel or sdist)\n"
    )


def test_json_names_each_edit_and_the_status_and_nothing_is_written(recipes: Path) -> None:
    tree = recipes.parent / "tree"
    tree.mkdir()
    out = recipes.parent / "out"
    args = ["5", "--collection", "mine", "--source-root", str(tree), "--out", str(out), "--json"]
    result = invoke(*args)
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "pr": 5,
        "collection": "mine",
        "status": "failed",
        "edits": [
            {
                "target": "notinstalled_pkg.mod.f",
                "old_target": "notinstalled_pkg.mod.f",
                "status": "not-found",
                "similarity": 0.0,
                "reason": "the target is gone and no function of its package holds its edits "
                "closely enough to be the one it moved to",
            }
        ],
    }
    assert not out.exists()
