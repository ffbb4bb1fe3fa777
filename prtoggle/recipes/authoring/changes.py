"""What comparing a module's two sides gives: candidates to patch, names entries, listed changes."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from prtoggle.recipes.authoring.statements import Body, Statement, import_text


@dataclass(frozen=True)
class PatchCandidate:
    """A function on both sides whose body a code swap reverts: its lines post-fix and
    pre-fix (under the post-fix decorators), and the post-fix line of its first change."""

    qualname: str
    new: tuple[str, ...]
    old: tuple[str, ...]
    line: int
    fallback: str | None
    """The pre-fix def to `define` when no edits can be drafted (None: no sound define)."""


@dataclass(frozen=True)
class Listed:
    """A change that stays as the fix made it: post-fix line, its stripped code, reason."""

    line: int
    code: str | None
    reason: str


@dataclass
class ScopeNames:
    """One scope's `names` entry being drafted: pre-fix statements to run, names to delete."""

    scope: str
    line: int
    define: dict[int, tuple[Statement, list[ast.alias] | None]] = field(default_factory=dict)
    remove: list[str] = field(default_factory=list)
    body: Body | None = None
    values: dict[int, str] = field(default_factory=dict)
    """Statements written for the revert, by pre-fix line: `__doc__ = '...'` (a docstring)."""

    def define_text(self) -> str:
        """The pre-fix statements, in their order; an import reduced to the names it binds
        that changed, as the module wrote it. Dedented, unless that would change a
        multi-line string in them (a method's docstring): then as the file indents them."""
        assert self.body is not None or not self.define
        statements = [statement for statement, _ in self.define.values()]
        keep = self.body is not None and any(self.body.dedent_changes(s) for s in statements)
        indent = self.body.indent(statements[0]) if keep and self.body else ""
        parts = []
        for first in sorted({*self.define, *self.values}):
            if first in self.values:
                parts.append(indent + self.values[first])
                continue
            statement, aliases = self.define[first]
            node = statement.node
            whole = aliases is None or len(aliases) == len(getattr(node, "names", ()))
            if not whole and isinstance(node, ast.Import | ast.ImportFrom) and aliases:
                parts.append(indent + import_text(node, aliases))
            elif self.body is not None:
                parts.append(self.body.text(statement, dedent=not keep))
        return "".join(parts)


@dataclass
class ModuleChanges:
    """Everything a module's comparison gives."""

    patches: list[PatchCandidate] = field(default_factory=list)
    names: dict[str, ScopeNames] = field(default_factory=dict)
    listed: list[Listed] = field(default_factory=list)
    inert: list[Listed] = field(default_factory=list)


@dataclass(frozen=True)
class Scope:
    """Where a comparison is: dotted scope, qualname prefix, whether `names` may act."""

    name: str
    prefix: str
    names_ok: bool
    fields: bool
    label: str

    def member(self, node: ast.ClassDef, *, fields: bool) -> Scope:
        """The scope of class `node`'s body, `node` a class of this scope."""
        qualname = f"{self.prefix}{node.name}"
        return Scope(
            f"{self.name}.{node.name}",
            f"{qualname}.",
            names_ok=self.names_ok and not self.prefix,
            fields=fields,
            label=f"a field of {qualname}" if fields else f"class body of {qualname}",
        )
