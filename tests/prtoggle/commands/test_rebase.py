"""`prtoggle rebase` on a hand-made package: a target that moved and drifted, and a tie."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from prtoggle.cli.main import cli
from prtoggle.commands import rebase as rebase_module
from prtoggle.commands.rebase import rebase_recipe
from prtoggle.patching.source_files import SourceFile, SourceTree, open_source_tree
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.schema import load_recipe

REPO_ROOT = Path(__file__).resolve().parents[3]

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
                    "reason": "",
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
    assert [c.status for c in check_recipe(written, tree=open_source_tree(shop))] == ["ok"]


def test_two_functions_as_similar_are_a_tie_declined_naming_both(
    older: Path, shop: Path, tmp_path: Path
) -> None:
    (shop / "shop" / "archive.py").write_text(COPY)
    result = rebase(shop, tmp_path / "out", as_json=False)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "edit 1: shop.billing.total: not-found (similarity 0.99)",
        "could not rebase older/7: no unambiguous place for edit 1 (shop.billing.total): "
        "moved candidates shop.archive.sum_archived_prices (similarity 0.988) and "
        "shop.ledger.sum_prices (0.988) are too close to tell apart (margin 0.1); "
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


COMMENTED = """\
# The billing fix, kept by hand: this header stays.
pr: 8
title: 1:30

patches:
  # the one target, in the old module
  - target: shop.billing.total
    edits:
      - match: |   # the fixed lines
          subtotal = 0
          for item in items:
              subtotal += item.price * item.quantity
        replacement: |
          subtotal = 0
          for item in items:
              subtotal += item.price

      # a second edit, untouched by the drift
      - match: "return subtotal - discount"
        append: "    # reverted"
"""
DRIFTED = """\
def total(items):
    subtotal = 0.0
    for item in items:
        subtotal += item.price * item.quantity
    discount = subtotal // 20
    return subtotal - discount
"""


def prtoggle_process(*args: str, yaml_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -m prtoggle ARGS` as a real process, PRTOGGLE_YAML_PATH set."""
    env = {**os.environ, "PRTOGGLE_YAML_PATH": str(yaml_path)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "prtoggle", *args]
    return subprocess.run(argv, check=False, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def commented(tmp_path: Path) -> tuple[Path, Path]:
    """A collection `kept` holding COMMENTED, and a source root where its match drifted."""
    folder = tmp_path / "kept"
    folder.mkdir()
    (folder / "8.yaml").write_text(COMMENTED)
    root = tmp_path / "src"
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "billing.py").write_text(DRIFTED)
    return folder, root


def test_a_rebased_recipe_keeps_every_comment_and_the_layout_of_what_did_not_change(
    commented: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, root = commented
    out = tmp_path / "out"
    args = ["rebase", "8", "--collection", "kept", "--source-root", str(root), "--out", str(out)]
    result = prtoggle_process(*args, yaml_path=folder)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "edit 1: shop.billing.total: re-anchored (similarity 0.99)",
        "edit 2: shop.billing.total: exact (similarity 1.00)",
        f"rebased: wrote {out / '8.yaml'}",
    ]
    assert (out / "8.yaml").read_text() == COMMENTED.replace(
        "          subtotal = 0\n", "          subtotal = 0.0\n"
    )


