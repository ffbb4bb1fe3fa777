"""Write a drafted recipe as YAML, only once it checks ok on the trees its targets are in."""

from __future__ import annotations

import datetime
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from prtoggle.errors import RegistryError
from prtoggle.patching.source_files import SourceTree
from prtoggle.patching.types import Edit
from prtoggle.recipes.authoring.from_diff import DraftTarget, SkippedChange
from prtoggle.recipes.check import TargetCheck, check_fix
from prtoggle.recipes.schema import Recipe, load_recipe_text

_CHECK_PREFIX = re.compile(r"^.*?\.yaml:\d+: PR \d+: \S+ \([^)]*\): ")
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class RecipeWriteError(RegistryError):
    """A recipe file cannot be written where it was asked for; nothing was written."""


@dataclass(frozen=True)
class RecipeHeader:
    """The metadata a new recipe starts with."""

    pr: int
    title: str
    url: str | None = None
    merged: datetime.date | None = None


def render_recipe(header: RecipeHeader, targets: Sequence[tuple[str, Sequence[Edit]]]) -> str:
    """The YAML text of a recipe: header keys, then `patches` with block-literal code."""
    document: dict[str, Any] = {"pr": header.pr, "title": header.title}
    if header.url:
        document["url"] = header.url
    if header.merged is not None:
        document["merged"] = header.merged
    document["patches"] = [
        {"target": target, "edits": [_edit_mapping(edit) for edit in edits]}
        for target, edits in targets
    ]
    return render_patches(document)


def render_patches(document: dict[str, Any]) -> str:
    """A recipe mapping as YAML, keys in their order, code as `|` block literals."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)


def checked_recipe(
    header: RecipeHeader, targets: Sequence[DraftTarget], *, path: Path
) -> tuple[str, list[DraftTarget], list[SkippedChange]]:
    """The recipe text of the targets that check ok; the others become skipped changes.

    The text is checked as the file `path` it is going to be (messages name that file).
    """
    kept = list(targets)
    failed: list[SkippedChange] = []
    while kept:
        text = render_recipe(header, [(t.target, t.edits) for t in kept])
        bad = _failing(text, path, kept)
        if not bad:
            return text, kept, failed
        for target, check in bad:
            reason = f"the revert does not check ({check.status}: {_why(check.message)})"
            failed.append(SkippedChange(target.file, target.line, reason))
        names = {target.target for target, _ in bad}
        kept = [t for t in kept if t.target not in names]
    return "", [], failed


def recipe_destination(out: Path, pr: int) -> Path:
    """OUT/<pr>.yaml, once it is known writable; nothing is created.

    Refused with a RecipeWriteError naming it: OUT that exists and is not a directory, and
    a destination that is a symbolic link (never written through) or not a regular file
    (a FIFO is never opened). `new` calls it before its work, write_recipe again to write.
    """
    if out.exists() and not out.is_dir():
        raise RecipeWriteError(f"--out {out}: not a directory; expected a directory for <PR>.yaml")
    path = out / f"{pr}.yaml"
    _refuse_destination(path)
    return path


def write_recipe(text: str, *, out: Path, pr: int) -> Path:
    """Write `text` as OUT/<pr>.yaml, atomically (OUT created if missing); the path written.

    The text goes to a temporary file in OUT, flushed to disk, then renamed over the
    destination: a reader sees the old file or the new one, never a part of either, and
    an error or an interruption leaves the old file as it was (the temporary removed).
    The mode is the old file's, else what the umask gives a new file. Refusals and write
    errors are a RecipeWriteError naming the file.
    """
    path = recipe_destination(out, pr)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecipeWriteError(
            f"--out {out}: cannot create the directory: {exc.strerror or exc}"
        ) from exc
    try:
        _replace_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        raise RecipeWriteError(
            f"{path}: cannot write the recipe: {exc.strerror or exc}; nothing written "
            "(a file already there is unchanged)"
        ) from exc
    return path


def _failing(
    text: str, path: Path, targets: Sequence[DraftTarget]
) -> list[tuple[DraftTarget, TargetCheck]]:
    recipe = load_recipe_text(text, path=path, collection="new")
    bad = []
    for tree in _trees(targets):
        mine = {t.target for t in targets if t.tree is tree}
        subset = replace(recipe, patches=tuple(p for p in recipe.patches if p.target in mine))
        bad.extend(_bad_checks(subset, tree, targets))
    return bad


def _bad_checks(
    recipe: Recipe, tree: SourceTree, targets: Sequence[DraftTarget]
) -> list[tuple[DraftTarget, TargetCheck]]:
    by_name = {t.target: t for t in targets}
    return [(by_name[c.target], c) for c in check_fix(recipe, tree=tree) if not c.ok]


def _trees(targets: Sequence[DraftTarget]) -> list[SourceTree]:
    trees: list[SourceTree] = []
    for target in targets:
        if all(target.tree is not tree for tree in trees):
            trees.append(target.tree)
    return trees


def _why(message: str) -> str:
    """A check message's first line without the scratch recipe's path and the target."""
    first = message.splitlines()[0] if message else ""
    return _CHECK_PREFIX.sub("", first)


def _edit_mapping(edit: Edit) -> dict[str, str]:
    return {"match": edit.match, edit.kind: edit.text}


def _refuse_destination(path: Path) -> None:
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (or OUT to be made)
        return
    except OSError as exc:
        raise RecipeWriteError(f"{path}: cannot write the recipe: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise RecipeWriteError(
            f"{path}: is a symbolic link (to {os.readlink(path)}); refused: prtoggle never "
            "writes through a link; remove it or choose another --out"
        )
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "special")
        raise RecipeWriteError(
            f"{path}: is {kind}, not a regular file; refused (a recipe is written as a "
            "regular file); remove it or choose another --out"
        )


def _replace_atomically(path: Path, data: bytes) -> None:
    """`data` into a temporary file next to `path`, synced, then renamed over `path`."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """The rename made durable too, where the file system allows a directory fsync."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _umask() -> int:
    """This process's umask: from /proc where Linux gives it, else set and put back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # process-global for an instant: the CLI writes from one thread
    os.umask(mask)
    return mask


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as `|` block literals, as a person writes code in YAML."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)
