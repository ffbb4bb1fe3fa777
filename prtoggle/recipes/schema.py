"""One recipe file: read within limits, parsed with the safe YAML loader, validated to a Recipe."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prtoggle.errors import RegistryError
from prtoggle.patching.types import Patch
from prtoggle.recipes.names_schema import (
    NameChange,
    NotReverted,
    validate_guards,
    validate_names,
    validate_not_reverted,
)
from prtoggle.recipes.patch_schema import (
    DOTTED,
    expect_mapping,
    key_at,
    required_str,
    validate_patches,
)
from prtoggle.recipes.versions import APPLIES_TO_EXAMPLE, VersionRange, parse_version_range
from prtoggle.recipes.yaml_reading import (
    MAX_RECIPE_BYTES,
    LineDict,
    read_recipe_text,
    short,
)

if TYPE_CHECKING:
    from prtoggle.patching.swap import EditLayer

__all__ = [
    "MAX_PR",
    "MAX_RECIPE_BYTES",
    "MIN_PR",
    "SYMPTOMS",
    "NameChange",
    "NotReverted",
    "Recipe",
    "load_recipe",
]

MIN_PR, MAX_PR = 1, 10_000_000
"""The PR numbers a recipe may carry (inclusive)."""
SYMPTOMS = (
    "nan",
    "illegal-memory-access",
    "out-of-bounds",
    "memory-corruption",
    "stale-read",
    "wrong-output",
)
DESCRIPTION_KEYS = ("title", "url", "merged", "component", "symptom", "expect", "repro", "bench")
"""The optional keys that describe a fix (what `list --json` and `show` print of each)."""
_FIX_REQUIRED = ("patches",)
_FIX_OPTIONAL = (
    "pr",
    *DESCRIPTION_KEYS,
    "verified_on",
    "applies_to",
    "names",
    "not_reverted",
    "guards",
    "added_modules",
)
_MODULE_KEY_EXAMPLES = {
    "repro": "fixes.scenarios.trtllm_draft_decode_capture",
    "bench": "fixes.benchmarks.draft_decode_capture_cost",
    "component": "fixes.attention.trtllm_mha_backend",
}
_CAPTURE_NAME = re.compile(r"capture|^__init__$|^init_cuda_graph_state")


@dataclass(frozen=True)
class Recipe:
    """One registered bug fix of one collection, and the patches that revert it."""

    pr: int
    title: str
    patches: tuple[Patch, ...]
    path: Path
    collection: str
    url: str | None = None
    merged: datetime.date | None = None
    component: str | None = None
    symptom: str | None = None
    expect: str | None = None
    repro: str | None = None
    bench: str | None = None
    verified_on: tuple[str, ...] = ()
    applies_to: VersionRange | None = None
    names: tuple[NameChange, ...] = ()
    not_reverted: tuple[NotReverted, ...] = ()
    guards: tuple[str, ...] = ()
    """The tests the fix added or changed: pytest node ids or test files, repository-relative."""
    added_modules: tuple[str, ...] = ()
    """Modules (and packages) the fix added: reverted, they cannot be imported."""

    @property
    def partial(self) -> bool:
        """Whether some change of the fix stays as the fix made it (`not_reverted`)."""
        return bool(self.not_reverted)

    @property
    def top_levels(self) -> tuple[str, ...]:
        """The top-level packages of every patch target and names scope, sorted."""
        dotted = [p.target for p in self.patches] + [n.scope for n in self.names]
        return tuple(sorted({name.split(".", 1)[0] for name in dotted}))

    @property
    def acts_at_capture(self) -> bool:
        """Whether a target runs at CUDA-graph capture or state init (revert before capture)."""
        return any(_CAPTURE_NAME.search(p.target.rsplit(".", 1)[-1]) for p in self.patches)

    @property
    def label(self) -> str:
        """`collection/PR`, how messages name one fix."""
        return f"{self.collection}/{self.pr}"

    def edit_layer(self, target: str) -> EditLayer:
        """This recipe's edits of `target` as one layer of the code swapper (the one builder)."""
        from prtoggle.patching.swap import EditLayer  # the swapper: only where code is swapped

        patch = next((patch for patch in self.patches if patch.target == target), None)
        if patch is None:
            raise RegistryError(f"{self.label} ({self.path}) has no patch of {target}")
        return EditLayer(pr=self.pr, patch=patch, yaml_path=str(self.path))


