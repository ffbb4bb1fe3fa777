"""Tests for what `new` may call whole: a fix that changes `__slots__`, adds `__eq__`, changes a
dataclass's fields or a class statement (defined back whole), moves
a function to another module, renames or deletes a module. Each is reverted truly (the
reverted program imported in a real process and compared with the pre-fix one) or listed
in `not_reverted`. Real git checkouts, real `prtoggle run` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from prtoggle.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
PR = 5151
SUBJECT = f"Fix the package (#{PR})"


def git(repo: Path, *args: str) -> None:
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e.com", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def checkout(root: Path, pre: dict[str, str], post: dict[str, str | None]) -> Path:
    """A git checkout of python/pkg: a commit of `pre`, then the fix commit (`post`: each
    file's new text, None to delete it)."""
    files = {"python/pkg/__init__.py": "", **pre}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    for name, text in post.items():
        if text is None:
            (root / name).unlink()
        else:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", SUBJECT)
    return root


def draft(repo: Path, out: Path) -> tuple[int, dict[str, object]]:
    args = ["new", "--from-git", "HEAD", "--repo", str(repo), "--out", str(out), "--json"]
    result = CliRunner().invoke(cli, args, prog_name="prtoggle")
    return result.exit_code, json.loads(result.stdout)


def reasons(record: dict[str, object]) -> list[str]:
    listed = record["not_reverted"]
    assert isinstance(listed, list)
    return [f"{item['file']}:{item['line']} {item['reason']}" for item in listed]


def probe(repo: Path, out: Path, code: str, *, reverted: bool) -> str:
    """`code`'s output, run on the post-fix checkout, under `prtoggle run -r PR` or not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRTOGGLE_", "SGLANG_"))}
    env |= {"PYTHONPATH": os.pathsep.join([str(REPO), str(repo / "python")])}
    env |= {"PRTOGGLE_YAML_PATH": str(out), "PRTOGGLE_WARM": "0"}
    command = [sys.executable, "-c", code]
    if reverted:
        command = [sys.executable, "-m", "prtoggle", "run", "-r", str(PR), "--", *command]
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def whole(qualname: str) -> str:
    return (
        f"{qualname} defined back whole, a new class: instances and subclasses made from the "
        "post-fix class before the revert landed keep it (isinstance against the pre-fix "
        "class fails for them)"
    )


def test_a_fix_that_adds_a_slot_defines_the_class_back_whole(tmp_path: Path) -> None:
    pre = {"python/pkg/m.py": "class C:\n    __slots__ = ('a',)\n\n\ndef f():\n    return 1\n"}
    post = {"python/pkg/m.py": "class C:\n    __slots__ = ('a', 'b')\n\n\ndef f():\n    return 2\n"}
    repo = checkout(tmp_path / "repo", pre, post)
    out = tmp_path / "out"
    code, record = draft(repo, out)
    assert (code, record["targets"]) == (1, ["pkg.m.f"])
    assert record["names"] == [
        {"scope": "pkg.m", "define": "class C:\n    __slots__ = ('a',)\n", "remove": []}
    ]
    assert reasons(record) == [f"pkg/m.py:2 {whole('C')}"]
    check = "from pkg.m import C, f\nprint(C.__slots__, hasattr(C, 'b'), f())\n"
    assert probe(repo, out, check, reverted=False) == "('a', 'b') True 2\n"
    assert probe(repo, out, check, reverted=True) == "('a',) False 1\n"


def test_a_fix_that_adds_eq_defines_the_class_back_whole_and_its_hash_with_it(
    tmp_path: Path,
) -> None:
    pre = {"python/pkg/m.py": "class C:\n    x = 1\n"}
    eq = "\n    def __eq__(self, other):\n        return True\n"
    repo = checkout(tmp_path / "repo", pre, {"python/pkg/m.py": "class C:\n    x = 1\n" + eq})
    out = tmp_path / "out"
    code, record = draft(repo, out)
    assert code == 1
    assert record["names"] == [{"scope": "pkg.m", "define": "class C:\n    x = 1\n", "remove": []}]
    assert reasons(record) == [f"pkg/m.py:3 {whole('C')}"]
    check = "from pkg.m import C\nprint(C() == C(), C.__hash__ is None)\n"
    assert probe(repo, out, check, reverted=True) == "False False\n"  # __eq__ gone, hash back


def test_a_dataclass_field_the_fix_removed_comes_back_and_other_modules_import_the_new_class(
    tmp_path: Path,
) -> None:
    head = "from dataclasses import dataclass\n\n\n@dataclass(frozen=True, kw_only=True)\n"
    pre = {
        "python/pkg/m.py": head + "class P:\n    limit: int\n    name: str\n",
        "python/pkg/user.py": "from pkg.m import P\n\n\ndef make():\n    return P(name='x')\n",
    }
    post = {"python/pkg/m.py": head + "class P:\n    name: str\n"}
    repo = checkout(tmp_path / "repo", pre, post)
    out = tmp_path / "out"
    code, record = draft(repo, out)
    assert (code, record["targets"]) == (1, [])
    assert record["names"] == [
        {
            "scope": "pkg.m",
            "define": "@dataclass(frozen=True, kw_only=True)\nclass P:\n    limit: int\n"
            "    name: str\n",
            "remove": [],
        }
    ]
    assert reasons(record) == [f"pkg/m.py:4 {whole('P')}"]
    check = (
        "import pkg.m, pkg.user\n"
        "try:\n    pkg.user.make()\nexcept TypeError as exc:\n    print(exc)\n"
        "print(pkg.user.P is pkg.m.P, [f for f in pkg.m.P.__dataclass_fields__])\n"
    )
    assert probe(repo, out, check, reverted=False) == "True ['name']\n"
    assert probe(repo, out, check, reverted=True) == (
        "P.__init__() missing 1 required keyword-only argument: 'limit'\nTrue ['limit', 'name']\n"
    )


def test_a_class_whose_member_registers_at_import_is_not_defined_again_but_listed(
    tmp_path: Path,
) -> None:
    body = "    @register\n    def run(self):\n        pass\n\n\ndef f():\n    return {}\n"
    pre = {"python/pkg/m.py": "class C:\n" + body.format(1)}
    post = {"python/pkg/m.py": "class C(dict):\n" + body.format(2)}
    repo = checkout(tmp_path / "repo", pre, post)
    code, record = draft(repo, tmp_path / "out")
    assert (code, record["targets"], record["names"]) == (1, ["pkg.m.f"], [])
    assert reasons(record) == [
        "pkg/m.py:1 class statement of C changed (bases, keywords or decorators)"
    ]


def test_a_function_moved_to_another_module_stays_where_the_old_module_imports_it(
    tmp_path: Path,
) -> None:
    pre = {
        "python/pkg/a.py": "def helper():\n    return 1\n\n\ndef use():\n    return helper()\n",
        "python/pkg/b.py": "X = 1\n",
    }
    post = {
        "python/pkg/a.py": "from pkg.b import helper\n\n\ndef use():\n    return helper()\n",
        "python/pkg/b.py": "X = 1\n\n\ndef helper():\n    return 1\n",
    }
    repo = checkout(tmp_path / "repo", pre, post)
    out = tmp_path / "out"
    code, record = draft(repo, out)
    assert code == 1
    assert record["names"] == [
        {"scope": "pkg.a", "define": "def helper():\n    return 1\n", "remove": []}
    ]
    assert reasons(record) == [
        "pkg/b.py:4 helper added by the fix stays: pkg/a.py (changed by the same fix) imports "
        "it from pkg.b, and removing it would fail that import"
    ]
    check = "import pkg.a, pkg.b\nprint(pkg.a.use(), pkg.a.helper.__module__)\n"
    assert probe(repo, out, check, reverted=True) == "1 pkg.a\n"  # as before the fix


def test_a_renamed_module_is_unimportable_as_added_and_listed_as_removed(tmp_path: Path) -> None:
    pre = {
        "python/pkg/old.py": "def g():\n    return 1\n",
        "python/pkg/user.py": "from pkg.old import g\n\n\ndef h():\n    return g()\n",
    }
    post = {
        "python/pkg/old.py": None,
        "python/pkg/new.py": "def g():\n    return 1\n",
        "python/pkg/user.py": "from pkg.new import g\n\n\ndef h():\n    return g()\n",
    }
    repo = checkout(tmp_path / "repo", pre, post)
    code, record = draft(repo, tmp_path / "out")
    assert code == 1
    assert record["added_modules"] == ["pkg.new"]
    assert reasons(record) == [
        "pkg/old.py:1 a module the fix removed (pkg.old cannot be imported reverted)",
    ]


def test_a_deleted_module_is_listed_and_checks_ok_on_the_fix_s_tree(tmp_path: Path) -> None:
    pre = {"python/pkg/gone.py": "X = 1\n", "python/pkg/m.py": "def f():\n    return 1\n"}
    post = {"python/pkg/gone.py": None, "python/pkg/m.py": "def f():\n    return 2\n"}
    repo = checkout(tmp_path / "repo", pre, post)
    out = tmp_path / "out"
    code, record = draft(repo, out)
    assert (code, record["skipped"]) == (1, [])
    assert reasons(record) == [
        "pkg/gone.py:1 a module the fix removed (pkg.gone cannot be imported reverted)"
    ]
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(out), "PRTOGGLE_SGLANG_UPSTREAM": "0"}
    command = [sys.executable, "-m", "prtoggle", "check", "--source-root", str(repo / "python")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    env["PYTHONPATH"] = str(repo / "python")
    listed = subprocess.run(
        [sys.executable, "-m", "prtoggle", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    [entry] = [r for r in json.loads(listed.stdout) if r["pr"] == PR]
    assert entry["partial"] is True


def test_a_name_another_module_imports_only_inside_a_function_is_removed(
    tmp_path: Path,
) -> None:
    pre = {"python/pkg/a.py": "def use():\n    return 1\n", "python/pkg/b.py": "X = 1\n"}
    post = {
        "python/pkg/a.py": "def use():\n    from pkg.b import helper\n\n    return helper()\n",
        "python/pkg/b.py": "X = 1\n\n\ndef helper():\n    return 1\n",
    }
    repo = checkout(tmp_path / "repo", pre, post)
    code, record = draft(repo, tmp_path / "out")
    assert (code, record["targets"], reasons(record)) == (0, ["pkg.a.use"], [])
    assert record["names"] == [{"scope": "pkg.b", "define": "", "remove": ["helper"]}]


def test_a_deleted_module_of_a_namespace_folder_is_listed_under_its_path(tmp_path: Path) -> None:
    pre = {"python/pkg/sub/gone.py": "X = 1\n", "python/pkg/m.py": "def f():\n    return 1\n"}
    post = {"python/pkg/sub/gone.py": None, "python/pkg/m.py": "def f():\n    return 2\n"}
    repo = checkout(tmp_path / "repo", pre, post)
    code, record = draft(repo, tmp_path / "out")
    assert (code, record["skipped"]) == (1, [])
    assert reasons(record) == [
        "pkg/sub/gone.py:1 a module the fix removed (pkg.sub.gone cannot be imported reverted)"
    ]


def test_a_module_deleted_alone_in_its_package_is_listed(tmp_path: Path) -> None:
    pre = {
        "python/pkg/__init__.py": "",
        "python/pkg/gone.py": "X = 1\n",
        "python/other/__init__.py": "",
        "python/other/m.py": "def f():\n    return 1\n",
    }
    post = {"python/pkg/gone.py": None, "python/other/m.py": "def f():\n    return 2\n"}
    repo = checkout(tmp_path / "repo", pre, post)
    code, record = draft(repo, tmp_path / "out")
    assert (code, record["skipped"]) == (1, [])
    assert reasons(record) == [
        "pkg/gone.py:1 a module the fix removed (pkg.gone cannot be imported reverted)"
    ]
