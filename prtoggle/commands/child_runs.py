"""Which fixes `repro` and `bench` run (those having a scenario, a benchmark) and their runner."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prtoggle.commands.selections import load_default_registry
from prtoggle.errors import CommandUsageError
from prtoggle.recipes.prs import join_prs
from prtoggle.recipes.registry import Recipe, Registry
from prtoggle.runners.requirements import require_installed
from prtoggle.runners.warm_client import HEAVY_MODULES, CommandRunner, command_runner, warm_enabled


def recipes_to_run(
    command: str,
    *,
    prs: Sequence[int],
    run_all: bool,
    key: str,
    what: str,
    collection: str | None = None,
) -> list[Recipe]:
    """The fixes PRS or --all name that have `key` (`repro`, `bench`), checked runnable here.

    Before any child starts: the `detect` extra and the modules to run are installed (each
    refusal: one `error:` line, exit 2).
    """
    registry = load_default_registry(collection=collection)
    recipes = select_recipes_having(registry, prs, run_all=run_all, key=key, what=what)
    require_installed(command, detect=True, runs=[str(getattr(recipe, key)) for recipe in recipes])
    return recipes


@contextmanager
def recipe_runner(recipes: Sequence[Recipe], *, cold: bool) -> Iterator[CommandRunner]:
    """What runs the fixes' children: a warm worker preloading their components (unless
    `--cold` or PRTOGGLE_WARM=0 says otherwise), closed on exit."""
    preload = [*HEAVY_MODULES, *(recipe.component for recipe in recipes if recipe.component)]
    with command_runner(warm=warm_enabled(cold=cold), preload=preload) as runner:
        yield runner


def select_recipes_having(
    registry: Registry, prs: Sequence[int], *, run_all: bool, key: str, what: str
) -> list[Recipe]:
    """The fixes named by PRS or --all that set YAML key `key` (`what`).

    A PR number names its fixes in every collection (narrow `registry` with
    `--collection`); those without `key` are left out, and a PR none of whose fixes has
    it is an error.
    """
    having = [recipe for recipe in registry.recipes if getattr(recipe, key)]
    choices = join_prs(dict.fromkeys(recipe.pr for recipe in having))
    if run_all and prs:
        raise CommandUsageError("give PR numbers or --all, not both")
    if run_all:
        if not having:
            raise CommandUsageError(f"no registered fix has a {what} (`{key}:` in its YAML)")
        return having
    if not prs:
        raise CommandUsageError(f"expected PR numbers or --all; fixes with a {what}: {choices}")
    recipes = []
    for pr in dict.fromkeys(prs):
        found = registry.find(pr)
        kept = [recipe for recipe in found if getattr(recipe, key)]
        if not kept:
            files = ", ".join(str(recipe.path) for recipe in found)
            raise CommandUsageError(
                f"PR {pr} has no {what} (no `{key}:` in {files}); fixes with a {what}: {choices}"
            )
        recipes.extend(kept)
    return recipes


def split_selection(registry: Registry, prs: Sequence[int]) -> tuple[list[Recipe], list[Recipe]]:
    """The fixes PRS name that have a scenario, and those that have guards (one may be both).

    A PR none of whose recipes has either is a CommandUsageError saying how to add guards.
    """
    if not prs:
        raise CommandUsageError("expected PR numbers or --all")
    scenarios: list[Recipe] = []
    guarded: list[Recipe] = []
    for pr in dict.fromkeys(prs):
        found = registry.find(pr)
        if not any(recipe.repro or recipe.guards for recipe in found):
            files = ", ".join(str(recipe.path) for recipe in found)
            raise CommandUsageError(
                f"PR {pr} ({files}) has no guards and no repro scenario; record the fix's "
                "tests with `prtoggle new --from-git REV` (it writes `guards:`) or add "
                "`guards: [path/to/test_x.py::test_y]` to the recipe"
            )
        scenarios.extend(recipe for recipe in found if recipe.repro)
        guarded.extend(recipe for recipe in found if recipe.guards)
    return scenarios, guarded


def require_guard_files(recipes: Sequence[Recipe], *, tests: Path) -> None:
    """Every guard's test file exists under `tests` (else one CommandUsageError naming it)."""
    for recipe in recipes:
        for guard in recipe.guards:
            file = guard.split("::", 1)[0]
            if not (tests / file).is_file():
                raise CommandUsageError(
                    f"guard {file} of {recipe.label} ({recipe.path}) does not exist under "
                    f"{tests}; expected the fix's tests there (--tests DIR: a checkout at "
                    "the fix's commit)"
                )
