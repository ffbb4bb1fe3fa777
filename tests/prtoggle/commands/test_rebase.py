"""`prtoggle rebase` on a hand-made package: a target that moved and drifted, and a tie."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli
from prtoggle.commands.rebase import rebase_recipe
from prtoggle.patching.source_files import SourceFile, SourceTree, open_source_tree
from prtoggle.recipes.check import check_fix
from prtoggle.recipes.schema import load_recipe

RECIPE = """\
pr: 7
title: prices without quantities, written when total was in shop.billing
patches:
  - target: shop.billing.total
    edits:
      - match: |
          for item in items:
              subtotal += item.price * item.quantity
          discount = subtotal // 10
        replacement: |
          for item in items:
              subtotal += item.price
          discount = subtotal // 10
"""
MOVED = '''\
"""Sums of a cart (shop.billing.total moved here, renamed; its discount drifted)."""


def sum_prices(items):
    subtotal = 0
    for item in items:
        subtotal += item.price * item.quantity
    discount = subtotal // 20
    return subtotal - discount


def count(items):
    return len(items)
'''
COPY = '''\
"""Old carts: a copy of sum_prices under another name."""


def sum_archived_prices(items):
    subtotal = 0
    for item in items:
        subtotal += item.price * item.quantity
    discount = subtotal // 20
    return subtotal - discount
'''


@pytest.fixture
def older(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A collection `older` holding RECIPE, written for code that has since changed."""
    folder = tmp_path / "older"
    folder.mkdir()
    (folder / "7.yaml").write_text(RECIPE)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(folder))
    return folder


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A source root where shop.billing.total is gone: moved to shop.ledger.sum_prices."""
    root = tmp_path / "src"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "billing.py").write_text("def invoice(cart):\n    return cart\n")
    (root / "shop" / "ledger.py").write_text(MOVED)
    return root


def rebase(root: Path, out: Path, *, as_json: bool) -> Result:
    args = ["rebase", "7", "--collection", "older", "--source-root", str(root), "--out", str(out)]
    return CliRunner().invoke(cli, [*args, *(["--json"] if as_json else [])])


def test_a_target_that_moved_and_drifted_is_found_by_similarity_and_re_anchored(
    older: Path, shop: Path, tmp_path: Path
) -> None:
    result = rebase(shop, tmp_path / "out", as_json=True)
    assert (result.exit_code, json.loads(result.stdout)) == (
        0,
        {
            "pr": 7,
            "collection": "older",
            "status": "rebased",
            "edits": [
                {
                    "target": "shop.ledger.sum_prices",
                    "old_target": "shop.billing.total",
                    "status": "moved",
                    "similarity": 0.988,
                }
            ],
        },
    )
    written = load_recipe(tmp_path / "out" / "7.yaml")
    edit = written.patches[0].edits[0]
    assert (written.patches[0].target, edit.match, edit.text) == (
        "shop.ledger.sum_prices",
        "for item in items:\n"
        "    subtotal += item.price * item.quantity\n"
        "discount = subtotal // 20\n",
        "for item in items:\n    subtotal += item.price\ndiscount = subtotal // 20\n",
    )
    assert [c.status for c in check_fix(written, tree=open_source_tree(shop))] == ["ok"]


def test_two_functions_as_similar_are_a_tie_declined_naming_both(
    older: Path, shop: Path, tmp_path: Path
) -> None:
    (shop / "shop" / "archive.py").write_text(COPY)
    result = rebase(shop, tmp_path / "out", as_json=False)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "edit 1: shop.billing.total: not-found (similarity 0.99)",
        "could not rebase older/7: no unambiguous place for an edit of shop.billing.total; "
        "shop.billing.total: moved candidates shop.archive.sum_archived_prices (similarity "
        "0.988) and shop.ledger.sum_prices (0.988) are too close to tell apart (margin 0.1); "
        "nothing written",
    ]
    assert not (tmp_path / "out").exists()


TWO_TARGETS = """\
pr: 8
title: two functions of shop.billing, both moved since
patches:
  - target: shop.billing.total
    edits:
      - match: |
          subtotal += item.price * item.quantity
        replacement: |
          subtotal += item.price
  - target: shop.billing.count
    edits:
      - match: |
          return len(items)
        replacement: |
          return len(items) - 1
"""


@dataclass
class CountingTree(SourceTree):
    """A directory tree that counts the reads of each file."""

    reads: Counter[str] = field(default_factory=Counter)

    def read(self, relative: str) -> SourceFile | None:
        self.reads[relative] += 1
        return super().read(relative)


def test_the_targets_of_one_recipe_that_moved_search_the_package_files_once(
    shop: Path, tmp_path: Path
) -> None:
    (tmp_path / "8.yaml").write_text(TWO_TARGETS)
    recipe = load_recipe(tmp_path / "8.yaml", collection="older")
    tree = CountingTree(path=shop)
    result = rebase_recipe(recipe, tree=tree, out=tmp_path / "out")
    assert (result.status, [(e.target, e.status) for e in result.edits]) == (
        "rebased",
        [("shop.ledger.sum_prices", "moved"), ("shop.ledger.count", "moved")],
    )
    assert dict(tree.reads) == {
        "shop/billing.py": 3,  # each target looked for where it was, then the search
        "shop/__init__.py": 1,  # the search
        "shop/ledger.py": 3,  # the search, then each rebased target's check
    }
