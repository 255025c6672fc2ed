"""``KubeEvents``: an :class:`~karpy.ports.EventSink` posting ``events.k8s.io/v1`` Events.

``record()`` is called on the operator's thread and never blocks it: the Event is put on a
bounded queue that a worker task on the edge loop drains (a few POSTs in flight at a time). Only
the leader records (followers would duplicate every event). Repeats of the same (object, reason,
message) within ``dedupe_seconds`` are dropped, as Karpenter's recorder does. Events about
cluster-scoped objects (NodePools, NodeClaims, Nodes) go to the ``default`` namespace, as kubectl
expects.

A POST that fails for a reason worth retrying (a 5xx, 429, a timeout or a broken connection: an
outage) puts its Event back at the head of the queue and the worker backs off exponentially
(``backoff_first`` doubled per failure, at most ``backoff_cap`` seconds) before it tries again,
so Events recorded during an outage are posted once the API server answers. ``409
AlreadyExists`` counts as posted (the answer to an earlier attempt was lost; the name is ours).
Any other refusal (400, 403, 404, 422) drops that Event (counted in ``rejected``, logged at info).
The queue holds at most ``max_queued`` Events waiting (plus up to ``in_flight`` being posted):
when it is full the oldest is dropped (counted in ``dropped``); a burst of drops is logged once,
when it starts (summed up at info when the queue has drained). A failure streak is logged as one
warning line, its end at info. The worker ends with the client (the edge loop cancels it); the
Events still queued then are counted in the log line. Built by :mod:`karpy.operator`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import Any

from karpy.adapters.kube import client as client_mod
from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube import leader as leader_mod
from karpy.adapters.kube import watch as watch_mod
from karpy.model import errors
from karpy.ports import Event, EventSink

__all__ = ["KubeEvents", "event_body"]

log = logging.getLogger("karpy.kube.events")

Item = tuple[str, dict[str, Any]]  # (POST path, Event body)


def event_body(event: Event, *, controller: str, instance: str, uid: str = "") -> dict[str, Any]:
    res = client_mod.RESOURCES.get(event.kind)
    namespace = event.namespace if res is not None and res.namespaced else ""
    regarding: dict[str, Any] = {
        "apiVersion": res.api_version if res is not None else "v1",
        "kind": event.kind,
        "name": event.name,
    }
    if namespace:
        regarding["namespace"] = namespace
    if uid:
        regarding["uid"] = uid
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": f"{event.name}.", "namespace": namespace or "default"},
        "eventTime": leader_mod.micro_time(event.time),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": event.reason,
        "reason": event.reason,
        "note": event.message[:1024],
        "type": event.type,
        "regarding": regarding,
    }


def _about(item: Item) -> str:
    regarding = item[1].get("regarding") or {}
    return f"{regarding.get('kind', '?')}/{regarding.get('name', '?')}"


class KubeEvents:
    def __init__(
        self,
        kube: client_mod.KubeClient,
        *,
        controller: str = "karpy",
        instance: str = "karpy",
        may_write: Callable[[], bool] | None = None,
        dedupe_seconds: float = 120.0,
        max_queued: int = 1000,
        in_flight: int = 4,
        backoff_first: float = 0.5,
        backoff_cap: float = 10.0,
    ) -> None:
        self.kube = kube
        self.controller = controller
        self.instance = instance
        self.may_write = may_write
        self.dedupe_seconds = dedupe_seconds
        self.max_queued = max(1, max_queued)
        self.in_flight = max(1, in_flight)
        self._backoff = watch_mod.Backoff(first=backoff_first, cap=backoff_cap)
        self._recent: dict[tuple[str, str, str, str, str], float] = {}
        # edge loop only: the queue, the worker and its wake-up, the burst and streak counters
        self._queue: collections.deque[Item] = collections.deque()
        self._posting = 0  # Events being posted (taken off the queue)
        self._worker: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._burst = 0  # Events dropped since the queue last drained
        self._streak = 0  # failed attempts since the last one that worked
        self._cause = ""  # the last failed attempt's error
        self.posted = 0
        self.failed = 0  # failed attempts (their Events retried)
        self.dropped = 0  # dropped because the queue was full
        self.rejected = 0  # refused by the API server (not retried)

    @property
    def queued(self) -> int:
        """Events waiting to be posted (not counting those being posted)."""
        return len(self._queue)

    def record(self, event: Event) -> None:
        if self.may_write is not None and not self.may_write():
            return
        key = (event.kind, event.namespace, event.name, event.reason, event.message)
        now = time.monotonic()
        if now - self._recent.get(key, -1e18) < self.dedupe_seconds:
            return
        self._recent[key] = now
        if len(self._recent) > 10_000:
            cutoff = now - self.dedupe_seconds
            self._recent = {k: t for k, t in self._recent.items() if t >= cutoff}
        body = event_body(event, controller=self.controller, instance=self.instance)
        # named here, as the client names what it creates (an API server ignoring generateName)
        body["metadata"]["name"] = self.kube.generated_name(body["metadata"].pop("generateName"))
        path = client_mod.RESOURCES["Event"].path(body["metadata"]["namespace"])
        try:
            self.kube.edge.loop.call_soon_threadsafe(self._enqueue, (path, body))
        except RuntimeError:  # the edge loop is closed: the client is gone
            self.dropped += 1

    # -- the edge loop -------------------------------------------------------------------
    def _drop_oldest(self) -> None:
        item = self._queue.popleft()
        self.dropped += 1
        self._burst += 1
        if self._burst == 1:
            log.warning(
                "events: %d waiting to be posted (is the API server answering?); the queue is full, "
                "dropping the oldest (first: %s)",
                self.max_queued,
                _about(item),
            )

    def _enqueue(self, item: Item) -> None:
        while len(self._queue) >= self.max_queued:
            self._drop_oldest()
        self._queue.append(item)
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._drain(), name="karpy-events")
        assert self._wake is not None
        self._wake.set()

    async def _drain(self) -> None:
        try:
            while True:
                if not self._queue:
                    self._drained()
                    assert self._wake is not None
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                batch = [self._queue.popleft() for _ in range(min(self.in_flight, len(self._queue)))]
                self._posting = len(batch)
                outcomes = await asyncio.gather(*(self._post(item) for item in batch))
                self._posting = 0
                retry = [item for item, outcome in zip(batch, outcomes, strict=True) if outcome is None]
                if not retry:
                    self._worked()
                    continue
                self._queue.extendleft(reversed(retry))
                while len(self._queue) > self.max_queued:
                    self._drop_oldest()
                await asyncio.sleep(self._retrying())
        except asyncio.CancelledError:
            left = len(self._queue) + self._posting
            if left:
                log.info("events: %d not posted (the client closed)", left)
            raise

    async def _post(self, item: Item) -> bool | None:
        """True: posted; False: refused for good (dropped); None: to be retried."""
        path, body = item
        try:
            await self.kube.request("POST", path, body=body)
        except errors.AlreadyExists:
            pass  # an earlier attempt went through (its answer was lost): the name is ours
        except kerrors.TRANSIENT as exc:
            self.failed += 1
            self._cause = str(exc)
            return None
        except errors.KubeError as exc:
            self.rejected += 1
            log.info("event %s not posted: %s", _about(item), exc)
            return False
        except Exception:  # a bug must not end the worker (and every later Event with it)
            self.rejected += 1
            log.exception("event %s not posted", _about(item))
            return False
        self.posted += 1
        return True

    def _retrying(self) -> float:
        """The delay before the next attempt; the first failure of a streak is logged as a warning."""
        delay = self._backoff.next()
        self._streak += 1
        if self._streak == 1 and not self.kube.stopping.is_set():
            log.warning(
                "events: posting failed: %s; %d queued, retrying in %.1f s (backing off up to %.0f s)",
                self._cause,
                len(self._queue),
                delay,
                self._backoff.cap,
            )
        else:
            log.debug("events: posting failed again (%d in a row): %s", self._streak, self._cause)
        return delay

    def _worked(self) -> None:
        if self._streak:
            log.info("events: posting works again after %d failed attempts", self._streak)
        self._streak = 0
        self._backoff.reset()

    def _drained(self) -> None:
        if self._burst:
            log.info("events: %d dropped while the queue was full", self._burst)
        self._burst = 0


def _conforms(sink: KubeEvents) -> EventSink:
    return sink
