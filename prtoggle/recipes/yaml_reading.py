"""Bounded reading of recipe YAML: regular files only, size and alias limits, short messages."""

from __future__ import annotations

import functools
import os
import re
import reprlib
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from prtoggle.errors import PrToggleError, RegistryError

MAX_RECIPE_BYTES = 1024 * 1024
"""A recipe file larger than this (1 MiB) is refused before it is parsed."""
MAX_YAML_NODES = 50_000
"""A YAML document larger than this many nodes, with every alias expanded, is refused."""
MAX_SHOWN_CHARS = 200
"""No error message shows more than this many characters of a recipe's value."""

_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")


class _ShortRepr(reprlib.Repr):
    """reprlib's bounded repr; the loader's line-carrying containers shown as list and dict."""

    def repr_LineList(self, value: list[Any], level: int) -> str:
        return self.repr_list(value, level)

    def repr_LineDict(self, value: dict[Any, Any], level: int) -> str:
        return self.repr_dict(value, level)


_SHORT = _ShortRepr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, MAX_SHOWN_CHARS, MAX_SHOWN_CHARS
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 6


class LineDict(dict[Any, Any]):
    """A YAML mapping that remembers its own line and the line of every key."""

    line: int
    key_lines: dict[Any, int]


class LineList(list[Any]):
    """A YAML sequence that remembers its line."""

    line: int


