"""What the ``karpy`` client and the daemon share: where the socket is, how a message is framed,
and the fingerprint that says whether a daemon runs the client's code.

Light on purpose: the client imports it before anything else, so it uses the standard library
only (no pathlib, typing or dataclasses beyond what ``import karpy`` already loaded).

- :func:`socket_path`: ``KARPY_DAEMON_SOCKET``, else ``$XDG_RUNTIME_DIR/karpy-UID/`` (``/tmp``
  without it) and one socket per karpy installation (``daemon-TAG.sock``, TAG from the package's
  folder), so two virtualenvs never share a daemon. :func:`private_folder` makes the folder
  (mode 0700) and refuses one that others can write or that another user owns.
- :func:`send` / :func:`recv`: a message is a 4-byte big-endian length and a JSON object;
  ``send`` can pass file descriptors with it (``SCM_RIGHTS``), ``recv`` takes them.
- :func:`fingerprint` / :func:`mismatch`: ``code`` hashes the name, size and modification time
  of every file of the karpy package, the interpreter and its version, and the installed
  distributions (``*.dist-info`` names carry versions); ``options`` holds what the interpreter
  decides at start (``KARPY_PURE``, ``-X`` and other interpreter flags). A daemon serves only a
  client with the same fingerprint; one whose ``code`` differs is out of date and stops.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "MAX_FDS",
    "MAX_MESSAGE",
    "PACKAGE",
    "WireError",
    "fingerprint",
    "mismatch",
    "private_folder",
    "recv",
    "send",
    "socket_path",
]

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the karpy package folder
MAX_MESSAGE = 64 * 1024 * 1024  # a request holds argv and the environment: far below this
MAX_FDS = 3  # stdin, stdout, stderr
_HEADER = struct.Struct(">I")
_SUN_PATH_MAX = 107  # sockaddr_un.sun_path less the terminating NUL (Linux)


class WireError(Exception):
    """The other end broke the protocol or the socket cannot be used (the message says how)."""


def socket_path(environ: Mapping[str, str] = os.environ) -> str:
    """The daemon's socket for this karpy installation (see the module docstring)."""
    given = environ.get("KARPY_DAEMON_SOCKET", "")
    if given:
        path = os.path.abspath(given)
    else:
        base = environ.get("XDG_RUNTIME_DIR", "") or "/tmp"
        tag = hashlib.sha256(PACKAGE.encode()).hexdigest()[:12]
        path = os.path.join(base, f"karpy-{os.getuid()}", f"daemon-{tag}.sock")
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise WireError(
            f"socket path {path} is longer than {_SUN_PATH_MAX} bytes: set KARPY_DAEMON_SOCKET shorter"
        )
    return path


def private_folder(path: str) -> None:
    """Make the socket's folder (0700) or check that only this user can write to it."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.stat(folder)
    if st.st_uid != os.getuid():
        raise WireError(f"{folder} belongs to uid {st.st_uid}, not to this user ({os.getuid()})")
    if st.st_mode & 0o022:
        raise WireError(
            f"{folder} can be written by others (mode {st.st_mode & 0o777:o}): use a private folder"
        )


def send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one framed JSON ``message``, passing ``fds`` along with its first bytes."""
    data = json.dumps(message, separators=(",", ":")).encode()
    frame = _HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [frame], list(fds)) if fds else 0
    if sent < len(frame):  # (sending nothing to a peer that answered and closed would fail)
        sock.sendall(frame[sent:])


def _read(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise WireError("connection closed in the middle of a message")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket, *, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors sent with it; ``(None, [])`` when the peer closed first."""
    fds: list[int] = []
    if max_fds:
        head, fds, flags, _ = socket.recv_fds(sock, _HEADER.size, max_fds)
        if flags & socket.MSG_CTRUNC:
            _close(fds)
            raise WireError(f"more than {max_fds} file descriptors sent")
    else:
        head = sock.recv(_HEADER.size)
    if not head:
        _close(fds)
        return None, []
    try:
        if len(head) < _HEADER.size:
            head += _read(sock, _HEADER.size - len(head))
        (size,) = _HEADER.unpack(head)
        if size > MAX_MESSAGE:
            raise WireError(f"message of {size} bytes (at most {MAX_MESSAGE})")
        message = json.loads(_read(sock, size))
    except (WireError, ValueError) as exc:
        _close(fds)
        raise WireError(f"bad message: {exc}") from exc
    if not isinstance(message, dict):
        _close(fds)
        raise WireError("bad message: not a JSON object")
    return message, fds


def _close(fds: Sequence[int]) -> None:
    for fd in fds:
        os.close(fd)


def _files(folder: str, out: list[tuple[str, int, int]]) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    _files(entry.path, out)
            else:
                st = entry.stat()
                out.append((entry.path, st.st_size, st.st_mtime_ns))


def _distributions() -> list[str]:
    out: list[str] = []
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        out.extend(n for n in names if n.endswith((".dist-info", ".egg-info", ".pth")))
    return sorted(out)


def fingerprint(environ: Mapping[str, str] = os.environ, *, package: str = PACKAGE) -> dict[str, str]:
    """``{"code": digest, "options": text}`` of this process (see the module docstring);
    ``package``: the folder whose files count as its code."""
    files: list[tuple[str, int, int]] = []
    _files(package, files)
    files.sort()
    code = hashlib.sha256()
    for part in (repr(files), sys.executable, sys.version, repr(_distributions())):
        code.update(part.encode(errors="surrogateescape"))
        code.update(b"\0")
    pure = environ.get("KARPY_PURE", "") not in ("", "0")
    options = f"KARPY_PURE={int(pure)} flags={tuple(sys.flags)} X={sorted(sys._xoptions.items())}"
    return {"code": code.hexdigest(), "options": options}


def mismatch(ours: Mapping[str, str], theirs: object) -> tuple[str, bool] | None:
    """Why a client with fingerprint ``theirs`` cannot be served by a daemon with ``ours``, and
    whether the daemon is out of date (its code differs) — or None when they match."""
    if not isinstance(theirs, dict) or theirs.get("code") != ours["code"]:
        return (
            "the daemon runs older or other code than this karpy (upgraded or edited since it started)",
            True,
        )
    if theirs.get("options") != ours["options"]:
        return f"the daemon was started with other interpreter options ({ours['options']})", False
    return None
