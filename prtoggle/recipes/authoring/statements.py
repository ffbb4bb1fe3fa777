"""The statements of a module or class body: which names each binds, its text and its key."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from prtoggle.patching.define_code import parse_define

IMPORT = "import"
VALUE = "value"
DEF = "def"
CLASS = "class"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MADE_AT_CLASS_CREATION = frozenset(
    {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "NamedTuple", "TypedDict", "BaseModel"}
)
"""Bases whose class body is read once when the class is made (members, fields)."""
_DATACLASS_DECORATORS = frozenset({"dataclass", "dataclasses.dataclass", "attr.s", "attrs.define"})


@dataclass(frozen=True)
class Statement:
    """One statement of a body: its node and its lines (decorators and trailing comments
    of a def included, as `inspect.getblock` ends a def)."""

    node: ast.stmt
    first: int
    last: int


@dataclass(frozen=True)
class Binding:
    """A name a simple statement binds: `kind` (import, value, def, class), the statement,
    the text that binds it alone (an import reduced to this name) and a comparison key."""

    name: str
    kind: str
    statement: Statement
    text: str
    key: str


@dataclass
class Body:
    """A scope's statements: the simple bindings per name, and every other statement."""

    lines: Sequence[str]
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    others: list[Statement] = field(default_factory=list)
    other_names: set[str] = field(default_factory=set)

    def text(self, statement: Statement, *, dedent: bool = True) -> str:
        """The statement's lines, dedented, each ending in a newline (the source's bytes)."""
        chosen = self.lines[statement.first - 1 : statement.last]
        text = "".join(f"{line}\n" for line in chosen)
        return textwrap.dedent(text) if dedent else text

    def indent(self, statement: Statement) -> str:
        """The whitespace before the statement's first line."""
        line = self.lines[statement.first - 1]
        return line[: len(line) - len(line.lstrip())]

    def dedent_changes(self, statement: Statement) -> bool:
        """Whether dedenting the statement's text changes a string in it (a multi-line
        string's later lines keep the file's indentation)."""
        if not self.indent(statement):
            return False
        try:
            dedented = ast.parse(self.text(statement))
        except SyntaxError:
            return True
        return _strings(dedented) != _strings(statement.node)


def read_body(body: Sequence[ast.stmt], lines: Sequence[str], *, fields: bool = False) -> Body:
    """The Body of statements `body` of a module or class whose source lines are `lines`.

    `fields`: a class made at creation from its body (dataclass, enum, named tuple):
    its assignments are fields, never simple bindings.
    """
    out = Body(lines=lines)
    for index, node in enumerate(body):
        bound = _first_line(body[index + 1]) - 1 if index + 1 < len(body) else len(lines)
        statement = Statement(node, _first_line(node), last_line(lines, node, bound=bound))
        bindings = _bindings(statement, out, fields=fields)
        if bindings is None:
            out.others.append(statement)
            out.other_names |= bound_names(node)
            continue
        for binding in bindings:
            out.bindings.setdefault(binding.name, []).append(binding)
    return out


def bound_names(node: ast.stmt) -> set[str]:
    """The names a statement binds in its scope (nested functions and classes not entered)."""
    names: set[str] = set()
    stack: list[ast.AST] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (*_DEFS, ast.ClassDef)):
            names.add(item.name)
            stack.extend(getattr(item, "decorator_list", []))
            continue
        if isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store | ast.Del):
            names.add(item.id)
        elif isinstance(item, ast.alias):
            names.add((item.asname or item.name).split(".")[0])
        elif isinstance(item, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp):
            continue
        stack.extend(ast.iter_child_nodes(item))
    return names


def defined_names(define: str) -> list[str]:
    """The names the top-level statements of `define` bind, in order (found by their AST)."""
    names: list[str] = []
    for node in parse_define(define).body:
        names.extend(name for name in sorted(bound_names(node)) if name not in names)
    return names


