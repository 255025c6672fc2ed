"""YAML files and folders -> documents: ``(file, document index, parsed object or Problem)``.

:func:`read_paths` finds the ``*.yaml``/``*.yml`` files of folders (recursively, sorted), reads
each as UTF-8 (a byte-order mark is dropped; other bytes are one problem naming the offset),
splits multi-document streams (a syntax error costs only its own document; timestamps stay
strings: the schemas parse RFC3339 themselves). A missing or unreadable file is a problem of the
file itself (index :data:`~karpy.api.problems.FILE`, no document), a path holding no object one
warning, ``no objects found in PATH``. :mod:`karpy.api.load` validates the documents;
:func:`iter_path` gives them as they are parsed, a stream of :data:`PARALLEL_DOCUMENTS` or more
parsed by a forked child while the caller validates (:mod:`karpy.api.parallel`). A
:class:`Reading` starts those children at once, before the caller has imported what validates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from karpy.api import parallel as parallel_mod
from karpy.api import yaml_events
from karpy.api.problems import ERROR, FILE, WARNING, Problem

__all__ = [
    "PARALLEL_DOCUMENTS",
    "Document",
    "Loader",
    "PureLoader",
    "Reading",
    "iter_path",
    "iter_text",
    "load",
    "nothing_found",
    "read_path",
    "read_paths",
    "read_text",
]

# (file, document index, the parsed document, or a Problem where it could not be read)
Document = tuple[str, int, object]
PARALLEL_DOCUMENTS = 1000  # a stream this long is parsed beside its validation (karpy.api.parallel)


# libyaml's parser when PyYAML was built with it (about ten times faster on a large file); a
# document it rejects is read again with PyYAML's own parser, whose verdict and messages stand
# (they name the offending character, e.g. a tab), so errors read as they always have.
_SAFE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _without_timestamps(resolvers: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {
        first: [(tag, rx) for tag, rx in found if tag != "tag:yaml.org,2002:timestamp"]
        for first, found in resolvers.items()
    }


class Loader(_SAFE):  # type: ignore[misc]
    """The safe loader every YAML input of karpy is read with (plan, disrupt, explain, snapshots,
    Simulation files): timestamps stay strings (the schemas parse RFC 3339 themselves)."""


class PureLoader(yaml.SafeLoader):
    """:class:`Loader` on PyYAML's pure-Python parser (see :func:`load`)."""


Loader.yaml_implicit_resolvers = _without_timestamps(yaml.SafeLoader.yaml_implicit_resolvers)
PureLoader.yaml_implicit_resolvers = _without_timestamps(yaml.SafeLoader.yaml_implicit_resolvers)


def load(text: str, *, many: bool = False, fast: Any = Loader, pure: Any = PureLoader) -> Any:
    """``text`` parsed by ``fast`` (libyaml; plain YAML built from its events by
    :mod:`karpy.api.yaml_events`, the same objects), or where it raises, by ``pure`` (PyYAML's
    parser, whose documents or error stand); ``many``: the list of every document of the stream."""
    try:
        try:
            return yaml_events.load(text, fast, many=many)
        except yaml_events.Unsupported:
            pass
        return list(yaml.load_all(text, Loader=fast)) if many else yaml.load(text, Loader=fast)
    except yaml.YAMLError:
        return list(yaml.load_all(text, Loader=pure)) if many else yaml.load(text, Loader=pure)


_DOC_START = re.compile(r"^---(?:\s|$)")
_NOT_CONTENT = re.compile(r"^\s*(?:#.*|%.*)?$")


