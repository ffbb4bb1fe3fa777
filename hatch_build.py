"""Build hook: an editable install maps the name `prtoggle` to this checkout and nothing else.

The checkout's root never goes on sys.path (it holds `tests`, `bench`, `docs`, `examples`
and the demo engine `fixes`, which would shadow a project's own). Instead a `.pth` file
installs a finder of exactly `prtoggle`, asked before Python's path finder, so that a
folder `prtoggle/` without `__init__.py` left on sys.path (an older install's empty
`prtoggle/_shipped_yaml`) is not imported as an empty namespace package. A regular
`prtoggle` package found on sys.path (PYTHONPATH pointing at another tree) still wins, as
it would over any editable install.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_FINDER = '''"""prtoggle's editable install: the name `prtoggle` is the checkout at {package!r}."""
import sys
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader

_PACKAGE = {package!r}


class PrtoggleCheckoutFinder:
    """`prtoggle` from the checkout, unless sys.path holds a regular `prtoggle` package."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "prtoggle":
            return None
        found = PathFinder.find_spec(name, path)
        if found is not None and found.origin is not None:
            return found
        init = _PACKAGE + "/__init__.py"
        spec = ModuleSpec(name, SourceFileLoader(name, init), origin=init, is_package=True)
        spec.submodule_search_locations = [_PACKAGE]
        spec.has_location = True
        return spec


if not any(getattr(f, "__name__", "") == "PrtoggleCheckoutFinder" for f in sys.meta_path):
    sys.meta_path.insert(0, PrtoggleCheckoutFinder)
'''


class EditableFinderHook(BuildHookInterface):
    """Adds `__editable___prtoggle_checkout.pth` and its finder module to an editable wheel."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            return
        self._scratch = tempfile.mkdtemp(prefix="prtoggle-editable-")
        package = os.path.join(os.path.abspath(self.root), "prtoggle")
        module = os.path.join(self._scratch, "__editable___prtoggle_checkout.py")
        with open(module, "w", encoding="utf-8") as out:
            out.write(_FINDER.format(package=package))
        pth = os.path.join(self._scratch, "__editable___prtoggle_checkout.pth")
        with open(pth, "w", encoding="utf-8") as out:
            out.write("import __editable___prtoggle_checkout\n")
        build_data["force_include_editable"] = {
            module: "__editable___prtoggle_checkout.py",
            pth: "__editable___prtoggle_checkout.pth",
        }

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
