"""Recipe version ranges (`applies_to`): parse one, and find the version it is checked against.

`packaging` decides what a range means. A range made only of plain releases compared by
`==`, `!=`, `<`, `<=`, `>`, `>=` (`sglang>=0.5.11,<0.5.15`) is read and tested without
importing it, with the same answers, for a plain release (`0.5.23`): that is every range
the shipped recipes carry, and every process under `prtoggle run` reads them. Anything
else (`~=`, wildcards, pre-releases, local versions) goes to `packaging`.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prtoggle.errors import VersionRangeError
from prtoggle.recipes.installed_versions import installed_version, name_and_version_headers

if TYPE_CHECKING:
    from pathlib import Path

    from packaging.requirements import Requirement

    from prtoggle.patching.source_files import SourceTree

APPLIES_TO_EXAMPLE = "sglang>=0.5.11,<0.5.15"


@dataclass(frozen=True)
class VersionRange:
    """`applies_to` of a recipe: one distribution and the versions of it the recipe is for.

    `clauses` is the range read without `packaging` (operator, release with its trailing
    zeros dropped), or () where `packaging` reads `text`.
    """

    distribution: str
    text: str
    clauses: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def contains(self, version: str) -> bool:
        """Whether `version` is in the range (pre-releases included); unparsable: False."""
        plain = _plain_version(version)
        if self.clauses and plain is not None:
            return all(_compare(op, plain, bound) for op, bound in self.clauses)
        from packaging.version import InvalidVersion, Version

        try:
            parsed = Version(version)
        except InvalidVersion:
            return False
        return _requirement(self.text).specifier.contains(parsed, prereleases=True)


class Ranged(Protocol):
    """What the range checks read of a recipe (prtoggle.recipes.schema.Recipe has it)."""

    @property
    def applies_to(self) -> VersionRange | None: ...

    @property
    def label(self) -> str: ...

    @property
    def path(self) -> Path: ...


def parse_version_range(text: str) -> VersionRange:
    """Parse `name<specifiers>`; ValueError says what is wrong (the caller adds the place)."""
    plain = _PLAIN_RANGE.fullmatch(text)
    if plain is not None:
        clauses = tuple(
            (op, _release(version)) for op, version in _CLAUSE.findall(plain["specifiers"])
        )
        return VersionRange(distribution=plain["name"], text=text.strip(), clauses=clauses)
    from packaging.requirements import InvalidRequirement

    try:
        requirement = _requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(
            f"is not a distribution name followed by version specifiers, like "
            f"{APPLIES_TO_EXAMPLE!r}"
        ) from exc
    if requirement.extras or requirement.marker is not None or requirement.url:
        raise ValueError("takes a name and version specifiers only (no extras, markers or URL)")
    if not str(requirement.specifier):
        raise ValueError(f"names no versions; give specifiers, like {APPLIES_TO_EXAMPLE!r}")
    return VersionRange(distribution=requirement.name, text=text.strip())


def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 compares it (`packaging.utils.canonicalize_name`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def tree_version(tree: SourceTree, distribution: str) -> str | None:
    """The version of `distribution` a tree holds, None when it does not say.

    Read from a wheel's `*.dist-info/METADATA`, an sdist's `PKG-INFO`, or a directory's
    `*.dist-info/METADATA`, `PKG-INFO` or static `[project] version` of `pyproject.toml`:
    the first of those files whose name is the distribution's. In a directory only the
    `*.dist-info` folders named after it are read (a site-packages holds hundreds).
    """
    wanted = canonical_name(distribution)
    return tree.memo("version", wanted, lambda: _version_in(tree, wanted))


def out_of_range(fix: Ranged, *, tree: SourceTree | None) -> str | None:
    """Why `fix` does not apply to the tree (or the installed code), or None when it may.

    None also when the recipe has no range or the version is unknown: then its text decides.
    """
    if fix.applies_to is None:
        return None
    distribution = fix.applies_to.distribution
    if tree is None:
        version, where = installed_version(distribution), "installed"
    else:
        version, where = tree_version(tree, distribution), f"in {tree.label}"
    if not _excludes(fix, version):
        return None
    return (
        f"{distribution} {version} ({where}) is outside the recipe's range "
        f"{fix.applies_to.text} (applies_to)"
    )


def require_installed_in_range(fix: Ranged) -> None:
    """Refuse a revert of `fix` where the installed distribution is outside its range."""
    if fix.applies_to is None:
        return
    version = installed_version(fix.applies_to.distribution)
    if not _excludes(fix, version):
        return
    raise VersionRangeError(
        f"{fix.label} does not apply to the installed {fix.applies_to.distribution} "
        f"{version}: {fix.path} covers {fix.applies_to.text} (applies_to); use a recipe "
        f"for {version} or install a version in that range"
    )


_PLAIN_VERSION = r"[0-9]+(?:\.[0-9]+)*"
_PLAIN_CLAUSE = rf"(?:==|!=|<=|>=|<|>)[ \t]*{_PLAIN_VERSION}"
_PLAIN_RANGE = re.compile(
    rf"[ \t]*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)[ \t]*"
    rf"(?P<specifiers>{_PLAIN_CLAUSE}(?:[ \t]*,[ \t]*{_PLAIN_CLAUSE})*)[ \t]*"
)
"""A range `packaging` reads as a name and plain-release clauses, nothing else."""
_CLAUSE = re.compile(rf"(==|!=|<=|>=|<|>)[ \t]*({_PLAIN_VERSION})")
_POST_VERSION = re.compile(rf"(?P<release>{_PLAIN_VERSION})(?:\.post(?P<post>[0-9]+))?")
_COMPARE: dict[str, Callable[[tuple[object, ...], tuple[object, ...]], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


def _release(text: str) -> tuple[int, ...]:
    """A plain release as PEP 440 compares it: numbers, trailing zeros dropped."""
    numbers = [int(part) for part in text.split(".")]
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def _plain_version(version: str) -> tuple[tuple[int, ...], int] | None:
    """A release with an optional `.postN` as PEP 440 orders it: (release, N or -1)."""
    found = _POST_VERSION.fullmatch(version)
    if found is None:
        return None
    return _release(found["release"]), -1 if found["post"] is None else int(found["post"])


def _compare(op: str, version: tuple[tuple[int, ...], int], bound: tuple[int, ...]) -> bool:
    """PEP 440's clause `op bound` (a plain release) for a release or post-release.

    Ordered as (release, post): `<V` leaves out only V's pre-releases, so it is a
    comparison; `>V` also leaves out V's post-releases, so it compares releases alone.
    """
    if op == ">":
        return version[0] > bound
    return _COMPARE[op](version, (bound, -1))


@functools.lru_cache(maxsize=64)
def _requirement(text: str) -> Requirement:
    from packaging.requirements import Requirement

    return Requirement(text)


def _excludes(fix: Ranged, version: str | None) -> bool:
    """A known version outside the recipe's range (an unknown one: the text decides)."""
    return (
        fix.applies_to is not None and version is not None and not fix.applies_to.contains(version)
    )


