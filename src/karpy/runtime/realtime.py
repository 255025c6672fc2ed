"""``RealtimeLoop``: the same loop, but ``step()`` waits for the wall clock (or a wake-up).

The only place in karpy's core, controllers and operator that reads the wall clock or sleeps (the
Kubernetes and AWS adapters read it for their own protocol: Lease renew times, request timeouts,
retry backoff). Used by the operator; tests and the simulator use the virtual
:class:`~karpy.runtime.loop.Loop`.
"""

from __future__ import annotations

import threading
import time

from karpy.runtime.loop import INFINITY, Loop

__all__ = ["RealtimeLoop"]


class RealtimeLoop(Loop):
    def __init__(self, *, max_wait: float = 1.0) -> None:
        super().__init__(start=time.time())
        self._wakeup = threading.Event()
        self._lock = threading.RLock()
        self.max_wait = max_wait

    def notify(self) -> None:
        """Called from another thread (e.g. a watch) to make ``step()`` look again."""
        self._wakeup.set()

    def step(self) -> bool:
        with self._lock:
            due = self.peek()
        wall = time.time()
        if due > wall:
            timeout = self.max_wait if due == INFINITY else min(self.max_wait, due - wall)
            self._wakeup.wait(timeout)
            self._wakeup.clear()
            with self._lock:
                self._now = max(self._now, time.time())
                if self.peek() > self._now:
                    return True
        with self._lock:
            self._now = max(self._now, time.time())
            return super().step()