def load_recipe(path: Path, *, collection: str | None = None) -> Recipe:
    """Parse and validate one recipe file; `collection` defaults to its directory's name.

    Safe YAML loader only. Any file that cannot be read as a recipe (over
    MAX_RECIPE_BYTES, not UTF-8, nested too deeply, malformed) is a RegistryError
    whose one-line message names the file.
    """
    document = _parsed(read_recipe_text(path), name=str(path))
    return _fix_from_mapping(document, path, collection or path.parent.name)


def load_recipe_text(text: str, *, path: Path, collection: str) -> Recipe:
    """Parse and validate a recipe held as text (sglang's registered ones); `path` names it."""
    return _fix_from_mapping(_parsed(text, name=str(path)), path, collection)


def load_patches(text: str, *, source: str = "patch config") -> tuple[Patch, ...]:
    """The validated `patches:` of recipe YAML text (sglang's block, or a whole recipe).

    The one validator of the format: the same keys, rules and RegistryError messages as
    load_recipe, each naming `source` and the line; the other keys are metadata, ignored.
    """
    path = Path(source)
    document = _parsed(text, name=source)
    mapping = expect_mapping(
        document, path, line=1, what=source, required=_FIX_REQUIRED, optional=_FIX_OPTIONAL
    )
    return validate_patches(mapping, path)


def _parsed(text: str, *, name: str) -> object:
    """yaml_loader.parse_yaml: PyYAML is imported only where a recipe's text is parsed."""
    from prtoggle.recipes.yaml_loader import parse_yaml

    return parse_yaml(text, name=name)


def _fix_from_mapping(document: object, path: Path, collection: str) -> Recipe:
    mapping = _fix_mapping(document, path)
    fields = {
        key: _optional_str(mapping, key, path)
        for key in ("url", "component", "expect", "repro", "bench")
    }
    _check_formats(mapping, path, fields)
    title = _optional_str(mapping, "title", path)
    return Recipe(
        pr=_pr(mapping, path),
        title=title or "",
        patches=validate_patches(mapping, path) if "patches" in mapping else (),
        path=path,
        collection=collection,
        merged=_merged(mapping, path),
        symptom=_symptom(mapping, path),
        verified_on=_verified_on(mapping, path),
        applies_to=_applies_to(mapping, path),
        names=validate_names(mapping, path),
        not_reverted=validate_not_reverted(mapping, path),
        guards=validate_guards(mapping, path),
        added_modules=_added_modules(mapping, path),
        **fields,
    )


def _fix_mapping(document: object, path: Path) -> LineDict:
    """The recipe's top mapping: `patches` may be left out where `names` reverts something."""
    names_only = isinstance(document, LineDict) and (
        "names" in document or "added_modules" in document
    )
    return expect_mapping(
        document,
        path,
        line=1,
        what="fix file",
        required=() if names_only else _FIX_REQUIRED,
        optional=(*_FIX_OPTIONAL, *(_FIX_REQUIRED if names_only else ())),
    )


def _pr(mapping: LineDict, path: Path) -> int:
    """`pr:` when given, else the number the file is named after (sglang's files have none)."""
    if "pr" not in mapping:
        if not _is_number(path.stem):
            raise RegistryError(
                f"{path}:1: fix file has no 'pr' key and its name is not <PR>.yaml; add "
                "`pr: <number>` or name the file after the PR number"
            )
        pr, where = int(path.stem), f"{path}:1: file name {path.name}"
    else:
        pr, where = mapping["pr"], f"{key_at(path, mapping, 'pr')}: 'pr'"
        if not isinstance(pr, int) or isinstance(pr, bool):
            raise RegistryError(f"{where} must be a positive integer, got {short(pr)}")
    if not MIN_PR <= pr <= MAX_PR:
        raise RegistryError(
            f"{where} gives PR number {pr}, outside the supported range {MIN_PR}..{MAX_PR}"
        )
    if "pr" in mapping and _is_number(path.stem) and int(path.stem) != pr:
        raise RegistryError(
            f"{where} is {pr} but the file is named {path.name}; name a recipe file after "
            "its PR or give it another name"
        )
    return pr


