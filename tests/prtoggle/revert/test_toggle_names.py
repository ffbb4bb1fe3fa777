"""Tests for whole-fix reverts: names land with a PR's swaps, all or nothing, partial ones said."""

from __future__ import annotations

import importlib
import sys
import typing
import warnings
from pathlib import Path

import pytest
from revert_fixtures import ModuleFactory, clean_toggle_state, modules_fixture, write_fix  # noqa: F401

from prtoggle import PartialRevertWarning
from prtoggle.errors import PatchApplicationError, RevertSpecError
from prtoggle.protocol import REVERT_ENV, WHOLE_ONLY_ENV
from prtoggle.recipes.registry import Registry, load_registry
from prtoggle.revert import sglang_toggle, toggle

CORE = """\
LIMIT = 8192


def new_helper(x):
    return x * 2


def compute(x):
    return new_helper(x) + LIMIT


class Base:
    def forward(self):
        return "base"


class Child(Base):
    def forward(self):
        return "child:" + super().forward()
"""
USER = "from app.core import LIMIT, new_helper\n"
WHOLE_FIX = """\
pr: 931
title: a helper and a constant
patches:
  - target: app.core.compute
    edits:
      - match: return new_helper(x) + LIMIT
        replacement: return {helper}(x) + LIMIT
names:
  - scope: app.core
    define: |
      LIMIT = 4096
      def _old_helper(x):
          return x + 1
    remove: [{remove}]
  - scope: app.core.Child
    remove: [forward]
"""
PARTIAL = """\
not_reverted:
  - file: app/core.py
    line: 9
    reason: decorator of compute changed
"""


def registry(tmp_path: Path, *, helper: str = "_old_helper", remove: str = "new_helper",
             extra: str = "") -> Registry:  # fmt: skip
    write_fix(tmp_path / "reg", 931, WHOLE_FIX.format(helper=helper, remove=remove) + extra)
    return load_registry(dirs=[tmp_path / "reg"])


def snapshot(*holders: object) -> list[dict[str, object]]:
    return [dict(vars(holder)) for holder in holders]


def same_objects(before: list[dict[str, object]], holders: tuple[object, ...]) -> bool:
    return all(
        set(vars(holder)) == set(old) and all(vars(holder)[k] is v for k, v in old.items())
        for holder, old in zip(holders, before, strict=True)
    )


