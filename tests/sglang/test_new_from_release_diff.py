"""`prtoggle new --from-diff` on real data: sglang's 0.5.22 -> 0.5.23 diff of its mem_cache
(patches checked and byte-exact; names and not_reverted read as YAML, issue 27)."""

from __future__ import annotations

import ast
import difflib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from prtoggle.patching.define_code import parse_define
from prtoggle.patching.editor import edit_text
from prtoggle.patching.source_files import open_source_tree
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.schema import Recipe, load_recipe_text

pytestmark = pytest.mark.sglang

WHEELS_ENV = "PRTOGGLE_SGLANG_HISTORY_WHEELS"
OLDER = "0.5.22"
PACKAGE = "sglang/srt/mem_cache/"
"""The part of the release diff drafted here (84 files; the whole release diff has 1,988)."""


@pytest.fixture(scope="session")
def older_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sglang 0.5.22 wheel: from $PRTOGGLE_SGLANG_HISTORY_WHEELS, else pip download."""
    directory = Path(os.environ.get(WHEELS_ENV) or tmp_path_factory.mktemp("sglang-0.5.22"))
    wheels = sorted(directory.glob(f"sglang-{OLDER}-*.whl"))
    if not wheels:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
        done = subprocess.run(
            [*command, f"sglang=={OLDER}", "-d", str(directory)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        wheels = sorted(directory.glob(f"sglang-{OLDER}-*.whl"))
        if done.returncode != 0 or not wheels:
            pytest.fail(
                f"could not download the sglang=={OLDER} wheel into {directory} (set "
                f"{WHEELS_ENV} to a folder holding it): {done.stderr.strip()[-500:]}",
                pytrace=False,
            )
    return wheels[0]


def release_diff(older: Path, newer: Path, *, under: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """The git-style diff older -> newer of the .py files under `under`, paths as in sglang's
    repository (python/sglang/...), and each changed file's (old, new) text."""
    old_zip, new_zip = zipfile.ZipFile(older), zipfile.ZipFile(newer)
    old_names = {n for n in old_zip.namelist() if n.startswith(under) and n.endswith(".py")}
    new_names = {n for n in new_zip.namelist() if n.startswith(under) and n.endswith(".py")}
    parts, texts = [], {}
    for name in sorted(old_names | new_names):
        old = old_zip.read(name).decode() if name in old_names else ""
        new = new_zip.read(name).decode() if name in new_names else ""
        if old == new:
            continue
        texts[f"python/{name}"] = (old, new)
        a = f"a/python/{name}" if name in old_names else "/dev/null"
        b = f"b/python/{name}" if name in new_names else "/dev/null"
        lines = difflib.unified_diff(old.splitlines(), new.splitlines(), a, b, lineterm="")
        parts.append(f"diff --git a/python/{name} b/python/{name}\n" + "\n".join(lines) + "\n")
    return "".join(parts), texts


@pytest.fixture(scope="module")
def drafted(
    older_wheel: Path, sglang_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, dict[str, object], dict[str, tuple[str, str]]]:
    diff, texts = release_diff(older_wheel, sglang_wheel, under=PACKAGE)
    folder = tmp_path_factory.mktemp("new-release")
    (folder / "release.diff").write_text(diff)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "prtoggle", "new", "--from-diff", str(folder / "release.diff")),
            *("--pr", "1", "--source-root", str(sglang_wheel), "--out", str(folder), "--json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stderr == ""
    return done.returncode, json.loads(done.stdout), texts


def test_the_release_diff_gives_a_recipe_that_checks_ok_on_the_newer_wheel(
    drafted: tuple[int, dict[str, object], dict[str, tuple[str, str]]], sglang_wheel: Path
) -> None:
    code, record, _ = drafted
    recipe = patches_of(Path(str(record["file"])))
    assert code == 1
    assert len(recipe.patches) > 400
    statuses = {check.status for check in check_recipe(recipe, tree=open_source_tree(sglang_wheel))}
    assert statuses == {"ok"}


def test_each_target_reverts_to_its_text_in_the_older_wheel(
    drafted: tuple[int, dict[str, object], dict[str, tuple[str, str]]],
    older_wheel: Path,
    sglang_wheel: Path,
) -> None:
    recipe = patches_of(Path(str(drafted[1]["file"])))
    newer, older = open_source_tree(sglang_wheel), open_source_tree(older_wheel)
    differing = [
        patch.target
        for patch in recipe.patches
        if _code(
            edit_text(
                source=find_in_source_tree(patch.target, source_root=newer).text, edits=patch.edits
            )
        )
        != _code(find_in_source_tree(patch.target, source_root=older).text)
    ]
    assert differing == []


def test_every_file_whose_module_level_code_changed_has_a_names_or_not_reverted_entry(
    drafted: tuple[int, dict[str, object], dict[str, tuple[str, str]]],
) -> None:
    _, record, texts = drafted
    names, listed = record["names"], record["not_reverted"]
    assert isinstance(names, list) and isinstance(listed, list)
    scopes = {entry["scope"] for entry in names}
    covered = {f"python/{entry['file']}" for entry in listed}
    covered |= {path for path in texts if _module(path) in {s.rsplit(".", 1)[0] for s in scopes}}
    covered |= {path for path in texts if _module(path) in scopes}
    added = record.get("added_modules") or []
    assert isinstance(added, list)
    covered |= {  # a module the fix added: unimportable while reverted (added_modules)
        path for path in texts if any(f"{_module(path)}.".startswith(f"{m}.") for m in added)
    }
    changed_outside = {path for path, (old, new) in texts.items() if _outline(old) != _outline(new)}
    assert changed_outside - covered == set()
    assert len(names) > 50
    for entry in names:
        for node in parse_define(entry["define"]).body:  # a class's members may be indented
            assert isinstance(node, _ALLOWED), (entry["scope"], ast.dump(node)[:80])


_ALLOWED = (
    ast.Import,
    ast.ImportFrom,
    ast.Assign,
    ast.AnnAssign,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


def patches_of(path: Path) -> Recipe:
    """The recipe with its `names` and `not_reverted` (the runtime half's keys) left aside."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document.pop("names", None)
    document.pop("not_reverted", None)
    return load_recipe_text(yaml.safe_dump(document, sort_keys=False), path=path, collection="n")


def _module(path: str) -> str:
    parts = path.removeprefix("python/").removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _code(text: str) -> list[str]:
    """The lines from the def line on, blank lines and trailing whitespace aside."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async ")))
    return [line.rstrip() for line in lines[start:] if line.strip()]


def _outline(text: str) -> str:
    """A module with every function's body and decorators dropped: what no recipe can revert."""
    if not text:
        return ""
    module = ast.parse(text)
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.body, node.decorator_list = [ast.Pass()], []
            node.args, node.returns = (
                ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                None,
            )
    return ast.dump(module)
