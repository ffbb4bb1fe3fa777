"""`prtoggle new --from-diff` on hand-made packages: placement, skipped changes, exit statuses."""

from __future__ import annotations

import datetime
import difflib
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from prtoggle.cli.main import cli
from prtoggle.patching.editor import edit_text
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.recipes.authoring.git import commit_of_patch
from prtoggle.recipes.schema import Recipe, load_recipe, load_recipe_text

BEFORE = '''\
"""A module."""

import os

LIMIT = 4


def helper(x):
    return x + 1


class Pool:
    size = 8

    def alloc(self, n):
        if n > self.size:
            raise ValueError(n)
        return list(range(n))

    @staticmethod
    def free(slots):
        return len(slots)

    def gone(self):
        return 0


def total(values):
    out = 0
    for value in values:
        out += value
    return out
'''

AFTER = '''\
"""A module."""

import os
import sys

LIMIT = 8


def helper(x):
    return x + 1


class Pool:
    size = 16

    def alloc(self, n):
        if n >= self.size:
            raise ValueError(n)

        return list(range(n))

    @classmethod
    def free(slots):
        return len(slots)

    def added(self):
        return 1


def total(values):
    out = 0
    for value in values:
        out += abs(value)
    return out
'''


def git_diff(path: str, before: str, after: str) -> str:
    """A diff of one file as git writes it."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    return f"diff --git a/{path} b/{path}\n" + "\n".join(lines) + "\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A checkout whose python/ holds package `pkg` at its post-fix state."""
    package = tmp_path / "checkout" / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(AFTER)
    return tmp_path / "checkout" / "python"


