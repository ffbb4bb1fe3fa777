"""Tests for `prtoggle import-sglang`: one line per recipe written, the summary, --json.

Parsing, idempotence and errors of sglang's toggle module:
tests/prtoggle/recipes/test_from_sglang.py.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from click.testing import CliRunner, Result

from prtoggle.cli.main import cli

TOGGLE = '''\
_PR_REVERT_YAML_7 = """
patches:
  - target: pkg.mod.f
    edits:
      - match: |
          a = 1
        replacement: |
          a = 2
"""
_PR_FIX_REVERT_YAML = {7: _PR_REVERT_YAML_7}
'''


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["import-sglang", *args], prog_name="prtoggle")


def test_each_recipe_gets_a_line_then_the_summary(tmp_path: Path) -> None:
    (tmp_path / "toggle.py").write_text(TOGGLE)
    out = tmp_path / "out"
    result = invoke("--from", str(tmp_path / "toggle.py"), "--out", str(out))
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"7  {out / '7.yaml'}  written",
        f"1 recipes from {tmp_path / 'toggle.py'}: 1 written, 0 unchanged",
    ]


def test_json_gives_each_recipe_its_path_and_whether_it_changed(tmp_path: Path) -> None:
    (tmp_path / "toggle.py").write_text(TOGGLE)
    out = tmp_path / "out"
    invoke("--from", str(tmp_path / "toggle.py"), "--out", str(out))
    again = invoke("--from", str(tmp_path / "toggle.py"), "--out", str(out), "--json")
    assert again.exit_code == 0
    assert json.loads(again.stdout) == [{"pr": 7, "path": str(out / "7.yaml"), "changed": False}]


TWO_RECIPES = TOGGLE.replace(
    "_PR_FIX_REVERT_YAML = {7: _PR_REVERT_YAML_7}",
    "_PR_FIX_REVERT_YAML = {7: _PR_REVERT_YAML_7, 8: _PR_REVERT_YAML_7}",
)


def test_a_link_named_like_a_recipe_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "toggle.py").write_text(TWO_RECIPES)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / "8.yaml").symlink_to(victim)
    result = invoke("--from", str(tmp_path / "toggle.py"), "--out", str(out))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {out / '8.yaml'}: is a symbolic link (to {victim}); refused: prtoggle never "
        "writes through a link; nothing written; remove it or choose another --out\n"
    )
    assert victim.read_text() == "keep me\n"
    assert sorted(p.name for p in out.iterdir()) == ["8.yaml"]


def test_a_fifo_named_like_a_recipe_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "toggle.py").write_text(TOGGLE)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "7.yaml")
    result = invoke("--from", str(tmp_path / "toggle.py"), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {out / '7.yaml'}: is a FIFO, not a regular file; refused (a recipe is written "
        "as a regular file); nothing written; remove it or choose another --out\n"
    )


def test_a_rewritten_recipe_keeps_its_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "toggle.py").write_text(TOGGLE)
    out = tmp_path / "out"
    out.mkdir()
    (out / "7.yaml").write_text("old\n")
    (out / "7.yaml").chmod(0o600)
    result = invoke("--from", str(tmp_path / "toggle.py"), "--out", str(out))
    assert result.exit_code == 0
    assert stat.S_IMODE((out / "7.yaml").stat().st_mode) == 0o600
    assert "_PR_REVERT" not in (out / "7.yaml").read_text()
    assert "a = 2" in (out / "7.yaml").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["7.yaml"]
