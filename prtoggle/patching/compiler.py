"""Compile edited function source into a code object with real file names and line numbers."""

from __future__ import annotations
import __future__

import ast
from dataclasses import dataclass
from types import CodeType

from prtoggle.errors import PatchApplicationError, UnsupportedTargetError
from prtoggle.patching.editor import NumberedSource
from prtoggle.patching.enclosing import refuse_new_enclosing_reads
from prtoggle.patching.module_scope import imports_declaration

FUTURE_FLAGS_MASK = 0
for _feature in __future__.all_feature_names:
    FUTURE_FLAGS_MASK |= getattr(__future__, _feature).compiler_flag

_OUTER_NAME = "__prtoggle_outer__"
_STATEMENT_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class FunctionShape:
    """What the compiled code must look like to replace a function's `__code__`.

    `class_name` is the innermost enclosing class (private-name mangling and the
    `__class__` cell of zero-argument super()); `freevars` None skips the closure check
    (source-tree checks, where no live function exists). `enclosing` holds (name,
    function) for the variables of the enclosing functions (see patching.enclosing).
    `imported`: the names the module imports in its scope, so the code compiles as it
    does inside its module (see module_scope.imported_names).
    """

    name: str
    class_name: str | None
    freevars: tuple[str, ...] | None
    future_flags: int
    qualname: str | None = None
    enclosing: tuple[tuple[str, str], ...] = ()
    imported: frozenset[str] = frozenset()


def compile_function(
    edited: NumberedSource, *, shape: FunctionShape, filename: str, target: str
) -> CodeType:
    """Compile the one function definition in `edited` as the function `shape` describes.

    The definition is compiled inside a synthetic class named like the original's class
    (mangling, `__class__`) inside a synthetic function that binds the original free
    variables, so `co_freevars` match and the code can be swapped in. Every AST position
    is mapped to the real file line of its source line (see NumberedSource); nothing is run.
    """
    definition = parse_definition(edited, shape=shape, filename=filename, target=target)
    return compile_definition(definition, shape=shape, filename=filename, target=target)


def compile_definition(
    definition: ast.FunctionDef | ast.AsyncFunctionDef,
    *,
    shape: FunctionShape,
    filename: str,
    target: str,
) -> CodeType:
    """compile_function for a definition parse_definition gave; `definition` is not changed."""
    declared = [_located(node, definition) for node in imports_declaration(shape.imported)]
    module = ast.Module(body=[*declared, *_wrap(definition, shape)], type_ignores=[])
    try:
        module_code = compile(module, filename, "exec", flags=shape.future_flags, dont_inherit=True)
    except SyntaxError as exc:
        raise PatchApplicationError(
            f"{target}: the edited source does not compile: {exc.msg} at {filename}:{exc.lineno}"
        ) from exc
    except ValueError as exc:
        raise PatchApplicationError(f"{target}: the edited source does not compile: {exc}") from exc
    code = _find_code(module_code, _code_path(shape))
    if shape.qualname is not None:
        code = code.replace(co_qualname=shape.qualname)
    if shape.freevars is not None and code.co_freevars != shape.freevars:
        raise UnsupportedTargetError(
            f"{target}: the edited code uses free variables {code.co_freevars} but the "
            f"original uses {shape.freevars}; an edit may not add or drop uses of "
            "closure variables (or of super()/__class__)"
        )
    refuse_new_enclosing_reads(
        code, enclosing=shape.enclosing, freevars=shape.freevars, target=target
    )
    return code


