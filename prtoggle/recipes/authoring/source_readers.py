"""Which of a fix's guards read its package's source text, which no run-time revert changes."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

_LIVE_SOURCE = frozenset({"getsource", "getsourcelines", "findsource", "getcomments"})
"""inspect's readers of a live object's source text: the file's lines, as on disk."""

_FILE_READERS = frozenset({"read_text", "read_bytes", "open", "getline", "getlines"})
"""Calls that read a file's text (Path.read_text, open, io.open, tokenize.open, linecache)."""

_PACKAGE_FILES = frozenset({"__path__", "__file__", "origin"})
"""Attributes naming where a module's files are (`pkg.__path__`, `mod.__file__`, a spec's
`origin`); the bare name `__file__` is the test's own file, never counted."""

_LOCATORS = frozenset({"getsourcefile", "getfile", "find_spec"})
"""Calls that find the file of a module or object."""


def source_readers(guards: Sequence[str], text: str | None) -> list[tuple[str, str]]:
    """Each of `guards` (of one test file whose post-fix text is `text`) that reads the
    package's source text, with how (see source_text_read)."""
    if text is None:
        return []
    found = [(guard, source_text_read(text, guard)) for guard in guards]
    return [(guard, how) for guard, how in found if how is not None]


def source_text_read(test_text: str, guard: str) -> str | None:
    """How the guard (a node id `file::Class::test`, `file::test`, or a file) reads the text
    of source files of an imported package, named as `reader` of `where`; None when its code
    (the test and what of its module and class it reaches by name) does not.

    A test reads it when it calls inspect's source readers (`inspect.getsource`), or reads
    a file (`read_text`, `open`, ...) in code that also locates a package's files
    (`pkg.__path__`, `mod.__file__`, `inspect.getfile`, `find_spec`). Whatever such a test
    observes, a revert at run time leaves as the fix wrote it.
    """
    try:
        module = ast.parse(test_text)
    except SyntaxError:
        return None
    nodes = _reached(module, guard.split("::")[1:])
    calls = [n for node in nodes for n in ast.walk(node) if isinstance(n, ast.Call)]
    live = next((name for call in calls if (name := _called(call)) in _LIVE_SOURCE), None)
    if live is not None:
        return f"`inspect.{live}`"
    reader = next((name for call in calls if (name := _called(call)) in _FILE_READERS), None)
    where = next((found for node in nodes for found in _locators(node)), None)
    if reader is None or where is None:
        return None
    return f"`{reader}` of files under `{where}`"


def _reached(module: ast.Module, parts: list[str]) -> list[ast.AST]:
    """The guard's code, and the module-level statements and class members it reaches by
    name (read as a global, or as `self.`/`cls.` attribute), to a fixed point."""
    if not parts:
        return [module]
    owner, name = (parts[0], parts[-1]) if len(parts) > 1 else (None, parts[0])
    top = _bindings(module.body)
    klass = top.get(owner) if owner else None
    members = _bindings(klass.body) if isinstance(klass, ast.ClassDef) else {}
    start = members.get(name) if owner else top.get(name)
    if start is None:
        return [module]
    reached: list[ast.AST] = [start]
    grew = True
    while grew:
        grew = False
        for used in {n for node in reached for n in _names_used(node)}:
            for found in (top.get(used), members.get(used)):
                if found is not None and all(found is not r for r in reached):
                    reached.append(found)
                    grew = True
    return reached


def _bindings(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Each name a body's defs, classes and simple assignments bind, to its statement."""
    bound: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for item in ast.walk(target):
                    if isinstance(item, ast.Name):
                        bound[item.id] = node
    return bound


def _names_used(node: ast.AST) -> Iterator[str]:
    """Names read in `node`, and attributes read off `self` or `cls`."""
    for item in ast.walk(node):
        if isinstance(item, ast.Name) and isinstance(item.ctx, ast.Load):
            yield item.id
        elif isinstance(item, ast.Attribute) and _on_self(item):
            yield item.attr


def _on_self(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def _called(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _locators(node: ast.AST) -> Iterator[str]:
    """What in `node` locates a package's files, as its source text."""
    for item in ast.walk(node):
        if isinstance(item, ast.Attribute) and item.attr in _PACKAGE_FILES:
            yield ast.unparse(item)
        elif isinstance(item, ast.Call) and _called(item) in _LOCATORS:
            yield ast.unparse(item.func)
