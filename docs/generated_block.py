"""A generated block of a docs page: the text between two markers, rewritten or checked.

Used by `docs/module_map.py` and `docs/cli_commands.py`: `python docs/<script>.py` rewrites
the block in place; `--check` exits 1 when the committed block differs from what the code
generates now.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GeneratedBlock:
    """Where a block lives: its page, its two marker lines and the script that makes it."""

    page: Path
    begin: str
    end: str
    script: str

    def render(self, page: str, generated: str) -> str:
        """`page` with the text between the markers replaced by `generated`."""
        if self.begin not in page or self.end not in page:
            markers = f"{self.begin!r} and {self.end!r}"
            raise SystemExit(f"{self.page}: the markers {markers} are missing")
        head, rest = page.split(self.begin, 1)
        _, tail = rest.split(self.end, 1)
        return f"{head}{self.begin}\n{generated}\n{self.end}{tail}"

    def main(self, argv: list[str], generated: str) -> int:
        """Rewrite the page, or with --check say whether it is current (exit 1 when not)."""
        page = self.page.read_text()
        updated = self.render(page, generated)
        if "--check" in argv:
            if updated != page:
                sys.stderr.write(f"{self.page} is out of date: run `python docs/{self.script}`\n")
                return 1
            return 0
        self.page.write_text(updated)
        return 0
