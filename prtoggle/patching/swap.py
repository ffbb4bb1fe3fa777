"""Swap a function's `__code__` for edited code, layer edits of several fixes, restore exactly."""

from __future__ import annotations

import ast
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import CodeType, FunctionType

from prtoggle.errors import PatchApplicationError, PrToggleError
from prtoggle.patching.commit import ABSENT, Commit
from prtoggle.patching.compiler import (
    compile_definition,
    map_positions,
    parse_definition,
    signature_lines,
)
from prtoggle.patching.definition import (
    DefinitionValues,
    ExpressionScope,
    GlobalsScope,
    ModuleNamesScope,
    changed_values,
    current_values,
    refuse_decorator_change,
)
from prtoggle.patching.editor import (
    EditContext,
    NumberedSource,
    edit_numbered,
    insert_preamble,
    number_lines,
)
from prtoggle.patching.targets import FunctionSource, clear_caches, function_source
from prtoggle.patching.types import Patch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditLayer:
    """The edits one fix makes to one function.

    `pr` identifies the layer on its function: a PR number, or (for the patches of the
    source_patcher API, which share the one record of swapped functions) a negative number.
    """

    pr: int
    patch: Patch
    yaml_path: str | None

    @property
    def name(self) -> str:
        """`PR 26521`, or `source_patcher patch 3`."""
        return f"PR {self.pr}" if self.pr > 0 else f"source_patcher patch {-self.pr}"


@dataclass(frozen=True)
class Replacement:
    """What a revert puts on a function: its code and, when the def line changed, its values."""

    code: CodeType
    values: DefinitionValues | None


@dataclass
class PatchedFunction:
    """A function whose code is currently swapped, with its original code, values and source."""

    function: FunctionType
    original_code: CodeType
    original_values: DefinitionValues
    source: FunctionSource
    layers: list[EditLayer] = field(default_factory=list)
    values_swapped: bool = False


def apply_layers(source: FunctionSource, layers: Sequence[EditLayer]) -> NumberedSource:
    """Apply every layer's edits and preamble, in order, to the function's source text."""
    return _edited(number_lines(source.text, first_line=source.first_line), source, layers)


def build_replacement(
    source: FunctionSource,
    layers: Sequence[EditLayer],
    *,
    function: FunctionType | None = None,
    originals: DefinitionValues | None = None,
    evaluate: bool = True,
    namespace: dict[str, object] | None = None,
) -> Replacement:
    """Edit and compile; nothing is swapped.

    With a live `function`, new defaults and annotations are evaluated in its globals
    (unchanged ones keep `originals`, by default the function's own); without one, the
    names they read must be bound at the top of the module (`source.module_names`).
    `evaluate` False (check, show: recipe code never runs there) only requires the names
    they read to be bound in the live function's globals; the values it returns for
    them are placeholders, never to be installed.
    Edits of decorator lines are refused: they cannot take effect through a code swap.
    Any other failure (a RecursionError parsing a very long expression, an error raised
    evaluating a new default) is a PatchApplicationError naming the target, too.
    `namespace`: the globals to evaluate in instead of the function's (as a planned
    commit leaves them).
    """
    try:
        return _build_replacement(
            source,
            layers,
            function=function,
            originals=originals,
            evaluate=evaluate,
            namespace=namespace,
        )
    except PrToggleError:
        raise
    except Exception as exc:
        where = _label(source, layers[-1]) if layers else source.shape.name
        raise PatchApplicationError(
            f"{where}: the reverted code cannot be built: {type(exc).__name__}: {exc}"
        ) from exc


