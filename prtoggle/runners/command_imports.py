"""The modules a Python command imports at the top of its own files, read without running it.

For `python -m pytest ... PATH[::NODE]...` the test files named (and the conftest.py files
beside them and above, up to the working directory), for `python SCRIPT` the script, for
`python -c CODE` the code: their module-level `import X` and `from X import Y` statements
(inside `if`/`try` blocks too; relative imports are left out). A warm worker can import
these before the command's first run, so that the first run already finds them imported.
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
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    yield from _in_body(tree.body)


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
