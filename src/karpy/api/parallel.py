"""A long YAML stream parsed in a forked child while the caller uses what is already parsed.

Reading 5,000 pod documents takes about as long as validating them, and both are Python on one
core. :func:`parsed_in_a_child` forks (Linux): the child runs ``parse(0)`` and sends the
documents down a pipe, pickled in batches of :data:`BATCH`, then an end mark; the parent yields
them as they arrive, so :func:`karpy.api.load.load_documents` validates one batch while the
child parses the next. The documents are the ones ``parse(0)`` yields in the parent, in the same
order (plain YAML values and Problems pickle whole, shared anchors included).

Whatever goes wrong on the child's side (it cannot fork, dies, sends something that does not
unpickle) costs nothing but time: the parent parses from the first document it has not yielded
(``parse(start)``), as it would have without a child. A caller that stops early, or an error
in the caller, ends the child (SIGKILL); the child is always reaped.
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

__all__ = ["BATCH", "available", "parsed_in_a_child"]

BATCH = 200  # documents per pickled message
_HEADER = struct.Struct(">I")
_END = 0  # a message of length 0 ends the stream

Documents = Iterator[tuple[str, int, object]]  # (file, document index, document or Problem)


def available() -> bool:
    """Whether this platform forks cheaply (Linux; elsewhere streams are parsed in-process)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def parsed_in_a_child(parse: Callable[[int], Documents]) -> Documents:
    """What ``parse(0)`` yields, parsed in a forked child (see the module docstring); ``parse(n)``
    yields the documents of index ``n`` and after."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        yield from parse(0)
        return
    if pid == 0:
        _child(parse, read_end, write_end)
    os.close(write_end)
    resume, finished = 0, False
    try:
        with open(read_end, "rb") as pipe:
            while True:
                try:
                    batch = _receive(pipe)
                except (EOFError, OSError, pickle.UnpicklingError, ValueError, TypeError):
                    break  # the child died or broke the stream: parse the rest here
                if batch is None:
                    finished = True
                    break
                for document in batch:
                    resume = document[1] + 1
                    yield document
    finally:
        _reap(pid, kill=not finished)
    if not finished:
        yield from parse(resume)


def _child(parse: Callable[[int], Documents], read_end: int, write_end: int) -> None:
    """In the child: parse, send the batches and the end mark, and leave without cleaning up
    anything of the parent's (``os._exit``)."""
    code = 1
    try:
        os.close(read_end)
        with open(write_end, "wb") as out:
            batch: list[tuple[str, int, object]] = []
            for document in parse(0):
                batch.append(document)
                if len(batch) >= BATCH:
                    _send(out, batch)
                    batch = []
            if batch:
                _send(out, batch)
            out.write(_HEADER.pack(_END))
        code = 0
    except BaseException:  # (the parent parses the rest itself)
        pass
    finally:
        os._exit(code)


def _send(out: BinaryIO, batch: list[tuple[str, int, object]]) -> None:
    data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)))
    out.write(data)


def _receive(pipe: BinaryIO) -> list[tuple[str, int, object]] | None:
    """The next batch, or None at the end mark; EOFError when the stream stops short."""
    head = pipe.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the child's stream stopped")
    (size,) = _HEADER.unpack(head)
    if size == _END:
        return None
    data = pipe.read(size)
    if len(data) < size:
        raise EOFError("the child's stream stopped in a batch")
    batch = pickle.loads(data)
    if not isinstance(batch, list):
        raise TypeError("not a batch")
    return batch


def _reap(pid: int, *, kill: bool) -> None:
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # (reaped already where SIGCHLD is ignored)
        os.waitpid(pid, 0)
