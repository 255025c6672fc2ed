"""The daemon: a warm process that forks one worker per ``karpy`` command it is handed.

:func:`serve` binds the socket (:func:`karpy.daemon.wire.socket_path`, mode 0600 in a private
folder), then answers one connection at a time from the same user (checked with
``SO_PEERCRED``):

- ``{"op": "status"}``: its pid, socket, start time, commands run and fingerprint.
- ``{"op": "stop"}``: it answers, removes the socket and exits.
- ``{"op": "run", ...}`` (:func:`karpy.daemon.client.request`) with the client's stdin, stdout
  and stderr: when the fingerprints differ it refuses (and stops, when its own code is out of
  date); otherwise it forks a worker and goes back to listening. The worker takes the client's
  descriptors as 0, 1 and 2, its working folder, environment and umask, sets up ``sys.stdin``,
  ``sys.stdout`` and ``sys.stderr`` as the client's are (encoding, buffering), tells the client
  its pid, runs ``run(argv)`` as the entry point would (``SystemExit`` gives the status; another
  exception prints its traceback and gives 1), runs the ``atexit`` functions, flushes, reports
  ``{"exit": status}`` and ends. A worker whose client goes away (the socket closes) gets
  SIGTERM.

The daemon never runs a command itself, so each command starts from the same warm state and
leaves nothing behind for the next. It must be single-threaded when it forks: ``warm`` may
import and compute, not start threads. Workers are reaped by the kernel (SIGCHLD ignored in
the daemon, restored in the worker). SIGTERM or SIGINT stops the daemon; running workers go on
to their end.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from karpy.daemon import wire

__all__ = ["REQUEST_SECONDS", "Daemon", "serve"]

Runner = Callable[[Sequence[str]], object]
REQUEST_SECONDS = 10.0  # to receive a whole request once connected
_KEPT: list[object] = []  # the daemon's own std streams, kept alive in a worker (they own fds 0-2)


class _Stop(Exception):
    pass


class Daemon:
    """The listening daemon (see the module docstring): :meth:`bind`, then :meth:`serve_forever`."""

    def __init__(self, path: str, run: Runner, *, environ: Mapping[str, str] = os.environ) -> None:
        self.path = path
        self.run_command = run
        self.fingerprint = wire.fingerprint(environ)
        self.started = time.time()
        self.commands = 0
        self.listener: socket.socket | None = None

    def bind(self) -> None:
        """Take the socket: refuse when a daemon answers on it, replace one left by a dead daemon."""
        wire.private_folder(self.path)
        if os.path.exists(self.path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.path)
            except OSError:
                os.unlink(self.path)  # nobody listens: a daemon that died left it
            else:
                raise wire.WireError(f"a karpy daemon already listens on {self.path}")
            finally:
                probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(self.path)
        finally:
            os.umask(old)
        listener.listen(64)
        self.listener = listener

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "socket": self.path,
            "started": self.started,
            "commands": self.commands,
            "fingerprint": self.fingerprint,
        }

    def serve_forever(self) -> None:
        """Answer connections until ``stop`` or SIGTERM/SIGINT; then remove the socket."""
        assert self.listener is not None, "bind() first"

        def stop(_signum: int, _frame: object) -> None:
            raise _Stop

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the workers
        try:
            while True:
                conn, _ = self.listener.accept()
                try:
                    self._answer(conn)
                except wire.WireError as exc:
                    _log(f"bad request: {exc}")
                except OSError as exc:
                    _log(f"connection lost: {exc}")
                finally:
                    conn.close()
        except _Stop:
            pass
        finally:
            self.close()

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def _answer(self, conn: socket.socket) -> None:
        uid = _peer_uid(conn)
        if uid != os.getuid():
            _log(f"refused a connection from uid {uid}")
            return
        conn.settimeout(REQUEST_SECONDS)  # a client that connects and sends nothing holds no one up
        message, fds = wire.recv(conn, max_fds=wire.MAX_FDS)
        conn.settimeout(None)
        if message is None:
            return
        try:
            op = message.get("op")
            if op == "status":
                wire.send(conn, self.status())
            elif op == "stop":
                wire.send(conn, {"stopping": os.getpid()})
                raise _Stop
            elif op == "run":
                self._run(conn, message, fds)
            else:
                raise wire.WireError(f"unknown op {op!r}")
        finally:
            for fd in fds:
                os.close(fd)

    def _run(self, conn: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
        refused = wire.mismatch(self.fingerprint, message.get("fingerprint"))
        if refused is not None:
            why, stale = refused
            wire.send(conn, {"refused": why, "stopping": stale})
            if stale:
                _log(f"stopping: {why}")
                raise _Stop
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # nothing of the daemon's may reach the client through a worker
        pid = os.fork()
        if pid == 0:
            _worker(conn, self.listener, message, fds, self.run_command)
        self.commands += 1


def serve(path: str, run: Runner, *, ready: Callable[[Daemon], None] | None = None) -> None:
    """Bind ``path`` and serve until stopped (``ready`` is called once the socket listens)."""
    daemon = Daemon(path, run)
    daemon.bind()
    try:
        if ready is not None:
            ready(daemon)
        daemon.serve_forever()
    finally:
        daemon.close()


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def _log(line: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    sys.stderr.write(f"{stamp} karpy daemon[{os.getpid()}]: {line}\n")
    sys.stderr.flush()


def _worker(
    conn: socket.socket,
    listener: socket.socket | None,
    message: dict[str, Any],
    fds: list[int],
    run: Runner,
) -> NoReturn:
    """In the forked worker: become the client's process, run the command, report, end."""
    status = 1
    try:
        if listener is not None:
            listener.close()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _take_streams(fds, message.get("streams") or [None, None, None])
        fds.clear()
        os.chdir(message["cwd"])
        os.umask(int(message["umask"]))
        os.environ.clear()
        os.environ.update(message["env"])
        sys.argv = list(message["argv"])
        try:
            wire.send(conn, {"pid": os.getpid()})
        except OSError:  # the client went away before the command started: nothing to run
            os._exit(1)
        threading.Thread(target=_watch_client, args=(conn,), daemon=True).start()
        status = _run(run, sys.argv[1:])
        atexit._run_exitfuncs()
    except BaseException:  # the worker must report and end, whatever happened
        _print_exception()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        with contextlib.suppress(OSError):
            wire.send(conn, {"exit": status})
        os._exit(status)


