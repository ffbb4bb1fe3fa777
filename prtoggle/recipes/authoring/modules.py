"""Which module of a source root a diff's path names (leading folders dropped), inside it only."""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from prtoggle.patching.source_files import SourceFile, SourceTree, open_source_tree


@dataclass(frozen=True)
class ModuleFile:
    """A diff path's module: dotted name, post-fix file, and the tree its targets are in."""

    module: str
    file: SourceFile
    tree: SourceTree
    relative: str
    """The file's path under `tree` (posix)."""


def installed_roots() -> list[SourceTree]:
    """The directories of sys.path (where installed packages are), as source trees."""
    roots = []
    for entry in sys.path:
        path = Path(entry)
        if entry and path.is_absolute() and path.is_dir():
            roots.append(open_source_tree(path))
    return roots


def safe_path(path: str) -> bool:
    """Whether a diff path stays inside whatever root it is read under: relative, no `..`."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts


def find_module(path: str, *, roots: Sequence[SourceTree]) -> ModuleFile | None:
    """The module `path` names: leading components dropped until the rest is a module.

    A rest whose top folder holds `__init__.py` wins (a regular package: `python/sglang/
    srt/x.py` -> `sglang.srt.x`); else the first rest made of identifiers (a namespace
    package). None when nothing fits, or `path` leaves the root (absolute, `..`, or a
    link in a directory root pointing out of it): such a file is never read.
    """
    parts = PurePosixPath(path).parts
    if not path.endswith(".py") or not safe_path(path):
        return None
    for regular in (True, False):
        for root in roots:
            for drop in range(len(parts)):
                found = _module_at(root, parts, drop, regular=regular)
                if found is not None:
                    return found
    return None


def find_file(path: str, *, roots: Sequence[SourceTree]) -> tuple[Path, str] | None:
    """A file of any kind that `path` names in a directory root: the file and its path
    relative to the root the runtime and `check` read it from. Leading folders are dropped
    until the rest starts with a regular package (a folder holding `__init__.py`), which may
    sit under the dropped folders (`python/sglang/x.cuh` -> `sglang/x.cuh`); else the
    longest rest that is a file under the root. None when absent."""
    parts = PurePosixPath(path).parts
    if not safe_path(path):
        return None
    directories = [root.path for root in roots if root.path.is_dir()]
    for root in directories:
        for drop in range(len(parts) - 1):
            base = root.joinpath(*parts[:drop])
            rest = "/".join(parts[drop:])
            package = (base / parts[drop] / "__init__.py").is_file()
            if package and _inside(root, "/".join(parts)) and (base / rest).is_file():
                return base / rest, rest
    for root in directories:
        for drop in range(len(parts)):
            relative = "/".join(parts[drop:])
            if _inside(root, relative) and (root / relative).is_file():
                return root / relative, relative
    return None


def imported_names(found: ModuleFile) -> set[tuple[str, str]]:
    """(module, name) of every `from module import name` the module runs when it loads: at
    its top level, under `if`/`try`/`with` too, not in a def or class body (relative imports
    resolved against its package; `import *` left out); none when it does not parse."""
    package = found.module.split(".")
    if not found.relative.endswith("__init__.py"):
        package = package[:-1]
    return set(_from_imports(found.file.text, tuple(package)))


def top_level_line(found: ModuleFile, name: str) -> tuple[int, str | None] | None:
    """The first line (decorators included) of the module-level statement that binds
    `name` last, and its stripped code; None when no such statement."""
    try:
        body = ast.parse(found.file.text).body
    except SyntaxError:
        return None
    lines = found.file.text.splitlines()
    hit: ast.stmt | None = None
    for node in _load_time_statements(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        named = getattr(node, "name", None) == name and not isinstance(node, ast.ImportFrom)
        if named or any(isinstance(t, ast.Name) and t.id == name for t in targets):
            hit = node
    if hit is None:
        return None
    first = min([d.lineno for d in getattr(hit, "decorator_list", [])] + [hit.lineno])
    code = lines[first - 1].strip() if first <= len(lines) else ""
    return first, code or None


def _load_time_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements a module body runs when it loads, blocks (`if`, `try`, `with`)
    entered, def and class bodies not."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While):
            out += _load_time_statements([*node.body, *node.orelse])
        elif isinstance(node, ast.With | ast.AsyncWith):
            out += _load_time_statements(node.body)
        elif isinstance(node, ast.Try | ast.TryStar):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            out += _load_time_statements([*node.body, *handlers, *node.orelse, *node.finalbody])
    return out


def _module_at(
    root: SourceTree, parts: tuple[str, ...], drop: int, *, regular: bool
) -> ModuleFile | None:
    rest = parts[drop:]
    names = [*rest[:-1], rest[-1][: -len(".py")]]
    if names[-1] == "__init__":
        names.pop()
    if not names or not all(name.isidentifier() for name in names):
        return None
    layouts = [("", "/".join(rest))]  # the root is the package root (any archive)
    if root.path.is_dir() and drop:  # the root holds the path's leading folders
        layouts.append(("/".join(parts[:drop]) + "/", "/".join(parts)))
    for prefix, relative in layouts:
        found = _read(root, relative)
        if found is None:
            continue
        if regular and (len(rest) == 1 or _read(root, f"{prefix}{rest[0]}/__init__.py") is None):
            continue
        tree = open_source_tree(root.path / prefix) if prefix else root
        return ModuleFile(".".join(names), found, tree, "/".join(rest))
    return None


def _read(root: SourceTree, relative: str) -> SourceFile | None:
    """The file, when it is inside the root (a directory's links pointing out: None)."""
    if root.path.is_dir() and not _inside(root.path, relative):
        return None
    return root.read(relative)


def _inside(root: Path, relative: str) -> bool:
    """Whether root/relative, links resolved, is still under root."""
    resolved = (root / relative).resolve()
    return resolved.is_relative_to(root.resolve())


@functools.lru_cache(maxsize=256)
def _from_imports(text: str, package: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """imported_names of a text in `package`: parsed once per text (each draft of a search
    reads the same head files again)."""
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return frozenset()
    out: set[tuple[str, str]] = set()
    for node in _load_time_statements(body):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            source = ".".join([*base, *([node.module] if node.module else [])])
            out.update((source, alias.name) for alias in node.names if alias.name != "*")
    return frozenset(out)
