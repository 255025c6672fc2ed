"""The edges karpy's controllers talk through, as synchronous Protocols.

- :class:`KubeAPI` speaks raw Kubernetes JSON (dicts) and raises :mod:`karpy.model.errors`
  ``KubeError`` subclasses; implemented by :mod:`karpy.adapters.memory` (tests and the
  simulator) and the kube adapter (the operator). ``batch`` takes several independent calls
  (:class:`KubeOp`) at once: the in-memory server makes them in order, the kube adapter
  concurrently (bounded, rate-limited); both answer them in order, each result or error apart.
- :class:`CloudProvider` launches and removes instances for NodeClaims (Karpenter's narrow
  port): implemented by :mod:`karpy.providers.fake`, :mod:`karpy.providers.kwok` and
  :mod:`karpy.providers.aws`; :class:`BatchLauncher` is the optional batch launch.
- :class:`Clock` reads the loop's time; :class:`EventSink` records Kubernetes-style events.

See "Sync core, async edge" in the architecture: the operator's adapter runs its async
client on its own thread and exposes these synchronous methods.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from karpy.model.catalog import InstanceType
from karpy.model.errors import CloudError, KubeError
from karpy.model.objects import NodeClaim, NodePool

__all__ = [
    "BatchLauncher",
    "Clock",
    "CloudProvider",
    "Event",
    "EventSink",
    "KubeAPI",
    "KubeOp",
    "RawObject",
    "WatchEvent",
]

RawObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch notification: ``type`` is ADDED, MODIFIED or DELETED; ``obj`` the raw object."""

    type: str
    kind: str
    obj: RawObject


@dataclass(frozen=True, slots=True)
class KubeOp:
    """One call of :meth:`KubeAPI.batch`: ``verb`` is ``get``, ``create``, ``update``, ``patch`` or
    ``delete``, with that method's arguments; ``body`` is the object (create, update) or the patch."""

    verb: str
    kind: str
    name: str = ""
    namespace: str = ""
    body: Mapping[str, Any] | None = None


class KubeAPI(Protocol):
    """The Kubernetes API, as far as karpy uses it. ``kind`` is the object kind (``"Pod"``)."""

    def get(self, kind: str, name: str, namespace: str = "") -> RawObject: ...  # NotFound

    # read_only: the caller will not change the objects and reads them before its next call
    # (upstream's UnsafeDisableDeepCopy): an API server holding them in memory may hand out its own
    def list(
        self, kind: str, namespace: str | None = None, *, read_only: bool = False
    ) -> list[RawObject]: ...

    def create(self, obj: RawObject) -> RawObject: ...  # AlreadyExists

    def update(self, obj: RawObject) -> RawObject: ...  # NotFound, Conflict (resourceVersion)

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], namespace: str = "") -> RawObject: ...

    def delete(self, kind: str, name: str, namespace: str = "") -> None: ...  # finalizers respected

    # TooManyRequests when a PDB forbids; with ``uid``, Conflict when the pod of that name is another one
    # (a pod re-created under the same name, as a StatefulSet's: the eviction's UID precondition)
    def evict(self, name: str, namespace: str, uid: str = "") -> None: ...

    def bind(self, name: str, namespace: str, node_name: str) -> None: ...

    def watch(self, callback: Callable[[WatchEvent], None]) -> None: ...

    # Independent calls (each on another object) made as ``getattr(self, op.verb)(...)`` would, the
    # results in the order of ``ops``: what the method returns ({} for a delete) or the KubeError it
    # raised (one failing call fails alone); the writes reach the watch callbacks in that order too.
    def batch(self, ops: Sequence[KubeOp]) -> builtins.list[RawObject | KubeError]: ...


class CloudProvider(Protocol):
    """Launches and removes instances for NodeClaims (Karpenter's CloudProvider)."""

    @property
    def name(self) -> str: ...

    def create(self, claim: NodeClaim) -> NodeClaim: ...  # hydrated; InsufficientCapacity, NodeClassNotReady

    def delete(self, claim: NodeClaim) -> None: ...  # NodeClaimNotFound once the instance is gone

    def get(self, provider_id: str) -> NodeClaim: ...  # NodeClaimNotFound

    def list(self) -> list[NodeClaim]: ...

    def instance_types(self, pool: NodePool) -> tuple[InstanceType, ...]: ...

    def is_drifted(self, claim: NodeClaim) -> str: ...  # "" when not drifted


@runtime_checkable
class BatchLauncher(Protocol):
    """A CloudProvider that launches several NodeClaims in one go (the AWS provider batches
    identical CreateFleet requests); the lifecycle hands it every claim a pass launches."""

    def create_batch(self, claims: Sequence[NodeClaim]) -> list[NodeClaim | CloudError]: ...


class Clock(Protocol):
    def now(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes-style event about one object."""

    time: float
    kind: str
    name: str
    namespace: str
    reason: str
    message: str
    type: str = "Normal"


class EventSink(Protocol):
    def record(self, event: Event) -> None: ...
