"""Tests for prtoggle.patching.targets: resolution, pending modules, refused target kinds."""

from __future__ import annotations

import sys

import pytest
from revert_fixtures import ModuleFactory, modules_fixture  # noqa: F401

from prtoggle.errors import TargetResolutionError, UnsupportedTargetError
from prtoggle.patching.targets import (
    PendingTarget,
    ResolvedTarget,
    function_source,
    import_target,
    resolve_loaded,
)

ODD_MODULE = """\
import functools

square = lambda a: a * a
length = len
join = str.join
generated = {}
exec("def made(a):\\n    return a\\n", generated)
made = generated["made"]
total = functools.partial(sum)


class Box:
    @property
    def hidden(self):
        return 1

    hidden = property(None)
"""


def test_function_in_a_submodule_not_imported_yet_is_pending(modules: ModuleFactory) -> None:
    modules.write("pkg.sub", "def f():\n    return 1\n")
    modules.load("pkg", "")
    assert resolve_loaded("pkg.sub.f") == PendingTarget(target="pkg.sub.f", module="pkg.sub")
    assert "pkg.sub" not in sys.modules


def test_package_not_imported_at_all_is_pending_on_its_top_module(
    modules: ModuleFactory,
) -> None:
    modules.write("pkg.sub", "def f():\n    return 1\n")
    assert resolve_loaded("pkg.sub.f") == PendingTarget(target="pkg.sub.f", module="pkg")
    assert "pkg" not in sys.modules


def test_unknown_top_module_is_an_error() -> None:
    with pytest.raises(TargetResolutionError) as caught:
        resolve_loaded("no_such_module_xyz.f")
    assert str(caught.value) == (
        "no_such_module_xyz.f: no module named 'no_such_module_xyz' is importable; expected a "
        "dotted path module[.Class].function"
    )


def test_missing_attribute_names_its_holder(modules: ModuleFactory) -> None:
    modules.load("odd", ODD_MODULE)
    with pytest.raises(TargetResolutionError) as caught:
        resolve_loaded("odd.Box.missing")
    assert str(caught.value) == (
        "odd.Box.missing: odd.Box has no attribute 'missing'; it has: hidden"
    )
    with pytest.raises(TargetResolutionError) as close:
        resolve_loaded("odd.Box.hiden")
    assert str(close.value) == (
        "odd.Box.hiden: odd.Box has no attribute 'hiden'; closest names: hidden"
    )


def test_import_target_imports_the_module(modules: ModuleFactory) -> None:
    modules.write("pkg.sub", "def f():\n    return 1\n")
    resolved = import_target("pkg.sub.f")
    assert isinstance(resolved, ResolvedTarget)
    assert resolved.function() == 1


def test_import_target_reports_a_module_that_fails_to_import(modules: ModuleFactory) -> None:
    modules.write("broken", "raise RuntimeError('no')\n")
    with pytest.raises(TargetResolutionError) as caught:
        import_target("broken.f")
    assert str(caught.value) == "broken.f: importing module broken failed: RuntimeError: no"


def test_a_parent_package_whose_import_fails_is_named_with_its_cause(
    modules: ModuleFactory,
) -> None:
    modules.write("heavy.layers", "def f():\n    return 1\n")
    (modules.root / "heavy" / "__init__.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(TargetResolutionError) as caught:
        import_target("heavy.layers.f")
    assert str(caught.value) == (
        "heavy.layers: importing its parent packages failed: ModuleNotFoundError: "
        "No module named 'no_such_dependency_xyz'"
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("odd.square", "odd.square: is a lambda; only functions defined with def can be patched"),
        (
            "odd.length",
            "odd.length: is a builtin_function_or_method implemented in C, not a "
            "Python function; only functions defined in Python source can be "
            "patched",
        ),
        (
            "odd.join",
            "odd.join: is a method_descriptor implemented in C, not a Python "
            "function; only functions defined in Python source can be patched",
        ),
        (
            "odd.Box",
            "odd.Box: is a class, not a function; expected a function, method, "
            "staticmethod, classmethod or property",
        ),
        (
            "odd.total",
            "odd.total: is a partial, not a function; expected a "
            "function, method, staticmethod, classmethod or property",
        ),
        ("odd.Box.hidden", "odd.Box.hidden: is a property without a getter"),
    ],
)
def test_targets_that_cannot_be_patched_are_refused(
    modules: ModuleFactory, target: str, message: str
) -> None:
    modules.load("odd", ODD_MODULE)
    with pytest.raises(UnsupportedTargetError) as caught:
        resolve_loaded(target)
    assert str(caught.value) == message


def test_function_without_source_is_refused(modules: ModuleFactory) -> None:
    module = modules.load("odd", ODD_MODULE)
    resolved = resolve_loaded("odd.made")
    assert isinstance(resolved, ResolvedTarget)
    with pytest.raises(UnsupportedTargetError) as caught:
        function_source(module.made, target="odd.made")
    assert str(caught.value) == (
        "odd.made: the source of made is unavailable (could not get source code); only "
        "functions defined in a Python source file can be patched"
    )


def test_function_source_spans_decorators_with_real_first_line(modules: ModuleFactory) -> None:
    text = "import functools\n\n\n@functools.cache\n@functools.cache\ndef f(a):\n    return a\n"
    path = modules.write("deco", text)
    module = modules.load("deco", text)
    resolved = resolve_loaded("deco.f")
    assert isinstance(resolved, ResolvedTarget)
    assert resolved.function is module.f.__wrapped__.__wrapped__
    source = function_source(resolved.function, target="deco.f")
    assert (source.filename, source.first_line) == (str(path), 4)
    assert source.text == "@functools.cache\n@functools.cache\ndef f(a):\n    return a\n"


def test_import_target_without_any_importable_prefix_is_an_error() -> None:
    with pytest.raises(TargetResolutionError) as caught:
        import_target("no_such_module_xyz.sub.f")
    assert str(caught.value) == (
        "no_such_module_xyz.sub.f: no prefix of it is an importable module; expected a dotted "
        "path module[.Class].function"
    )
