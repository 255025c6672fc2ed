"""YAML text -> Python objects straight from libyaml's events, for the plain YAML of manifests.

PyYAML over libyaml still builds every object in Python: libyaml's events become a node graph,
each plain scalar is matched against the resolver's regular expressions, and the constructor
walks the graph (about two thirds of the time of reading a large file of pods). Manifests use a
small part of YAML: mappings, sequences, scalars, and at times anchors and aliases (PyYAML's
dumper writes them for a shared object), never tags or merge keys. :func:`load` builds those
from the events directly (an alias is the anchored object itself, as PyYAML makes it),
resolving each distinct plain scalar once (the same keys and values recur in every document),
with the loader class's own implicit resolvers and PyYAML's own constructors for booleans,
nulls, integers and floats, so the result is the object PyYAML's loader builds. Anything else
(an explicit tag, a merge key, an alias before its anchor, a duplicate anchor, a key that is a
mapping or a sequence, a second document) raises :class:`Unsupported` and the caller reads the
text with the loader itself; a syntax error is libyaml's ``yaml.YAMLError``, as with the loader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

__all__ = ["Unsupported", "available", "load"]

_CParser: Any
try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml
    _CParser = None

_STR = "tag:yaml.org,2002:str"
_SAFE = SafeConstructor()
# the resolved tags built here, with PyYAML's own constructor of each (str is the value itself)
_BUILD: dict[str, Callable[[yaml.ScalarNode], Any]] = {
    "tag:yaml.org,2002:null": _SAFE.construct_yaml_null,
    "tag:yaml.org,2002:bool": _SAFE.construct_yaml_bool,
    "tag:yaml.org,2002:int": _SAFE.construct_yaml_int,
    "tag:yaml.org,2002:float": _SAFE.construct_yaml_float,
}
_MEMO_MAX = 200_000  # distinct plain scalars remembered per resolver table


class Unsupported(Exception):
    """The text uses YAML this reader leaves to PyYAML's loader (anchors, tags, merge keys, ...)."""


def available() -> bool:
    """Whether PyYAML was built with libyaml (without it, callers use the loader alone)."""
    return _CParser is not None


class _Plain:
    """Plain scalar -> value under one resolver table, remembered per distinct text."""

    def __init__(self, resolvers: dict[Any, list[tuple[str, Any]]]) -> None:
        self.resolvers = resolvers
        self.wildcard = resolvers.get(None, [])
        self.memo: dict[str, Any] = {}

    def __call__(self, value: str) -> Any:
        memo = self.memo
        if value in memo:
            return memo[value]
        found = self._resolve(value)
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[value] = found
        return found

    def _resolve(self, value: str) -> Any:
        # as yaml.resolver.BaseResolver.resolve for a plain ScalarNode
        candidates = self.resolvers.get(value[0] if value else "", [])
        for tag, regexp in [*candidates, *self.wildcard]:
            if regexp.match(value):
                if tag == _STR:
                    return value
                build = _BUILD.get(tag)
                if build is None:
                    raise Unsupported(tag)  # a merge key, a timestamp, '=': the loader's business
                return build(yaml.ScalarNode(tag, value))
        return value


_PLAIN: dict[int, tuple[dict[Any, Any], _Plain]] = {}


_OWN_TAGS = (*_BUILD, _STR, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def _plain_of(loader: Any) -> _Plain:
    resolvers = loader.yaml_implicit_resolvers
    entry = _PLAIN.get(id(loader))
    if entry is None or entry[0] is not resolvers:
        safe = SafeConstructor.yaml_constructors
        if any(loader.yaml_constructors.get(tag) is not safe[tag] for tag in _OWN_TAGS):
            raise Unsupported("a loader with constructors of its own")
        entry = (resolvers, _Plain(resolvers))
        _PLAIN[id(loader)] = entry
    return entry[1]


def load(text: str, loader: Any, *, many: bool = False) -> Any:
    """``yaml.load(text, Loader=loader)`` (``many``: ``list(yaml.load_all(...))``) for plain YAML;
    raises :class:`Unsupported` where the loader must read it (or has constructors of its own
    for the core tags), ``yaml.YAMLError`` on bad syntax."""
    if _CParser is None:
        raise Unsupported("PyYAML without libyaml")
    parser = _CParser(text)
    try:
        return _stream(parser.get_event, _plain_of(loader), many)
    finally:
        parser.dispose()


def _stream(get: Callable[[], Event | None], plain: _Plain, many: bool) -> Any:
    get()  # StreamStartEvent
    documents: list[Any] = []
    while True:
        event = get()
        if type(event) is StreamEndEvent:
            break
        if type(event) is not DocumentStartEvent:
            raise Unsupported(type(event).__name__)
        if documents and not many:
            raise Unsupported("a second document")  # the loader names the error
        documents.append(_node(get, get(), plain, {}))  # anchors are per document
        if type(get()) is not DocumentEndEvent:
            raise Unsupported("document end")
    if many:
        return documents
    return documents[0] if documents else None


def _anchor(event: Any, value: Any, anchors: dict[str, Any]) -> None:
    if event.tag is not None:
        raise Unsupported("an explicit tag")
    if event.anchor is not None:
        if event.anchor in anchors:
            raise Unsupported("a duplicate anchor")  # the loader names the error
        anchors[event.anchor] = value  # before the contents: an alias inside gets this object


def _node(get: Callable[[], Event | None], event: Any, plain: _Plain, anchors: dict[str, Any]) -> Any:
    kind = type(event)
    if kind is ScalarEvent:
        value = plain(event.value) if event.implicit[0] else event.value
        if event.anchor is not None or event.tag is not None:
            _anchor(event, value, anchors)
        return value
    if kind is MappingStartEvent:
        mapping: dict[Any, Any] = {}
        if event.anchor is not None or event.tag is not None:
            _anchor(event, mapping, anchors)
        while True:
            item = get()
            if type(item) is MappingEndEvent:
                return mapping
            key = _node(get, item, plain, anchors)
            if type(key) is dict or type(key) is list:
                raise Unsupported("a complex key")
            mapping[key] = _node(get, get(), plain, anchors)
    if kind is SequenceStartEvent:
        sequence: list[Any] = []
        if event.anchor is not None or event.tag is not None:
            _anchor(event, sequence, anchors)
        while True:
            item = get()
            if type(item) is SequenceEndEvent:
                return sequence
            sequence.append(_node(get, item, plain, anchors))
    if kind is AliasEvent and event.anchor in anchors:
        return anchors[event.anchor]
    raise Unsupported(kind.__name__)  # an alias of no anchor (yet): the loader names the error
