"""Liveness of the operator's loop: "the loop is alive", not "the last pass was short".

:class:`Heartbeat` holds the time of the loop's last sign of progress. The operator hands
:meth:`Heartbeat.beat` to its kube client as ``on_answer``: it beats whenever a request of a port
call (``get``, ``patch``, ``batch`` ...: what the controllers wait for) ends with an answer or an
error, so a ``batch`` of 500 launches beats 500 times, not once at its end. A request cancelled
(the operator stopping) is no progress; the watches, the Lease renewals and the event posts are
requests of the edge itself and are not counted (they would keep a stuck operator "alive"). The
operator beats too at every loop turn and at the start and end of every controller run
(:mod:`karpy.operator.guard`).

:meth:`Heartbeat.check` (``/healthz``) fails only when the operator's thread has died or nothing
beat for ``timeout`` seconds (60 by default): a pass of 500 launches on a slow API server keeps
getting answers and stays alive however long it takes, and so does an outage (every request
fails within its timeout: a restart would not help); a thread stuck in a deadlock or an endless
computation does not. The check is a clock read: no lock, no API call. Built by
:class:`karpy.operator.runner.Operator`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["LIVENESS_TIMEOUT", "Heartbeat"]

LIVENESS_TIMEOUT = 60.0  # seconds without progress before /healthz answers 503


class Heartbeat:
    """The loop's last sign of progress (monotonic seconds) and the thread that runs the loop."""

    def __init__(
        self, timeout: float = LIVENESS_TIMEOUT, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.timeout = timeout
        self.clock = clock
        self.last = clock()
        self.thread: threading.Thread | None = None  # set by the loop's thread when it starts

    def beat(self) -> None:
        """A sign of progress (any thread; a float assignment, atomic)."""
        self.last = self.clock()

    def check(self) -> tuple[bool, str]:
        """(alive, why not): dead once the loop's thread ended or after ``timeout`` s of silence."""
        thread = self.thread
        if thread is not None and not thread.is_alive():
            return False, "the operator's loop has stopped"
        quiet = self.clock() - self.last
        if quiet >= self.timeout:
            return False, f"the operator's loop made no progress for {quiet:.0f} s"
        return True, "ok"