def _check_formats(mapping: LineDict, path: Path, fields: Mapping[str, str | None]) -> None:
    expect = fields["expect"]
    if expect is not None:
        try:
            re.compile(expect)
        except re.error as exc:
            raise RegistryError(
                f"{key_at(path, mapping, 'expect')}: 'expect' {short(expect)} is not a "
                f"valid regular expression: {exc}"
            ) from exc
    for key, example in _MODULE_KEY_EXAMPLES.items():
        value = fields[key]
        if value is not None and not DOTTED.fullmatch(value):
            raise RegistryError(
                f"{key_at(path, mapping, key)}: {key!r} must be a dotted module "
                f"name like {example}, got {short(value)}"
            )


def _optional_str(mapping: LineDict, key: str, path: Path) -> str | None:
    return required_str(mapping, key, path) if key in mapping else None


def _merged(mapping: LineDict, path: Path) -> datetime.date | None:
    if "merged" not in mapping:
        return None
    value = mapping["merged"]
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise RegistryError(
        f"{key_at(path, mapping, 'merged')}: 'merged' must be a date YYYY-MM-DD, got {short(value)}"
    )


def _verified_on(mapping: LineDict, path: Path) -> tuple[str, ...]:
    """`verified_on`: the versions of the target package the recipe was checked against."""
    value = mapping.get("verified_on", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RegistryError(
            f"{key_at(path, mapping, 'verified_on')}: 'verified_on' must be a list of version "
            f"strings like ['0.5.23'], got {short(value)}"
        )
    return tuple(value)


def _applies_to(mapping: LineDict, path: Path) -> VersionRange | None:
    """`applies_to`: the distribution and versions the recipe is for; verified_on inside it."""
    if "applies_to" not in mapping:
        return None
    text, where = mapping["applies_to"], key_at(path, mapping, "applies_to")
    if not isinstance(text, str):
        raise RegistryError(
            f"{where}: 'applies_to' must be a string like {APPLIES_TO_EXAMPLE!r}, got {short(text)}"
        )
    try:
        found = parse_version_range(text)
    except ValueError as exc:
        raise RegistryError(f"{where}: 'applies_to' {short(text)} {exc}") from exc
    outside = [v for v in mapping.get("verified_on", []) if not found.contains(v)]
    if outside:
        raise RegistryError(
            f"{key_at(path, mapping, 'verified_on')}: 'verified_on' lists {', '.join(outside)}, "
            f"outside applies_to {found.text}; a recipe is verified only on versions it covers"
        )
    return found


def _symptom(mapping: LineDict, path: Path) -> str | None:
    value = _optional_str(mapping, "symptom", path)
    if value is not None and value not in SYMPTOMS:
        raise RegistryError(
            f"{key_at(path, mapping, 'symptom')}: 'symptom' {short(value)} is not one "
            f"of: {', '.join(SYMPTOMS)}"
        )
    return value


def _added_modules(mapping: LineDict, path: Path) -> tuple[str, ...]:
    """`added_modules`: dotted names of the modules and packages the fix added."""
    value = mapping.get("added_modules", [])
    if not isinstance(value, list) or not all(
        isinstance(v, str) and DOTTED.fullmatch(v) for v in value
    ):
        raise RegistryError(
            f"{key_at(path, mapping, 'added_modules')}: 'added_modules' must be a list of "
            f"dotted module names like ['sglang.srt.new_helpers'], got {short(value)}"
        )
    twice = next((name for name in value if value.count(name) > 1), None)
    if twice is not None:
        raise RegistryError(
            f"{key_at(path, mapping, 'added_modules')}: 'added_modules' lists {twice!r} twice"
        )
    return tuple(value)


def _is_number(text: str) -> bool:
    """ASCII digits only: `str.isdigit` also accepts '²' and Arabic-Indic digits."""
    return text.isascii() and text.isdigit()
