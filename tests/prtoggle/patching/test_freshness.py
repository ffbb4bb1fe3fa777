"""Tests for prtoggle.patching.freshness: no patching from a file changed after import."""

from __future__ import annotations

import os

import pytest
from revert_fixtures import ModuleFactory, make_patch, modules_fixture  # noqa: F401

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.swap import CodeSwapper, EditLayer
from prtoggle.patching.targets import ResolvedTarget, function_source, resolve_loaded

MODULE = """\
import math


def area(r):
    return math.pi * r * r
"""
EDIT = EditLayer(
    pr=3,
    patch=make_patch("shapes.area", ("return math.pi * r * r", "replacement", "return 0")),
    yaml_path="/reg/3.yaml",
)


def loaded_area(modules: ModuleFactory):  # type: ignore[no-untyped-def]
    module = modules.load("shapes", MODULE)
    resolved = resolve_loaded("shapes.area")
    assert isinstance(resolved, ResolvedTarget)
    return module, resolved.function


def test_an_unchanged_file_is_patched(modules: ModuleFactory) -> None:
    module, area = loaded_area(modules)
    CodeSwapper().patch(area, EDIT)
    assert module.area(2) == 0


def test_a_line_added_above_the_function_after_import_is_refused(
    modules: ModuleFactory,
) -> None:
    module, area = loaded_area(modules)
    path = modules.write("shapes", "# a new first line\n" + MODULE)
    original = area.__code__
    with pytest.raises(PatchApplicationError) as caught:
        CodeSwapper().patch(area, EDIT)
    assert str(caught.value) == (
        f"shapes.area: {path} changed after shapes was loaded (it has no area at line 4 any "
        "more); a revert edited from the file would mix code that never ran with the running "
        "code; restart the program (or re-import shapes) first"
    )
    assert area.__code__ is original and module.area(1) == pytest.approx(3.14159, rel=1e-5)


def test_a_same_size_edit_of_the_body_after_import_is_refused(modules: ModuleFactory) -> None:
    _module, area = loaded_area(modules)
    path = modules.write("shapes", MODULE.replace("r * r", "r + r"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    with pytest.raises(PatchApplicationError) as caught:
        function_source(area, target="shapes.area")
    assert str(caught.value).startswith(
        f"shapes.area: {path} changed after shapes was loaded (its area at line 4 is not the "
        "code running now); "
    )
