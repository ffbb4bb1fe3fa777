"""Tests for the selection rule: one PR number in several collections, judged per install."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from prtoggle.errors import RevertSpecError, UnknownPRError
from prtoggle.recipes.registry import UPSTREAM_COLLECTION, Registry, load_registry
from prtoggle.recipes.selection import RevertRequest, refusal, select
from prtoggle.revert.toggle import parse_revert_requests, select_reverts

ENGINE = "selengine"
ENGINE_SOURCE = "def width(bs, topk):\n    rows = bs * topk\n    return rows\n"
OURS = """\
pr: 27460
title: ours, rebased
applies_to: {applies_to}
patches:
  - target: selengine.width
    edits:
      - match: rows = bs * topk
        replacement: rows = bs
"""
DEMO = """\
pr: 27460
title: the demo engine's
patches:
  - target: seldemo.width
    edits:
      - match: rows = bs * topk
        replacement: rows = bs
"""
TOGGLE_MODULE = '''\
_PR_REVERT_YAML_27460 = """
patches:
  - target: selengine.width
    edits:
      - match: |
          rows = {match}
        replacement: |
          rows = bs
"""
_PR_REVERT_YAML_26329 = """
patches:
  - target: selengine.width
    edits:
      - match: |
          return rows
        replacement: |
          return rows + 1
"""
_PR_FIX_REVERT_YAML = {{27460: _PR_REVERT_YAML_27460, 26329: _PR_REVERT_YAML_26329}}
'''


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Packages `selengine` (version 1.5) and `seldemo` on sys.path, found without import."""
    root = tmp_path / "site"
    for name in (ENGINE, "seldemo"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(ENGINE_SOURCE)
    dist_info = root / "selengine-1.5.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Name: selengine\nVersion: 1.5\n")
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in (ENGINE, "seldemo"):
        sys.modules.pop(name, None)


def registry_of(
    tmp_path: Path, *, applies_to: str = "selengine>=1.0", upstream_match: str = "bs * topk"
) -> Registry:
    for name, text in (("demo", DEMO), ("ours", OURS.format(applies_to=applies_to))):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "27460.yaml").write_text(text)
    toggle_module = tmp_path / "pr_fix_toggle.py"
    toggle_module.write_text(TOGGLE_MODULE.format(match=upstream_match))
    return load_registry(dirs=[tmp_path / "demo", tmp_path / "ours"], upstream=toggle_module)


def labels(registry: Registry, spec: str) -> list[str]:
    requests = parse_revert_requests(spec, registry=registry)
    selections = select_reverts(requests, registry=registry)
    return [recipe.label for selection in selections for recipe in selection.recipes]


def test_the_built_in_collection_holds_sglangs_registered_recipes(
    tmp_path: Path, engine: Path
) -> None:
    registry = registry_of(tmp_path)
    assert registry.collections() == ("demo", "ours", UPSTREAM_COLLECTION)
    upstream = registry.in_collection(UPSTREAM_COLLECTION)
    assert [(fix.pr, fix.title) for fix in upstream.recipes] == [
        (26329, "sglang's revert recipe for PR 26329"),
        (27460, "sglang's revert recipe for PR 27460"),
    ]
    assert registry.is_upstream(UPSTREAM_COLLECTION) and not registry.is_upstream("ours")


def test_a_maintained_recipe_that_applies_is_used_and_the_upstream_text_left_out(
    tmp_path: Path, engine: Path
) -> None:
    registry = registry_of(tmp_path)
    [selection] = select_reverts([RevertRequest(27460)], registry=registry)
    assert [recipe.label for recipe in selection.recipes] == ["demo/27460", "ours/27460"]
    assert [item.line() for item in selection.left_out] == [
        f"{UPSTREAM_COLLECTION}/27460 (shadowed: ours/27460 is the maintained recipe for the "
        "installed code)"
    ]


def test_an_upstream_text_that_applies_is_used_when_no_maintained_recipe_does(
    tmp_path: Path, engine: Path
) -> None:
    registry = registry_of(tmp_path, applies_to="selengine>=2.0")
    assert labels(registry, "27460") == ["demo/27460", f"{UPSTREAM_COLLECTION}/27460"]
    assert labels(registry, "26329") == [f"{UPSTREAM_COLLECTION}/26329"]


def test_a_request_whose_only_recipe_is_stale_upstream_text_is_refused_saying_what_to_do(
    tmp_path: Path, engine: Path
) -> None:
    registry = registry_of(tmp_path, upstream_match="bs * topk * ctx")
    toggle_module = tmp_path / "pr_fix_toggle.py"
    with pytest.raises(RevertSpecError) as caught:
        labels(registry, f"{UPSTREAM_COLLECTION}:27460")
    assert str(caught.value) == (
        f"{UPSTREAM_COLLECTION}:27460: no recipe applies to the installed code: "
        f"{UPSTREAM_COLLECTION}/27460 is stale: its match text is not in the installed code: "
        f"selengine.width: edit 1 of 1 ({toggle_module}:5) matched 0 times in "
        f"{engine / ENGINE / '__init__.py'}:1-3; expected exactly 1.; `prtoggle check 27460 "
        f"--collection {UPSTREAM_COLLECTION}` shows the nearest lines; add a recipe for the "
        "installed version (a PRTOGGLE_YAML_PATH collection)"
    )


def test_a_recipe_outside_its_range_does_not_take_part_and_alone_is_refused(
    tmp_path: Path, engine: Path
) -> None:
    registry = registry_of(tmp_path, applies_to="selengine>=1.0,<1.4")
    [selection] = select_reverts([RevertRequest(27460)], registry=registry)
    assert [recipe.label for recipe in selection.recipes] == [
        "demo/27460",
        f"{UPSTREAM_COLLECTION}/27460",
    ]
    alone = select(registry, RevertRequest(27460, "ours"))
    assert alone.recipes == ()
    assert refusal(alone) == (
        "ours:27460: no recipe applies to the installed code: ours/27460 is out of range: "
        "installed selengine 1.5, range selengine>=1.0,<1.4; use a recipe for the installed "
        "version or install a version in that range"
    )


def test_collection_colon_pr_names_exactly_one_recipe(tmp_path: Path, engine: Path) -> None:
    registry = registry_of(tmp_path)
    assert labels(registry, "demo:27460") == ["demo/27460"]
    assert labels(registry, "ours:27460, demo:27460") == ["ours/27460", "demo/27460"]
    with pytest.raises(UnknownPRError) as caught:
        parse_revert_requests("demo:26329", registry=registry)
    assert str(caught.value).startswith(
        "SGLANG_DEBUG_REVERT_PR='demo:26329': PR 26329 is not in collection 'demo'; its PRs: "
        "27460; PR 26329 is in: sglang-upstream"
    )


def test_all_keeps_what_applies_and_zero_or_empty_mean_nothing(
    tmp_path: Path, engine: Path
) -> None:
    registry = registry_of(tmp_path, applies_to="selengine>=2.0")
    assert parse_revert_requests("all", registry=registry) is None
    assert parse_revert_requests("0", registry=registry) == ()
    assert parse_revert_requests(" ", registry=registry) == ()
    selections = select_reverts(None, registry=registry)
    assert {s.request.pr: [r.label for r in s.recipes] for s in selections} == {
        26329: [f"{UPSTREAM_COLLECTION}/26329"],
        27460: ["demo/27460", f"{UPSTREAM_COLLECTION}/27460"],
    }
