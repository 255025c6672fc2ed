"""The kube client's client-side rate limit: a token bucket (client-go's ``flowcontrol``) with priority.

:class:`TokenBucket` holds ``burst`` tokens and gains ``qps`` per second (client-go's
``NewTokenBucketRateLimiter(qps, burst)``, a ``golang.org/x/time/rate`` limiter): it starts full,
and a request takes one token. Taking is a *reservation*, as ``rate.Limiter.Wait``: the count may go
below zero, and a request that finds none waits until its own token has been earned, so waiters are
served in the order they came and the long-run rate never exceeds ``qps``.

Two priorities, as upstream's operator has (the leader-election client is a client of its own, and
the API server's priority and fairness puts Lease renewals and watches ahead of bulk writes):

- :meth:`TokenBucket.acquire` (the controllers' calls: the :class:`~karpy.ports.KubeAPI` methods
  and ``batch``): waits for its token;
- :meth:`TokenBucket.charge` (the edge's own requests: Lease renewals, list+watch, event posts):
  takes a token at once, into debt if need be, and never waits; the debt delays the controllers'
  later calls, so the total stays within ``qps`` while a renewal is never queued behind a burst.

``qps <= 0`` turns the limit off (client-go's negative QPS). Used on the edge loop only (no lock):
by :class:`karpy.adapters.kube.client.KubeClient`. The clock is injectable (tests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "TokenBucket"]

DEFAULT_QPS = 200.0  # upstream Karpenter's KUBE_CLIENT_QPS
DEFAULT_BURST = 300  # KUBE_CLIENT_BURST


class TokenBucket:
    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self._clock = clock or time.monotonic
        self._tokens = float(self.burst)
        self._at = self._clock()
        self.waited = 0.0  # seconds the acquired tokens were waited for, in all (a measure of throttling)

    @property
    def enabled(self) -> bool:
        return self.qps > 0

    def tokens(self) -> float:
        """The tokens now (negative: reserved ahead by waiting requests, or owed by charges)."""
        self._refill()
        return self._tokens

    def _refill(self) -> None:
        now = self._clock()
        if now > self._at:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = max(self._at, now)

    def reserve(self) -> float:
        """Take a token; the seconds until it is earned (0: at once)."""
        if not self.enabled:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def cancel(self) -> None:
        """Give back a reserved token that was not used (its request was cancelled)."""
        if self.enabled:
            self._tokens = min(float(self.burst), self._tokens + 1.0)

    def charge(self) -> None:
        """Take a token without waiting (high priority; the count may go into debt)."""
        self.reserve()

    async def acquire(self) -> None:
        """Wait for a token (normal priority, first come first served)."""
        delay = self.reserve()
        if delay <= 0:
            return
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancel()
            raise
        self.waited += delay
