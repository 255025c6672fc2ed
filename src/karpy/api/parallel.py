"""A long YAML stream parsed in a forked child while the caller uses what is already parsed.

Reading 5,000 pod documents takes about as long as validating them, and both are Python on one
core. :func:`parsed_in_a_child` forks (Linux): the child runs ``parse(0)`` and writes the
documents, pickled in batches of :data:`BATCH`, to an anonymous in-memory file
(``memfd_create``), announcing each batch's size on a pipe, then an end mark; the parent yields
them as they arrive, so :func:`karpy.api.load.load_documents` validates one batch while the
child parses the next. The child never waits for the parent (a pipe would stop it at 64 KiB). The
documents are the ones ``parse(0)`` yields in the parent, in the same order (plain YAML values
and Problems pickle whole, shared anchors included).

Whatever goes wrong on the child's side (it cannot fork, dies, sends something that does not
unpickle) costs nothing but time: the parent parses from the first document it has not yielded
(``parse(start)``), as it would have without a child. A caller that stops early, or an error
in the caller, ends the child (SIGKILL); the child is always reaped.

:class:`Started` forks at once rather than at the first document asked for, so the child parses
while the caller still has other work to do first (``karpy plan`` imports its schemas
meanwhile: :class:`karpy.api.documents.Reading`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable, Iterator
from typing import BinaryIO

__all__ = ["BATCH", "Started", "available", "parsed_in_a_child"]

BATCH = 200  # documents per pickled message
_HEADER = struct.Struct(">I")
_END = 0  # a message of length 0 ends the stream

Documents = Iterator[tuple[str, int, object]]  # (file, document index, document or Problem)


def available() -> bool:
    """Whether this platform forks cheaply and has anonymous in-memory files (Linux; elsewhere
    streams are parsed in-process)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(os, "memfd_create")


def parsed_in_a_child(parse: Callable[[int], Documents]) -> Documents:
    """What ``parse(0)`` yields, parsed in a forked child (see the module docstring); ``parse(n)``
    yields the documents of index ``n`` and after. The child is forked when the first document is
    asked for."""
    yield from Started(parse)  # (its iteration ends and reaps the child however the caller left)


class Started:
    """What ``parse(0)`` yields, being parsed from now on by a child forked here: the caller can
    do other work (import the schemas, say) before it iterates. Iterate once; :meth:`close` (or
    the ``with`` block) ends a child that has not finished and reaps it, however the caller left."""

    def __init__(self, parse: Callable[[int], Documents]) -> None:
        self._parse = parse
        self._pid = 0
        self._finished = False
        self._sizes: BinaryIO | None = None
        self._data = -1
        made: list[int] = []
        try:
            made.append(os.memfd_create("karpy-documents", os.MFD_CLOEXEC))
            made.extend(os.pipe())
            pid = os.fork()
        except OSError:
            for fd in made:
                os.close(fd)
            return  # (parsed here when iterated)
        data, read_end, write_end = made
        if pid == 0:
            _child(parse, read_end, write_end, data)
        os.close(write_end)
        self._pid, self._data = pid, data
        self._sizes = open(read_end, "rb")  # noqa: SIM115 (closed by close())

    def __iter__(self) -> Documents:
        resume, offset = 0, 0
        try:
            while self._sizes is not None:
                try:
                    size = _size(self._sizes)
                    if size == _END:
                        self._finished = True
                        break
                    batch = _batch(_read_at(self._data, size, offset))
                except (EOFError, OSError, pickle.UnpicklingError, ValueError, TypeError):
                    break  # the child died or broke the stream: parse the rest here
                offset += size
                for document in batch:
                    resume = document[1] + 1
                    yield document
        finally:
            self.close()
        if not self._finished:
            yield from self._parse(resume)

    def close(self) -> None:
        """End the child (unless it sent the whole stream), reap it and free the stream; safe to
        call again."""
        if self._pid:
            _reap(self._pid, kill=not self._finished)
            self._pid = 0
        if self._sizes is not None:
            self._sizes.close()
            self._sizes = None
        if self._data >= 0:
            os.close(self._data)
            self._data = -1

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _child(parse: Callable[[int], Documents], read_end: int, write_end: int, data: int) -> None:
    """In the child: parse, write the batches and announce each, then the end mark, and leave
    without cleaning up anything of the parent's (``os._exit``)."""
    code = 1
    try:
        os.close(read_end)
        with open(write_end, "wb", buffering=0) as sizes:
            batch: list[tuple[str, int, object]] = []
            for document in parse(0):
                batch.append(document)
                if len(batch) >= BATCH:
                    _send(sizes, data, batch)
                    batch = []
            if batch:
                _send(sizes, data, batch)
            sizes.write(_HEADER.pack(_END))
        code = 0
    except BaseException:  # (the parent parses the rest itself)
        pass
    finally:
        os._exit(code)


def _send(sizes: BinaryIO, data: int, batch: list[tuple[str, int, object]]) -> None:
    message = memoryview(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
    written = 0
    while written < len(message):  # (appended: the child alone moves the file's offset)
        written += os.write(data, message[written:])
    sizes.write(_HEADER.pack(len(message)))


def _size(sizes: BinaryIO) -> int:
    """The size of the next batch, or :data:`_END`; EOFError when the stream stops short."""
    head = sizes.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the child's stream stopped")
    (size,) = _HEADER.unpack(head)
    return int(size)


def _read_at(data: int, size: int, offset: int) -> bytes:
    """``size`` bytes of the stream from ``offset`` (``pread``: the shared offset is the child's)."""
    parts: list[bytes] = []
    while size > 0:
        part = os.pread(data, size, offset)
        if not part:
            raise EOFError("the child's batch is short")
        parts.append(part)
        size -= len(part)
        offset += len(part)
    return b"".join(parts)


def _batch(message: bytes) -> list[tuple[str, int, object]]:
    batch = pickle.loads(message)
    if not isinstance(batch, list):
        raise TypeError("not a batch")
    return batch


def _reap(pid: int, *, kill: bool) -> None:
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # (reaped already where SIGCHLD is ignored)
        os.waitpid(pid, 0)
