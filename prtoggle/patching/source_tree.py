"""Find a target's function definition in a source tree by module path and AST, no import."""

from __future__ import annotations
import __future__

import ast
import bisect
import inspect
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.compiler import FunctionShape
from prtoggle.patching.lines import split_lines
from prtoggle.patching.source_files import SourceFile, SourceTree, open_source_tree
from prtoggle.patching.targets import FunctionSource

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SKIPPED_DECORATORS = ("setter", "deleter", "overload")


def find_in_source_tree(target: str, *, source_root: Path | SourceTree) -> FunctionSource:
    """Locate `a.b.C.f` as `a/b.py` (or `a/b/__init__.py`) under `source_root`, then C.f.

    `source_root` is a directory, a wheel or an sdist (see source_files). The text is
    what `inspect.getsource` gives for the live function: from the first decorator line,
    the block `inspect.getblock` finds, so a static check edits what the runtime edits.
    """
    tree = source_root if isinstance(source_root, SourceTree) else open_source_tree(source_root)
    found, names = _module_file(target, tree=tree)
    parsed = tree.memo("parsed", found.name, lambda: _parse(found))
    if parsed.text != found.text:  # a directory's file changed since: parse it again
        parsed = _parse(found)
        tree.memo("parsed", found.name, lambda: parsed)
    if parsed.module is None:
        raise TargetResolutionError(f"{target}: {found.name}:{parsed.error}")
    node, class_name = _walk(parsed.module, names, target=target, filename=found.name)
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    block = inspect.getblock(parsed.lines[first - 1 : _block_bound(parsed, node)])
    shape = FunctionShape(
        name=node.name, class_name=class_name, freevars=None, future_flags=parsed.future_flags
    )
    return FunctionSource(
        filename=found.name,
        first_line=first,
        text="".join(block),
        shape=shape,
        module_names=parsed.module_names,
    )


@dataclass(frozen=True)
class _ParsedModule:
    """A module file parsed once per tree: its tree (None and `error` when it does not parse)."""

    text: str
    module: ast.Module | None
    error: str
    lines: list[str]
    module_names: frozenset[str] | None
    future_flags: int
    starts: list[int]


def module_level_names(module: ast.Module) -> frozenset[str] | None:
    """Names the module binds at its top level (None: a star import makes them unknown).

    The body of `if TYPE_CHECKING:` is left out: it never runs.
    """
    names: set[str] = set()
    pending: list[ast.stmt] = list(module.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, _DEFINITIONS):
            names.add(node.name)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)  # the body runs for type checkers only
        else:
            names.update(
                child.id
                for child in ast.walk(node)
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)
            )
            for field in ("body", "orelse", "finalbody", "handlers"):
                pending.extend(
                    child for child in getattr(node, field, []) if isinstance(child, ast.stmt)
                )
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return frozenset(names)


def _walk(
    module: ast.Module, names: list[str], *, target: str, filename: str
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]:
    body: list[ast.stmt] = module.body
    node: ast.stmt | None = None
    class_name: str | None = None
    for depth, name in enumerate(names):
        node = _definition(body, name)
        if node is None:
            where = ".".join(names[:depth]) or "the module"
            raise TargetResolutionError(
                f"{target}: {filename} has no definition of {name!r} in {where}"
            )
        if depth < len(names) - 1:
            if not isinstance(node, ast.ClassDef):
                raise TargetResolutionError(
                    f"{target}: {filename}:{node.lineno}: {name} is not a class, so it cannot "
                    f"hold {names[depth + 1]!r}"
                )
            class_name = node.name
            body = node.body
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise TargetResolutionError(f"{target}: {filename}: {names[-1]} is a class, not a function")
    return node, class_name


def _module_file(target: str, *, tree: SourceTree) -> tuple[SourceFile, list[str]]:
    parts = target.split(".")
    looked: list[str] = []
    for index in range(len(parts) - 1, 0, -1):
        base = "/".join(parts[:index])
        for relative in (f"{base}.py", f"{base}/__init__.py"):
            looked.append(tree.looked_for(relative))
            found = tree.read(relative)
            if found is not None:
                return found, parts[index:]
    raise TargetResolutionError(
        f"{target}: no module file for it under {tree.label}; looked for {', '.join(looked)}"
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


def _is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING` (false when the module runs)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _future_flags(tree: ast.Module) -> int:
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                if feature is not None:
                    flags |= feature.compiler_flag
    return flags


def _parse(found: SourceFile) -> _ParsedModule:
    try:
        module = ast.parse(found.text, filename=found.name)
    except SyntaxError as exc:
        error = f"{exc.lineno} does not parse: {exc.msg}"
        return _ParsedModule(found.text, None, error, [], None, 0, [])
    lines = split_lines(found.text, keepends=True)
    starts = sorted({node.lineno for node in ast.walk(module) if isinstance(node, ast.stmt)})
    names = module_level_names(module)
    return _ParsedModule(found.text, module, "", lines, names, _future_flags(module), starts)


def _block_bound(parsed: _ParsedModule, node: ast.stmt) -> int | None:
    """A line the block of `node` cannot pass: before the next statement that starts after it.

    Only bounds the text `inspect.getblock` tokenizes (it stops at the block's end itself).
    """
    index = bisect.bisect_right(parsed.starts, node.end_lineno or node.lineno)
    return parsed.starts[index] - 1 if index < len(parsed.starts) else None
