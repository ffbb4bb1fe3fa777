"""Whole-fix drafts that must land as `new` wrote them: causes found on real sglang fixes.

Each case is a small package changed by a fix over several modules, drafted by
`prtoggle new --from-diff`, then reverted in a real Python process by prtoggle's runtime
(`prtoggle.reverted` with `PRTOGGLE_YAML_PATH`, the modules imported first) and compared
with the pre-fix package imported in another process.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from prtoggle.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
DESCRIBE = """\
import contextlib, importlib, json, os, sys
import prtoggle
modules = [importlib.import_module(name) for name in sys.argv[1:]]
revert = os.environ.get("PR")
with prtoggle.reverted(int(revert)) if revert else contextlib.nullcontext():
    print(json.dumps({
        m.__name__: [
            sorted(k for k in vars(m) if k[:2] != "__"),
            list(vars(m).get("__annotations__", {})),
            {k: list(vars(c).get("__annotations__", {})) for k, c in vars(m).items()
             if isinstance(c, type) and c.__module__ == m.__name__},
        ]
        for m in modules
    }))
"""


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "pkg" / "__init__.py").touch()


def fix_diff(before: dict[str, str], after: dict[str, str]) -> str:
    parts = []
    for name in sorted(after):
        path = f"python/pkg/{name}"
        old, new = before[name].splitlines(), after[name].splitlines()
        lines = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm="")
        parts.append(f"diff --git a/{path} b/{path}\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def draft(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> Path:
    """`new --from-diff` of the fix (PR 7): the recipe folder; the post-fix package lies in
    tmp_path/post, the pre-fix one in tmp_path/pre."""
    write_package(tmp_path / "pre", before)
    write_package(tmp_path / "post", after)
    (tmp_path / "fix.diff").write_text(fix_diff(before, after))
    out = tmp_path / "recipes"
    arguments = ["--from-diff", str(tmp_path / "fix.diff"), "--source-root", str(tmp_path / "post")]
    result = CliRunner().invoke(
        cli, ["new", *arguments, "--pr", "7", "--out", str(out), "--json"], prog_name="prtoggle"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["not_reverted"] == []
    return out


def describe(root: Path, modules: list[str], *, recipes: Path | None = None) -> object:
    """Each module's top-level names, imported in a fresh process (then PR 7 reverted by
    `prtoggle.reverted` where `recipes` is given, as the import oracle does)."""
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DEBUG_REVERT_PR"}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(ROOT)])
    if recipes is not None:
        env.update(PR="7", PRTOGGLE_YAML_PATH=str(recipes))
    done = subprocess.run(
        [sys.executable, "-c", DESCRIBE, *modules],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-1500:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_name_the_fix_adds_and_other_modules_import_is_removed_from_each_of_them(
    tmp_path: Path,
) -> None:
    # The fix adds a class and imports it in a module sorted after the one defining it and
    # in one sorted before: removing it where it lives first also removed its copies, and
    # the later entry's remove then found its own name unbound (a refused revert).
    before = {
        "base.py": "def helper():\n    return 1\n",
        "core.py": "LIMIT = 1\n",
        "user.py": "from pkg.core import LIMIT\n",
    }
    after = {
        "base.py": "from pkg.core import Result\n\n\ndef helper():\n    return 1\n",
        "core.py": "LIMIT = 1\n\n\nclass Result:\n    pass\n",
        "user.py": "from pkg.core import LIMIT, Result\n",
    }
    recipes = draft(tmp_path, before, after)
    modules = ["pkg.base", "pkg.core", "pkg.user"]
    expected = describe(tmp_path / "pre", modules)
    assert describe(tmp_path / "post", modules, recipes=recipes) == expected


def test_an_annotated_name_the_fix_adds_leaves_no_annotation_once_removed(
    tmp_path: Path,
) -> None:
    before = {
        "core.py": "LIMIT: int = 1\n\n\nclass Box:\n    size: int = 1\n",
    }
    after = {
        "core.py": "LIMIT: int = 1\n_HOOK: object = None\n\n\n"
        "class Box:\n    size: int = 1\n    label: str = ''\n",
    }
    recipes = draft(tmp_path, before, after)
    expected = describe(tmp_path / "pre", ["pkg.core"])
    assert expected == {"pkg.core": [["Box", "LIMIT"], ["LIMIT"], {"Box": ["size"]}]}
    assert describe(tmp_path / "post", ["pkg.core"], recipes=recipes) == expected
