"""Find a target's function definition in a source tree by module path and AST, no import."""

from __future__ import annotations
import __future__

import ast
import functools
import gc
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.compiler import FunctionShape
from prtoggle.patching.lines import split_lines
from prtoggle.patching.module_scope import module_level_names
from prtoggle.patching.reexports import (
    MAX_REEXPORT_HOPS,
    ImportBinding,
    import_bindings,
    package_of,
)
from prtoggle.patching.source_files import SourceFile, SourceTree, open_source_tree
from prtoggle.patching.targets import OPERATOR_DECORATORS, FunctionSource, custom_op_refusal

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
NOT_BINDING_DECORATORS = ("setter", "deleter", "overload")
"""Decorators whose def does not bind its name: the live definition is another one."""


def find_in_source_tree(target: str, *, source_root: Path | SourceTree) -> FunctionSource:
    """Locate `a.b.C.f` as `a/b.py` (or `a/b/__init__.py`) under `source_root`, then C.f.

    `source_root` is a directory, a wheel or an sdist (see source_files). The text is
    what `inspect.getsource` gives for the live function: from the first decorator line,
    the block `inspect.getblock` finds, so a static check edits what the runtime edits.
    A name the module imports instead of defining (`from a.c import f`, an `__init__`
    re-export) is followed there, as attribute access follows it at run time, for up to
    MAX_REEXPORT_HOPS steps; `found_as` then names where the definition is.
    """
    tree = source_root if isinstance(source_root, SourceTree) else open_source_tree(source_root)
    current, followed = target, [target]
    while True:
        found, names, module = _module_file(current, tree=tree, original=target)
        parsed = _parsed(tree, found)
        if parsed.definitions is None:
            raise TargetResolutionError(f"{target}: {found.name}:{parsed.error}")
        step = _reexport_step(parsed, names, module=module, found=found)
        if step is None:
            break
        if step in followed or len(followed) > MAX_REEXPORT_HOPS:
            chain = " -> ".join([*followed, step])
            raise TargetResolutionError(
                f"{target}: the re-exports do not end in a definition within "
                f"{MAX_REEXPORT_HOPS} steps: {chain}"
            )
        current = step
        followed.append(step)
    node, class_name = _walk(parsed.definitions, names, target=target, filename=found.name)
    if node.operator:
        raise custom_op_refusal(target)
    shape = FunctionShape(
        name=node.name,
        class_name=class_name,
        freevars=("__class__",) if class_name and _class_cell(node) else (),
        future_flags=parsed.future_flags,
    )
    return FunctionSource(
        filename=found.name,
        first_line=node.first,
        text="".join(_block(parsed, node)),
        shape=shape,
        module_names=parsed.module_names,
        found_as=current if current != target else None,
    )


def binds_its_name(node: ast.stmt) -> bool:
    """Whether a def or class statement binds its name at run time: not a property's
    setter or deleter, nor an overload (the one rule of which `def`s can be targets)."""
    return not any(_label(d) in NOT_BINDING_DECORATORS for d in _decorators(node))


def operator_decorator(node: ast.stmt) -> str | None:
    """The decorator that makes a def a torch operator object (not a function), if any."""
    return next((_label(d) for d in _decorators(node) if _label(d) in OPERATOR_DECORATORS), None)


@dataclass(frozen=True)
class _Definition:
    """A def or class statement live at a module's top level or in a class body.

    `first` is its first decorator's line (else `lineno`), `end` its last line (of its
    last statement); `bound` the last line its block can reach: the line before the next
    statement that starts after it, None at the end of the module. `body` is the line
    where the first statement of its body starts (its first decorator's, if any), the
    line of its keyword and its column offset (in bytes). `named_class` keeps the syntax
    tree of a function whose lines name `super` or `__class__`: whether it closes over its
    class is found when it is a target (`_class_cell`).
    """

    name: str
    is_class: bool
    lineno: int
    first: int
    end: int
    bound: int | None
    body: tuple[int, int, int]
    members: dict[str, _Definition]
    named_class: ast.stmt | None = field(default=None, compare=False, repr=False)
    operator: str | None = None


@dataclass(frozen=True)
class _ParsedModule:
    """A module file parsed once per tree: its definitions (None and `error` when it does
    not parse); the syntax tree itself is not kept (but the few functions' in
    `_Definition.named_class`)."""

    text: str
    definitions: dict[str, _Definition] | None
    error: str
    lines: list[str]
    module_names: frozenset[str] | None
    future_flags: int
    imports: dict[str, ImportBinding] | None = None