def test_a_whole_fix_reverts_names_and_code_then_restores_the_identical_objects(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    core = modules.load("app.core", CORE)
    user = modules.load("app.user", USER)
    holders = (core, core.Child, user)
    before = snapshot(*holders)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a whole revert warns nothing
        with toggle.reverted(931, registry=registry(tmp_path)):
            assert core.compute(1) == 2 + 4096
            assert user.LIMIT == 4096 and "new_helper" not in vars(user)
            assert core.Child().forward() == "base"
    assert same_objects(before, holders)
    assert core.compute(1) == 2 + 8192


def test_names_wait_for_their_module_like_targets(modules: ModuleFactory, tmp_path: Path) -> None:
    modules.write("app.core", CORE)
    with toggle.reverted(931, registry=registry(tmp_path)):
        assert "app.core" not in sys.modules
        core = importlib.import_module("app.core")
        assert core.LIMIT == 4096 and core.compute(1) == 4098
        assert toggle.patched_targets(931) == ("app.core.compute",)
    assert core.LIMIT == 8192 and core.compute(1) == 8194


def test_the_global_check_refuses_code_that_would_fail_with_name_error(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    core = modules.load("app.core", CORE)
    before = snapshot(core, core.Child)
    reg = registry(tmp_path, helper="_older_helper")
    with pytest.raises(PatchApplicationError) as caught, toggle.reverted(931, registry=reg):
        pass
    assert str(caught.value) == (
        f"{tmp_path / 'reg' / '931.yaml'}: PR 931: app.core.compute reads `_older_helper`, not "
        "defined in module app.core after the revert (nor a builtin), so the reverted code "
        "would fail with NameError; the recipe must define it (names: define) or list the "
        "change in not_reverted"
    )
    assert same_objects(before, (core, core.Child))
    assert not toggle.is_reverted(931)


GATED = """\
import os

if os.environ.get("PRTOGGLE_TEST_NEVER_SET"):
    import json as accelerator


def compute(x):
    if x < 0:
        return accelerator.dumps(x)
    return x + 1
"""
GATED_FIX = """\
pr: 932
title: a function reading a name its module binds only on some machines
patches:
  - target: app.gated.compute
    edits:
      - match: return x + 1
        replacement: return x + 2
"""


def test_the_global_check_leaves_out_names_the_module_binds_only_under_a_condition(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    """As sglang's `if is_flashinfer_available(): import flashinfer`: the fixed code reads
    the name too, and `check` reads the source's conditional binding; no refusal."""
    gated = modules.load("app.gated", GATED)
    write_fix(tmp_path / "reg", 932, GATED_FIX)
    with toggle.reverted(932, registry=load_registry(dirs=[tmp_path / "reg"])):
        assert gated.compute(1) == 3
    assert gated.compute(1) == 2


def test_a_stale_name_at_import_undoes_the_whole_fix_and_the_import_raises(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    modules.write("app.core", CORE)
    path = tmp_path / "reg" / "931.yaml"
    with toggle.reverted(931, registry=registry(tmp_path, remove="gone_helper")):
        with pytest.raises(PatchApplicationError) as caught:
            importlib.import_module("app.core")
        assert str(caught.value) == (
            "PR 931 could not be reverted when app.core was imported, so it is not reverted at "
            f"all: {path}:9: PR 931: remove: `gone_helper` is not bound in module app.core (the "
            "fix's code is not what the recipe expects: the recipe is stale)"
        )
        assert not toggle.is_reverted(931)
    assert "app.core" not in sys.modules  # the failed import left nothing behind
    core = importlib.import_module("app.core")
    assert core.LIMIT == 8192 and "_old_helper" not in vars(core)


def test_a_partial_revert_warns_once_per_block_naming_what_stays(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    modules.load("app.core", CORE)
    reg = registry(tmp_path, extra=PARTIAL)
    with pytest.warns(PartialRevertWarning) as caught, toggle.reverted(931, registry=reg):
        pass
    assert [str(w.message) for w in caught] == [
        "PR 931 in force (partial: 1 change not reverted: app/core.py:9 decorator of compute "
        "changed)"
    ]
    assert caught[0].filename == __file__


def test_whole_only_refuses_a_partial_revert_and_all_leaves_it_out(
    modules: ModuleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules.load("app.core", CORE)
    reg = registry(tmp_path, extra=PARTIAL)
    monkeypatch.setenv(WHOLE_ONLY_ENV, "1")
    with pytest.raises(RevertSpecError) as caught, toggle.reverted(931, registry=reg):
        pass
    assert str(caught.value) == (
        "reverted(): PR 931 (reg/931) is a partial revert (partial: 1 change not reverted: "
        "app/core.py:9 decorator of compute changed), and only whole reverts are wanted here "
        f"({WHOLE_ONLY_ENV}=1 or --whole-only); leave PR 931 out, or accept partial reverts"
    )
    assert not toggle.is_reverted(931)
    monkeypatch.setenv("PRTOGGLE_YAML_PATH", str(tmp_path / "reg"))
    monkeypatch.setenv(REVERT_ENV, "reg:931")
    monkeypatch.setattr(sglang_toggle, "take_over", lambda toggle: None)  # process-wide hook
    with pytest.raises(RevertSpecError, match=r"^SGLANG_DEBUG_REVERT_PR: PR 931 \(reg/931\) is a"):
        toggle.maybe_revert_pr_fix()


def test_a_reloaded_module_gets_its_names_again_and_restore_keeps_the_reloaded_objects(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    core = modules.load("app.core", CORE)
    with toggle.reverted(931, registry=registry(tmp_path)):
        importlib.reload(core)
        assert core.LIMIT == 4096 and "new_helper" not in vars(core) and core.compute(1) == 4098
        reloaded_child = core.Child
        assert reloaded_child().forward() == "base"
    assert core.LIMIT == 8192 and core.compute(1) == 8194
    assert core.Child is reloaded_child and core.Child().forward() == "child:base"


IMPORTS_POST = """\
import json


def encode(value):
    return json.dumps(value)
"""
IMPORTS_PRE = """\
import json
from collections import OrderedDict


def encode(value):
    return json.dumps(OrderedDict.fromkeys(value))
"""
IMPORTS_FIX = """\
pr: 932
patches:
  - target: app.codec.encode
    edits:
      - match: return json.dumps(value)
        replacement: return json.dumps(OrderedDict.fromkeys(value))
names:
  - scope: app.codec
    define: |
      from collections import OrderedDict
"""


def test_reverted_code_compiles_with_the_imports_the_fix_removed_as_the_pre_fix_module_does(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    # `OrderedDict.fromkeys(...)` compiles to other bytecode (CPython 3.11) on a name the
    # module imports: the swap compiles with the pre-fix module's imports, the define's too.
    codec = modules.load("app.codec", IMPORTS_POST)
    namespace: dict[str, object] = {}
    exec(compile(IMPORTS_PRE, "pre.py", "exec"), namespace)
    expected = namespace["encode"].__code__  # type: ignore[attr-defined]
    write_fix(tmp_path / "reg", 932, IMPORTS_FIX)
    with toggle.reverted(932, registry=load_registry(dirs=[tmp_path / "reg"])):
        assert codec.encode("ab") == '{"a": null, "b": null}'
        assert codec.encode.__code__.co_code == expected.co_code


def test_removing_an_import_the_fix_added_leaves_the_same_object_in_other_modules(
    modules: ModuleFactory, tmp_path: Path
) -> None:
    # `Optional` is typing's: other modules importing it hold no copy of the scope's.
    typed = modules.load("app.typed", "from typing import Optional\n")
    other = modules.load("app.other", "from typing import Optional\n")
    fix = "pr: 934\nnames:\n  - scope: app.typed\n    remove: [Optional]\n"
    write_fix(tmp_path / "reg", 934, fix)
    with toggle.reverted(934, registry=load_registry(dirs=[tmp_path / "reg"])):
        assert "Optional" not in vars(typed)
        assert other.Optional is typing.Optional
    assert typed.Optional is typing.Optional