def patches_of(path: Path) -> Recipe:
    """The recipe at `path` as this branch's loader reads it: its `names` and
    `not_reverted` keys (loaded by the runtime half of issue 27) left aside."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document.pop("names", None)
    document.pop("not_reverted", None)
    text = yaml.safe_dump(document, sort_keys=False)
    return load_recipe_text(text, path=path, collection="new")


def run_new(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["new", *args], input=stdin, prog_name="prtoggle")
    return result.exit_code, result.stdout, result.stderr


def test_each_change_is_drafted_as_a_patch_or_a_names_entry_and_the_recipe_is_whole(
    tree: Path, tmp_path: Path
) -> None:
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", BEFORE, AFTER))
    args = ["--from-diff", str(diff), "--pr", "42", "--source-root", str(tree)]
    code, out, _ = run_new(*args, "--out", str(tmp_path / "out"), "--json")
    assert code == 0
    assert json.loads(out) == {
        "pr": 42,
        "file": str(tmp_path / "out" / "42.yaml"),
        "targets": ["pkg.mod.Pool.alloc", "pkg.mod.total"],
        "names": [
            {"scope": "pkg.mod", "define": "LIMIT = 4\n", "remove": ["sys"]},
            {
                "scope": "pkg.mod.Pool",
                "define": "size = 8\n@staticmethod\ndef free(slots):\n    return len(slots)\n"
                "def gone(self):\n    return 0\n",
                "remove": ["added"],
            },
        ],
        "added_modules": [],
        "not_reverted": [],
        "skipped": [],
        "guards": [],
    }


def test_the_written_recipe_turns_each_post_fix_function_into_its_pre_fix_text_byte_for_byte(
    tree: Path, tmp_path: Path
) -> None:
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", BEFORE, AFTER))
    out = tmp_path / "out"
    run_new("--from-diff", str(diff), "--pr", "42", "--source-root", str(tree), "--out", str(out))
    recipe = patches_of(out / "42.yaml")
    assert recipe.title == "Revert of python/pkg/mod.py"
    alloc = find_in_source_tree("pkg.mod.Pool.alloc", source_root=tree)
    assert edit_text(source=alloc.text, edits=recipe.patches[0].edits) == (
        "    def alloc(self, n):\n        if n > self.size:\n            raise ValueError(n)\n"
        "        return list(range(n))\n"
    )
    source = find_in_source_tree("pkg.mod.total", source_root=tree)
    assert edit_text(source=source.text, edits=recipe.patches[1].edits) == (
        "def total(values):\n    out = 0\n    for value in values:\n        out += value\n"
        "    return out\n"
    )


def test_the_recipe_yaml_holds_names_then_not_reverted_after_patches(
    tree: Path, tmp_path: Path
) -> None:
    before = AFTER.replace("@classmethod\n    def free", "@register\n    def free")
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", before.replace("LIMIT = 8", "LIMIT = 4"), AFTER))
    code, _, _ = run_new(
        *("--from-diff", str(diff), "--pr", "7", "--source-root", str(tree), "--out", str(tmp_path))
    )
    assert code == 1
    assert (tmp_path / "7.yaml").read_text() == (
        "pr: 7\n"
        "title: Revert of python/pkg/mod.py\n"
        "names:\n"
        "- scope: pkg.mod\n"
        "  define: |\n"
        "    LIMIT = 4\n"
        "not_reverted:\n"
        "- file: pkg/mod.py\n"
        "  line: 22\n"
        "  code: '@classmethod'\n"
        "  reason: decorators of Pool.free changed (@register not re-applied)\n"
    )


def test_every_change_placed_exits_0_and_reads_the_diff_from_stdin(tree: Path) -> None:
    before = AFTER.replace("out += abs(value)", "out += value")
    code, out, err = run_new(
        "--from-diff",
        "-",
        "--pr",
        "7",
        "--source-root",
        str(tree),
        "--out",
        str(tree.parent / "out"),
        stdin=git_diff("python/pkg/mod.py", before, AFTER),
    )
    assert (code, err) == (0, "")
    assert out == f"wrote {tree.parent / 'out' / '7.yaml'}: 1 target\n  pkg.mod.total\n"


def test_a_file_starting_with_a_byte_order_mark_is_read_as_python_reads_it(
    tree: Path, tmp_path: Path
) -> None:
    """The diff shows the mark on line 1, as git does; the module's text starts after it."""
    before = "def first(x):\n    return x + 1\n"
    after = "def first(x):\n    return x + 2\n"
    (tree / "pkg" / "marked.py").write_bytes(b"\xef\xbb\xbf" + after.encode())
    diff = git_diff("python/pkg/marked.py", "\ufeff" + before, "\ufeff" + after)
    out = tmp_path / "out"
    args = ["--from-diff", "-", "--pr", "11", "--source-root", str(tree), "--out", str(out)]
    code, stdout, stderr = run_new(*args, stdin=diff)
    assert (code, stdout, stderr) == (
        0,
        f"wrote {out / '11.yaml'}: 1 target\n  pkg.marked.first\n",
        "",
    )
    recipe = load_recipe(out / "11.yaml")
    source = find_in_source_tree("pkg.marked.first", source_root=tree)
    assert (source.first_line, edit_text(source=source.text, edits=recipe.patches[0].edits)) == (
        1,
        before,
    )


def test_blank_line_only_changes_are_part_of_the_edits(tree: Path, tmp_path: Path) -> None:
    before = AFTER.replace(
        "            raise ValueError(n)\n\n", "            raise ValueError(n)\n"
    )
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", before, AFTER))
    code, out, _ = run_new(
        *("--from-diff", str(diff), "--pr", "7", "--source-root", str(tree)),
        *("--out", str(tmp_path), "--json"),
    )
    assert code == 0
    assert json.loads(out)["targets"] == ["pkg.mod.Pool.alloc"]
    alloc = find_in_source_tree("pkg.mod.Pool.alloc", source_root=tree)
    edits = patches_of(tmp_path / "7.yaml").patches[0].edits
    assert edit_text(source=alloc.text, edits=edits) == (
        "    def alloc(self, n):\n        if n >= self.size:\n            raise ValueError(n)\n"
        "        return list(range(n))\n"
    )


def test_files_outside_the_source_root_are_skipped_and_the_rest_drafted(
    tree: Path, tmp_path: Path
) -> None:
    before = AFTER.replace("out += abs(value)", "out += value")
    diff = tmp_path / "fix.diff"
    other_diff = git_diff("benchmark/run_mod.py", "x = 1\n", "x = 2\n")
    diff.write_text(git_diff("python/pkg/mod.py", before, AFTER) + other_diff)
    code, out, _ = run_new(
        *("--from-diff", str(diff), "--pr", "7", "--source-root", str(tree)),
        *("--out", str(tmp_path), "--json"),
    )
    assert code == 1
    record = json.loads(out)
    assert record["targets"] == ["pkg.mod.total"]
    assert record["skipped"] == [
        {"file": "benchmark/run_mod.py", "line": 1, "reason": "not in the source root"}
    ]