def _parsed(tree: SourceTree, found: SourceFile) -> _ParsedModule:
    parsed = tree.memo("parsed", found.name, lambda: _parse(found))
    if parsed.text != found.text:  # a directory's file changed since: parse it again
        parsed = _parse(found)
        tree.memo("parsed", found.name, lambda: parsed)
    return parsed


def _reexport_step(
    parsed: _ParsedModule, names: list[str], *, module: str, found: SourceFile
) -> str | None:
    """The dotted name `names` stands for when the module imports `names[0]` (the
    import is the name's last binding), else None: the module defines it itself."""
    binding = (parsed.imports or {}).get(names[0])
    defined = (parsed.definitions or {}).get(names[0])
    if binding is None or (defined is not None and defined.lineno > binding.line):
        return None
    is_package = found.name.endswith("__init__.py")
    origin = binding.origin(package=package_of(module, is_package=is_package))
    if origin is None:
        raise TargetResolutionError(
            f"{module}.{'.'.join(names)}: {found.name}:{binding.line}: a relative import of "
            f"{names[0]!r} reaches above the top-level package"
        )
    return ".".join([origin, *names[1:]])


def _walk(
    definitions: dict[str, _Definition], names: list[str], *, target: str, filename: str
) -> tuple[_Definition, str | None]:
    node: _Definition | None = None
    class_name: str | None = None
    for depth, name in enumerate(names):
        node = definitions.get(name)
        if node is None:
            where = ".".join(names[:depth]) or "the module"
            imports = " nor imports it" if depth == 0 else ""
            raise TargetResolutionError(
                f"{target}: {filename} has no definition of {name!r} in {where}{imports}"
            )
        if depth < len(names) - 1:
            if not node.is_class:
                raise TargetResolutionError(
                    f"{target}: {filename}:{node.lineno}: {name} is not a class, so it cannot "
                    f"hold {names[depth + 1]!r}"
                )
            class_name = node.name
            definitions = node.members
    if node is None or node.is_class:
        raise TargetResolutionError(f"{target}: {filename}: {names[-1]} is a class, not a function")
    return node, class_name


def _module_file(
    target: str, *, tree: SourceTree, original: str
) -> tuple[SourceFile, list[str], str]:
    """The file of the longest module prefix of `target`, the names after it, its name."""
    parts = target.split(".")
    looked: list[str] = []
    for index in range(len(parts) - 1, 0, -1):
        base = "/".join(parts[:index])
        for relative in (f"{base}.py", f"{base}/__init__.py"):
            looked.append(tree.looked_for(relative))
            found = tree.read(relative)
            if found is not None:
                return found, parts[index:], ".".join(parts[:index])
    if target != original:
        raise TargetResolutionError(
            f"{original}: re-exported from {target}, which has no module file under "
            f"{tree.label}; looked for {', '.join(looked)}"
        )
    raise TargetResolutionError(
        f"{target}: no module file for it under {tree.label}; looked for {', '.join(looked)}"
    )


def _definitions(
    body: list[ast.stmt], *, bound: int | None, lines: list[str]
) -> dict[str, _Definition]:
    """The definitions of `body` live at runtime, by name (property setters, overloads
    skipped; the last of a name wins), with those of their class bodies (`lines`: the
    module's)."""
    found: dict[str, _Definition] = {}
    for index, node in enumerate(body):
        if not isinstance(node, _DEFINITIONS) or not binds_its_name(node):
            continue
        after = body[index + 1].lineno - 1 if index + 1 < len(body) else bound
        is_class = isinstance(node, ast.ClassDef)
        found[node.name] = _Definition(
            name=node.name,
            is_class=is_class,
            lineno=node.lineno,
            first=_first_line(node),
            end=node.end_lineno or node.lineno,
            bound=after,
            body=(_first_line(node.body[0]), node.body[0].lineno, node.body[0].col_offset),
            members=_definitions(node.body, bound=after, lines=lines) if is_class else {},
            named_class=node if not is_class and _may_name_class(node, lines) else None,
            operator=operator_decorator(node),
        )
    return found


def _class_cell(definition: _Definition) -> bool:
    """Whether the function closes over `__class__` (its syntax tree is walked only now,
    for the one target asked for, and only where its lines name `super` or `__class__`)."""
    return definition.named_class is not None and _uses_class_cell(definition.named_class)