def _build_replacement(
    source: FunctionSource,
    layers: Sequence[EditLayer],
    *,
    function: FunctionType | None,
    originals: DefinitionValues | None,
    evaluate: bool,
    namespace: dict[str, object] | None,
) -> Replacement:
    target = layers[-1].patch.target if layers else source.shape.name
    shape, filename = source.shape, source.filename
    original = number_lines(source.text, first_line=source.first_line)
    edited = _edited(original, source, layers)
    edited_def = parse_definition(
        edited, shape=shape, filename=filename, target=target, positions=False
    )
    header = signature_lines(edited_def, edited)
    map_positions(edited_def, edited)
    code = compile_definition(edited_def, shape=shape, filename=filename, target=target)
    if original.lines[:header] == edited.lines[:header]:
        return Replacement(code=code, values=None)  # same decorators and signature
    original_def = _definition(original, source)
    try:
        refuse_decorator_change(original_def, edited_def, label=target)
    except PatchApplicationError:
        _refuse_first_decorator_change(source, layers, original_def)
        raise
    label = _label(source, layers[-1]) if layers else target
    if function is not None and originals is None:
        originals = current_values(function)
    values = changed_values(
        original_def,
        edited_def,
        originals=originals,
        scope=_scope(source, function, label=label, evaluate=evaluate, namespace=namespace),
        class_name=shape.class_name,
        future_flags=shape.future_flags,
    )
    if values is not None and function is not None and "__signature__" in vars(function):
        raise PatchApplicationError(
            f"{label}: the edit changes the signature of {function.__qualname__}, which has an "
            "explicit __signature__ that a code swap cannot keep consistent"
        )
    return Replacement(code=code, values=values)


class CodeSwapper:
    """Owns every swapped function; callers serialise access (toggle holds a lock).

    Code, defaults, keyword defaults and annotations change in one step
    (prtoggle.patching.commit): no call sees one without the other. Restoring the last
    layer puts back the original objects themselves.
    """

    def __init__(self) -> None:
        self._patched: dict[int, PatchedFunction] = {}

    def patch(
        self, function: FunctionType, layer: EditLayer, *, commit: Commit | None = None
    ) -> None:
        """Add `layer` on top of the function's current layers and swap the code in.

        With `commit`, the swap is one of its changes (made when it runs; forgotten, record
        included, if it is aborted); without, it is made now.
        """
        state = self._patched.get(id(function))
        if state is None:
            source = function_source(function, target=layer.patch.target)
            state = PatchedFunction(
                function=function,
                original_code=function.__code__,
                original_values=current_values(function),
                source=source,
            )
        if any(existing.pr == layer.pr for existing in state.layers):
            raise PatchApplicationError(
                f"{layer.patch.target}: {layer.name} already edits this function"
            )
        replacement = build_replacement(
            state.source,
            [*state.layers, layer],
            function=function,
            originals=state.original_values,
            namespace=None if commit is None else _planned_globals(function, commit),
        )
        self._record(state, [*state.layers, layer], replacement, commit)
        logger.debug("patched %s for %s", layer.patch.target, layer.name)

    def unpatch(self, function: FunctionType, pr: int, *, commit: Commit | None = None) -> None:
        """Remove the layer of `pr`; with no layer left the original objects return."""
        state = self._patched.get(id(function))
        if state is None or all(layer.pr != pr for layer in state.layers):
            return
        remaining = [layer for layer in state.layers if layer.pr != pr]
        if not remaining:
            self._record(state, [], Replacement(code=state.original_code, values=None), commit)
            return
        try:
            replacement = build_replacement(
                state.source, remaining, function=function, originals=state.original_values
            )
        except PatchApplicationError as exc:
            gone = next(layer.name for layer in state.layers if layer.pr == pr)
            others = ", ".join(layer.name for layer in remaining)
            raise PatchApplicationError(
                f"cannot restore {gone} on {state.function.__qualname__} while {others} "
                f"stay in force: their edits need {gone}'s edits ({exc}); restore them first"
            ) from exc
        self._record(state, remaining, replacement, commit)

    def original_code(self, function: FunctionType) -> CodeType:
        state = self._patched.get(id(function))
        return function.__code__ if state is None else state.original_code

    def is_patched(self, function: FunctionType) -> bool:
        return id(function) in self._patched

    def _record(
        self,
        state: PatchedFunction,
        layers: list[EditLayer],
        replacement: Replacement,
        commit: Commit | None,
    ) -> None:
        """Put `replacement` on the function (now, or as part of `commit`) and record it."""
        key, before = id(state.function), (self._patched.get(id(state.function)), state.layers)
        swapped_before = state.values_swapped
        _install(state, replacement, commit)
        state.layers = layers
        if layers:
            self._patched[key] = state
        else:
            self._patched.pop(key, None)
        if commit is None:
            return

        def forget() -> None:
            state.layers, state.values_swapped = before[1], swapped_before
            if before[0] is None:
                self._patched.pop(key, None)
            else:
                self._patched[key] = before[0]

        commit.on_abort(forget)