def _split_documents(text: str) -> list[tuple[int, str]]:
    """(first line index, text) of each document; comments before a leading ``---`` are not one."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _DOC_START.match(line)]
    if not starts:
        return [(0, text)]
    chunks: list[tuple[int, str]] = []
    if not all(_NOT_CONTENT.match(line) for line in lines[: starts[0]]):
        chunks.append((0, "".join(lines[: starts[0]])))
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        chunks.append((begin, "".join(lines[begin:end])))
    return chunks


def _document(file: str, index: int, first_line: int, chunk: str) -> Document | None:
    """Document ``index`` of ``file`` (its text ``chunk`` starts at line ``first_line``), a Problem
    for a syntax error, None for an empty document."""
    try:
        raw = load(chunk)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + mark.line + 1 if mark is not None else None
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at line {line}, column {mark.column + 1}" if mark is not None and line else ""
        message = f"YAML syntax error{where}: {what}"
        return (file, index, Problem(file, index, "", "", "", message, line=line))
    return None if raw is None else (file, index, raw)


def _parse_serially(file: str, chunks: Sequence[tuple[int, str]], start: int = 0) -> Iterator[Document]:
    for index in range(start, len(chunks)):
        found = _document(file, index, *chunks[index])
        if found is not None:
            yield found


def iter_text(text: str, *, file: str, parallel: bool | None = None) -> Iterator[Document]:
    """The documents of ``text`` in order, as :func:`read_text`. A stream of at least
    :data:`PARALLEL_DOCUMENTS` documents is parsed by a forked child (Linux) while the caller uses
    the documents already parsed (:mod:`karpy.api.parallel`); ``parallel`` False never forks,
    True forks whatever the size."""
    return iter(_documents(text, file, parallel))


def _documents(text: str, file: str, parallel: bool | None, *, start: bool = False) -> Iterable[Document]:
    """:func:`iter_text`'s documents; ``start``: a long stream's child is forked now
    (:class:`karpy.api.parallel.Started`) rather than when the first document is asked for."""
    chunks = _split_documents(text)
    parse = functools.partial(_parse_serially, file, chunks)
    wanted = len(chunks) >= PARALLEL_DOCUMENTS if parallel is None else parallel
    if not (wanted and parallel_mod.available()):
        return parse(0)
    return parallel_mod.Started(parse) if start else parallel_mod.parsed_in_a_child(parse)


def read_text(text: str, *, file: str) -> list[Document]:
    """The documents of ``text`` (see the module docstring), parsed in this process."""
    return list(iter_text(text, file=file, parallel=False))


def _file_problem(file: str, message: str, severity: str = ERROR) -> tuple[str, list[Document]]:
    return (file, [(file, FILE, Problem(file, FILE, "", "", "", message, severity))])


def _iter_file(file: Path, parallel: bool | None, *, start: bool = False) -> tuple[str, Iterable[Document]]:
    """The file's name and its documents, parsed as they are taken (:func:`iter_text`); ``start``:
    a long stream's child is forked now (:class:`karpy.api.parallel.Started`)."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        return _file_problem(str(file), f"cannot read: {exc.strerror or exc}")
    try:
        text = data.decode("utf-8-sig")  # (a byte-order mark is dropped)
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        return _file_problem(str(file), message)
    return (str(file), _documents(text, str(file), parallel, start=start))


def read_paths(paths: Sequence[Path]) -> list[tuple[str, list[Document]]]:
    """Each YAML file of ``paths`` (folders: ``*.yaml``/``*.yml`` found recursively, sorted) with its
    documents; a missing or unreadable file is one Problem of the file (index :data:`FILE`)."""
    return [entry for path in paths for entry in read_path(path)]


def read_path(path: Path) -> list[tuple[str, list[Document]]]:
    """:func:`read_paths` of one path."""
    return [(name, list(docs)) for name, docs in iter_path(path, parallel=False)]


def iter_path(
    path: Path, *, parallel: bool | None = None, start: bool = False
) -> Iterator[tuple[str, Iterable[Document]]]:
    """:func:`read_path` as it goes: each file is read when reached, and its documents parsed as
    they are taken; a long stream is parsed beside the caller's work on the documents already
    taken (``parallel``: :func:`iter_text`; a caller that takes them all at once gains nothing).
    ``start``: a long stream's child is forked when its file is read (:class:`Reading`)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    elif path.exists():
        files = [path]
    else:
        yield _file_problem(str(path), "no such file or directory")
        return
    for file in files:
        yield _iter_file(file, parallel, start=start)


class Reading:
    """The YAML files of ``paths`` read now, as :func:`iter_path` finds them, and each stream of
    :data:`PARALLEL_DOCUMENTS` documents or more being parsed from now on by a forked child
    (:class:`karpy.api.parallel.Started`): the caller imports what validates them meanwhile, then
    hands this to :func:`karpy.api.load.load_paths`. Iterate once: per path, the path and its
    files (name, documents). :meth:`close` (or the ``with`` block) ends and reaps a child whose
    documents were not all taken, however the caller left. ``start=False``: each long stream's
    child is forked when its first document is asked for (:func:`iter_path`)."""

    def __init__(self, paths: Sequence[Path], *, start: bool = True) -> None:
        self._paths = [(path, list(iter_path(path, start=start))) for path in paths]

    def __iter__(self) -> Iterator[tuple[Path, list[tuple[str, Iterable[Document]]]]]:
        return iter(self._paths)

    def close(self) -> None:
        for _, files in self._paths:
            for _, docs in files:
                if isinstance(docs, parallel_mod.Started):
                    docs.close()

    def __enter__(self) -> Reading:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def nothing_found(path: Path, *, files: int) -> Problem:
    """``no objects found in PATH`` for a path of ``files`` YAML files that hold no document."""
    what = "" if files else " (no *.yaml or *.yml file)"
    return Problem("", FILE, "", "", "", f"no objects found in {path}{what}", WARNING)
