"""The import hook's index of pending targets: module prefixes with their PRs; unnotified ones."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prtoggle.patching.import_hook import notifies_when_loaded


@dataclass
class PendingIndex:
    """What the import hook looks at; each field replaced whole, so readers need no lock.

    `modules`: every module prefix of a pending target's dotted path (`a`, `a.b` and
    `a.b.C` for `a.b.C.f`), with the PRs that have a pending target under it. Only these
    imports get their loader wrapped and are acted on when they finish.
    `unnotified`: modules pending targets wait for that are in sys.modules without
    executing through the hook (started before the revert was asked for, or finished
    inside prtoggle's own work): no call comes when they finish, so every import checks
    them until then.
    """

    modules: Mapping[str, frozenset[int]] = field(default_factory=dict)
    unnotified: frozenset[str] = frozenset()

    def rebuild(self, pending: Iterable[tuple[int, str, str]]) -> None:
        """Index every pending target, given as (PR, target, module it waits for)."""
        modules: dict[str, set[int]] = {}
        unnotified: set[str] = set()
        for pr, target, waiting_for in pending:
            parts = target.split(".")
            for index in range(1, len(parts)):
                modules.setdefault(".".join(parts[:index]), set()).add(pr)
            module = sys.modules.get(waiting_for)
            if module is not None and not notifies_when_loaded(module):
                unnotified.add(waiting_for)
        self.modules = {name: frozenset(prs) for name, prs in modules.items()}
        self.unnotified = frozenset(unnotified)