def _version_in(tree: SourceTree, wanted: str) -> str | None:
    """The version the first of the tree's metadata files named `wanted` gives."""

    def named_after(folder: str) -> bool:  # `name-version`; the file's Name decides
        folder = canonical_name(folder)
        return folder == wanted or folder.startswith(f"{wanted}-")

    for name, text in tree.metadata_files(dist_info=named_after):
        found = _name_and_version(name, text)
        if found is not None and canonical_name(found[0]) == wanted:
            return found[1]
    return None


def _name_and_version(name: str, text: str) -> tuple[str, str] | None:
    if name.endswith("pyproject.toml"):
        import tomllib

        try:
            project = tomllib.loads(text).get("project", {})
        except tomllib.TOMLDecodeError:
            return None
        if isinstance(project.get("name"), str) and isinstance(project.get("version"), str):
            return project["name"], project["version"]
        return None
    head = text.replace("\r\n", "\n").split("\n\n", 1)[0]  # the long description follows
    headers = name_and_version_headers(head)
    if headers is None:  # anything but `Key: value` lines: the email parser reads it
        from email.parser import Parser

        parsed = Parser().parsestr(head, headersonly=True)
        headers = {key: str(parsed[key] or "") for key in ("name", "version")}
    if headers.get("name") and headers.get("version"):
        return headers["name"], headers["version"]
    return None
