"""No test reaches into a private name of a module other than the one it is named after.

A test of `x.py` (`test_x.py`, `test_cli_x.py`) may read `x`'s private helpers; any other
module's process-global state is reset or read through that module's public functions
(e.g. the `fresh_detection_state` fixture of tests/conftest.py), never by patching or
reading its `_NAMES`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("prtoggle", "fixes")


def _ours(module: str) -> bool:
    return module.split(".", 1)[0] in PACKAGES


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _modules_bound(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module, for the prtoggle and fixes modules a file imports."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name) and alias.asname:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and _ours(node.module):
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}"):
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def private_uses(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, what) for every private name of one of our modules that `path` uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = _modules_bound(tree)
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _ours(node.module):
            uses += [(node.lineno, node.module, a.name) for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in bound:
                uses.append((node.lineno, bound[node.value.id], node.attr))
        elif isinstance(node, ast.Call) and node.args:
            uses += _by_name(node, bound)
    return uses


def _by_name(call: ast.Call, bound: dict[str, str]) -> list[tuple[int, str, str]]:
    """setattr/getattr-like calls naming a private global: (module, "_x") or "module._x"."""
    first, second = call.args[0], call.args[1] if len(call.args) > 1 else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and _ours(first.value):
        module, _, name = first.value.rpartition(".")
        return [(call.lineno, module, name)] if _private(name) else []
    if isinstance(first, ast.Name) and first.id in bound and isinstance(second, ast.Constant):
        name = second.value
        return [(call.lineno, bound[first.id], name)] if _private(str(name)) else []
    return []


def test_no_test_touches_a_private_name_of_another_module() -> None:
    offences = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for line, module, name in private_uses(path):
            if not path.stem.endswith(module.rsplit(".", 1)[-1]):
                offences.append(f"{path.relative_to(ROOT)}:{line}: {module}.{name}")
    assert offences == []


def test_the_check_sees_a_patched_and_a_read_private_global(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "from prtoggle.detect.probes import clock\n"
        "from prtoggle.detect.redzones import buffers as b\n"
        "from prtoggle.cli.repro import _print_table\n"
        "def test(monkeypatch):\n"
        "    monkeypatch.setattr(clock, '_CLOCK', None)\n"
        "    monkeypatch.setattr('prtoggle.detect.config._OVERRIDE', None)\n"
        "    assert b._REGISTRY\n"
    )
    assert sorted(private_uses(sample)) == [
        (3, "prtoggle.cli.repro", "_print_table"),
        (5, "prtoggle.detect.probes.clock", "_CLOCK"),
        (6, "prtoggle.detect.config", "_OVERRIDE"),
        (7, "prtoggle.detect.redzones.buffers", "_REGISTRY"),
    ]
