"""A whole-fix recipe (names and a swap) on the installed sglang 0.5.23's radix cache.

The recipe is hand-written, shaped like a real fix's revert: a constant and two imports the
fix removed (bound again), an override the fix added to a subclass (removed: the base's
method serves again), a method the fix removed (bound again, with zero-argument super()),
and an edited method reading the constant. Reverted and restored in this process, the
module's and the class's namespaces come back object for object; under `prtoggle run` the
names land in the command's process and in a grandchild it spawns.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prtoggle.recipes.registry import load_registry
from prtoggle.revert import toggle

pytestmark = pytest.mark.sglang

MODULE = "sglang.srt.mem_cache.radix_cache"
RECIPE = f"""\
pr: 990027
title: radix cache, reverted whole (hand-written for the tests)
patches:
  - target: {MODULE}.RadixCache.supports_prefix_sharing
    edits:
      - match: return not self.disable
        replacement: return _PREFIX_SHARING and not self.disable
names:
  - scope: {MODULE}
    define: |
      import heapq as _heapq_before_fix
      from sglang.srt.utils.common import ceil_align as _ceil_align_before_fix
      _PREFIX_SHARING: bool = False
  - scope: {MODULE}.RadixCache
    remove: [total_size]
    define: |
      def supports_fast_match_prefix(self):
          return not super().supports_fast_match_prefix()
"""
PROBE = f"""\
import multiprocessing

def report():
    from {MODULE} import RadixCache
    import {MODULE} as module
    from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache
    cache = object.__new__(RadixCache)
    cache.disable = False
    return (
        getattr(module, "_PREFIX_SHARING", "absent"),
        RadixCache.total_size is BasePrefixCache.total_size,
        cache.supports_prefix_sharing(),
        cache.supports_fast_match_prefix(),
    )

if __name__ == "__main__":
    print("child", *report(), flush=True)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print("grandchild", *pool.apply(report), flush=True)
"""


@pytest.fixture
def recipe_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "whole"
    directory.mkdir()
    (directory / "990027.yaml").write_text(RECIPE)
    return directory


def test_the_revert_lands_on_the_real_module_and_restores_every_object(recipe_dir: Path) -> None:
    from sglang.srt.mem_cache import radix_cache
    from sglang.srt.mem_cache.base_prefix_cache import BasePrefixCache

    cls = radix_cache.RadixCache
    before = dict(vars(radix_cache)), dict(vars(cls))
    cache = object.__new__(cls)
    cache.disable = False
    registry = load_registry(dirs=[recipe_dir])
    with toggle.reverted(990027, registry=registry):
        assert radix_cache._PREFIX_SHARING is False
        assert radix_cache._heapq_before_fix is sys.modules["heapq"]
        assert "total_size" not in vars(cls) and cls.total_size is BasePrefixCache.total_size
        assert cache.supports_prefix_sharing() is False
        assert cache.supports_fast_match_prefix() is True  # super() reaches the base's False
    after = dict(vars(radix_cache)), dict(vars(cls))
    for old, new in zip(before, after, strict=True):
        assert set(old) == set(new)
        assert [name for name in old if old[name] is not new[name]] == []
    assert cache.supports_prefix_sharing() is True
    assert cache.supports_fast_match_prefix() is False


def test_run_lands_the_names_in_the_child_and_a_spawned_grandchild(
    recipe_dir: Path, sglang_env: dict[str, str], tmp_path: Path
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = {**sglang_env, "PRTOGGLE_YAML_PATH": str(recipe_dir), "PRTOGGLE_WARM": "0"}
    command = [sys.executable, "-m", "prtoggle", "run", "-r", "whole:990027", "--"]
    done = subprocess.run(
        [*command, sys.executable, str(probe)],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, textwrap.shorten(done.stderr, 2000)
    assert done.stdout.splitlines() == [
        "child False True False True",
        "grandchild False True False True",
    ]