def parse_definition(
    edited: NumberedSource,
    *,
    shape: FunctionShape,
    filename: str,
    target: str,
    positions: bool = True,
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The one definition of `shape.name` in `edited`, every position at its real file line.

    `positions` False leaves the positions as parsed (lines of `edited`, off by one when
    it is indented): for a definition that is only compared, never compiled.
    """
    text = edited.text
    origins = edited.origins
    offset = _offset(edited)
    indented = offset == 1
    try:
        tree = ast.parse(f"if 1:\n{text}" if indented else text, filename=filename)
    except SyntaxError as exc:
        index = (exc.lineno or 1) - 1 - offset
        where = f"{filename}:{origins[index]}" if 0 <= index < len(origins) else filename
        line = f": {edited.lines[index].text.strip()!r}" if 0 <= index < len(origins) else ""
        raise PatchApplicationError(
            f"{target}: the edited source does not compile: {exc.msg} at {where} (edited "
            f"line {index + 1} of {len(origins)}{line})"
        ) from exc
    body = tree.body[0].body if indented and tree.body else tree.body  # type: ignore[attr-defined]
    definition = body[0] if len(body) == 1 else None
    if not isinstance(definition, _STATEMENT_NODES) or definition.name != shape.name:
        found = ", ".join(type(node).__name__ for node in body) or "nothing"
        raise PatchApplicationError(
            f"{target}: the edited source must be exactly one definition of {shape.name}(); "
            f"it holds: {found}; code outside the def's signature and body cannot take effect "
            "through a code swap"
        )
    if positions:
        map_positions(definition, edited)
    return definition


def map_positions(definition: ast.stmt, edited: NumberedSource) -> None:
    """Move every position of a definition parsed from `edited` with `positions` False
    to the real file line of its source line (monotonic by construction)."""
    _map_positions(definition, edited.origins, offset=_offset(edited))


def signature_lines(definition: ast.stmt, edited: NumberedSource) -> int:
    """How many leading lines of `edited` hold the decorators and the def statement's
    header through its colon, for a definition parsed with `positions` False.

    The lines before the first body statement, and that statement's line too when the
    body starts on the header's line (`def f(): return 1`).
    """
    first = definition.body[0]  # type: ignore[attr-defined]
    line = first.lineno - _offset(edited)
    before = edited.lines[line - 1].text.encode()[: first.col_offset]  # offsets count bytes
    return line if before.strip() else line - 1


def _offset(edited: NumberedSource) -> int:
    """1 when the text is indented: it is parsed after an `if 1:` line."""
    return 1 if edited.lines and edited.lines[0].text[:1] in (" ", "\t") else 0


def _map_positions(root: ast.AST, origins: tuple[int, ...], *, offset: int) -> None:
    """Give every node the real file line of its source line (monotonic by construction)."""
    for node in _nodes(root):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        end_lineno = getattr(node, "end_lineno", None)
        node.lineno = origins[lineno - 1 - offset]  # type: ignore[attr-defined]
        if end_lineno is not None:
            node.end_lineno = origins[end_lineno - 1 - offset]  # type: ignore[attr-defined]
            same_line = node.lineno == node.end_lineno  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
            if same_line and end_lineno != lineno and end_col is not None and end_col < col:
                node.end_col_offset = col  # type: ignore[attr-defined]


def _nodes(root: ast.AST) -> list[ast.AST]:
    """Every node under `root`, itself included (what ast.walk gives, in another order)."""
    found = [root]
    for node in found:  # grows while it is read
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                found.append(value)
            elif isinstance(value, list):
                found.extend(item for item in value if isinstance(item, ast.AST))
    return found


def _wrap(definition: ast.stmt, shape: FunctionShape) -> list[ast.stmt]:
    freevars = [name for name in shape.freevars or () if name != "__class__"]
    inner: ast.stmt = definition
    if shape.class_name is not None:
        inner = ast.ClassDef(
            name=shape.class_name, bases=[], keywords=[], body=[definition], decorator_list=[]
        )
    if not freevars:
        return [_located(inner, definition)]
    binding = ast.Assign(
        targets=[ast.Name(id=name, ctx=ast.Store()) for name in freevars],
        value=ast.Constant(value=None),
    )
    outer = ast.FunctionDef(
        name=_OUTER_NAME,
        args=ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[binding, inner],
        decorator_list=[],
        returns=None,
    )
    return [_located(outer, definition)]


def _located(wrapper: ast.stmt, definition: ast.stmt) -> ast.stmt:
    """Give synthetic nodes the definition's first line (and Python 3.12+ type_params).

    The definition's own nodes, parsed, have both already; they are not visited.
    """
    pending: list[ast.AST] = [wrapper]
    while pending:
        node = pending.pop()
        if node is definition:
            continue
        if "type_params" in node._fields and not hasattr(node, "type_params"):
            node.type_params = []  # type: ignore[attr-defined]
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            node.lineno = node.end_lineno = definition.lineno  # type: ignore[attr-defined]
            node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
        pending.extend(ast.iter_child_nodes(node))
    return wrapper


def _code_path(shape: FunctionShape) -> list[str]:
    path = [_OUTER_NAME] if any(v != "__class__" for v in shape.freevars or ()) else []
    if shape.class_name is not None:
        path.append(shape.class_name)
    return [*path, shape.name]


def _find_code(code: CodeType, path: list[str]) -> CodeType:
    for name in path:
        children = [c for c in code.co_consts if isinstance(c, CodeType) and c.co_name == name]
        if len(children) != 1:
            raise PatchApplicationError(
                f"internal error: expected one code object named {name!r} in {code.co_name}, "
                f"found {len(children)}"
            )
        code = children[0]
    return code
