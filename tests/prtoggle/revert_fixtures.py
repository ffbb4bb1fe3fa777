"""Test helpers for the patching/registry/toggle/check tests: fixture modules and fix YAML."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType, ModuleType

import pytest

from prtoggle.patching.swap import EditLayer
from prtoggle.patching.targets import ResolvedTarget, resolve_loaded
from prtoggle.patching.types import Edit, Patch
from prtoggle.recipes import registry
from prtoggle.revert import toggle


@dataclass
class ModuleFactory:
    """Writes dotted modules under `root` (which is on sys.path) and imports them."""

    root: Path

    def write(self, name: str, source: str) -> Path:
        parts = name.split(".")
        directory = self.root.joinpath(*parts[:-1])
        directory.mkdir(parents=True, exist_ok=True)
        for depth in range(1, len(parts)):
            init = self.root.joinpath(*parts[:depth], "__init__.py")
            if not init.exists():
                init.write_text("")
        path = directory / f"{parts[-1]}.py"
        path.write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        return path

    def load(self, name: str, source: str) -> ModuleType:
        self.write(name, source)
        return importlib.import_module(name)


@pytest.fixture(name="modules")
def modules_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleFactory]:
    """Fixture modules in tmp_path/src on sys.path; removed from sys.modules afterwards."""
    root = tmp_path / "src"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield ModuleFactory(root=root)
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(root)):
            del sys.modules[name]


@pytest.fixture(autouse=True)
def clean_toggle_state() -> Iterator[None]:
    """Every test starts and ends with nothing reverted and no cached registry."""
    registry.clear_registry_cache()
    yield
    for pr in toggle.active_reverts():
        toggle.restore(pr)
    registry.clear_registry_cache()


def write_fix(directory: Path, pr: int, body: str) -> Path:
    """Write `<pr>.yaml` (dedented `body`) into `directory` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{pr}.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def make_patch(target: str, *edits: tuple[str, str, str]) -> Patch:
    """A Patch of (match, kind, text) edits, numbered as YAML lines 1, 2, ..."""
    return Patch(
        target=target,
        edits=tuple(
            Edit(match=match, kind=kind, text=text, line=index)  # type: ignore[arg-type]
            for index, (match, kind, text) in enumerate(edits, start=1)
        ),
        line=1,
    )


def edit_layer(target: str, *edits: tuple[str, str, str], pr: int = 1) -> EditLayer:
    """PR `pr`'s layer of (match, kind, text) edits on `target`, from `/reg/<pr>.yaml`."""
    return EditLayer(pr=pr, patch=make_patch(target, *edits), yaml_path=f"/reg/{pr}.yaml")


def loaded_function(target: str) -> FunctionType:
    """The function `target` names in an already imported module."""
    resolved = resolve_loaded(target)
    assert isinstance(resolved, ResolvedTarget), f"{target} is not loaded"
    return resolved.function
