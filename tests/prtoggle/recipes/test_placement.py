"""Tests for recipes.authoring.placement: which `def`s are targets, as the static reader says."""

from __future__ import annotations

from pathlib import Path

import pytest

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.source_tree import find_in_source_tree
from prtoggle.recipes.authoring.placement import CUSTOM_OP, NOT_LIVE, layout

MODULE = """\
import typing

import torch


class Box:
    @property
    def size(self):
        return 1

    @size.setter
    def size(self, value):
        pass

    @typing.overload
    def pick(self, a: int) -> int: ...

    def pick(self, a):
        return a


@torch.library.custom_op("prtoggle_placement::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def helper():
    return 0
"""
DEFINED = ("Box.size", "Box.pick", "double", "helper")


def test_placement_and_the_static_reader_agree_on_which_defs_are_targets(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(MODULE)
    placed = layout(MODULE, name="pkg/mod.py").functions
    readable = {}
    for qualname in DEFINED:
        try:
            source = find_in_source_tree(f"pkg.mod.{qualname}", source_root=tmp_path)
            readable[qualname] = source.first_line
        except PatchApplicationError:
            continue
    assert {name: span.first for name, span in placed.items()} == readable
    assert sorted(readable) == ["Box.pick", "Box.size", "helper"]


@pytest.mark.parametrize(("line", "kind"), [(12, NOT_LIVE), (16, NOT_LIVE), (23, CUSTOM_OP)])
def test_a_def_that_is_no_target_is_placed_with_the_reason(line: int, kind: str) -> None:
    assert layout(MODULE, name="pkg/mod.py").region(line).kind == kind
