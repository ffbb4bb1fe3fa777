"""Imports sit at the top of each module; the few kept inside functions are listed with a reason.

A function-level (or `TYPE_CHECKING`) import hides a dependency from a reader. prtoggle
imports its own modules at module top, except where an import is kept lazy for a reason
written in LAZY below; torch, Triton and numpy are never imported at prtoggle's import
(inside functions only). The click group loads a command's module only when it runs, so
a command's imports cost nothing to the others.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "prtoggle"
HEAVY = ("torch", "triton", "numpy")

_CHILD_START = (
    "the start-up path of every child Python (kept lazy by the speed work of issue 28; "
    "listed there)"
)
_SWAP_ON_IMPORT = (
    "the code swapper and target resolution load when a target's module is imported, not "
    "at a reverting child's start-up, where every target usually waits (issue 28's speed)"
)
_YAML_ON_PARSE = (
    "PyYAML loads only where a recipe is parsed: a process under `prtoggle run` takes its "
    "recipes already parsed (recipes/parsed_recipes.py, issue 28's speed)"
)
_IMPORT_PRTOGGLE = "`import prtoggle` stays cheap: the public API loads on first use"
_DETECT_PROVIDER = "a probe provider imports torch or Triton: loaded when a probe first runs"
_AUTHORING = "owned by the whole-fix work (recipes/authoring and its helpers); not moved here"
_WARM_FORK = (
    "the warm server imports no revert or detection machinery its preload did not: each "
    "fork loads what a fresh child's start-up would"
)

_NEEDS_PYTEST = (
    "imports pytest (through the plugin's package): loaded once `coverage` knows pytest is "
    "installed, so --help and the missing-pytest error work on the light install (issue 34)"
)

LAZY: dict[str, dict[str, str]] = {
    "prtoggle/cli/repro.py": dict.fromkeys(
        [
            "prtoggle.commands.coverage_runs",
            "prtoggle.commands.repro_guards",
        ],
        _NEEDS_PYTEST,
    ),
    "prtoggle/cli/coverage.py": dict.fromkeys(
        [
            "prtoggle.cli.coverage_report",
            "prtoggle.commands.coverage",
            "prtoggle.commands.coverage_html",
            "prtoggle.commands.repro_guards",
        ],
        _NEEDS_PYTEST,
    ),
    "prtoggle/__init__.py": {
        "prtoggle.revert": _IMPORT_PRTOGGLE,
        "prtoggle.revert.source_patcher": _IMPORT_PRTOGGLE,
        "prtoggle.revert.toggle": _IMPORT_PRTOGGLE,
    },
    "prtoggle/commands/show.py": {
        "prtoggle.recipes.check": "the checker (and the code swapper it loads) is `show`'s "
        "alone: `list`, which takes show's metadata, gets its checks from the user cache "
        "(recipes/check_cache.py, issue 34's speed)"
    },
    "prtoggle/detect/probes/site_probes.py": {"prtoggle.detect.probes": _DETECT_PROVIDER},
    "prtoggle/recipes/check.py": {
        "prtoggle.recipes.names_check": "only a recipe with `names` or `not_reverted` needs "
        "it: `list` and `run`'s pre-check of the shipped recipes never load it"
    },
    "prtoggle/recipes/schema.py": {
        "prtoggle.patching.swap": _SWAP_ON_IMPORT,
        "prtoggle.recipes.yaml_loader": _YAML_ON_PARSE,
    },
    "prtoggle/revert/module_readiness.py": {
        "prtoggle.patching.name_scopes": _SWAP_ON_IMPORT,
        "prtoggle.patching.targets": _SWAP_ON_IMPORT,
    },
    "prtoggle/revert/partial.py": {"prtoggle.recipes.selection": _CHILD_START},
    "prtoggle/revert/state.py": {
        "prtoggle.patching.swap": _SWAP_ON_IMPORT,
        "prtoggle.patching.commit": (
            "the one-step landing (stdlib only) loads with the first revert put in force, "
            "not at prtoggle's import"
        ),
    },
    "prtoggle/runners/warm_preload.py": {"prtoggle.revert": _WARM_FORK},
    "prtoggle/runners/warm_server.py": {
        "prtoggle.detect.findings.checking": _WARM_FORK,
        "prtoggle.recipes.registry": _WARM_FORK,
        "prtoggle.revert": _WARM_FORK,
        "prtoggle.patching.prepared_sources": (
            "the patching machinery loads in the server only when `bisect --git` asks it to "
            "read the changed files ahead; other servers fork without it"
        ),
    },
}
"""Module -> the prtoggle modules it may import inside a function or under TYPE_CHECKING,
each with the reason. Modules owned by the concurrent start-up work are listed in OWNED."""

OWNED: dict[str, str] = {
    **dict.fromkeys(
        [
            "prtoggle/_bootstrap/sitecustomize.py",
            "prtoggle/revert/toggle.py",
            "prtoggle/revert/child.py",
            "prtoggle/revert/process_report.py",
            "prtoggle/revert/processes.py",
            "prtoggle/recipes/registry.py",
            "prtoggle/recipes/versions.py",
            "prtoggle/recipes/resolution.py",
            "prtoggle/recipes/selection.py",
            "prtoggle/recipes/from_sglang.py",
            "prtoggle/recipes/schema.py",
            "prtoggle/recipes/yaml_reading.py",
            "prtoggle/patching/source_files.py",
            "prtoggle/runners/script_targets.py",
        ],
        _CHILD_START,
    ),
    **dict.fromkeys(
        [
            "prtoggle/recipes/names_check.py",
            "prtoggle/recipes/names_schema.py",
            "prtoggle/patching/names.py",
            "prtoggle/patching/define_code.py",
            "prtoggle/patching/global_reads.py",
            "prtoggle/revert/fix_landing.py",
        ],
        _AUTHORING,
    ),
}
"""Modules whose lazy imports are not judged here, with why (see LAZY)."""


HEAVY_AT_TOP = {
    "prtoggle/detect/probes/triton_provider.py": "the Triton probe provider: only loaded, "
    "inside a function, by a probe that runs on Triton (detect/probes/site_probes.py)",
}
"""Modules that may import torch, Triton or numpy at their top, with why (never at
`import prtoggle` or a command's start)."""


def lazy_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of each import of `path` inside a function or under TYPE_CHECKING."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, hidden: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = hidden or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            inside = inside or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            )
            if hidden and isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif hidden and isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.lineno, child.module))
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def top_level_imports(path: Path) -> list[str]:
    """Every module `path` imports outside functions and TYPE_CHECKING blocks."""
    hidden = {line for line, _ in lazy_imports(path)}
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno not in hidden:
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif node.module and not node.level:
                names.append(node.module)
    return names


