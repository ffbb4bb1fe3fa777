"""Find a target's function definition in a source tree by module path and AST, no import."""

from __future__ import annotations
import __future__

import ast
from pathlib import Path

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.compiler import FunctionShape
from prtoggle.patching.targets import FunctionSource

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SKIPPED_DECORATORS = ("setter", "deleter", "overload")


def find_in_source_tree(target: str, *, source_root: Path) -> FunctionSource:
    """Locate `a.b.C.f` as `a/b.py` (or `a/b/__init__.py`) under `source_root`, then C.f."""
    path, names = _module_file(target, source_root=source_root)
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise TargetResolutionError(
            f"{target}: {path}:{exc.lineno} does not parse: {exc.msg}"
        ) from exc
    body: list[ast.stmt] = tree.body
    node: ast.stmt | None = None
    class_name: str | None = None
    for depth, name in enumerate(names):
        node = _definition(body, name)
        if node is None:
            where = ".".join(names[:depth]) or "the module"
            raise TargetResolutionError(
                f"{target}: {path} has no definition of {name!r} in {where}"
            )
        if depth < len(names) - 1:
            if not isinstance(node, ast.ClassDef):
                raise TargetResolutionError(
                    f"{target}: {path}:{node.lineno}: {name} is not a class, so it cannot "
                    f"hold {names[depth + 1]!r}"
                )
            class_name = node.name
            body = node.body
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise TargetResolutionError(f"{target}: {path}: {names[-1]} is a class, not a function")
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    lines = text.splitlines(keepends=True)[first - 1 : node.end_lineno]
    shape = FunctionShape(
        name=node.name, class_name=class_name, freevars=None, future_flags=_future_flags(tree)
    )
    return FunctionSource(filename=str(path), first_line=first, text="".join(lines), shape=shape)


def _module_file(target: str, *, source_root: Path) -> tuple[Path, list[str]]:
    parts = target.split(".")
    looked: list[str] = []
    for index in range(len(parts) - 1, 0, -1):
        base = source_root.joinpath(*parts[:index])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            looked.append(str(candidate))
            if candidate.is_file():
                return candidate, parts[index:]
    raise TargetResolutionError(
        f"{target}: no module file for it under {source_root}; looked for {', '.join(looked)}"
    )


def _definition(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The definition of `name` that is live at runtime (property setters, overloads skipped)."""
    found = None
    for node in body:
        if isinstance(node, _DEFINITIONS) and node.name == name and not _skipped(node):
            found = node
    return found


def _skipped(node: ast.stmt) -> bool:
    for decorator in getattr(node, "decorator_list", []):
        label = (
            decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        )
        if label in _SKIPPED_DECORATORS:
            return True
    return False


def _future_flags(tree: ast.Module) -> int:
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                if feature is not None:
                    flags |= feature.compiler_flag
    return flags
