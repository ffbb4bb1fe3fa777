"""Which module of a source root a diff's file path names (leading folders dropped)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from prtoggle.patching.source_files import SourceFile, SourceTree, open_source_tree
from prtoggle.recipes.authoring.diff import DiffError


@dataclass(frozen=True)
class ModuleFile:
    """A diff path's module: dotted name, post-fix file, and the tree its targets are in."""

    module: str
    file: SourceFile
    tree: SourceTree


def installed_roots() -> list[SourceTree]:
    """The directories of sys.path (where installed packages are), as source trees."""
    roots = []
    for entry in sys.path:
        path = Path(entry)
        if entry and path.is_absolute() and path.is_dir():
            roots.append(open_source_tree(path))
    return roots


def find_module(path: str, *, roots: Sequence[SourceTree], source: str) -> ModuleFile:
    """The module `path` names: leading components dropped until the rest is a module.

    A rest whose top folder holds `__init__.py` wins (a regular package: `python/sglang/
    srt/x.py` -> `sglang.srt.x`); else the first rest made of identifiers (a namespace
    package). Raises DiffError naming the path and the roots when nothing fits.
    """
    parts = PurePosixPath(path).parts
    if not path.endswith(".py") or not parts:
        raise DiffError(f"{source}: {path}: not a Python file; expected a path ending in .py")
    for regular in (True, False):
        for root in roots:
            for drop in range(len(parts)):
                found = _module_at(root, parts, drop, regular=regular)
                if found is not None:
                    return found
    where = ", ".join(root.label for root in roots) or "no source root"
    raise DiffError(
        f"{source}: {path} names no module of {where}; expected the post-fix file under "
        "the source root (--source-root: a directory, wheel or sdist)"
    )


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
        found = root.read(relative)
        if found is None:
            continue
        if regular and (len(rest) == 1 or root.read(f"{prefix}{rest[0]}/__init__.py") is None):
            continue
        tree = open_source_tree(root.path / prefix) if prefix else root
        return ModuleFile(module=".".join(names), file=found, tree=tree)
    return None
