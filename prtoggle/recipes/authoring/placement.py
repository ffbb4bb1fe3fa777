"""Where each line of a module is: in which live function (or decorator), or in what else."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from prtoggle.patching.source_tree import binds_its_name, operator_decorator
from prtoggle.recipes.authoring.diff import DiffError
from prtoggle.recipes.authoring.statements import last_line

MODULE_LEVEL = "module-level code"
CLASS_BODY = "class body"
IMPORTS = "imports"
DECORATORS = "decorator lines"
ADDED_WHOLE = "a function added whole"
REMOVED_WHOLE = "a function removed whole"
NOT_LIVE = "a property setter, deleter, overload or redefined function (not a target)"
CUSTOM_OP = "a torch custom op (an operator object, not a function: not a target)"
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class FunctionSpan:
    """A live function or method: its dotted name in the module and its text's lines."""

    qualname: str
    first: int
    def_line: int
    last: int


@dataclass(frozen=True)
class Region:
    """What a line belongs to: a function (`qualname`, `decorator` when on its decorators)
    or, with qualname None, the reason a change there cannot be reverted (`kind`)."""

    kind: str
    qualname: str | None = None


@dataclass(frozen=True)
class Layout:
    """Every function of a module that a recipe can target, and each line's region."""

    lines: tuple[str, ...]
    functions: dict[str, FunctionSpan]
    regions: tuple[Region, ...]

    def region(self, line: int) -> Region:
        if 1 <= line <= len(self.regions):
            return self.regions[line - 1]
        return Region(MODULE_LEVEL)

    def text(self, qualname: str) -> list[str]:
        span = self.functions[qualname]
        return list(self.lines[span.first - 1 : span.last])


def layout(text: str, *, name: str) -> Layout:
    """The Layout of module source `text` (`name` for errors)."""
    try:
        module = ast.parse(text, filename=name)
    except SyntaxError as exc:
        raise DiffError(f"{name}:{exc.lineno}: does not parse ({exc.msg})") from exc
    lines = tuple(text.splitlines())
    regions = [Region(MODULE_LEVEL)] * len(lines)
    functions: dict[str, FunctionSpan] = {}
    _walk(module.body, prefix="", lines=lines, regions=regions, functions=functions)
    return Layout(lines=lines, functions=functions, regions=tuple(regions))


def _walk(
    body: list[ast.stmt],
    *,
    prefix: str,
    lines: tuple[str, ...],
    regions: list[Region],
    functions: dict[str, FunctionSpan],
) -> None:
    live = _live_definitions(body)
    for index, node in enumerate(body):
        start = _first_line(node)
        bound = _first_line(body[index + 1]) - 1 if index + 1 < len(body) else len(lines)
        end = node.end_lineno or node.lineno
        if isinstance(node, ast.Import | ast.ImportFrom):
            _mark(regions, start, end, Region(IMPORTS))
        elif isinstance(node, ast.ClassDef):
            _mark(regions, start, end, Region(CLASS_BODY))
            inner = f"{prefix}{node.name}."
            _walk(node.body, prefix=inner, lines=lines, regions=regions, functions=functions)
        elif (
            isinstance(node, _FUNCTIONS)
            and node is live.get(node.name)
            and operator_decorator(node)
        ):
            _mark(regions, start, end, Region(CUSTOM_OP))
        elif isinstance(node, _FUNCTIONS) and node is live.get(node.name):
            last = last_line(lines, node, bound=bound)
            span = FunctionSpan(f"{prefix}{node.name}", start, node.lineno, last)
            functions[span.qualname] = span
            _mark(regions, start, node.lineno - 1, Region(DECORATORS, span.qualname))
            _mark(regions, node.lineno, span.last, Region("function", span.qualname))
        elif isinstance(node, _FUNCTIONS):
            _mark(regions, start, end, Region(NOT_LIVE))
        elif prefix:
            _mark(regions, start, end, Region(CLASS_BODY))


def _live_definitions(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Per name, the definition live at run time (setters, deleters, overloads skipped)."""
    live: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)) and binds_its_name(node):
            live[node.name] = node
    return live


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return decorators[0].lineno if decorators else node.lineno


def _mark(regions: list[Region], start: int, end: int, region: Region) -> None:
    for line in range(start, min(end, len(regions)) + 1):
        regions[line - 1] = region
