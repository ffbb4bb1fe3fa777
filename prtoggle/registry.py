"""Fix records loaded from YAML registry directories and validated, with file:line errors."""

from __future__ import annotations

import datetime
import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from prtoggle.errors import RegistryError, UnknownPRError
from prtoggle.patching.types import EDIT_KINDS, Edit, EditKind, Patch

YAML_PATH_ENV = "PRTOGGLE_YAML_PATH"
SYMPTOMS = (
    "nan",
    "illegal-memory-access",
    "out-of-bounds",
    "memory-corruption",
    "stale-read",
    "wrong-output",
)
_FIX_REQUIRED = ("pr", "title", "patches")
_FIX_OPTIONAL = ("url", "merged", "component", "symptom", "expect", "repro", "bench")
_PATCH_KEYS = ("target", "edits")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_MODULE_KEY_EXAMPLES = {
    "repro": "fixes.scenarios.pr26521",
    "bench": "fixes.benchmarks.pr26521",
    "component": "fixes.scenarios.pr26521",
}
_CAPTURE_NAME = re.compile(r"capture|^__init__$|^init_cuda_graph_state")


@dataclass(frozen=True)
class Fix:
    """One registered bug fix and the patches that revert it."""

    pr: int
    title: str
    patches: tuple[Patch, ...]
    path: Path
    url: str | None = None
    merged: datetime.date | None = None
    component: str | None = None
    symptom: str | None = None
    expect: str | None = None
    repro: str | None = None
    bench: str | None = None

    @property
    def acts_at_capture(self) -> bool:
        """Whether a target runs at CUDA-graph capture or state init (revert before capture)."""
        return any(_CAPTURE_NAME.search(p.target.rsplit(".", 1)[-1]) for p in self.patches)


@dataclass(frozen=True)
class Registry:
    """Every fix found in the registry directories, keyed by PR number."""

    fixes: Mapping[int, Fix]
    dirs: tuple[Path, ...]

    def get(self, pr: int) -> Fix:
        if pr not in self.fixes:
            raise UnknownPRError(
                f"PR {pr} is not registered; registered PRs: {_pr_list(self.prs())} "
                f"(registry directories: {', '.join(str(d) for d in self.dirs)})"
            )
        return self.fixes[pr]

    def prs(self) -> tuple[int, ...]:
        return tuple(sorted(self.fixes))

    def by_merge_date(self) -> tuple[Fix, ...]:
        """Fixes oldest first; fixes without a merge date last, then by PR number."""
        return tuple(
            sorted(
                self.fixes.values(),
                key=lambda fix: (fix.merged is None, fix.merged or datetime.date.min, fix.pr),
            )
        )


def shipped_yaml_dir() -> Path:
    """The fixes shipped with prtoggle: inside the wheel, or `yaml/` of a source checkout."""
    package_dir = Path(__file__).resolve().parent
    installed = package_dir / "_shipped_yaml"
    return installed if installed.is_dir() else package_dir.parent / "yaml"


def yaml_dirs_from_env(value: str | None) -> tuple[Path, ...]:
    """The shipped directory, then the PRTOGGLE_YAML_PATH directories (os.pathsep separated)."""
    extra = [Path(part) for part in (value or "").split(os.pathsep) if part.strip()]
    return (shipped_yaml_dir(), *extra)


def load_registry(*, dirs: Sequence[Path] | None = None) -> Registry:
    """Load and validate every `*.yaml` / `*.yml` file of `dirs` (None: shipped + env)."""
    chosen = tuple(dirs) if dirs is not None else yaml_dirs_from_env(os.environ.get(YAML_PATH_ENV))
    fixes: dict[int, Fix] = {}
    for directory in chosen:
        if not directory.is_dir():
            raise RegistryError(
                f"registry directory {directory} does not exist or is not a directory "
                f"(registry directories: {', '.join(str(d) for d in chosen)}; "
                f"extra ones come from {YAML_PATH_ENV})"
            )
        for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
            fix = load_fix(path)
            if fix.pr in fixes:
                other = fixes[fix.pr].path
                raise RegistryError(
                    f"duplicate PR {fix.pr}: defined in {other}:{_pr_line(other)} "
                    f"and in {path}:{_pr_line(path)}"
                )
            fixes[fix.pr] = fix
    return Registry(fixes=fixes, dirs=chosen)