def test_a_diff_with_nothing_in_the_source_root_exits_2_and_writes_nothing(
    tree: Path, tmp_path: Path
) -> None:
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/other/mod.py", BEFORE, AFTER))
    out = tmp_path / "out"
    code, _, err = run_new(
        "--from-diff", str(diff), "--pr", "7", "--source-root", str(tree), "--out", str(out)
    )
    assert code == 2
    assert err == (
        f"error: {diff}: nothing placeable: 1 change(s) skipped (not in the source root); "
        "expected a change of the Python code under the source root (--source-root)\n"
    )
    assert not out.exists()


def test_a_diff_whose_every_change_is_listed_exits_2_and_writes_no_unloadable_recipe(
    tmp_path: Path,
) -> None:
    # A recipe of `not_reverted` alone reverts nothing, and no loader reads it: a
    # collection holding it would fail to load whole.
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("import os\nprint(2)\n")
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", "import os\nprint(1)\n", "import os\nprint(2)\n"))
    out = tmp_path / "out"
    args = ("--from-diff", str(diff), "--pr", "7", "--source-root", str(tmp_path / "python"))
    code, _, err = run_new(*args, "--out", str(out))
    assert code == 2
    assert err == (
        f"error: {diff}: nothing revertible: 1 change(s) cannot be reverted (module-level "
        "code changed); no recipe written: a recipe reverts something (patches or names)\n"
    )
    assert not out.exists()


def test_a_file_that_is_not_a_diff_exits_2(tree: Path, tmp_path: Path) -> None:
    diff = tmp_path / "fix.diff"
    diff.write_text("hello\n")
    code, _, err = run_new("--from-diff", str(diff), "--pr", "7", "--source-root", str(tree))
    assert code == 2
    assert err == (
        f"error: {diff}: no file in the diff; expected a unified diff as git writes it "
        "(`--- a/path`, `+++ b/path`, `@@ -l,n +l,n @@` hunks)\n"
    )


def test_a_diff_that_disagrees_with_the_source_root_exits_2(tree: Path, tmp_path: Path) -> None:
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", AFTER, BEFORE))
    code, _, err = run_new("--from-diff", str(diff), "--pr", "7", "--source-root", str(tree))
    assert code == 2
    assert err == (
        f"error: {diff}: python/pkg/mod.py:4: the diff says '', the source root has "
        "'import sys'; expected the post-fix source the diff was made from (--source-root)\n"
    )