def is_type_checking_block(node: ast.stmt) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) without an else: code never run."""
    if not isinstance(node, ast.If) or node.orelse:
        return False
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", "")
    return name == "TYPE_CHECKING"


def made_from_body(node: ast.ClassDef) -> bool:
    """A class whose body is read when the class is made: dataclass, enum, named tuple..."""
    if any(decorator_name(d) in _DATACLASS_DECORATORS for d in node.decorator_list):
        return True
    return any(_dotted(base).split(".")[-1] in _MADE_AT_CLASS_CREATION for base in node.bases)


def decorator_name(node: ast.expr) -> str:
    """The dotted name a decorator calls or is (`torch.compile(...)` -> `torch.compile`)."""
    return _dotted(node.func if isinstance(node, ast.Call) else node)


def node_key(node: ast.AST) -> str:
    """A comparison key of code: its AST, positions aside."""
    return ast.dump(node, include_attributes=False)


def header_key(node: ast.ClassDef) -> str:
    """A class statement without its body: name, bases, keywords, decorators."""
    parts = [node.name, *map(node_key, node.bases), *map(node_key, node.keywords)]
    return "|".join([*parts, "@", *map(node_key, node.decorator_list)])


def last_line(lines: Sequence[str], node: ast.stmt, *, bound: int) -> int:
    """A def's last line as `inspect.getblock` ends it (its last statement, then comment
    lines indented deeper than the def); any other statement's last line."""
    last = node.end_lineno or node.lineno
    if not isinstance(node, (*_DEFS, ast.ClassDef)):
        return last
    for number in range(last + 1, bound + 1):
        text = lines[number - 1]
        stripped = text.lstrip()
        if not stripped:
            continue
        if not stripped.startswith("#") or len(text) - len(stripped) <= node.col_offset:
            break
        last = number
    return last


def _bindings(statement: Statement, body: Body, *, fields: bool) -> list[Binding] | None:
    node = statement.node
    text = body.text(statement)
    if isinstance(node, ast.Import | ast.ImportFrom):
        return _import_bindings(node, statement)
    if isinstance(node, (*_DEFS, ast.ClassDef)):
        kind = CLASS if isinstance(node, ast.ClassDef) else DEF
        return [Binding(node.name, kind, statement, text, text)]
    names = None if fields else _assigned_names(node)
    if names is None:
        return None
    return [Binding(name, VALUE, statement, text, node_key(node)) for name in names]


def _import_bindings(
    node: ast.Import | ast.ImportFrom, statement: Statement
) -> list[Binding] | None:
    if isinstance(node, ast.ImportFrom) and (
        node.module == "__future__" or any(alias.name == "*" for alias in node.names)
    ):
        return None
    out = []
    for alias in node.names:
        text = import_text(node, [alias])
        name = alias.asname or alias.name.split(".")[0]
        out.append(Binding(name, IMPORT, statement, text, text))
    return out


def import_text(node: ast.Import | ast.ImportFrom, aliases: Sequence[ast.alias]) -> str:
    """The import statement of `node` reduced to `aliases`, as the module wrote it."""
    names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in aliases)
    if isinstance(node, ast.Import):
        return f"import {names}\n"
    return f"from {'.' * node.level}{node.module or ''} import {names}\n"


def _assigned_names(node: ast.stmt) -> list[str] | None:
    """The plain names `NAME = expr`, `NAME: T = expr` or `a, b = expr` binds; else None."""
    if isinstance(node, ast.AnnAssign):
        simple = node.value is not None and isinstance(node.target, ast.Name)
        return [node.target.id] if simple and isinstance(node.target, ast.Name) else None
    if not isinstance(node, ast.Assign):
        return None
    names: list[str] = []
    for target in node.targets:
        items = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        if not all(isinstance(item, ast.Name) for item in items):
            return None
        names.extend(item.id for item in items if isinstance(item, ast.Name))
    return names


def _strings(node: ast.AST) -> list[str]:
    found = (n.value for n in ast.walk(node) if isinstance(n, ast.Constant))
    return [value for value in found if isinstance(value, str)]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    return ""


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return decorators[0].lineno if decorators else node.lineno
