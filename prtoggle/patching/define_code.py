"""The `define` text of a name change: its allowed statements, the names it binds, its code."""

from __future__ import annotations
import __future__

import ast
import functools
import itertools
from collections.abc import Collection
from dataclasses import dataclass
from types import CodeType

from prtoggle.patching.module_scope import imported_names, imports_declaration

ALLOWED_STATEMENTS = (
    "import",
    "from X import a [as b]",
    "NAME = expr",
    "NAME: T = expr",
    "def",
    "async def",
    "class",
)
"""The top-level statements a `define` may hold, as messages list them."""

FUTURE_ANNOTATIONS = __future__.annotations.compiler_flag


@dataclass(frozen=True)
class DefineProblem:
    """Why a `define` text is refused: its line (1 = the text's first line) and the reason."""

    line: int
    message: str


@functools.lru_cache(maxsize=4096)
def define_problem(text: str) -> DefineProblem | None:
    """The first reason `text` is not a valid `define` (None: it is).

    It must parse, and hold only ALLOWED_STATEMENTS at its top level; an assignment binds
    plain names (or a tuple of them); no `*` import; no `:=` outside a def or class body
    (it would bind a name the recipe does not declare).
    """
    try:
        module = parse_define(text)
    except SyntaxError as exc:
        return DefineProblem(line=exc.lineno or 1, message=f"does not parse: {exc.msg}")
    for node in module.body:
        reason = _statement_problem(node)
        if reason is not None:
            return DefineProblem(line=node.lineno, message=reason)
    return None


@functools.lru_cache(maxsize=4096)
def define_bindings(text: str) -> tuple[str, ...]:
    """The names a valid `define` text binds at its top level, in order, each once."""
    names: list[str] = []
    for node in parse_define(text).body:
        for name in _bound_by(node):
            if name not in names:
                names.append(name)
    return tuple(names)


@functools.lru_cache(maxsize=4096)
def define_imports(text: str) -> frozenset[str]:
    """The names a valid `define` text's top-level imports bind (module_scope's rule)."""
    return imported_names(parse_define(text))


def parse_define(text: str, *, first_line: int = 1) -> ast.Module:
    """The statements of a `define` text, its first line numbered `first_line` (the parser
    numbers them: no walk over the tree). Text indented as a whole (a class body's lines as
    the file has them: a multi-line string keeps the indentation of its lines, which
    dedenting would change) is parsed as that block."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first[:1] not in (" ", "\t"):
        return ast.parse("\n" * (first_line - 1) + text)
    if first_line >= 2:
        wrapped = ast.parse("\n" * (first_line - 2) + f"if 1:\n{text}")
    else:
        wrapped = ast.parse(f"if 1:\n{text}")
        ast.increment_lineno(wrapped, first_line - 2)
    block = wrapped.body[0]
    assert isinstance(block, ast.If)
    return ast.Module(body=block.body, type_ignores=[])


def compile_define(
    text: str,
    *,
    filename: str,
    first_line: int,
    class_name: str | None,
    future_flags: int,
    imported: Collection[str] = (),
) -> CodeType:
    """Code running `text` as a module body, or (`class_name`) as that class's body.

    A class body is compiled as `class <class_name>: <text>`; running the code in
    (module globals, a fresh locals mapping) leaves the synthetic class in the locals.
    Annotated assignments become plain ones: a revert never touches `__annotations__`.
    The text's first line is `first_line` of `filename`.
    `imported`: the names the module imports in its scope, declared (never run) so the
    functions compile as they do in the module (see module_scope.imported_names).
    """
    module = parse_define(text, first_line=first_line)
    body: list[ast.stmt] = [_without_annotation(node) for node in module.body]
    if class_name is not None:
        wrapper = ast.ClassDef(
            name=class_name,
            bases=[],
            keywords=[],
            body=body or [ast.Pass()],
            decorator_list=[],
        )
        _locate_new(wrapper, like=(first_line, 0, first_line, 0))
        body = [wrapper]
    lead = len(list(itertools.takewhile(_future_import, body)))
    declared = imports_declaration(imported)
    for node in declared:
        _locate_new(node, like=_place(body[0]))
    tree = ast.Module(body=[*body[:lead], *declared, *body[lead:]], type_ignores=[])
    return compile(tree, filename, "exec", flags=future_flags, dont_inherit=True)


def _statement_problem(node: ast.stmt) -> str | None:
    kind = type(node).__name__
    if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
        return "`from ... import *` binds names nobody can list; import them by name"
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if not _plain_target(target):
                return f"assigns to {ast.unparse(target)}; only plain names (or a tuple of them)"
    elif isinstance(node, ast.AnnAssign):
        if not isinstance(node.target, ast.Name):
            return f"assigns to {ast.unparse(node.target)}; only a plain name"
        if node.value is None:
            return f"`{ast.unparse(node)}` binds nothing; give it a value"
    elif not isinstance(
        node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    ):
        return (
            f"a {kind} statement is not allowed; expected one of: {', '.join(ALLOWED_STATEMENTS)}"
        )
    if _walrus_outside_bodies(node):
        return "`:=` would bind a name outside the ones the recipe lists; use `NAME = expr`"
    return None


def _future_import(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def _plain_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, ast.Tuple | ast.List):
        return all(isinstance(element, ast.Name) for element in target.elts)
    return False


def _walrus_outside_bodies(node: ast.stmt) -> bool:
    """A `:=` in what runs at the statement itself: values, defaults, decorators, bases."""
    pending: list[ast.AST] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.NamedExpr):
            return True
        for field, value in ast.iter_fields(current):
            if field == "body" and isinstance(current, (*_DEFINITIONS, ast.Lambda)):
                continue
            children = value if isinstance(value, list) else [value]
            pending.extend(child for child in children if isinstance(child, ast.AST))
    return False


def _bound_by(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [alias.asname or alias.name for alias in node.names]
    if isinstance(node, _DEFINITIONS):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names: list[str] = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            names.extend(element.id for element in target.elts if isinstance(element, ast.Name))
    return names


def _locate_new(node: ast.AST, *, like: tuple[int, int, int | None, int | None]) -> None:
    """Give `node` and the nodes made with it (none placed yet) the place `like` (lineno,
    col_offset, end_lineno, end_col_offset); parsed nodes below them keep theirs (what
    fix_missing_locations does, without walking the parsed tree)."""
    pending = [node]
    while pending:
        current = pending.pop()
        if "lineno" in current._attributes:
            if getattr(current, "lineno", None) is not None:
                continue  # parsed: it and everything in it are placed
            for attribute, value in zip(_PLACE, like, strict=True):
                setattr(current, attribute, value)
        pending.extend(ast.iter_child_nodes(current))


def _place(node: ast.stmt) -> tuple[int, int, int | None, int | None]:
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def _without_annotation(node: ast.stmt) -> ast.stmt:
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
    return node


_PLACE = ("lineno", "col_offset", "end_lineno", "end_col_offset")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
