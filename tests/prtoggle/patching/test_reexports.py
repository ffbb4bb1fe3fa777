"""Tests for prtoggle.patching.reexports and the static lookup that follows re-exports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from prtoggle.errors import TargetResolutionError
from prtoggle.patching.reexports import ImportBinding, import_bindings
from prtoggle.patching.source_tree import find_in_source_tree

PRICE = "def price(base):\n    return base * 2\n"
FILES = {
    "shop/__init__.py": "from .new import price\nfrom . import new as submodule\n",
    "shop/new.py": PRICE,
    "shop/old.py": "from shop.new import price\n",
    "shop/renamed.py": "from shop.new import price as cost\n",
    "shop/nested/__init__.py": "",
    "shop/nested/deep.py": "from ..old import price\n",
    "shop/chained.py": "from shop.nested.deep import price\n",
    "shop/redefined.py": "from shop.new import price\n\n\ndef price(base):\n    return base\n",
    "shop/later.py": "def price(base):\n    return base\n\n\nfrom shop.new import price\n",
    "shop/typing_only.py": (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from shop.new import price\n"
    ),
    "shop/fallback.py": (
        "try:\n    from shop.new import price\n"
        "except ImportError:\n    from shop.old import price\n"
    ),
    "shop/cycle_a.py": "from shop.cycle_b import price\n",
    "shop/cycle_b.py": "from shop.cycle_a import price\n",
    "shop/outside.py": "from elsewhere.mod import price\n",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for relative, text in FILES.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("target", "found_as"),
    [
        ("shop.old.price", "shop.new.price"),
        ("shop.price", "shop.new.price"),
        ("shop.renamed.cost", "shop.new.price"),
        ("shop.submodule.price", "shop.new.price"),
        ("shop.chained.price", "shop.new.price"),
        ("shop.fallback.price", "shop.new.price"),
        ("shop.later.price", "shop.new.price"),
    ],
)
def test_a_re_exported_function_is_found_where_it_is_defined(
    root: Path, target: str, found_as: str
) -> None:
    source = find_in_source_tree(target, source_root=root)
    assert (source.filename, source.text, source.found_as) == (
        str(root / "shop" / "new.py"),
        PRICE,
        found_as,
    )


def test_a_definition_after_the_import_wins_as_at_run_time(root: Path) -> None:
    source = find_in_source_tree("shop.redefined.price", source_root=root)
    assert (source.first_line, source.found_as) == (4, None)


def test_an_import_for_type_checkers_only_is_not_a_re_export(root: Path) -> None:
    with pytest.raises(TargetResolutionError) as error:
        find_in_source_tree("shop.typing_only.price", source_root=root)
    assert str(error.value) == (
        f"shop.typing_only.price: {root / 'shop' / 'typing_only.py'} has no definition of "
        "'price' in the module nor imports it"
    )


def test_re_exports_that_go_round_in_a_circle_are_an_error_naming_the_chain(root: Path) -> None:
    with pytest.raises(TargetResolutionError) as error:
        find_in_source_tree("shop.cycle_a.price", source_root=root)
    assert str(error.value) == (
        "shop.cycle_a.price: the re-exports do not end in a definition within 8 steps: "
        "shop.cycle_a.price -> shop.cycle_b.price -> shop.cycle_a.price"
    )


def test_a_re_export_from_outside_the_tree_names_both_names(root: Path) -> None:
    with pytest.raises(TargetResolutionError) as error:
        find_in_source_tree("shop.outside.price", source_root=root)
    assert str(error.value) == (
        f"shop.outside.price: re-exported from elsewhere.mod.price, which has no module file "
        f"under {root}; looked for {root / 'elsewhere' / 'mod.py'}, "
        f"{root / 'elsewhere' / 'mod' / '__init__.py'}, {root / 'elsewhere.py'}, "
        f"{root / 'elsewhere' / '__init__.py'}"
    )


def test_import_bindings_resolve_relative_imports_from_the_importing_package() -> None:
    module = ast.parse("from ..a import b as c\nfrom . import d\nimport x.y as z\nimport p.q\n")
    bindings = import_bindings(module)
    assert bindings == {
        "c": ImportBinding(1, 2, "a", "b"),
        "d": ImportBinding(2, 1, "", "d"),
        "z": ImportBinding(3, 0, "x.y", None),
        "p": ImportBinding(4, 0, "p", None),
    }
    origins = {name: b.origin(package="top.sub") for name, b in bindings.items()}
    assert origins == {"c": "top.a.b", "d": "top.sub.d", "z": "x.y", "p": "p"}
    assert bindings["c"].origin(package="top") is None
