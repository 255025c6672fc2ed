"""The asyncio loop of the Kubernetes edge, on its own daemon thread ("sync core, async edge").

:class:`Edge` runs the loop that ``kubernetes_asyncio``, the watches, the Lease election and the
event posts live on; :meth:`Edge.call` runs a coroutine there and waits for it from another thread
(the operator's), interruptibly. Used by :class:`karpy.adapters.kube.client.KubeClient` (which
re-exports it) and the operator's shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from karpy.adapters.kube import errors as kerrors

__all__ = ["INTERRUPT_POLL", "Edge"]

T = TypeVar("T")
INTERRUPT_POLL = 0.1  # how often a waiting call looks at its interrupt event (seconds)


class Edge:
    """The asyncio loop of the Kubernetes edge, on its own daemon thread."""

    def __init__(self, name: str = "karpy-kube") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float | None = None,
        *,
        interrupt: threading.Event | None = None,
    ) -> T:
        """Run ``coro`` on the edge loop and wait for it (from any other thread). With
        ``interrupt``, the wait ends (the request cancelled, :class:`~.errors.Interrupted` raised)
        within :data:`INTERRUPT_POLL` s of the event being set, or at once if it already is."""
        if interrupt is not None and interrupt.is_set():
            coro.close()
            raise kerrors.Interrupted("stopping: the call was not made")
        future = self.submit(coro)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            slice_ = INTERRUPT_POLL if interrupt is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                slice_ = left if slice_ is None else min(slice_, left)
            try:
                return future.result(None if slice_ is None else max(slice_, 0.0))
            except concurrent.futures.TimeoutError:
                if interrupt is not None and interrupt.is_set():
                    future.cancel()
                    raise kerrors.Interrupted("stopping: the call's answer is not waited for") from None
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise kerrors.Unavailable(f"Kubernetes call did not answer within {timeout} s") from None

    def stop(self, timeout: float = 2.0) -> None:
        """Cancel every task on the edge loop, stop it and join the thread."""
        if not self._started or not self.loop.is_running():
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.submit(shutdown()).result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
