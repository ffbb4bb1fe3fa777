"""The modules a Python command imports at the top of its own files, read without running it.

For `python -m pytest ... PATH[::NODE]...` the test files named (and the conftest.py files
beside them and above, up to the working directory), for `python SCRIPT` the script, for
`python -c CODE` the code: their module-level `import X` and `from X import Y` statements
(inside `if`/`try` blocks too; relative imports are left out). A warm worker can import
these before the command's first run, so that the first run already finds them imported.
`command_lazy_imports` reads the imports made inside functions: for pytest, those of the
tests named (every test of a file named whole) and of the files' other functions and
methods (fixtures, helpers, setUp); for a script, every function's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

from prtoggle.runners.warm_eligibility import python_invocation

_MOST_FILES = 64


def command_imports(argv: Sequence[str], *, cwd: Path) -> list[str]:
    """The absolute module names `argv`'s own files import at module level, in order."""
    invocation = python_invocation(argv)
    if invocation is None:
        return []
    if invocation.form == "code":
        sources = [invocation.target]
    elif invocation.form == "script":
        sources = _read([cwd / invocation.target])
    elif invocation.target == "pytest":
        sources = _read(_test_files(invocation.args, cwd=cwd))
    else:
        return []
    names: dict[str, None] = {}
    for source in sources:
        names.update(dict.fromkeys(_imports(source)))
    return list(names)


def command_lazy_imports(argv: Sequence[str], *, cwd: Path) -> list[str]:
    """The absolute module names `argv`'s own files import inside the functions it may run
    (see the module's docstring), in order; none that command_imports lists."""
    invocation = python_invocation(argv)
    if invocation is None or invocation.form == "code":
        return []
    chosen: dict[Path, set[str] | None]
    if invocation.form == "script":
        chosen = {cwd / invocation.target: None}
    elif invocation.target == "pytest":
        chosen = _chosen_tests(invocation.args, cwd=cwd)
    else:
        return []
    top: set[str] = set()
    lazy: dict[str, None] = {}
    for path, selected in chosen.items():
        for source in _read([path]):
            tree = _parsed(source)
            if tree is not None:
                top.update(_in_body(tree.body))
                lazy.update(dict.fromkeys(_lazy_imports(tree, selected)))
    return [name for name in lazy if name not in top]


def _chosen_tests(args: Sequence[str], *, cwd: Path) -> dict[Path, set[str] | None]:
    """Per test file (and conftest.py) the tests named in it (None: the whole file)."""
    named: dict[Path, set[str] | None] = {}
    for arg in args:
        if arg.startswith("-"):
            continue
        path, _, node = arg.partition("::")
        resolved = (cwd / path).resolve()
        nodes = named.get(resolved, set())
        if nodes is not None:
            named[resolved] = {*nodes, node.split("[", 1)[0]} if node else None
    return {path: named.get(path) for path in _test_files(args, cwd=cwd)}


def _lazy_imports(tree: ast.Module, selected: set[str] | None) -> Iterator[str]:
    for function, owner in _functions(tree.body, owner=""):
        if _runs(function.name, owner, selected):
            yield from _imports_within(function)


def _functions(
    body: Sequence[ast.stmt], *, owner: str
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, owner
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, owner=f"{owner}{node.name}::")


def _runs(name: str, owner: str, selected: set[str] | None) -> bool:
    """Whether a function may run when the `selected` tests run: the tests named, and
    every function that is not a test (a fixture, a helper, setUp) of a file or class
    that runs. `owner`: the classes around it, each followed by `::`."""
    if selected is None:
        return True
    whole = any(owner.startswith(f"{node}::") for node in selected)  # its class named
    if owner and not whole and not any(node.startswith(owner) for node in selected):
        return False
    return whole or not name.startswith("test") or f"{owner}{name}" in selected


def _imports_within(function: ast.AST) -> Iterator[str]:
    for node in ast.walk(function):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


def _test_files(args: Sequence[str], *, cwd: Path) -> list[Path]:
    files: dict[Path, None] = {}
    for arg in args:
        if arg.startswith("-"):
            continue
        path = (cwd / arg.split("::", 1)[0]).resolve()
        if not path.is_file() or path.suffix != ".py":
            continue
        for folder in [path.parent, *path.parent.parents]:
            conftest = folder / "conftest.py"
            if conftest.is_file():
                files[conftest] = None
            if folder == cwd.resolve():
                break
        files[path] = None
    return list(files)[:_MOST_FILES]


def _read(paths: Sequence[Path]) -> list[str]:
    sources = []
    for path in paths:
        try:
            sources.append(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return sources


def _imports(source: str) -> Iterator[str]:
    tree = _parsed(source)
    if tree is not None:
        yield from _in_body(tree.body)


def _parsed(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _in_body(body: Sequence[ast.stmt]) -> Iterator[str]:
    for node in body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
        elif isinstance(node, ast.If | ast.Try):
            for block in (node.body, node.orelse, getattr(node, "finalbody", [])):
                yield from _in_body(block)
            for handler in getattr(node, "handlers", []):
                yield from _in_body(handler.body)
