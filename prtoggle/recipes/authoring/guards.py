"""A fix's test files: never reverted; the tests it added or changed, as the recipe's `guards`."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from prtoggle.patching.source_files import SourceTree
from prtoggle.recipes.authoring.diff import DiffError, FileDiff, undo
from prtoggle.recipes.authoring.modules import find_file, find_module, safe_path

_TEST_FOLDERS = frozenset({"test", "tests"})
_ABOVE = 3
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def is_test_path(path: str) -> bool:
    """Whether a diff path is a test's: under a `test`/`tests` folder, or a `test_*.py`,
    `*_test.py` or `conftest.py` file. Such a file is never reverted."""
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name = parts[-1]
    return (
        bool(_TEST_FOLDERS.intersection(parts[:-1]))
        or name == "conftest.py"
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
    )


def in_package(path: str, *, roots: Sequence[SourceTree]) -> bool:
    """Whether `path` is a module of a package in one of `roots` whose test folder, if any,
    lies inside the package: found as a module (modules.find_module), no test folder among
    the leading folders dropped to find it, nor as its top-level package
    (`python/sglang/test/x.py` is sglang's code; `test/unit/pkg/x.py` is a test's)."""
    found = find_module(path, roots=roots) if path.endswith(".py") else None
    if found is None:
        return False
    dropped = PurePosixPath(path).parts[: -len(PurePosixPath(found.relative).parts)]
    top = found.module.split(".", 1)[0]
    return not _TEST_FOLDERS.intersection([*dropped, top])


def collectable(path: str) -> bool:
    """Whether pytest collects tests from the file by default (`test_*.py`, `*_test.py`)."""
    name = PurePosixPath(path).name
    return (name.startswith("test_") or name.endswith("_test.py")) and name.endswith(".py")


def file_guards(diff: FileDiff, *, roots: Sequence[SourceTree]) -> list[str]:
    """The guards of one test file's diff: a node id per test function or method the diff
    adds or changes; the file's path alone for a file the fix added, or when a changed
    line is outside every test (a helper, a fixture, module-level code, a class body line
    of a test class the fix did not add) or the post-fix text cannot be read; none for a
    deleted file or one pytest does not collect."""
    if diff.deleted or not collectable(diff.path):
        return []
    post = None if diff.added else _on_disk(diff, roots=roots)
    if post is None:
        return [diff.path]
    try:
        pre = undo(post, diff, source=diff.path)
        pre_tests, post_tests = _tests(ast.parse(pre)), _tests(ast.parse(post))
    except (DiffError, SyntaxError, ValueError):
        return [diff.path]
    named: list[str] = []
    for line in diff.lines:
        if line.kind == " " or not line.text.strip() or line.text.strip().startswith("#"):
            continue
        side, number = (post_tests, line.new) if line.kind == "+" else (pre_tests, line.old)
        found = side.at(number)
        if found is None or (found in post_tests.classes and found in pre_tests.classes):
            return [diff.path]
        if found in post_tests.ids and found not in named:
            named.append(found)
    order = {node: index for index, node in enumerate(post_tests.ids)}
    return [f"{diff.path}::{node}" for node in sorted(named, key=order.__getitem__)]


@dataclass(frozen=True)
class _Tests:
    """The pytest-collectable tests of a module: their ids in line order, the test classes,
    and per line the test it is part of (a class's name for a line of a test class that
    no test method holds)."""

    ids: tuple[str, ...]
    classes: frozenset[str]
    lines: dict[int, str]

    def at(self, line: int) -> str | None:
        return self.lines.get(line)


def _tests(module: ast.Module) -> _Tests:
    ids: list[str] = []
    classes: set[str] = set()
    lines: dict[int, str] = {}
    for node in module.body:
        if isinstance(node, _DEFS) and node.name.startswith("test"):
            ids.append(node.name)
            lines.update(dict.fromkeys(_span(node), node.name))
        elif isinstance(node, ast.ClassDef) and _test_class(node):
            classes.add(node.name)
            lines.update(dict.fromkeys(_span(node), node.name))
            for member in node.body:
                if isinstance(member, _DEFS) and member.name.startswith("test"):
                    ids.append(f"{node.name}::{member.name}")
                    lines.update(dict.fromkeys(_span(member), ids[-1]))
    return _Tests(tuple(ids), frozenset(classes), lines)


def _test_class(node: ast.ClassDef) -> bool:
    """A class pytest collects: `Test*`, or a unittest `...TestCase` subclass."""
    bases = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]
    return node.name.startswith("Test") or any(base.endswith("TestCase") for base in bases)


def _span(node: ast.AST) -> range:
    decorators = getattr(node, "decorator_list", [])
    first = min([d.lineno for d in decorators] + [getattr(node, "lineno", 1)])
    return range(first, (getattr(node, "end_lineno", None) or first) + 1)


def test_text(diff: FileDiff, *, roots: Sequence[SourceTree]) -> str | None:
    """A test file's post-fix text: the file in a root or in a folder above one (the checkout
    a source root like `python/` lies in), else, for a file the fix added, its added lines;
    None when deleted or not at hand."""
    if diff.deleted:
        return None
    found = _on_disk(diff, roots=roots)
    if found is None and diff.added:
        return "".join(f"{line.text}\n" for line in diff.lines if line.kind == "+")
    return found


def _on_disk(diff: FileDiff, *, roots: Sequence[SourceTree]) -> str | None:
    """The post-fix text of the diff's file: in a root (find_file), else its path under
    one of the three folders above a root, the first the diff agrees with (it undoes
    cleanly there); None when absent, unreadable or not the diff's file."""
    found = find_file(diff.path, roots=roots)
    candidates = [found[0]] if found is not None else []
    if safe_path(diff.path):
        for root in roots:
            candidates += [folder / diff.path for folder in list(root.path.parents)[:_ABOVE]]
    for candidate in candidates:
        try:
            text = candidate.read_text(encoding="utf-8-sig") if candidate.is_file() else None
        except (OSError, UnicodeDecodeError):
            continue
        if text is not None and _agrees(text, diff):
            return text
    return None


def _agrees(text: str, diff: FileDiff) -> bool:
    """Whether the diff undoes cleanly on `text` (a shorter file fails with IndexError)."""
    try:
        undo(text, diff, source=diff.path)
    except (DiffError, ValueError, IndexError):
        return False
    return True
