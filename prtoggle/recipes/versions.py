"""Recipe version ranges (`applies_to`): parse one, and find the version it is checked against."""

from __future__ import annotations

import importlib.metadata
import tomllib
from dataclasses import dataclass
from email.parser import Parser
from typing import TYPE_CHECKING, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from prtoggle.errors import VersionRangeError

if TYPE_CHECKING:
    from pathlib import Path

    from prtoggle.patching.source_files import SourceTree

APPLIES_TO_EXAMPLE = "sglang>=0.5.11,<0.5.15"


@dataclass(frozen=True)
class VersionRange:
    """`applies_to` of a recipe: one distribution and the versions of it the recipe is for."""

    distribution: str
    specifier: SpecifierSet
    text: str

    def contains(self, version: str) -> bool:
        """Whether `version` is in the range (pre-releases included); unparsable: False."""
        try:
            return self.specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False


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
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(
            f"is not a distribution name followed by version specifiers, like "
            f"{APPLIES_TO_EXAMPLE!r}"
        ) from exc
    if requirement.extras or requirement.marker is not None or requirement.url:
        raise ValueError("takes a name and version specifiers only (no extras, markers or URL)")
    if not str(requirement.specifier):
        raise ValueError(f"names no versions; give specifiers, like {APPLIES_TO_EXAMPLE!r}")
    return VersionRange(
        distribution=requirement.name, specifier=requirement.specifier, text=text.strip()
    )


def installed_version(distribution: str) -> str | None:
    """The version of the installed distribution, None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def tree_version(tree: SourceTree, distribution: str) -> str | None:
    """The version of `distribution` a tree holds, None when it does not say.

    Read from a wheel's `*.dist-info/METADATA`, an sdist's `PKG-INFO`, or a directory's
    `*.dist-info/METADATA`, `PKG-INFO` or static `[project] version` of `pyproject.toml`.
    """
    versions = tree.memo("versions", "", lambda: _versions_in(tree))
    return versions.get(canonicalize_name(distribution))


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


def _excludes(fix: Ranged, version: str | None) -> bool:
    """A known version outside the recipe's range (an unknown one: the text decides)."""
    return (
        fix.applies_to is not None and version is not None and not fix.applies_to.contains(version)
    )


def _versions_in(tree: SourceTree) -> dict[str, str]:
    """Distribution (canonical name) -> version, for what the tree's metadata files say."""
    versions: dict[str, str] = {}
    for name, text in tree.metadata_files():
        found = _name_and_version(name, text)
        if found is not None:
            versions.setdefault(canonicalize_name(found[0]), found[1])
    return versions


def _name_and_version(name: str, text: str) -> tuple[str, str] | None:
    if name.endswith("pyproject.toml"):
        try:
            project = tomllib.loads(text).get("project", {})
        except tomllib.TOMLDecodeError:
            return None
        if isinstance(project.get("name"), str) and isinstance(project.get("version"), str):
            return project["name"], project["version"]
        return None
    head = text.replace("\r\n", "\n").split("\n\n", 1)[0]  # the long description follows
    headers = Parser().parsestr(head, headersonly=True)
    if headers["Name"] and headers["Version"]:
        return str(headers["Name"]), str(headers["Version"])
    return None
