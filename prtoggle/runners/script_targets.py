"""Targets that live in the script a command runs as `__main__`, where no revert can land."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prtoggle.recipes.registry import Recipe

_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")


@dataclass(frozen=True)
class ScriptTarget:
    """A target of `recipe` that names the module COMMAND runs as `__main__`."""

    recipe: Recipe
    target: str
    module: str
    main: str

    @property
    def reason(self) -> str:
        runs = f"python {self.main}" if self.main.startswith("-m ") else self.main
        return (
            f"{self.recipe.label} targets {self.target}, but the command runs {runs} as "
            f"__main__, never importing it as {self.module}: prtoggle patches a module when "
            "it is imported, so this revert would never land; move the function into a "
            "module the script imports, or run that module's code through an import"
        )


def script_targets(recipes: Sequence[Recipe], command: Sequence[str]) -> list[ScriptTarget]:
    """The targets of `fixes` inside the script or `-m` module COMMAND runs as `__main__`.

    COMMAND is a Python command (`python app.py`, `python -u -m app`); for any other
    command the list is empty. A script `DIR/app.py` is module `app` for the child (its
    directory comes first on its path); `-m pkg.app` is module `pkg.app`.
    """
    main = _main_of(command)
    if main is None:
        return []
    found = []
    for fix in recipes:
        for patch in fix.patches:
            parts = patch.target.split(".")
            for index in range(1, len(parts)):
                module = ".".join(parts[:index])
                if _is_main(module, main):
                    found.append(
                        ScriptTarget(recipe=fix, target=patch.target, module=module, main=main)
                    )
                    break
    return found


def _main_of(command: Sequence[str]) -> str | None:
    """`-m NAME`, or the resolved path of the `.py` script, of a Python command."""
    if not command or not os.path.basename(command[0]).startswith("python"):
        return None
    args = iter(command[1:])
    for arg in args:
        if arg == "-m":
            return f"-m {next(args, '')}"
        if arg == "-c":
            return None
        if arg in _OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):
            return str(Path(arg).resolve()) if arg.endswith(".py") else None
    return None


def _is_main(module: str, main: str) -> bool:
    if main.startswith("-m "):
        return module == main[3:]
    script = Path(main)
    return script.parent.joinpath(*module.split(".")).with_suffix(".py") == script