def test_from_diff_without_pr_exits_2_naming_the_option(tree: Path, tmp_path: Path) -> None:
    diff = tmp_path / "fix.diff"
    diff.write_text(git_diff("python/pkg/mod.py", BEFORE, AFTER))
    code, _, err = run_new("--from-diff", str(diff), "--source-root", str(tree))
    assert code == 2
    assert err == (
        "error: --pr is required with --from-diff (the fix's PR number) "
        "(see `prtoggle new --help`)\n"
    )


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout (python/pkg) with one fix commit on top, its remote on GitHub."""
    root = tmp_path / "repo"
    (root / "python" / "pkg").mkdir(parents=True)
    (root / "python" / "pkg" / "__init__.py").write_text("")
    (root / "python" / "pkg" / "mod.py").write_text(BEFORE)
    git(root, "init", "-q")
    git(root, "add", ".")
    env = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    git(root, *env, "commit", "-qm", "init", "--date=2026-05-01T10:00:00")
    (root / "python" / "pkg" / "mod.py").write_text(AFTER)
    subject = "Fix the pool's bound and the total (#26521)"
    git(root, *env, "commit", "-qam", subject, "--date=2026-05-29T10:00:00")
    git(root, "remote", "add", "origin", "https://github.com/sgl-project/sglang.git")
    return root


def test_from_git_fills_pr_title_date_and_url_from_the_commit(repo: Path, tmp_path: Path) -> None:
    code, out, _ = run_new(
        "--from-git", "HEAD", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json"
    )
    assert code == 0
    assert json.loads(out)["targets"] == ["pkg.mod.Pool.alloc", "pkg.mod.total"]
    text = (tmp_path / "out" / "26521.yaml").read_text()
    assert text.startswith(
        "pr: 26521\ntitle: Fix the pool's bound and the total\n"
        "url: https://github.com/sgl-project/sglang/pull/26521\nmerged: 2026-05-29\n"
    )


def test_from_git_without_a_pr_in_the_subject_needs_pr(repo: Path) -> None:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e.com", "commit", "-q", "--amend", "-m", "x")
    code, _, err = run_new("--from-git", "HEAD", "--repo", str(repo))
    assert code == 2
    assert err == (
        "error: --pr is required: the subject of HEAD ('x') has no (#<number>) "
        "(see `prtoggle new --help`)\n"
    )


@pytest.mark.parametrize("command", [["show"], ["format-patch", "-1", "--stdout"]])
def test_from_diff_of_git_show_or_format_patch_takes_pr_title_and_date_from_its_header(
    repo: Path, tmp_path: Path, command: list[str]
) -> None:
    diff = tmp_path / "fix.patch"
    diff.write_text(git(repo, *command, "HEAD"))
    args = ["--from-diff", str(diff), "--source-root", str(repo / "python")]
    code, out, _ = run_new(*args, "--out", str(tmp_path / "out"), "--json")
    assert code == 0
    assert json.loads(out)["targets"] == ["pkg.mod.Pool.alloc", "pkg.mod.total"]
    assert (
        (tmp_path / "out" / "26521.yaml")
        .read_text()
        .startswith(
            "pr: 26521\ntitle: Fix the pool's bound and the total\nmerged: 2026-05-29\npatches:\n"
        )
    )


def test_from_diff_pr_and_title_options_win_over_the_header(repo: Path, tmp_path: Path) -> None:
    diff = tmp_path / "fix.patch"
    diff.write_text(git(repo, "format-patch", "-1", "--stdout", "HEAD"))
    args = ["--from-diff", str(diff), "--source-root", str(repo / "python")]
    run_new(*args, "--pr", "7", "--title", "Ours", "--out", str(tmp_path / "out"))
    assert (
        (tmp_path / "out" / "7.yaml")
        .read_text()
        .startswith("pr: 7\ntitle: Ours\nmerged: 2026-05-29\npatches:\n")
    )


def test_from_diff_of_a_header_without_a_pr_in_the_subject_needs_pr(
    repo: Path, tmp_path: Path
) -> None:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e.com", "commit", "-q", "--amend", "-m", "x")
    diff = tmp_path / "fix.patch"
    diff.write_text(git(repo, "show", "HEAD"))
    code, _, err = run_new("--from-diff", str(diff), "--source-root", str(repo / "python"))
    assert code == 2
    assert err == (
        f"error: --pr is required: the subject of {diff} ('x') has no (#<number>) "
        "(see `prtoggle new --help`)\n"
    )


def test_a_folded_subject_and_its_patch_tag_are_read_as_git_reads_the_subject() -> None:
    mailed = (
        "From 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b Mon Sep 17 00:00:00 2001\n"
        "From: t <t@example.com>\nDate: Fri, 29 May 2026 23:30:00 -0700\n"
        "Subject: [PATCH v2 1/3] Fix the pool's bound, a subject long enough to be\n"
        " folded (#26521)\n\n---\n"
    )
    shown = (
        "commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b (HEAD -> main)\n"
        "Author: t <t@example.com>\nDate:   Fri May 29 23:30:00 2026 -0700\n\n"
        "    Fix the pool's bound, a subject long enough to be\n    folded (#26521)\n\n"
        "    The body.\n\ndiff --git a/x.py b/x.py\n"
    )
    for text in (mailed, shown):
        commit = commit_of_patch(text)
        assert commit is not None
        assert (commit.pr, commit.title, commit.date) == (
            26521,
            "Fix the pool's bound, a subject long enough to be folded",
            datetime.date(2026, 5, 29),
        )
    assert commit_of_patch(git_diff("python/pkg/mod.py", BEFORE, AFTER)) is None
