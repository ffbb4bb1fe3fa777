"""One recipe file: read within limits, parsed with the safe YAML loader, validated to a Recipe."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prtoggle.errors import RegistryError
from prtoggle.patching.swap import EditLayer
from prtoggle.patching.types import EDIT_KINDS, Edit, EditKind, Patch
from prtoggle.recipes.versions import APPLIES_TO_EXAMPLE, VersionRange, parse_version_range
from prtoggle.recipes.yaml_reading import (
    MAX_RECIPE_BYTES,
    LineDict,
    LineList,
    parse_yaml,
    read_recipe_text,
    short,
)

__all__ = ["MAX_PR", "MAX_RECIPE_BYTES", "MIN_PR", "SYMPTOMS", "Recipe", "load_recipe"]

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
_FIX_REQUIRED = ("patches",)
_FIX_OPTIONAL = (
    "pr",
    "title",
    "url",
    "merged",
    "component",
    "symptom",
    "expect",
    "repro",
    "bench",
    "verified_on",
    "applies_to",
)
_PATCH_REQUIRED = ("target", "edits")
_PATCH_OPTIONAL = ("preamble",)
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
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
    document = parse_yaml(read_recipe_text(path), name=str(path))
    return _fix_from_mapping(document, path, collection or path.parent.name)


def load_recipe_text(text: str, *, path: Path, collection: str) -> Recipe:
    """Parse and validate a recipe held as text (sglang's registered ones); `path` names it."""
    return _fix_from_mapping(parse_yaml(text, name=str(path)), path, collection)


def load_patches(text: str, *, source: str = "patch config") -> tuple[Patch, ...]:
    """The validated `patches:` of recipe YAML text (sglang's block, or a whole recipe).

    The one validator of the format: the same keys, rules and RegistryError messages as
    load_recipe, each naming `source` and the line; the other keys are metadata, ignored.
    """
    path = Path(source)
    document = parse_yaml(text, name=source)
    mapping = _expect_mapping(
        document, path, line=1, what=source, required=_FIX_REQUIRED, optional=_FIX_OPTIONAL
    )
    return _patches(mapping, path)


def one_edit_kind(texts: Mapping[EditKind, str], *, where: str) -> tuple[EditKind, str]:
    """sglang's rule: at most one kind has non-blank text; none (or only empty ones) deletes."""
    active = [kind for kind, text in texts.items() if text.strip()]
    if len(active) > 1:
        raise RegistryError(
            f"{where}: edit sets more than one of replacement, prepend, append "
            f"(got {', '.join(active)}); use one per edit"
        )
    if active:
        return active[0], texts[active[0]]
    return "replacement", ""


def _fix_from_mapping(document: object, path: Path, collection: str) -> Recipe:
    mapping = _expect_mapping(
        document, path, line=1, what="fix file", required=_FIX_REQUIRED, optional=_FIX_OPTIONAL
    )
    fields = {
        key: _optional_str(mapping, key, path)
        for key in ("url", "component", "expect", "repro", "bench")
    }
    _check_formats(mapping, path, fields)
    title = _optional_str(mapping, "title", path)
    return Recipe(
        pr=_pr(mapping, path),
        title=title or "",
        patches=_patches(mapping, path),
        path=path,
        collection=collection,
        merged=_merged(mapping, path),
        symptom=_symptom(mapping, path),
        verified_on=_verified_on(mapping, path),
        applies_to=_applies_to(mapping, path),
        **fields,
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
        pr, where = mapping["pr"], f"{_at(path, mapping, 'pr')}: 'pr'"
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
                f"{_at(path, mapping, 'expect')}: 'expect' {short(expect)} is not a "
                f"valid regular expression: {exc}"
            ) from exc
    for key, example in _MODULE_KEY_EXAMPLES.items():
        value = fields[key]
        if value is not None and not _DOTTED.fullmatch(value):
            raise RegistryError(
                f"{_at(path, mapping, key)}: {key!r} must be a dotted module "
                f"name like {example}, got {short(value)}"
            )


def _patches(mapping: LineDict, path: Path) -> tuple[Patch, ...]:
    items = mapping["patches"]
    if not isinstance(items, LineList) or not items:
        raise RegistryError(
            f"{_at(path, mapping, 'patches')}: 'patches' must be a non-empty "
            f"list of {{target, edits}} mappings, got {short(items)}"
        )
    patches = []
    seen: dict[str, int] = {}
    for item in items:
        entry = _expect_mapping(
            item,
            path,
            line=items.line,
            what="patch",
            required=_PATCH_REQUIRED,
            optional=_PATCH_OPTIONAL,
        )
        target = _required_str(entry, "target", path)
        if not _DOTTED.fullmatch(target) or "." not in target:
            raise RegistryError(
                f"{_at(path, entry, 'target')}: 'target' must be a dotted path "
                f"module[.Class].function, got {short(target)}"
            )
        if target.split(".", 1)[0] == "__main__":
            raise RegistryError(
                f"{_at(path, entry, 'target')}: 'target' {target} names __main__, whatever "
                "script happens to run; a revert lands when a target's module is imported, "
                "and a script's own code runs before that could happen; name a module the "
                "program imports"
            )
        if target in seen:
            raise RegistryError(
                f"{_at(path, entry, 'target')}: target {target} is already "
                f"patched at line {seen[target]}; put all its edits in one entry"
            )
        seen[target] = entry.line
        preamble = _text(entry, "preamble", path)
        patches.append(
            Patch(target=target, edits=_edits(entry, path), line=entry.line, preamble=preamble)
        )
    return tuple(patches)


def _edits(entry: LineDict, path: Path) -> tuple[Edit, ...]:
    items = entry["edits"]
    if not isinstance(items, LineList) or not items:
        raise RegistryError(
            f"{_at(path, entry, 'edits')}: 'edits' must be a non-empty list of "
            f"{{match, replacement|prepend|append}} mappings, got {short(items)}"
        )
    edits = []
    for item in items:
        raw = _expect_mapping(
            item, path, line=items.line, what="edit", required=("match",), optional=EDIT_KINDS
        )
        match = _required_str(raw, "match", path)
        kind, text = _edit_kind(raw, path)
        edits.append(Edit(match=match, kind=kind, text=text, line=raw.line))
    return tuple(edits)


def _edit_kind(raw: LineDict, path: Path) -> tuple[EditKind, str]:
    texts: dict[EditKind, str] = {}
    for kind in EDIT_KINDS:
        if kind in raw:
            texts[kind] = _text(raw, kind, path)
    return one_edit_kind(texts, where=f"{path}:{raw.line}")


def _text(mapping: LineDict, key: str, path: Path) -> str:
    """An optional text key: absent or empty (`key:`) gives ""."""
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RegistryError(
            f"{_at(path, mapping, key)}: {key!r} must be a string, "
            f"got {_kind(value)} {short(value)}"
        )
    return value


def _expect_mapping(
    value: object,
    path: Path,
    *,
    line: int,
    what: str,
    required: Sequence[str],
    optional: Sequence[str],
) -> LineDict:
    if not isinstance(value, LineDict):
        raise RegistryError(
            f"{path}:{line}: {what} must be a mapping with keys "
            f"{', '.join(required)}; got {_kind(value)} {short(value)}"
        )
    allowed = (*required, *optional)
    for key in value:
        if key not in allowed:
            raise RegistryError(
                f"{path}:{value.key_lines[key]}: unknown key {short(key)} in {what}; "
                f"expected one of: {', '.join(allowed)}"
            )
    for key in required:
        if key not in value:
            raise RegistryError(
                f"{path}:{value.line}: {what} is missing required key {key!r}; "
                f"required keys: {', '.join(required)}"
            )
    return value


def _required_str(mapping: LineDict, key: str, path: Path) -> str:
    value = mapping[key]
    if not isinstance(value, str) or not value.strip():
        raise RegistryError(
            f"{_at(path, mapping, key)}: {key!r} must be a non-empty string, "
            f"got {_kind(value)} {short(value)}"
        )
    return value


def _optional_str(mapping: LineDict, key: str, path: Path) -> str | None:
    return _required_str(mapping, key, path) if key in mapping else None


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
        f"{_at(path, mapping, 'merged')}: 'merged' must be a date YYYY-MM-DD, got {short(value)}"
    )