def _modules() -> list[tuple[str, Path]]:
    return [(str(path.relative_to(ROOT)), path) for path in sorted(PACKAGE.rglob("*.py"))]


def test_every_lazy_import_of_prtoggle_is_listed_with_its_reason() -> None:
    unlisted = {
        f"{name}:{line}: {module}"
        for name, path in _modules()
        if name not in OWNED
        for line, module in lazy_imports(path)
        if module.startswith("prtoggle") and module not in LAZY.get(name, {})
    }
    assert unlisted == set()


def test_every_listed_lazy_import_is_still_there() -> None:
    present = {(name, module) for name, path in _modules() for _, module in lazy_imports(path)}
    listed = {(name, module) for name, modules in LAZY.items() for module in modules}
    assert listed - present == set()
    assert set(OWNED) <= {name for name, _ in _modules()}


def test_no_module_of_prtoggle_imports_torch_triton_or_numpy_at_its_top() -> None:
    heavy = {
        f"{name}: {module}"
        for name, path in _modules()
        if name not in HEAVY_AT_TOP
        for module in top_level_imports(path)
        if module.split(".")[0] in HEAVY
    }
    assert heavy == set()


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "example.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nimport os\nif TYPE_CHECKING:\n    import json\n"
        "def f():\n    from prtoggle.errors import PrToggleError\n    import torch\n"
    )
    assert lazy_imports(module) == [(4, "json"), (6, "prtoggle.errors"), (7, "torch")]
    assert top_level_imports(module) == ["typing", "os"]
