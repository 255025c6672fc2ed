"""A TCP proxy in front of the emulator that a fault test can cut, slow down and restore.

:class:`FaultProxy` listens on 127.0.0.1 (a free port) and forwards every connection to a target
``host:port``, from its own thread and event loop. A test can:

- :meth:`FaultProxy.cut`: close every open connection and refuse new ones (the API server is
  unreachable: an outage, a network partition) until :meth:`FaultProxy.restore`;
- set :attr:`FaultProxy.latency` (seconds): every chunk a client sends waits that long before it
  is forwarded, so each HTTP request answers that much later (a slow API server);
- read :attr:`FaultProxy.connections` (accepted so far) and :attr:`FaultProxy.refused`.

Used by the fault suite (tests/adapters/test_faults_*.py) and the kube launch benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from typing import Any


class FaultProxy:
    def __init__(self, target: str, *, latency: float = 0.0) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host.removeprefix("http://").removeprefix("https://") or "127.0.0.1", int(port))
        self.latency = latency
        self.connections = 0
        self.refused = 0
        self._cut = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port)
        )
        self._ready.set()
        self._loop.run_forever()
        # stopped: end the connections still piped (their tasks would be dropped half-run)
        pending = [task for task in asyncio.all_tasks(self._loop) if not task.done()]
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, delay: bool) -> None:
        try:
            while not reader.at_eof():
                chunk = await reader.read(65536)
                if not chunk:
                    break
                if delay and self.latency > 0:
                    await asyncio.sleep(self.latency)
                if self._cut:
                    break
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self._cut:
            self.refused += 1
            client_writer.close()
            return
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self.refused += 1
            client_writer.close()
            return
        self.connections += 1
        self._writers |= {client_writer, server_writer}
        try:
            await asyncio.gather(
                self._pipe(client_reader, server_writer, delay=True),
                self._pipe(server_reader, client_writer, delay=False),
            )
        finally:
            self._writers -= {client_writer, server_writer}

    def _call(self, fn: Any) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(5)

    def cut(self) -> None:
        """Drop every open connection and refuse new ones until :meth:`restore`."""

        def close_all() -> None:
            self._cut = True
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.transport.abort()
            self._writers.clear()

        self._call(close_all)

    def restore(self) -> None:
        def reopen() -> None:
            self._cut = False

        self._call(reopen)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return  # stopped already
        self.cut()

        def halt() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(halt)
        self._thread.join(5)