def test_a_rebased_recipe_is_read_back_as_prtoggle_reads_recipes_title_1_30_stays_text(
    commented: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, root = commented
    out = tmp_path / "out"
    args = ["rebase", "8", "--collection", "kept", "--source-root", str(root), "--out", str(out)]
    assert prtoggle_process(*args, yaml_path=folder).returncode == 0
    written = load_recipe(out / "8.yaml")
    assert (written.title, written.pr) == ("1:30", 8)


def test_an_edit_whose_lines_the_code_changed_too_says_so_not_only_a_similarity(
    commented: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, root = commented
    (folder / "8.yaml").write_text(
        COMMENTED.replace("subtotal += item.price\n", "subtotal += item.price * 2\n").replace(
            "subtotal += item.price * item.quantity\n", "subtotal += item.price * item.qty\n"
        )
    )
    out = tmp_path / "out"
    args = ["rebase", "8", "--collection", "kept", "--source-root", str(root), "--out", str(out)]
    result = prtoggle_process(*args, "--json", yaml_path=folder)
    assert result.returncode == 1
    first = json.loads(result.stdout)["edits"][0]
    assert (first["status"], first["reason"]) == (
        "not-found",
        "the code changed the same or an adjacent line the edit changes, so the two changes "
        "cannot be merged: the match's 'subtotal += item.price * item.qty' now reads "
        "'subtotal += item.price * item.quantity' (line 4 of the function); rewrite this "
        "edit by hand",
    )
    assert not out.exists()


STILL_APPLIES = """\
pr: 9
title: invoices returned whole
patches:
  - target: shop.billing.invoice
    edits:
      - match: return cart
        replacement: return [cart]
"""
GONE = """\
pr: 10
title: a function no module of shop holds any more
patches:
  - target: shop.billing.refund
    edits:
      - match: return amount * rate
        replacement: return amount
"""


@pytest.fixture
def several(older: Path) -> Path:
    """The collection `older` with 7 (moved and drifted), 9 (still applies), 10 (gone)."""
    (older / "9.yaml").write_text(STILL_APPLIES)
    (older / "10.yaml").write_text(GONE)
    return older


def rebase_several(root: Path, out: Path, *prs: str) -> Result:
    args = ["rebase", *prs, "--collection", "older", "--source-root", str(root), "--out", str(out)]
    return CliRunner().invoke(cli, args)


def test_several_prs_are_rebased_in_turn_each_under_its_collection_and_pr(
    several: Path, shop: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = rebase_several(shop, out, "9", "7")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "older/9:",
        "edit 1: shop.billing.invoice: exact (similarity 1.00)",
        "unchanged: older/9 already applies; nothing written",
        "older/7:",
        "edit 1: shop.ledger.sum_prices (was shop.billing.total): moved (similarity 0.99)",
        f"rebased: wrote {out / '7.yaml'}",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["7.yaml"]


def test_several_prs_with_json_are_a_list_of_the_answers_in_the_order_given(
    several: Path, shop: Path, tmp_path: Path
) -> None:
    result = rebase_several(shop, tmp_path / "out", "9", "7", "--json")
    assert result.exit_code == 0
    answers = json.loads(result.stdout)
    assert [(a["pr"], a["status"], [e["status"] for e in a["edits"]]) for a in answers] == [
        (9, "unchanged", ["exact"]),
        (7, "rebased", ["moved"]),
    ]


def test_a_pr_given_twice_is_rebased_once_and_answered_as_one(
    several: Path, shop: Path, tmp_path: Path
) -> None:
    result = rebase_several(shop, tmp_path / "out", "9", "9")
    assert (result.exit_code, result.stdout.splitlines()) == (
        0,
        [
            "edit 1: shop.billing.invoice: exact (similarity 1.00)",
            "unchanged: older/9 already applies; nothing written",
        ],
    )


def test_a_pr_without_a_recipe_among_several_is_an_error_before_anything_is_written(
    several: Path, shop: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = rebase_several(shop, out, "7", "99")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: PR 99 is not in collection 'older'; its PRs: 7, 9, 10\n"
    assert not out.exists()


def test_one_pr_that_cannot_be_rebased_among_several_exits_1_and_the_others_are_written(
    several: Path, shop: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = rebase_several(shop, out, "10", "7", "--json")
    assert result.exit_code == 1
    answers = json.loads(result.stdout)
    assert [(a["pr"], a["status"]) for a in answers] == [(10, "failed"), (7, "rebased")]
    assert sorted(p.name for p in out.iterdir()) == ["7.yaml"]


def test_several_prs_whose_code_lies_in_one_place_share_one_tree_and_its_search(
    several: Path, shop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (several / "8.yaml").write_text(TWO_TARGETS)
    trees: list[CountingTree] = []

    def counting_tree(path: Path) -> CountingTree:
        trees.append(CountingTree(path=path))
        return trees[-1]

    monkeypatch.setattr(rebase_module, "open_source_tree", counting_tree)
    result = rebase_several(shop, tmp_path / "out", "7", "8")
    assert (result.exit_code, len(trees)) == (0, 1)
    assert dict(trees[0].reads) == {
        "shop/billing.py": 4,  # each of the three targets looked for where it was, the search
        "shop/__init__.py": 1,  # the one search of the package, for both recipes
        "shop/ledger.py": 4,  # the search, then each rebased target's check
    }
