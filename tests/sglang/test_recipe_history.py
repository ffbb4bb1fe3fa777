"""yaml/sglang's recipes for older releases: checked on their own wheels, refused on 0.5.23."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import prtoggle
from prtoggle.errors import RevertSpecError
from prtoggle.patching.source_files import open_source_tree
from prtoggle.recipes.check import check_recipe
from prtoggle.recipes.schema import load_recipe

pytestmark = pytest.mark.sglang

PACK = Path(__file__).parents[2] / "yaml" / "sglang"
WHEELS_ENV = "PRTOGGLE_SGLANG_HISTORY_WHEELS"
"""A folder holding the sglang 0.5.13.post1 and 0.5.14 wheels; downloaded once when unset."""
OLD_RELEASES = ("0.5.13.post1", "0.5.14")
"""The last release of 24856's recipe and the last of 22832's and 26521's (docs/sglang.md)."""
OLD_RECIPES = {22832: "0.5.14", 24856: "0.5.13.post1", 26521: "0.5.14"}
"""Each older recipe and the last release it applies to."""


@pytest.fixture(scope="session")
def old_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The wheels of OLD_RELEASES: from $PRTOGGLE_SGLANG_HISTORY_WHEELS, else pip download."""
    directory = Path(os.environ.get(WHEELS_ENV) or tmp_path_factory.mktemp("sglang-old"))
    found = {}
    for version in OLD_RELEASES:
        wheels = sorted(directory.glob(f"sglang-{version}-*.whl"))
        if not wheels:
            command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
            done = subprocess.run(
                [*command, f"sglang=={version}", "-d", str(directory)],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            wheels = sorted(directory.glob(f"sglang-{version}-*.whl"))
            if done.returncode != 0 or not wheels:
                pytest.fail(
                    f"could not download the sglang=={version} wheel into {directory} (set "
                    f"{WHEELS_ENV} to a folder holding it): {done.stderr.strip()[-500:]}",
                    pytrace=False,
                )
        found[version] = wheels[0]
    return found


def test_each_older_recipe_applies_to_its_last_release_and_is_not_applicable_elsewhere(
    old_wheels: dict[str, Path], sglang_wheel: Path
) -> None:
    trees = {**old_wheels, "0.5.23": sglang_wheel}
    statuses = {
        (pr, version): {check.status for check in check_recipe(fix, tree=open_source_tree(wheel))}
        for pr in OLD_RECIPES
        for fix in [load_recipe(PACK / f"{pr}.yaml")]
        for version, wheel in trees.items()
    }
    assert statuses == {
        (22832, "0.5.13.post1"): {"ok"},
        (22832, "0.5.14"): {"ok"},
        (22832, "0.5.23"): {"not-applicable"},
        (24856, "0.5.13.post1"): {"ok"},
        (24856, "0.5.14"): {"not-applicable"},
        (24856, "0.5.23"): {"not-applicable"},
        (26521, "0.5.13.post1"): {"not-applicable"},
        (26521, "0.5.14"): {"ok"},
        (26521, "0.5.23"): {"not-applicable"},
    }
    for pr, last in OLD_RECIPES.items():
        assert last in load_recipe(PACK / f"{pr}.yaml").verified_on


def test_the_ranges_end_where_the_recipes_text_stops_matching(
    old_wheels: dict[str, Path], sglang_wheel: Path
) -> None:
    """Without applies_to each older recipe is stale on 0.5.23: the range hides real rot."""
    trees = {**old_wheels, "0.5.23": sglang_wheel}
    for pr, last in OLD_RECIPES.items():
        fix = dataclasses.replace(load_recipe(PACK / f"{pr}.yaml"), applies_to=None)
        for version, wheel in trees.items():
            statuses = {check.status for check in check_recipe(fix, tree=open_source_tree(wheel))}
            expected = (
                "ok" if version == last or (pr == 22832 and version in OLD_RELEASES) else "stale"
            )
            assert statuses == {expected}, (pr, version)


def test_the_installed_0_5_23_is_outside_every_older_recipes_range(sglang_installed: str) -> None:
    rows = [
        (c.pr, c.status, c.message)
        for pr in OLD_RECIPES
        for c in check_recipe(load_recipe(PACK / f"{pr}.yaml"))
    ]
    assert rows == [
        (
            22832,
            "not-applicable",
            "sglang 0.5.23 (installed) is outside the recipe's range "
            "sglang>=0.5.11,<0.5.15 (applies_to)",
        ),
        (
            24856,
            "not-applicable",
            "sglang 0.5.23 (installed) is outside the recipe's range "
            "sglang>=0.5.12,<0.5.14 (applies_to)",
        ),
        (
            26521,
            "not-applicable",
            "sglang 0.5.23 (installed) is outside the recipe's range "
            "sglang>=0.5.14,<0.5.15 (applies_to)",
        ),
    ]


def test_reverting_sglangs_22832_on_the_installed_0_5_23_is_refused_with_the_range() -> None:
    import sglang.srt.speculative.multi_layer_eagle_worker_v2 as worker

    function = worker.MultiLayerEagleDraftWorker._draft_extend_for_decode
    code = function.__code__
    # sglang's recipe named exactly (the plain number would use the demo engine's 22832):
    # outside its range, it is refused before anything is patched.
    with pytest.raises(RevertSpecError) as caught, prtoggle.reverted("sglang:22832"):
        pass
    assert str(caught.value) == (
        "sglang:22832: no recipe applies to the installed code: sglang/22832 is out of range: "
        "installed sglang 0.5.23, range sglang>=0.5.11,<0.5.15; use a recipe for the "
        "installed version or install a version in that range"
    )
    assert (prtoggle.is_reverted(22832), function.__code__) == (False, code)
