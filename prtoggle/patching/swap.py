"""Swap a function's `__code__` for edited code, layer edits of several fixes, restore exactly."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import CodeType, FunctionType

from prtoggle.errors import PatchApplicationError
from prtoggle.patching.compiler import compile_function
from prtoggle.patching.editor import EditContext, EditedSource, edit_lines, source_lines
from prtoggle.patching.targets import FunctionSource, function_source
from prtoggle.patching.types import Patch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditLayer:
    """The edits one fix makes to one function."""

    pr: int
    patch: Patch
    yaml_path: str | None


@dataclass
class PatchedFunction:
    """A function whose code is currently swapped, with its original code and source."""

    function: FunctionType
    original_code: CodeType
    source: FunctionSource
    layers: list[EditLayer] = field(default_factory=list)


def edited_source(source: FunctionSource, layers: Sequence[EditLayer]) -> EditedSource:
    """Apply every layer's edits, in order, to the function's source as its file has it."""
    current = EditedSource(lines=source_lines(source.text, first_line=source.first_line))
    for layer in layers:
        context = EditContext(
            target=layer.patch.target, filename=source.filename, yaml_path=layer.yaml_path
        )
        current = edit_lines(current.lines, layer.patch.edits, context=context)
    return current


def build_code(source: FunctionSource, layers: Sequence[EditLayer]) -> CodeType:
    """Edit and compile; nothing is swapped."""
    target = layers[-1].patch.target if layers else source.shape.name
    return compile_function(
        edited_source(source, layers), shape=source.shape, filename=source.filename, target=target
    )


class CodeSwapper:
    """Owns every swapped function; callers serialise access (toggle holds a lock)."""

    def __init__(self) -> None:
        self._patched: dict[int, PatchedFunction] = {}

    def patch(self, function: FunctionType, layer: EditLayer) -> None:
        """Add `layer` on top of the function's current layers and swap the code in."""
        state = self._patched.get(id(function))
        if state is None:
            source = function_source(function, target=layer.patch.target)
            state = PatchedFunction(
                function=function, original_code=function.__code__, source=source
            )
        if any(existing.pr == layer.pr for existing in state.layers):
            raise PatchApplicationError(
                f"{layer.patch.target}: PR {layer.pr} already edits this function"
            )
        code = build_code(state.source, [*state.layers, layer])
        function.__code__ = code
        state.layers.append(layer)
        self._patched[id(function)] = state
        logger.debug("patched %s for PR %d", layer.patch.target, layer.pr)

    def unpatch(self, function: FunctionType, pr: int) -> None:
        """Remove the layer of `pr`; with no layer left the original code object returns."""
        state = self._patched.get(id(function))
        if state is None or all(layer.pr != pr for layer in state.layers):
            return
        remaining = [layer for layer in state.layers if layer.pr != pr]
        if not remaining:
            function.__code__ = state.original_code
            del self._patched[id(function)]
            return
        try:
            function.__code__ = build_code(state.source, remaining)
        except PatchApplicationError as exc:
            others = ", ".join(str(layer.pr) for layer in remaining)
            raise PatchApplicationError(
                f"cannot restore PR {pr} on {state.function.__qualname__} while PRs {others} "
                f"stay reverted: their edits need PR {pr}'s edits ({exc}); restore them first"
            ) from exc
        state.layers = remaining

    def original_code(self, function: FunctionType) -> CodeType:
        state = self._patched.get(id(function))
        return function.__code__ if state is None else state.original_code

    def is_patched(self, function: FunctionType) -> bool:
        return id(function) in self._patched