def _verified_on(mapping: LineDict, path: Path) -> tuple[str, ...]:
    """`verified_on`: the versions of the target package the recipe was checked against."""
    value = mapping.get("verified_on", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RegistryError(
            f"{_at(path, mapping, 'verified_on')}: 'verified_on' must be a list of version "
            f"strings like ['0.5.23'], got {short(value)}"
        )
    return tuple(value)


def _applies_to(mapping: LineDict, path: Path) -> VersionRange | None:
    """`applies_to`: the distribution and versions the recipe is for; verified_on inside it."""
    if "applies_to" not in mapping:
        return None
    text, where = mapping["applies_to"], _at(path, mapping, "applies_to")
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
            f"{_at(path, mapping, 'verified_on')}: 'verified_on' lists {', '.join(outside)}, "
            f"outside applies_to {found.text}; a recipe is verified only on versions it covers"
        )
    return found


def _symptom(mapping: LineDict, path: Path) -> str | None:
    value = _optional_str(mapping, "symptom", path)
    if value is not None and value not in SYMPTOMS:
        raise RegistryError(
            f"{_at(path, mapping, 'symptom')}: 'symptom' {short(value)} is not one "
            f"of: {', '.join(SYMPTOMS)}"
        )
    return value


def _at(path: Path, mapping: LineDict, key: str) -> str:
    return f"{path}:{mapping.key_lines.get(key, mapping.line)}"


def _kind(value: object) -> str:
    if isinstance(value, list | dict):
        return "list" if isinstance(value, list) else "mapping"
    return type(value).__name__


def _is_number(text: str) -> bool:
    """ASCII digits only: `str.isdigit` also accepts '²' and Arabic-Indic digits."""
    return text.isascii() and text.isdigit()