def default_registry() -> Registry:
    """The registry of the shipped directory and PRTOGGLE_YAML_PATH (cached per its value)."""
    return _cached_registry(os.environ.get(YAML_PATH_ENV, ""))


def load_fix(path: Path) -> Fix:
    """Parse and validate one fix file (safe YAML loader only)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read fix file: {exc}") from exc
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        document = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or exc.context or "invalid YAML"
        raise RegistryError(f"{path}:{line}: YAML syntax error: {problem}") from exc
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}:1: YAML error: {exc}") from exc
    finally:
        loader.dispose()
    return _fix_from_mapping(document, path)


class _LineDict(dict[Any, Any]):
    """A YAML mapping that remembers its own line and the line of every key."""

    line: int
    key_lines: dict[Any, int]


class _LineList(list[Any]):
    """A YAML sequence that remembers its line."""

    line: int


class _LineLoader(yaml.SafeLoader):
    """Safe loader whose mappings and sequences carry 1-based line numbers."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    result = _LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in result:
            raise RegistryError(f"{loader.name}:{line}: duplicate key {key!r}")
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _LineList:
    result = _LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    return result


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)


@functools.lru_cache(maxsize=8)
def _cached_registry(yaml_path: str) -> Registry:
    return load_registry(dirs=yaml_dirs_from_env(yaml_path))


def _fix_from_mapping(document: object, path: Path) -> Fix:
    mapping = _expect_mapping(
        document, path, line=1, what="fix file", required=_FIX_REQUIRED, optional=_FIX_OPTIONAL
    )
    pr = mapping["pr"]
    if not isinstance(pr, int) or isinstance(pr, bool) or pr <= 0:
        raise RegistryError(
            f"{_at(path, mapping, 'pr')}: 'pr' must be a positive integer, got {pr!r}"
        )
    fields = {
        key: _optional_str(mapping, key, path)
        for key in ("url", "component", "expect", "repro", "bench")
    }
    _check_formats(mapping, path, fields)
    return Fix(
        pr=pr,
        title=_required_str(mapping, "title", path),
        patches=_patches(mapping, path),
        path=path,
        merged=_merged(mapping, path),
        symptom=_symptom(mapping, path),
        **fields,
    )


def _check_formats(mapping: _LineDict, path: Path, fields: Mapping[str, str | None]) -> None:
    expect = fields["expect"]
    if expect is not None:
        try:
            re.compile(expect)
        except re.error as exc:
            raise RegistryError(
                f"{_at(path, mapping, 'expect')}: 'expect' {expect!r} is not a "
                f"valid regular expression: {exc}"
            ) from exc
    for key, example in _MODULE_KEY_EXAMPLES.items():
        value = fields[key]
        if value is not None and not _DOTTED.fullmatch(value):
            raise RegistryError(
                f"{_at(path, mapping, key)}: {key!r} must be a dotted module "
                f"name like {example}, got {value!r}"
            )


def _patches(mapping: _LineDict, path: Path) -> tuple[Patch, ...]:
    items = mapping["patches"]
    if not isinstance(items, _LineList) or not items:
        raise RegistryError(
            f"{_at(path, mapping, 'patches')}: 'patches' must be a non-empty "
            f"list of {{target, edits}} mappings, got {items!r}"
        )
    patches = []
    seen: dict[str, int] = {}
    for item in items:
        entry = _expect_mapping(
            item, path, line=items.line, what="patch", required=_PATCH_KEYS, optional=()
        )
        target = _required_str(entry, "target", path)
        if not _DOTTED.fullmatch(target) or "." not in target:
            raise RegistryError(
                f"{_at(path, entry, 'target')}: 'target' must be a dotted path "
                f"module[.Class].function, got {target!r}"
            )
        if target in seen:
            raise RegistryError(
                f"{_at(path, entry, 'target')}: target {target} is already "
                f"patched at line {seen[target]}; put all its edits in one entry"
            )
        seen[target] = entry.line
        patches.append(Patch(target=target, edits=_edits(entry, path), line=entry.line))
    return tuple(patches)