def _uses_class_cell(node: ast.stmt) -> bool:
    """Whether a method's code closes over `__class__`: it (or a function nested in it,
    not in a nested class) names `super` or `__class__`, as zero-argument super() does."""
    pending: list[ast.AST] = list(ast.iter_child_nodes(node))
    while pending:
        child = pending.pop()
        if isinstance(child, ast.Name) and child.id in ("super", "__class__"):
            return True
        if not isinstance(child, ast.ClassDef):
            pending.extend(ast.iter_child_nodes(child))
    return False


def _may_name_class(node: ast.stmt, lines: list[str]) -> bool:
    """Whether the definition's lines hold `super` or `__class__` (or a non-ASCII name,
    which may read as either): only then is its syntax tree walked for them."""
    text = "".join(lines[_first_line(node) - 1 : node.end_lineno or node.lineno])
    return "super" in text or "__class__" in text or not text.isascii()


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None)
    return decorators[0].lineno if decorators else node.lineno


def _block(parsed: _ParsedModule, node: _Definition) -> list[str]:
    """The lines `inspect.getblock` gives from the definition's first line, untokenized.

    getblock (pure Python tokenizing on 3.11) ends the block as _block_end does from the
    syntax tree; it runs itself, on the lines up to `bound`, only where a backslash
    continuation leaves the last line to the tokenizer.
    """
    end = _block_end(parsed, node)
    if end is None:
        return inspect.getblock(parsed.lines[node.first - 1 : node.bound])
    return parsed.lines[node.first - 1 : end]


def _block_end(parsed: _ParsedModule, node: _Definition) -> int | None:
    """The block's last line: the definition's own last line, then, when its body has lines
    of its own, the comment lines after it indented at least as much as the body, up to
    the next line of code (blank lines between them kept).

    None where a backslash ends the last line or joins the header to the body: the
    logical line, and the block, may end on a later line than the syntax tree says.
    """
    lines = parsed.lines
    body_line, keyword_line, body_col = node.body
    header = lines[node.lineno - 1 : body_line - 1]
    if any(line.rstrip("\r\n").endswith("\\") for line in [*header, lines[node.end - 1]]):
        return None
    if lines[keyword_line - 1].encode()[:body_col].strip(b" \t\f"):
        return node.end  # the body starts on the header's line: it has no INDENT token
    indent = _indent(lines[body_line - 1])
    end = node.end
    stop = len(lines) if node.bound is None else node.bound
    for number in range(node.end + 1, stop + 1):
        line = lines[number - 1]
        rest = line[_indent(line) :]
        if rest[:1] == "#":
            end = number if _indent(line) >= indent else end
        elif rest.strip("\r\n"):
            break
    return end


def _indent(line: str) -> int:
    """The characters before the line's first token, as tokenize counts them."""
    return len(line) - len(line.lstrip(" \t\f"))


def _decorators(node: ast.stmt) -> list[ast.expr]:
    return list(getattr(node, "decorator_list", []))


def _label(decorator: ast.expr) -> str:
    """The last name of a decorator: `x` of `@a.x`, `@x` and `@a.x(...)`."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    if isinstance(decorator, ast.Attribute):
        return decorator.attr
    return decorator.id if isinstance(decorator, ast.Name) else ""


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (restored as it was; objects are freed as usual).

    A syntax tree holds no reference cycles, yet each collection while a large module is
    parsed traverses every node built so far; for sglang's modules that was a sixth of
    what `check --source-root` spent.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    with _collection_paused():  # the syntax tree is dropped before collections resume
        return _parse_text(found.text)


@functools.lru_cache(maxsize=128)
def _parse_text(text: str) -> _ParsedModule:
    """A module text parsed once per process (the last 128 kept; read-only): the drafts of
    one `bisect --git` read the same head files in tree after tree."""
    try:
        module = ast.parse(text)
    except SyntaxError as exc:
        error = f"{exc.lineno} does not parse: {exc.msg}"
        return _ParsedModule(text, None, error, [], None, 0)
    lines = split_lines(text, keepends=True)
    return _ParsedModule(
        text=text,
        definitions=_definitions(module.body, bound=None, lines=lines),
        error="",
        lines=lines,
        module_names=module_level_names(module),
        future_flags=_future_flags(module),
        imports=import_bindings(module),
    )
