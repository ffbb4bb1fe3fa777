"""PyYAML's safe loader bounded for recipes: lines on containers, node limits, one-line errors.

Imported where a recipe document is parsed (prtoggle.recipes.schema), so that a process
given its recipes already parsed (prtoggle.recipes.parsed_recipes) never imports PyYAML.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from typing import Any

import yaml

from prtoggle.errors import PrToggleError, RegistryError
from prtoggle.recipes.yaml_reading import (
    MAX_SHOWN_CHARS,
    MAX_YAML_NODES,
    LineDict,
    LineList,
    short,
    short_text,
)

_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")


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
_TAB_OR_TAG = re.compile(r"[\t!]")
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
    content.sort()
    starts = [low for low, _ in content]
    for found in _TAB_OR_TAG.finditer(text):
        at = (
            bisect.bisect_right(starts, found.start()) - 1
        )  # the last content starting here or before
        if at < 0 or found.start() >= content[at][1]:
            return False
    return True


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
