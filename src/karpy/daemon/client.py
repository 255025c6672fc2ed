"""The ``karpy`` side of the daemon: hand a command to a running daemon and wait for its status.

:func:`forward` returns the command's exit status, or None when no daemon took it (none
running, ``KARPY_NO_DAEMON`` set, or one that refused: other code or options); the caller then
runs the command itself. Once a worker has started the command, its outcome is final: the
client never runs it a second time. While the worker runs, SIGINT, SIGTERM and SIGHUP sent to
the client are passed on to it (Ctrl-C stops the command as it would a local one); if the
client goes away, the worker is stopped (:mod:`karpy.daemon.server`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.daemon import wire

__all__ = ["INTERRUPTED", "NO_DAEMON", "ask", "forward", "request", "streams"]

NO_DAEMON = "KARPY_NO_DAEMON"
INTERRUPTED = 128 + signal.SIGINT  # the status of a command stopped by Ctrl-C
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def streams() -> list[dict[str, Any] | None]:
    """How this process's stdin, stdout and stderr are set up (encoding, buffering), for the
    worker to set up its own alike; None for a closed descriptor."""
    out: list[dict[str, Any] | None] = []
    for fd, stream in ((0, sys.stdin), (1, sys.stdout), (2, sys.stderr)):
        try:
            os.fstat(fd)
        except OSError:
            out.append(None)
            continue
        out.append(
            {
                "encoding": getattr(stream, "encoding", None) or "utf-8",
                "errors": getattr(stream, "errors", None) or "strict",
                "line_buffering": bool(getattr(stream, "line_buffering", False)),
                "write_through": bool(getattr(stream, "write_through", False)),
            }
        )
    return out


def request(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``run`` request for ``argv`` (``sys.argv``: the program, then its arguments)."""
    mask = os.umask(0)
    os.umask(mask)
    return {
        "op": "run",
        "fingerprint": wire.fingerprint(environ),
        "argv": list(argv),
        "cwd": os.getcwd(),
        "env": dict(environ),
        "umask": mask,
        "streams": streams(),
    }


def forward(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> int | None:
    """Run ``argv`` in the daemon: its exit status, or None when no daemon took it (always None
    off Linux, where the daemon does not run)."""
    if environ.get(NO_DAEMON, "") not in ("", "0") or not sys.platform.startswith("linux"):
        return None
    try:
        path = wire.socket_path(environ)
    except wire.WireError:
        return None
    if not os.path.exists(path):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError:
            return None  # a socket left by a daemon that died: run here
        try:
            message = request(argv, environ)
        except OSError:
            return None  # (no working folder: it was removed) run here, as before
        fds = [fd for fd, spec in enumerate(message["streams"]) if spec is not None]
        try:
            wire.send(sock, message, fds)
            reply, _ = wire.recv(sock)
        except (OSError, wire.WireError):
            return None  # nothing started yet
        except KeyboardInterrupt:
            return INTERRUPTED  # Ctrl-C before the worker started: closing the socket stops it
        if reply is None:
            return None
        if "refused" in reply:
            _note(f"karpy: not run by the daemon: {reply['refused']}; running here")
            if reply.get("stopping"):
                _note("karpy: the daemon stopped; `karpy daemon start` starts one with this code")
            return None
        return _wait(sock, int(reply["pid"]))
    finally:
        sock.close()


def ask(path: str, message: Mapping[str, Any]) -> dict[str, Any] | None:
    """Send ``message`` (``status``, ``stop``) to the daemon on ``path``: its answer, or None when
    none listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        wire.send(sock, message)
        reply, _ = wire.recv(sock)
    except (OSError, wire.WireError):
        return None
    finally:
        sock.close()
    return reply


def _wait(sock: socket.socket, pid: int) -> int:
    """Pass signals on to worker ``pid`` until it reports its exit status."""

    def pass_on(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in _FORWARDED}
    try:
        try:
            reply, _ = wire.recv(sock)
        except (OSError, wire.WireError):
            reply = None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if reply is None or "exit" not in reply:
        _note(f"karpy: the daemon's worker (pid {pid}) ended without an exit status")
        return 1
    return int(reply["exit"])


def _note(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
