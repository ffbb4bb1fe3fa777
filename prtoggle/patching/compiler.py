"""Compile edited function source into a code object with real file names and line numbers."""

from __future__ import annotations
import __future__

import ast
from dataclasses import dataclass
from types import CodeType

from prtoggle.errors import PatchApplicationError, UnsupportedTargetError
from prtoggle.patching.editor import NumberedSource
from prtoggle.patching.enclosing import refuse_new_enclosing_reads

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
    """

    name: str
    class_name: str | None
    freevars: tuple[str, ...] | None
    future_flags: int
    qualname: str | None = None
    enclosing: tuple[tuple[str, str], ...] = ()


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
    module = ast.Module(body=_wrap(definition, shape), type_ignores=[])
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
    edited: NumberedSource, *, shape: FunctionShape, filename: str, target: str
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The one definition of `shape.name` in `edited`, every position at its real file line."""
    text = edited.text
    origins = edited.origins
    indented = bool(text) and text[0] in " \t"
    offset = 1 if indented else 0
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
    _map_positions(definition, origins, offset=offset)
    return definition


def _map_positions(root: ast.AST, origins: tuple[int, ...], *, offset: int) -> None:
    """Give every node the real file line of its source line (monotonic by construction)."""
    for node in ast.walk(root):
        lineno = getattr(node, "lineno", None)
        end_lineno = getattr(node, "end_lineno", None)
        if lineno is None:
            continue
        node.lineno = origins[lineno - 1 - offset]  # type: ignore[attr-defined]
        if end_lineno is not None:
            node.end_lineno = origins[end_lineno - 1 - offset]  # type: ignore[attr-defined]
            same_line = node.lineno == node.end_lineno  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
            if same_line and end_lineno != lineno and end_col is not None and end_col < col:
                node.end_col_offset = col  # type: ignore[attr-defined]


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
    """Give synthetic nodes the definition's first line (and Python 3.12+ type_params)."""
    for node in ast.walk(wrapper):
        if node is definition:
            continue
        if "type_params" in node._fields and not hasattr(node, "type_params"):
            node.type_params = []  # type: ignore[attr-defined]
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            node.lineno = node.end_lineno = definition.lineno  # type: ignore[attr-defined]
            node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
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