def _run(run: Runner, args: Sequence[str]) -> int:
    """The exit status a process running ``run(args)`` as its entry point would end with."""
    try:
        run(args)
    except SystemExit as exc:
        return _status(exc.code)
    except KeyboardInterrupt:
        _print_exception()
        return 128 + signal.SIGINT
    except BaseException:
        _print_exception()
        return 1
    return 0


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")  # sys.exit("message"): printed, status 1
    return 1


def _print_exception() -> None:
    try:
        traceback.print_exc()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _take_streams(fds: list[int], specs: Sequence[dict[str, Any] | None]) -> None:
    """Make the client's descriptors this process's 0, 1 and 2, and ``sys.std*`` over them."""
    given = iter(fds)
    for target, spec in enumerate(specs[:3]):
        fd = os.open(os.devnull, os.O_RDWR) if spec is None else next(given)
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    names = ("stdin", "stdout", "stderr")
    _KEPT.extend(getattr(sys, name) for name in names)
    _KEPT.extend(getattr(sys, f"__{name}__") for name in names)
    for target, (name, spec) in enumerate(zip(names, specs[:3], strict=True)):
        spec = spec or {}
        raw = io.FileIO(target, "r" if target == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if target == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffered,
            encoding=spec.get("encoding") or "utf-8",
            errors=spec.get("errors") or "strict",
            line_buffering=bool(spec.get("line_buffering")),
            write_through=bool(spec.get("write_through")),
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _watch_client(conn: socket.socket) -> None:
    """SIGTERM this worker when its client closes the connection (it died or was killed)."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)
