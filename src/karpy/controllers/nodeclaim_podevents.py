"""Pod events of a NodeClaim: when to write ``status.lastPodEventTime``.

Upstream's ``nodeclaim/podevents``, as a sub-reconciler of
:class:`karpy.controllers.nodeclaim_status.NodeClaimStatus`. For every NodeClaim it
remembers the pods on its node (key, uid, terminal, terminating). A difference from what it
saw last (a pod bound, removed, gone terminal or terminating) is a pod event: it asks for
``lastPodEventTime = now`` unless the stored time is less than :data:`POD_EVENT_DEDUPE`
seconds old (the event is dropped, not deferred). The first time it sees a claim created
after the controller started it compares with an empty node; older claims are taken as they
are (a restart is no event). A claim's signature is recomputed only when its StateNode holds
a different tuple of pods.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Set
from typing import Any

from karpy.api import encode
from karpy.model.objects import NodeClaim, Pod

__all__ = ["POD_EVENT_DEDUPE", "PodEvents", "PodSignature", "signature"]

POD_EVENT_DEDUPE = 10.0

PodSignature = frozenset[tuple[str, str, bool, bool]]


def signature(pods: tuple[Pod, ...]) -> PodSignature:
    """What a pod event compares: every pod's key, uid, and whether terminal or terminating."""
    return frozenset((p.key, p.uid, p.is_terminal(), p.deleting) for p in pods)


class PodEvents:
    """The pods each NodeClaim was last seen with, and the status write a change asks for."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._seen: dict[str, PodSignature] = {}
        self._signatures: dict[str, tuple[tuple[Pod, ...], PodSignature]] = {}  # claim -> (pods, signature)

    def observe(
        self, claim: NodeClaim, pods: tuple[Pod, ...], now: float
    ) -> tuple[dict[str, Any], NodeClaim, PodSignature]:
        """Take ``pods`` as seen on ``claim``'s node: (the status fields to write, the claim as
        written, the signature seen before, for :meth:`retry`)."""
        status: dict[str, Any] = {}
        cached = self._signatures.get(claim.name)
        if cached is not None and cached[0] is pods:
            current = cached[1]
        else:
            current = signature(pods)
            self._signatures[claim.name] = (pods, current)
        seen = self._seen.get(claim.name)
        if seen is None:
            seen = frozenset() if claim.created + 1.0 > self._started else current
        self._seen[claim.name] = current
        if current != seen and (
            claim.last_pod_event is None or now - claim.last_pod_event >= POD_EVENT_DEDUPE
        ):
            status["lastPodEventTime"] = encode.time(now)
            claim = dataclasses.replace(claim, last_pod_event=float(math.floor(now)))
        return status, claim, seen

    def retry(self, name: str, seen: PodSignature) -> None:
        """Undo the last :meth:`observe` of ``name`` (its write failed): the next one sees the event again."""
        self._seen[name] = seen

    def forget(self, name: str) -> None:
        self._seen.pop(name, None)
        self._signatures.pop(name, None)

    def keep(self, alive: Set[str]) -> None:
        """Forget every claim not in ``alive``."""
        for store in (self._seen, self._signatures):
            for name in [n for n in store if n not in alive]:
                del store[name]
