"""``KubeEvents``: an :class:`~karpy.ports.EventSink` posting ``events.k8s.io/v1`` Events.

``record()`` is called on the operator's thread; the POST runs on the edge loop without waiting
(an event is best effort and never blocks a reconcile). Only the leader posts (followers would
duplicate every event). Repeats of the same (object, reason, message) within ``dedupe_seconds``
are dropped, as Karpenter's recorder does. Events about cluster-scoped objects (NodePools,
NodeClaims, Nodes) go to the ``default`` namespace, as kubectl expects.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from karpy.adapters.kube import client as client_mod
from karpy.adapters.kube import leader as leader_mod
from karpy.model import errors
from karpy.ports import Event, EventSink

__all__ = ["KubeEvents", "event_body"]

log = logging.getLogger("karpy.kube.events")


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


class KubeEvents:
    def __init__(
        self,
        kube: client_mod.KubeClient,
        *,
        controller: str = "karpy",
        instance: str = "karpy",
        may_write: Callable[[], bool] | None = None,
        dedupe_seconds: float = 120.0,
    ) -> None:
        self.kube = kube
        self.controller = controller
        self.instance = instance
        self.may_write = may_write
        self.dedupe_seconds = dedupe_seconds
        self._recent: dict[tuple[str, str, str, str, str], float] = {}
        self._seq = itertools.count()
        self.posted = 0
        self.failed = 0

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
        self.kube.edge.submit(self._post(path, body))

    async def _post(self, path: str, body: dict[str, Any]) -> None:
        try:
            await self.kube.request("POST", path, body=body)
            self.posted += 1
        except (TimeoutError, errors.KubeError) as exc:
            self.failed += 1
            log.info("event %s/%s not posted: %s", body["regarding"]["kind"], body["regarding"]["name"], exc)


def _conforms(sink: KubeEvents) -> EventSink:
    return sink