def _install(state: PatchedFunction, replacement: Replacement, commit: Commit | None) -> None:
    function = state.function
    plan = Commit() if commit is None else commit
    plan.swap_code(function, replacement.code)
    plan.after(lambda: clear_caches(function))
    if replacement.values is not None or state.values_swapped:
        values = replacement.values or state.original_values
        plan.set_attr(function, "__defaults__", values.defaults)
        plan.set_attr(function, "__kwdefaults__", values.kwdefaults)
        plan.set_attr(function, "__annotations__", values.annotations)
        state.values_swapped = replacement.values is not None
    if commit is None:
        plan.run()


def _planned_globals(function: FunctionType, commit: Commit) -> dict[str, object]:
    """`function`'s globals as `commit` leaves them (new defaults are evaluated there)."""
    namespace = function.__globals__
    changed = commit.planned_values(namespace)
    if not changed:
        return namespace
    planned = {**namespace, **changed}
    return {name: value for name, value in planned.items() if value is not ABSENT}


def _definition(
    numbered: NumberedSource, source: FunctionSource
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The definition `numbered` holds, only to compare (its positions are not mapped)."""
    return parse_definition(
        numbered,
        shape=source.shape,
        filename=source.filename,
        target=source.shape.name,
        positions=False,
    )


def _edited(
    original: NumberedSource, source: FunctionSource, layers: Sequence[EditLayer]
) -> NumberedSource:
    current = original
    for layer in layers:
        context = _context(source, layer)
        current = edit_numbered(current, layer.patch.edits, context=context)
        current = insert_preamble(current, layer.patch.preamble, context=context)
    return current


def _refuse_first_decorator_change(
    source: FunctionSource,
    layers: Sequence[EditLayer],
    original_def: ast.FunctionDef | ast.AsyncFunctionDef,
) -> None:
    """Raise naming the first layer whose edits change the decorators (file:line, PR)."""
    for count in range(1, len(layers) + 1):
        try:
            edited_def = _definition(apply_layers(source, layers[:count]), source)
        except PatchApplicationError:
            continue
        refuse_decorator_change(original_def, edited_def, label=_label(source, layers[count - 1]))


def _label(source: FunctionSource, layer: EditLayer) -> str:
    where = (
        f"{layer.yaml_path}:{layer.patch.line}" if layer.yaml_path else f"line {layer.patch.line}"
    )
    return f"{where}: {layer.name}: {layer.patch.target} ({source.filename}:{source.first_line})"


def _scope(
    source: FunctionSource,
    function: FunctionType | None,
    *,
    label: str,
    evaluate: bool,
    namespace: dict[str, object] | None,
) -> ExpressionScope:
    if function is not None and evaluate:
        return GlobalsScope(namespace=namespace or function.__globals__, label=label)
    if function is not None:
        return ModuleNamesScope(names=frozenset(function.__globals__), label=label)
    return ModuleNamesScope(names=source.module_names, label=label)


def _context(source: FunctionSource, layer: EditLayer) -> EditContext:
    return EditContext(
        target=layer.patch.target, filename=source.filename, yaml_path=layer.yaml_path
    )
