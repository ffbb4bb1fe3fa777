"""Compare a module's pre-fix and post-fix bodies: what to patch, define, remove, or list."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from prtoggle.patching.lines import split_lines
from prtoggle.recipes.authoring.changes import (
    Listed,
    ModuleChanges,
    PatchCandidate,
    Scope,
    ScopeNames,
)
from prtoggle.recipes.authoring.decorators import droppable, kernel_object, reapplied
from prtoggle.recipes.authoring.dependents import follow_load_time_reads
from prtoggle.recipes.authoring.lines import LineMap
from prtoggle.recipes.authoring.statements import (
    CLASS,
    DEF,
    IMPORT,
    Binding,
    Body,
    Statement,
    bound_names,
    header_key,
    is_type_checking_block,
    made_from_body,
    node_key,
    read_body,
)
from prtoggle.recipes.authoring.whole_class import whole_class_blocker, whole_class_reason

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def compare_module(pre: str, post: str, *, module: str, lines: LineMap) -> ModuleChanges:
    """The changes of module `module` from pre-fix text `pre` to post-fix text `post`."""
    pre_tree, post_tree = ast.parse(pre), ast.parse(post)
    out = ModuleChanges()
    scope = Scope(module, "", names_ok=True, fields=False, label="module-level code")
    pre_body = read_body(pre_tree.body, split_lines(pre))
    post_body = read_body(post_tree.body, split_lines(post))
    comparer = Comparer(out, lines, _descriptor_classes(pre_tree) | _descriptor_classes(post_tree))
    comparer.scope(pre_body, post_body, scope)
    follow_load_time_reads(comparer, pre_body, post_body, scope)
    return out


@dataclass
class Comparer:
    out: ModuleChanges
    lines: LineMap
    descriptors: frozenset[str] = frozenset()
    """The module's classes whose instances are named by their class (`__set_name__`)."""

    def scope(self, pre: Body, post: Body, scope: Scope, *, block: bool = False) -> None:
        """Compare a module's or class's bodies (`block`: an `if` block's, no docstring)."""
        if not block:
            self._docstring(pre, post, scope)
        self._others(pre, post, scope)
        order = {name: b[0].statement.first for name, b in post.bindings.items()}
        for name, bindings in pre.bindings.items():
            order.setdefault(name, self.lines.post_of_pre(bindings[0].statement.first))
        for name in sorted(order, key=lambda n: (order[n], n)):
            self._name(name, pre, post, scope)

    def _docstring(self, pre: Body, post: Body, scope: Scope) -> None:
        """A changed docstring of the scope: its pre-fix value bound as `__doc__` (what the
        docstring statement binds); a class made from its body keeps a missing one listed
        (dataclass writes its own)."""
        old, new = _docstring(pre), _docstring(post)
        before, after = (_doc_value(s) for s in (old, new))
        if before == after or not scope.names_ok or (scope.fields and None in (before, after)):
            return
        for body, statement in ((pre, old), (post, new)):
            if statement is not None:
                body.others.remove(statement)
        line = self.where(new, post, pre_side=False)[0] if new else None
        entry = self._entry(scope, line or self.lines.post_of_pre(old.first if old else 1))
        entry.values[old.first if old else 0] = f"__doc__ = {before!r}\n"

    def _others(self, pre: Body, post: Body, scope: Scope) -> None:
        """Statements that bind no simple name, aligned by their code; each difference listed
        (but an `if` whose test is the same: its body compared as in `_branch`)."""
        keys_pre = [node_key(s.node) for s in pre.others]
        keys_post = [node_key(s.node) for s in post.others]
        matcher = difflib.SequenceMatcher(None, keys_pre, keys_post, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            unpaired = list(pre.others[i1:i2])
            for statement in post.others[j1:j2]:
                twin = next((s for s in unpaired if _same_test(s.node, statement.node)), None)
                if twin is not None and self._branch(twin, statement, pre, post, scope):
                    unpaired.remove(twin)
                    continue
                self._list_other(statement, post, scope, pre_side=False)
            if j1 == j2:
                for statement in unpaired:
                    self._list_other(statement, pre, scope, pre_side=True)

    def _branch(self, old: Statement, new: Statement, pre: Body, post: Body, scope: Scope) -> bool:
        """Names changed under an `if` (same test, no else) drafted as the scope's own,
        when sound: only defines and removes, of names bound nowhere else in the scope,
        with at least one remove. A remove refuses the revert where the branch did not
        run (the name is absent), so a revert that lands is the branch's pre-fix code."""
        p, q = old.node, new.node
        assert isinstance(p, ast.If) and isinstance(q, ast.If)
        if p.orelse or q.orelse or not scope.names_ok:
            return False
        trial = ModuleChanges()
        Comparer(trial, self.lines).scope(
            read_body(p.body, pre.lines), read_body(q.body, post.lines), scope, block=True
        )
        entry = trial.names.get(scope.name)
        if trial.patches or trial.listed or trial.inert or entry is None or not entry.remove:
            return False
        defined = [bound_names(statement.node) for statement, _ in entry.define.values()]
        changed = set(entry.remove).union(*defined)
        elsewhere = set(post.bindings) | set(pre.bindings)
        for other in (*pre.others, *post.others):
            if other is not old and other is not new:
                elsewhere |= bound_names(other.node)
        if changed & elsewhere:
            return False
        mine = self._entry(scope, entry.line)
        mine.body = mine.body or entry.body
        mine.define.update(entry.define)
        mine.remove.extend(entry.remove)
        return True

    def _list_other(
        self, statement: Statement, body: Body, scope: Scope, *, pre_side: bool
    ) -> None:
        line, code = self.where(statement, body, pre_side=pre_side)
        if is_type_checking_block(statement.node):
            self.out.inert.append(Listed(line, code, "type-checking-only code (never runs)"))
            return
        reason = scope.label + (" removed" if pre_side else " changed")
        self.out.listed.append(Listed(line, code, reason))

    def _name(self, name: str, pre: Body, post: Body, scope: Scope) -> None:
        old, new = pre.bindings.get(name, []), post.bindings.get(name, [])
        if [b.key for b in old] == [b.key for b in new]:
            return
        qualname = f"{scope.prefix}{name}"
        if name in pre.other_names | post.other_names:
            self._list(old, new, pre, post, f"{qualname} is also bound by other {scope.label}")
            return
        if scope.prefix and name == "__slots__":
            why = "slots are made when the class is created: a revert cannot add or drop one"
            self._list(old, new, pre, post, f"{qualname} changed ({why})")
            return
        hashed = "__hash__" in pre.bindings or "__hash__" in post.bindings
        if scope.prefix and name == "__eq__" and bool(old) != bool(new) and not hashed:
            self._list(old, new, pre, post, _implicit_hash(qualname, added=bool(new)))
        if len(old) == len(new) == 1 and old[0].kind == new[0].kind == CLASS:
            self._class(old[0], new[0], pre, post, scope)
        elif len(old) == len(new) == 1 and old[0].kind == new[0].kind == DEF:
            self._def(old[0], new[0], pre, post, scope)
        else:
            self._rebind(name, old, new, bodies=(pre, post), scope=scope)

    def _def(self, old: Binding, new: Binding, pre: Body, post: Body, scope: Scope) -> None:
        p, q = old.statement.node, new.statement.node
        assert isinstance(p, _DEFS) and isinstance(q, _DEFS)
        qualname = f"{scope.prefix}{p.name}"
        kernel = kernel_object(q.decorator_list) or kernel_object(p.decorator_list)
        if kernel is not None:
            unsound = reapplied(p.decorator_list, kernels=True) or reapplied(
                q.decorator_list, kernels=True
            )
            if scope.names_ok and unsound is None:
                self.define(scope, old, pre=pre, post=post, new=new)
                return
            why = f"{qualname} changed ({kernel}: a kernel object, not a function, no swap)"
            self._list([old], [new], pre, post, why)
            return
        same_head = type(p) is type(q) and _keys(p.decorator_list) == _keys(q.decorator_list)
        unsound = reapplied(p.decorator_list) or reapplied(q.decorator_list)
        definable = scope.names_ok and unsound is None
        if same_head and _uses_class_cell(p) == _uses_class_cell(q):
            self._patch(old, new, pre, post, qualname, fallback=definable)
            return
        if definable:
            self.define(scope, old, pre=pre, post=post, new=new)
            return
        swappable = type(p) is type(q) and _uses_class_cell(p) == _uses_class_cell(q)
        if swappable and _body_lines(old, pre) != _body_lines(new, post):
            self._patch(old, new, pre, post, qualname, fallback=False)
        why = unsound or "a nested class's member"
        what = "decorators" if not same_head else "use of super()/__class__"
        self._list([old], [new], pre, post, f"{what} of {qualname} changed ({why} not re-applied)")

    def _class(self, old: Binding, new: Binding, pre: Body, post: Body, scope: Scope) -> None:
        """A class on both sides: its members compared; when that leaves a change listed
        (its class statement, a field, other class-body code), a module-level class is
        defined back whole instead where it can run again (whole_class), and listed as a
        new class."""
        p, q = old.statement.node, new.statement.node
        assert isinstance(p, ast.ClassDef) and isinstance(q, ast.ClassDef)
        qualname = f"{scope.prefix}{q.name}"
        trial = Comparer(ModuleChanges(), self.lines, self.descriptors)
        if header_key(p) != header_key(q):
            head = Statement(q, new.statement.first, q.body[0].lineno - 1)
            line, code = self.where(head, post, pre_side=False)
            reason = f"class statement of {qualname} changed (bases, keywords or decorators)"
            trial.out.listed.append(Listed(line, code, reason))
        fields = made_from_body(p) or made_from_body(q)
        inner = scope.member(q, fields=fields)
        trial.scope(
            read_body(p.body, pre.lines, fields=fields),
            read_body(q.body, post.lines, fields=fields),
            inner,
        )
        whole = scope.names_ok and not scope.prefix and bool(trial.out.listed)
        if whole and whole_class_blocker(p, q, descriptors=self.descriptors) is None:
            self.define(scope, old, pre=pre, post=post, new=new)
            line, code = self.where(new.statement, post, pre_side=False)
            self.out.listed.append(Listed(line, code, whole_class_reason(qualname)))
            return
        self.out.patches.extend(trial.out.patches)
        self.out.names.update(trial.out.names)
        self.out.listed.extend(trial.out.listed)
        self.out.inert.extend(trial.out.inert)

    def _rebind(
        self,
        name: str,
        old: list[Binding],
        new: list[Binding],
        *,
        bodies: tuple[Body, Body],
        scope: Scope,
    ) -> None:
        pre, post = bodies
        qualname = f"{scope.prefix}{name}"
        if not scope.names_ok:
            self._list(old, new, pre, post, f"{qualname} changed (a member of a nested class)")
            return
        descriptor = self._descriptor([*old, *new]) if scope.prefix else None
        if descriptor is not None:
            why = (
                f"a {descriptor}, whose __set_name__ runs only when the class statement does: "
                "defined back, it would be named on a stand-in class"
            )
            self._list(old, new, pre, post, f"{qualname} changed ({why})")
            return
        blocking = _unsound(old, new)
        if blocking is not None:
            self._list(old, new, pre, post, f"{qualname} changed ({blocking} not re-applied)")
            return
        if old:
            self.define(scope, *old, pre=pre, post=post, new=new[0] if new else None)
            return
        entry = self._entry(scope, self._line(new, post))
        entry.remove.append(name)
        lingering = [droppable(_decorators(b)) for b in new]
        left = next((d for d in lingering if d is not None), None)
        if left is not None:
            line, code = self.where(new[0].statement, post, pre_side=False)
            reason = f"{qualname} added by the fix is removed, but {left} may have registered it"
            self.out.listed.append(Listed(line, code, reason))

    def define(
        self, scope: Scope, *old: Binding, pre: Body, post: Body, new: Binding | None
    ) -> None:
        line = self._line([new], post) if new else self.lines.post_of_pre(old[0].statement.first)
        entry = self._entry(scope, line)
        entry.body = pre
        for binding in old:
            first = binding.statement.first
            kept = entry.define.get(first)
            if binding.kind != IMPORT:
                entry.define[first] = (binding.statement, None)
                continue
            aliases = kept[1] if kept is not None and kept[1] is not None else []
            node = binding.statement.node
            assert isinstance(node, ast.Import | ast.ImportFrom)
            aliases += [a for a in node.names if (a.asname or a.name.split(".")[0]) == binding.name]
            entry.define[first] = (binding.statement, aliases)

    def _patch(
        self, old: Binding, new: Binding, pre: Body, post: Body, qualname: str, *, fallback: bool
    ) -> None:
        start, stop = new.statement.first, new.statement.last
        new_lines = tuple(post.lines[start - 1 : stop])
        p = old.statement.node
        head = new.statement.node.lineno - start
        old_lines = (*new_lines[:head], *pre.lines[p.lineno - 1 : old.statement.last])
        if new_lines == old_lines:
            return
        line = self.lines.first_added(start, stop) or self.lines.post_of_pre_span(
            old.statement.first, old.statement.last
        )
        text = pre.text(old.statement) if fallback else None
        self.out.patches.append(PatchCandidate(qualname, new_lines, old_lines, line, text))

    def _entry(self, scope: Scope, line: int) -> ScopeNames:
        entry = self.out.names.setdefault(scope.name, ScopeNames(scope.name, line))
        entry.line = min(entry.line, line)
        return entry

    def listed(self, line: int, code: str | None, reason: str) -> None:
        """List a change as not reverted: its post-fix line, that line's code, the reason."""
        self.out.listed.append(Listed(line, code, reason))

    def _descriptor(self, bindings: list[Binding]) -> str | None:
        """The module's descriptor class one of `bindings` calls for its value, if any."""
        for binding in bindings:
            value = getattr(binding.statement.node, "value", None)
            func = value.func if isinstance(value, ast.Call) else None
            if isinstance(func, ast.Name) and func.id in self.descriptors:
                return func.id
        return None

    def _list(
        self, old: list[Binding], new: list[Binding], pre: Body, post: Body, reason: str
    ) -> None:
        statement, body = (new[0].statement, post) if new else (old[0].statement, pre)
        line, code = self.where(statement, body, pre_side=not new)
        self.out.listed.append(Listed(line, code, reason))

    def _line(self, bindings: Sequence[Binding], post: Body) -> int:
        return self.where(bindings[0].statement, post, pre_side=False)[0]

    def where(self, statement: Statement, body: Body, *, pre_side: bool) -> tuple[int, str | None]:
        """The post-fix line of a statement's first change, and that line's stripped text."""
        if pre_side:
            line = self.lines.post_of_pre_span(statement.first, statement.last)
            return line, None
        line = self.lines.first_added(statement.first, statement.last) or statement.first
        code = body.lines[line - 1].strip() if line <= len(body.lines) else ""
        return line, code or None


def _implicit_hash(qualname: str, *, added: bool) -> str:
    """Why a class's `__hash__` stays when a fix adds or removes its `__eq__`."""
    owner = qualname.rsplit(".", 1)[0]
    if added:
        return (
            f"{qualname} added by the fix: {owner}.__hash__ stays None (set when the class "
            "was created with __eq__): its instances stay unhashable"
        )
    return (
        f"{qualname} removed by the fix: {owner}.__hash__ stays the inherited one (the class "
        "was created without __eq__): its instances stay hashable"
    )


def _descriptor_classes(tree: ast.Module) -> frozenset[str]:
    """The module's top-level classes that define `__set_name__`, or inherit it from one of
    them: Python names their instances when a class statement binds them."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    found = {
        name
        for name, node in classes.items()
        if any(isinstance(n, _DEFS) and n.name == "__set_name__" for n in node.body)
    }
    grew = True
    while grew:
        heirs = {
            name
            for name, node in classes.items()
            if name not in found
            and any(isinstance(b, ast.Name) and b.id in found for b in node.bases)
        }
        found |= heirs
        grew = bool(heirs)
    return frozenset(found)


def _docstring(body: Body) -> Statement | None:
    """The body's docstring statement: its first statement, a string constant."""
    firsts = [b.statement.first for bs in body.bindings.values() for b in bs]
    first = min(body.others, key=lambda s: s.first, default=None)
    if first is None or (firsts and min(firsts) < first.first):
        return None
    node = first.node
    value = node.value if isinstance(node, ast.Expr) else None
    return first if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def _doc_value(statement: Statement | None) -> str | None:
    if statement is None:
        return None
    node = statement.node
    assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    return str(node.value.value)


def _same_test(first: ast.stmt, second: ast.stmt) -> bool:
    """Two `if` statements with the same test."""
    if not isinstance(first, ast.If) or not isinstance(second, ast.If):
        return False
    if is_type_checking_block(first) or is_type_checking_block(second):
        return False
    return node_key(first.test) == node_key(second.test)


def _keys(nodes: Sequence[ast.AST]) -> list[str]:
    return [node_key(node) for node in nodes]


def _decorators(binding: Binding) -> list[ast.expr]:
    return list(getattr(binding.statement.node, "decorator_list", []))


def _unsound(old: Sequence[Binding], new: Sequence[Binding]) -> str | None:
    """The first decorator that a define of `old` would not re-apply soundly, or that a
    define over `new` would not undo."""
    for binding in old:
        found = reapplied(_decorators(binding), whole_class=binding.kind == CLASS, kernels=True)
        if found is not None:
            return found
    if old:
        for binding in new:
            found = reapplied(_decorators(binding), whole_class=binding.kind == CLASS, kernels=True)
            if found is not None:
                return found
    return None


def _uses_class_cell(node: ast.AST) -> bool:
    """Whether a def reads `__class__` (zero-argument super() does): its code has that cell."""
    for item in ast.walk(node):
        if isinstance(item, ast.Name) and item.id == "__class__":
            return True
        if isinstance(item, ast.Call) and _bare_super(item):
            return True
    return False


def _bare_super(call: ast.Call) -> bool:
    """`super()` with no arguments."""
    name = call.func.id if isinstance(call.func, ast.Name) else ""
    return name == "super" and not call.args and not call.keywords


def _body_lines(binding: Binding, body: Body) -> list[str]:
    node = binding.statement.node
    return list(body.lines[node.lineno - 1 : binding.statement.last])
