"""Tests for `prtoggle import-sglang`: one line per recipe written, the summary, --json.

Parsing, idempotence and errors of sglang's toggle module:
tests/prtoggle/recipes/test_from_sglang.py.
"""

from __future__ import annotations

import json
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
