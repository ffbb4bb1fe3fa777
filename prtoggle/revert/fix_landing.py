"""One collection's fix in force: its names and code swaps landed as modules get ready, undone.

A fix lands piece by piece, as the modules of its `names` scopes and patch targets finish
importing: each step plans its ready name changes, then its ready code swaps, on one
prtoggle.patching.commit.Commit (the caller then runs the global check over the whole PR
on the program the commit leaves, and lands it in one step). Undoing plans the swaps,
then the name changes, last landed first, back to the identical objects. Used under the
revert lock.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import TYPE_CHECKING

from prtoggle.errors import PatchApplicationError
from prtoggle.recipes.registry import Recipe
from prtoggle.recipes.versions import require_installed_in_range
from prtoggle.revert import module_readiness

if TYPE_CHECKING:  # imported where first needed: a start-up with everything pending skips them
    from prtoggle.patching.commit import Commit
    from prtoggle.patching.module_scope import ImportChange
    from prtoggle.patching.names import AppliedNames
    from prtoggle.patching.swap import CodeSwapper

OnWait = Callable[[str], None]
"""Called with a module that another import is executing now, so the landing retries."""


@functools.cache
def swapper() -> CodeSwapper:
    """The one record of swapped functions, shared by reverts and the source_patcher API.

    Made at first use, under the revert lock: a process whose targets all wait for their
    module's import never loads the code swapper.
    """
    from prtoggle.patching.swap import CodeSwapper

    return CodeSwapper()


@dataclass
class ActiveRecipe:
    """One collection's recipe of a PR in force: what landed, and what waits for which module."""

    recipe: Recipe
    patched: list[tuple[str, FunctionType]] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # target -> module it waits for
    names_applied: list[tuple[int, AppliedNames]] = field(default_factory=list)
    names_pending: dict[int, str] = field(default_factory=dict)  # entry -> module waited for
    said: set[str] = field(default_factory=set)  # what held_copies said, once each
    _imports: dict[str, ImportChange] | None = None
    _named_modules: set[int] = field(default_factory=set)
    """Modules (ids) other_names looked at already: what it says of one holds for the
    landing (a module object reloaded is another)."""
    _naming: list[ModuleType] = field(default_factory=list)
    """Modules changed since other_names was last asked (it looks at them all at once)."""
    _replaced: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    """(scope, objects its names replace) planned since held copies were last looked for."""

    def import_changes(self) -> dict[str, ImportChange]:
        """Per scope, the import names this fix's names add and remove (read once)."""
        if self._imports is None:
            self._imports = _import_changes(self.recipe)
        return self._imports

    def land_ready(
        self, *, finished: str | None, initial: bool, on_wait: OnWait, commit: Commit
    ) -> None:
        """Plan on `commit` every name change, then every target, whose module is complete
        now (the code compiled as the pre-fix module compiles it: its imports as the fix's
        names leave them). The record follows at once; aborting `commit` puts it back."""
        from prtoggle.patching.copies import one_scan
        from prtoggle.patching.module_scope import imports_changed

        commit.on_abort(self._checkpoint())
        entries = range(len(self.recipe.names)) if initial else list(self.names_pending)
        with imports_changed(self.import_changes()), one_scan():
            for index in entries:
                self._names_or_wait(index, finished=finished, on_wait=on_wait, commit=commit)
            targets = [p.target for p in self.recipe.patches] if initial else list(self.pending)
            for target in targets:
                self.patch_or_wait(target, finished=finished, on_wait=on_wait, commit=commit)
        self._say_held_copies()

    def patch_or_wait(
        self, target: str, *, finished: str | None, on_wait: OnWait, commit: Commit
    ) -> None:
        """Patch `target` if its module has finished importing, else record it as pending."""
        waiting_for = module_readiness.pending_module(target, finished=finished)
        if waiting_for is not None:
            self.pending[target] = waiting_for
            on_wait(waiting_for)
            return
        from prtoggle.patching.targets import PendingTarget, resolve_loaded

        resolved = resolve_loaded(target)
        if isinstance(resolved, PendingTarget):
            self.pending[target] = resolved.module
            return
        require_installed_in_range(self.recipe)
        swapper().patch(resolved.function, self.recipe.edit_layer(target), commit=commit)
        self.patched.append((target, resolved.function))
        self.pending.pop(target, None)
        self._say_other_names(sys.modules.get(resolved.function.__module__))

    def check_globals(self, commit: Commit) -> None:
        """The global check, on the program `commit` leaves: every function swapped or
        defined reads only defined globals. A name this recipe removes from a module is
        never excused there (check's rule: the module after the revert lacks it)."""
        if not self.patched and not self.names_applied:
            return
        from prtoggle.patching.global_reads import PlannedCode, global_reads, refuse_unresolved

        removed: dict[str, frozenset[str]] = {}
        for change in self.recipe.names:
            removed[change.scope] = removed.get(change.scope, frozenset()) | set(change.remove)
        checked = []
        for what, function, swapped in self._landed_with_labels():
            excused = set(_names_its_module_may_bind(function))
            if swapped:  # what the fixed code read already
                excused |= global_reads(swapper().original_code(function))
            checked.append(
                PlannedCode(
                    what=what,
                    code=commit.code_of(function),
                    module=function.__module__,
                    names=commit.names_after(function.__globals__),
                    builtins=getattr(function, "__builtins__", None),
                    excused=excused - removed.get(function.__module__, frozenset()),
                )
            )
        refuse_unresolved(checked, label=f"{self.recipe.path}: PR {self.recipe.pr}")

    def _landed_with_labels(self) -> Iterator[tuple[str, FunctionType, bool]]:
        """(what the global check calls it, function, swapped?) of each function landed:
        a swapped target by its name, a defined function as `define of SCOPE` (as check)."""
        for target, function in self.patched:
            yield target, function, True
        for _, applied in self.names_applied:
            for _, function in applied.functions:
                yield f"define of {applied.scope.name}", function, False

    def undo(self, commit: Commit) -> None:
        """Plan on `commit` putting back the swaps, then the name changes, last first: the
        identical objects back."""
        commit.on_abort(self._checkpoint())
        while self.patched:
            _target, function = self.patched[-1]
            swapper().unpatch(function, self.recipe.pr, commit=commit)
            self.patched.pop()
        while self.names_applied:
            self.names_applied[-1][1].restore(commit=commit)
            self.names_applied.pop()

    def _checkpoint(self) -> Callable[[], None]:
        """A callable putting this record back as it is now (a plan that never ran)."""
        patched, names = list(self.patched), list(self.names_applied)
        pending, names_pending = dict(self.pending), dict(self.names_pending)

        def back() -> None:
            self.patched[:], self.names_applied[:] = patched, names
            self.pending.clear()
            self.pending.update(pending)
            self.names_pending.clear()
            self.names_pending.update(names_pending)
            self._named_modules.difference_update(id(module) for module in self._naming)
            self._naming.clear()  # nothing of the plan landed: nothing to say of it
            self._replaced.clear()

        return back

    def waits(self) -> Iterator[tuple[str, str]]:
        """(dotted path, module waited for) of everything pending, for the import hook."""
        yield from self.pending.items()
        for index, module in self.names_pending.items():
            yield f"{self.recipe.names[index].scope}.__names__", module

    def imported_but_pending(self) -> tuple[str, ...]:
        """Pending targets and name scopes whose module is complete all the same."""
        late = [t for t in self.pending if module_readiness.holder_is_ready(t)]
        for index in self.names_pending:
            scope = self.recipe.names[index].scope
            if module_readiness.scope_is_ready(scope):
                late.append(f"names of {scope}")
        return tuple(late)

    def reland_reloaded(self, module: str, *, on_wait: OnWait, commit: Commit) -> None:
        """`module` was re-executed: its new objects get this fix's names and swaps again."""
        from prtoggle.patching.module_scope import imports_changed

        commit.on_abort(self._checkpoint())
        with imports_changed(self.import_changes()):
            self._reland_reloaded(module, on_wait=on_wait, commit=commit)
        self._say_held_copies()

    def _reland_reloaded(self, module: str, *, on_wait: OnWait, commit: Commit) -> None:
        from prtoggle.patching.targets import PendingTarget, resolve_loaded

        relanded: set[int] = set()
        for index, applied in list(self.names_applied):
            if applied.scope.module.__name__ != module:
                continue
            prior = None
            if applied.scope.cls is None:  # the reload rebound the module's names itself
                prior = applied.forget_holder_bindings(commit)
            if index not in relanded:  # the old record keeps its copies (or old class)
                relanded.add(index)
                self._names_or_wait(
                    index, finished=module, on_wait=on_wait, commit=commit, prior=prior
                )
        for target in dict.fromkeys(
            t
            for t, _ in self.patched
            if (module_readiness.imported_holder(t) or ("",))[0] == module
        ):
            resolved = resolve_loaded(target)
            if isinstance(resolved, PendingTarget):
                raise PatchApplicationError(f"{target}: not found in {module} after the reload")
            if all(function is not resolved.function for _, function in self.patched):
                self.patch_or_wait(target, finished=module, on_wait=on_wait, commit=commit)

    def _names_or_wait(
        self,
        index: int,
        *,
        finished: str | None,
        on_wait: OnWait,
        commit: Commit,
        prior: Mapping[str, object] | None = None,
    ) -> None:
        change = self.recipe.names[index]
        waiting_for = module_readiness.pending_module(
            f"{change.scope}.__names__", finished=finished
        )
        if waiting_for is not None:
            self.names_pending[index] = waiting_for
            on_wait(waiting_for)
            return
        from prtoggle.patching.name_scopes import resolve_scope
        from prtoggle.patching.names import apply_names
        from prtoggle.patching.targets import PendingTarget

        scope = resolve_scope(change.scope)
        if isinstance(scope, PendingTarget):
            self.names_pending[index] = scope.module
            return
        require_installed_in_range(self.recipe)
        applied = apply_names(
            scope,
            define=change.define,
            remove=change.remove,
            label=f"{self.recipe.path}:{change.line}: PR {self.recipe.pr}",
            filename=str(self.recipe.path),
            first_line=change.define_line or change.line,
            commit=commit,
            prior=prior,
        )
        self.names_applied.append((index, applied))
        self.names_pending.pop(index, None)
        replaced = {  # what the change replaces or removes (it lands when `commit` runs)
            b.name: b.previous
            for b in applied.bindings
            if b.holder is scope.holder and b.landed is not b.previous
        }
        self._say_other_names(scope.module)
        if replaced:
            self._replaced.append((change.scope, replaced))

    def _say_other_names(self, module: object) -> None:
        """Say, once, that `module` is imported under other names too (held_copies.py),
        with the others changed in this landing (_say_held_copies)."""
        if isinstance(module, ModuleType) and id(module) not in self._named_modules:
            self._named_modules.add(id(module))
            self._naming.append(module)

    def _say_held_copies(self) -> None:
        """Say, once each, which modules changed are imported under other names too, and
        where loaded modules hold objects the planned names replace: one look over
        sys.modules, and over the package, for everything planned since the last
        (held_copies.py)."""
        from prtoggle.revert.held_copies import held_copies, other_names

        naming, self._naming = self._naming, []
        if naming:
            self._say(other_names(naming))
        changes, self._replaced = self._replaced, []
        if changes:
            self._say(held_copies(changes))

    def _say(self, notes: list[str]) -> None:
        from prtoggle.revert.held_copies import say_unreached

        fresh = [note for note in notes if note not in self.said]
        self.said.update(fresh)
        say_unreached(fresh, pr=self.recipe.pr)


def _import_changes(recipe: Recipe) -> dict[str, ImportChange]:
    """Per scope of `fix`'s names: the names its `define` imports, and those it removes."""
    from prtoggle.patching.define_code import parse_define

    changes: dict[str, ImportChange] = {}
    for change in recipe.names:
        added = frozenset(
            (alias.asname or alias.name).split(".")[0]
            for node in (parse_define(change.define).body if change.define.strip() else [])
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        )
        old_added, old_removed = changes.get(change.scope, (frozenset(), frozenset()))
        changes[change.scope] = (old_added | added, old_removed | frozenset(change.remove))
    return changes


def _names_its_module_may_bind(function: FunctionType) -> frozenset[str]:
    """Names the source of `function`'s module binds at its top level, under a condition
    too (`if is_flashinfer_available(): import flashinfer`): absent here, they are the
    module's own condition, not the revert's doing, as `check` reads the source."""
    from prtoggle.patching.module_scope import module_scope

    filename = getattr(sys.modules.get(function.__module__), "__file__", None)
    found = module_scope(filename) if filename else None
    return frozenset() if found is None or found.bound is None else found.bound