def _edits(entry: _LineDict, path: Path) -> tuple[Edit, ...]:
    items = entry["edits"]
    if not isinstance(items, _LineList) or not items:
        raise RegistryError(
            f"{_at(path, entry, 'edits')}: 'edits' must be a non-empty list of "
            f"{{match, replacement|prepend|append}} mappings, got {items!r}"
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


def _edit_kind(raw: _LineDict, path: Path) -> tuple[EditKind, str]:
    """sglang's rule: at most one of the kinds has non-blank text; none given deletes."""
    texts: dict[EditKind, str] = {}
    for kind in EDIT_KINDS:
        value = raw.get(kind, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise RegistryError(
                f"{_at(path, raw, kind)}: {kind!r} must be a string, "
                f"got {type(value).__name__} {value!r}"
            )
        if kind in raw:
            texts[kind] = value  # type: ignore[index]
    active = [kind for kind, text in texts.items() if text.strip()]
    if len(active) > 1:
        raise RegistryError(
            f"{path}:{raw.line}: edit sets more than one of replacement, "
            f"prepend, append (got {', '.join(active)}); use one per edit"
        )
    if active:
        return active[0], texts[active[0]]
    return next(iter(texts), "replacement"), ""


def _expect_mapping(
    value: object,
    path: Path,
    *,
    line: int,
    what: str,
    required: Sequence[str],
    optional: Sequence[str],
) -> _LineDict:
    if not isinstance(value, _LineDict):
        raise RegistryError(
            f"{path}:{line}: {what} must be a mapping with keys "
            f"{', '.join(required)}; got {_kind(value)} {value!r}"
        )
    allowed = (*required, *optional)
    for key in value:
        if key not in allowed:
            raise RegistryError(
                f"{path}:{value.key_lines[key]}: unknown key {key!r} in {what}; "
                f"expected one of: {', '.join(allowed)}"
            )
    for key in required:
        if key not in value:
            raise RegistryError(
                f"{path}:{value.line}: {what} is missing required key {key!r}; "
                f"required keys: {', '.join(required)}"
            )
    return value


def _required_str(mapping: _LineDict, key: str, path: Path) -> str:
    value = mapping[key]
    if not isinstance(value, str) or not value.strip():
        raise RegistryError(
            f"{_at(path, mapping, key)}: {key!r} must be a non-empty string, "
            f"got {type(value).__name__} {value!r}"
        )
    return value


def _optional_str(mapping: _LineDict, key: str, path: Path) -> str | None:
    return _required_str(mapping, key, path) if key in mapping else None


def _merged(mapping: _LineDict, path: Path) -> datetime.date | None:
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
        f"{_at(path, mapping, 'merged')}: 'merged' must be a date YYYY-MM-DD, got {value!r}"
    )


def _symptom(mapping: _LineDict, path: Path) -> str | None:
    value = _optional_str(mapping, "symptom", path)
    if value is not None and value not in SYMPTOMS:
        raise RegistryError(
            f"{_at(path, mapping, 'symptom')}: 'symptom' {value!r} is not one "
            f"of: {', '.join(SYMPTOMS)}"
        )
    return value


def _at(path: Path, mapping: _LineDict, key: str) -> str:
    return f"{path}:{mapping.key_lines.get(key, mapping.line)}"


def _pr_line(path: Path) -> int:
    """The line of the top-level `pr:` key (files were already parsed successfully)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if re.match(r"pr\s*:", line):
            return number
    return 1


def _kind(value: object) -> str:
    return "list" if isinstance(value, list) else type(value).__name__


def _pr_list(prs: Sequence[int]) -> str:
    return ", ".join(str(pr) for pr in prs) if prs else "(none)"