def read_recipe_text(path: Path) -> str:
    """The UTF-8 text of a regular file of at most MAX_RECIPE_BYTES; anything else refused.

    The file is opened without blocking (a FIFO never hangs) and its type is checked on
    the open descriptor, so a device, FIFO or directory is refused without being read.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read fix file: {exc.strerror or exc}") from exc
    try:
        data = _read_regular(descriptor, path)
    finally:
        os.close(descriptor)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RegistryError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); recipe files must be UTF-8"
        ) from exc


def parse_yaml(text: str, *, name: str, libyaml: bool = True) -> object:
    """One YAML document through the safe loader, within the limits; errors name `name`.

    Mappings and sequences come back as LineDict / LineList. Every way the loader can
    fail (syntax, a value its tag cannot hold, an unhashable key, too many nodes after
    alias expansion, too deep) is one RegistryError line `name:line: ...`.

    Where PyYAML has libyaml, the document is first scanned and composed in C (about five
    times faster) and built by the same constructors. libyaml accepts a few documents the
    pure-Python loader refuses (a tab or a `!` outside a block scalar, a comment right
    after a block scalar's `|`), so its result is kept only for a document free of those
    (`_same_as_pure`); anything else, failures included, is read again by the pure
    loader, whose result or message is the one given: neither depends on libyaml.
    `libyaml=False`: the pure loader only.
    """
    if libyaml and _FastLoader is not None:
        try:
            fast = _FastLoader(text)
            value = _load(fast, name=name, accept=functools.partial(_same_as_pure, text))
        except Exception:  # any failure: the pure loader below says what is wrong
            value = _NOT_LOADED
        if value is not _NOT_LOADED:
            return value
    loader = _BoundedLoader(text)
    try:
        return _load(loader, name=name)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = short_text(
            exc.problem or exc.context or "invalid YAML", limit=2 * MAX_SHOWN_CHARS
        )
        if isinstance(exc, yaml.constructor.ConstructorError):
            raise RegistryError(f"{name}:{line}: YAML value error: {problem}") from exc
        raise RegistryError(f"{name}:{line}: YAML syntax error: {problem}") from exc
    except yaml.YAMLError as exc:
        raise RegistryError(f"{name}:1: YAML error: {short_text(str(exc))}") from exc
    except RecursionError as exc:
        raise RegistryError(
            f"{name}: nested too deeply for the YAML loader (RecursionError); a recipe is a "
            "mapping of at most a few levels"
        ) from exc


def short(value: object) -> str:
    """`repr(value)` cut to at most MAX_SHOWN_CHARS characters, without rendering the rest."""
    return short_text(_SHORT.repr(value))


def short_text(text: str, *, limit: int = MAX_SHOWN_CHARS) -> str:
    """`text` cut to at most `limit` characters (`...` marks a cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _BoundedLoader(yaml.SafeLoader):
    """Safe loader: 1-based lines on containers, no base-60 numbers, one error per value."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0] and _SEXAGESIMAL.fullmatch(value):
            return "tag:yaml.org,2002:str"  # YAML 1.1 reads 1:30 as 90; keep the text
        return super().resolve(kind, value, implicit)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (yaml.YAMLError, PrToggleError, RecursionError):
            raise
        except Exception as exc:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read {short_text(short(node.value), limit=80)} as "
                f"{node.tag.rsplit(':', 1)[-1]}: {short_text(str(exc))}",
                node.start_mark,
            ) from exc


def _construct_mapping(loader: _BoundedLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str | int | float | bool | type(None)):
            raise RegistryError(
                f"{loader.name}:{line}: a mapping key must be a string or a number, got "
                f"{'a list' if isinstance(key, list) else type(key).__name__} {short(key)}"
            )
        if key in result:
            raise RegistryError(f"{loader.name}:{line}: duplicate key {short(key)}")
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _BoundedLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    return result


_BoundedLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_BoundedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)


_FastLoader: type[_BoundedLoader] | None = None
"""The libyaml-backed loader parse_yaml tries first; None where PyYAML was built without it."""
HAVE_LIBYAML = bool(getattr(yaml, "__with_libyaml__", False))
"""Whether PyYAML has libyaml here, so that parse_yaml can take its faster path."""

if HAVE_LIBYAML:

    class _CBoundedLoader(yaml.CSafeLoader, _BoundedLoader):
        """_BoundedLoader's resolver and constructors on libyaml's scanner and composer."""

    _FastLoader = _CBoundedLoader


_NOT_LOADED = object()
"""What _load gives when `accept` turns the composed document down."""
_BLOCK_HEADER = re.compile(r"[|>](?:[1-9][-+]?|[-+][1-9]?)? *")
"""A block scalar's header line both loaders read alike (no comment on it)."""


def _load(
    loader: _BoundedLoader,
    *,
    name: str,
    accept: Callable[[yaml.Node | None], bool] | None = None,
) -> object:
    """The document `loader` holds, within the node limit; the loader's errors as raised.

    _NOT_LOADED where `accept` turns its node tree down.
    """
    loader.name = name
    try:
        node = loader.get_single_node()
        if node is not None:
            _refuse_expansion(node, name=name)
        if accept is not None and not accept(node):
            return _NOT_LOADED
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _same_as_pure(text: str, root: yaml.Node | None) -> bool:
    """Whether libyaml's node tree for `text` is surely the pure loader's: every tab and
    `!` of the text inside a block scalar's content, no comment on a block header, and no
    byte order mark or Unicode line break (NEL, LS, PS) anywhere."""
    if any(char in text for char in "\ufeff\x85\u2028\u2029"):
        return False
    content: list[tuple[int, int]] = []
    seen: set[int] = set()
    stack = [] if root is None else [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.style in ("|", ">"):
                start, end = node.start_mark.index, node.end_mark.index
                header_end = text.find("\n", start, end)
                header_end = end if header_end < 0 else header_end
                if not _BLOCK_HEADER.fullmatch(text, start, header_end):
                    return False
                content.append((header_end, end))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(child for pair in node.value for child in pair)
    return all(
        any(low <= index < high for low, high in content)
        for index, char in enumerate(text)
        if char in "\t!"
    )


def _read_regular(descriptor: int, path: Path) -> bytes:
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        raise RegistryError(
            f"{path}: not a regular file ({_file_kind(info.st_mode)}); a recipe is a "
            "regular .yaml file"
        )
    if info.st_size > MAX_RECIPE_BYTES:
        raise _too_large(path, info.st_size)
    chunks, total = [], 0
    while total <= MAX_RECIPE_BYTES:
        chunk = os.read(descriptor, MAX_RECIPE_BYTES + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > MAX_RECIPE_BYTES:  # it grew after fstat
        raise _too_large(path, total)
    return b"".join(chunks)


def _too_large(path: Path, size: int) -> RegistryError:
    return RegistryError(
        f"{path}: recipe file is {size} bytes, over the limit of {MAX_RECIPE_BYTES} bytes (1 MiB)"
    )


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((label for test, label in kinds if test(mode)), "not a regular file")


def _refuse_expansion(root: yaml.Node, *, name: str) -> None:
    """Refuse a document whose node count, every alias expanded, passes MAX_YAML_NODES."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in visiting:
            raise RegistryError(
                f"{name}:{node.start_mark.line + 1}: an alias refers to a node that contains "
                "it (a recursive structure); recipes hold plain trees"
            )
        visiting.add(key)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_YAML_NODES:
                raise RegistryError(
                    f"{name}:{node.start_mark.line + 1}: the YAML document expands to more "
                    f"than {MAX_YAML_NODES} nodes (aliases counted at every use); a recipe "
                    "is a few hundred"
                )
        visiting.discard(key)
        sizes[key] = total
        return total

    size(root)
