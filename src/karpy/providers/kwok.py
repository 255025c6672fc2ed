"""The kwok CloudProvider: an "instance" is a Node object written through the KubeAPI.

Karpenter's ``kwok/cloudprovider`` for the simulator and kwok clusters. ``create`` picks the
cheapest compatible available offering with :func:`karpy.core.scheduling.launch.choose`
(skipping offerings in the 3-minute unavailable-offerings cache), writes a Node named
``<claim>-<n>`` with providerID ``kwok://<node>``, the launch labels, the
``karpenter.sh/unregistered:NoExecute`` taint plus the claim's taints and startup taints,
and the type's capacity; with a loop and a registration delay (constructor default, or the
KWOKNodeClass's ``nodeRegistrationDelay``) the Node appears only ``delay`` seconds later.
``delete`` deletes the Node and forgets the instance; a later ``delete`` raises
``NodeClaimNotFound`` (so termination completes). ``get``/``list`` read the ``kwok://``
Nodes (plus instances whose Node is still to appear). ``ice`` injects insufficient capacity
for tests and the simulator. Wired by the simulator and the operator's kwok mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, Protocol

from karpy.api import encode
from karpy.api import load as api_load
from karpy.core.scheduling.launch import choose, node_labels
from karpy.model import errors, labels
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass, NodeClass
from karpy.model.objects import Condition, Node, NodeClaim, NodePool
from karpy.model.requirements import Requirements
from karpy.model.taints import NO_EXECUTE, Taint
from karpy.ports import Clock, CloudProvider, KubeAPI

__all__ = ["KWOK_LABEL", "PROVIDER_PREFIX", "UNAVAILABLE_TTL", "UNREGISTERED_TAINT", "KwokCloudProvider"]

PROVIDER_PREFIX = "kwok://"
KWOK_LABEL = "kwok.x-k8s.io/node"
UNREGISTERED_TAINT = Taint("karpenter.sh/unregistered", NO_EXECUTE)
UNAVAILABLE_TTL = 180.0  # upstream's unavailable-offerings cache: 3 minutes

OfferingKey = tuple[str, str, str]  # (instance type, zone, capacity type)
TypesFor = Callable[[NodePool, NodeClass | None], tuple[InstanceType, ...]]


class Scheduler(Protocol):
    """What the provider needs of :class:`karpy.runtime.loop.Loop` (a sibling layer)."""

    def call_later(
        self, delay: float, fn: Callable[[], object], *, name: str = ..., priority: int = ...
    ) -> object: ...


class KwokCloudProvider:
    name = "kwok"

    def __init__(
        self,
        kube: KubeAPI,
        clock: Clock,
        *,
        types_for: TypesFor,
        node_class_for: Callable[[NodePool], NodeClass | None] | None = None,
        registration_delay: float = 0.0,
        loop: Scheduler | None = None,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._types_for = types_for
        self._node_class_for = node_class_for or self._read_node_class
        self.registration_delay = registration_delay
        self._loop = loop
        self.ice: set[OfferingKey] = set()
        self._unavailable: dict[OfferingKey, float] = {}  # offering -> expiry
        self._ids = itertools.count(1)
        self._pending: dict[str, NodeClaim] = {}  # provider id -> hydrated claim, Node not written yet
        self._terminated: set[str] = set()  # provider ids deleted while their Node lingers (finalizers)
        # Node name -> (resourceVersion, the instance it stands for): list() re-reads every Node
        self._parsed: dict[str, tuple[str, NodeClaim | None]] = {}
        self._types_cache: dict[str, tuple[NodePool, NodeClass | None, tuple[InstanceType, ...]]] = {}
        self.create_calls: list[NodeClaim] = []
        self.delete_calls: list[NodeClaim] = []

    # -- unavailable offerings -----------------------------------------------------------
    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Cache an offering as unavailable for :data:`UNAVAILABLE_TTL` seconds."""
        self._unavailable[(instance_type, zone, capacity_type)] = self._clock.now() + UNAVAILABLE_TTL

    def unavailable(self) -> frozenset[OfferingKey]:
        """Offerings in the unavailable-offerings cache now (expired entries are dropped)."""
        now = self._clock.now()
        for key in [k for k, until in self._unavailable.items() if until <= now]:
            del self._unavailable[key]
        return frozenset(self._unavailable)

    # -- instance types ------------------------------------------------------------------
    def instance_types(self, pool: NodePool) -> tuple[InstanceType, ...]:
        return self._types(pool, self._node_class_for(pool))

    def _types(self, pool: NodePool, node_class: NodeClass | None) -> tuple[InstanceType, ...]:
        cached = self._types_cache.get(pool.name)
        if cached is not None and cached[0] == pool and cached[1] == node_class:
            types = cached[2]
        else:
            types = self._types_for(pool, node_class)
            self._types_cache[pool.name] = (pool, node_class, types)
        gone = self.unavailable()
        if not gone:
            return types
        return tuple(_without(it, gone) for it in types)

    def _read_node_class(self, pool: NodePool) -> NodeClass | None:
        ref = pool.node_class_ref
        if ref is None:
            return None
        try:
            raw = self._kube.get(ref.kind, ref.name)
        except errors.NotFound:
            return None
        obj, _ = api_load.parse_object(raw, file=f"kube:{ref.kind}", index=0)
        return obj if isinstance(obj, EC2NodeClass | KWOKNodeClass) else None

    def _pool_for(self, claim: NodeClaim) -> NodePool:
        if claim.node_pool:
            try:
                return api_load.convert_node_pool(self._kube.get("NodePool", claim.node_pool))
            except (errors.NotFound, errors.InputError):
                pass
        return NodePool(name=claim.node_pool, node_class_ref=claim.node_class_ref)

    # -- CloudProvider -------------------------------------------------------------------
    def create(self, claim: NodeClaim) -> NodeClaim:
        self.create_calls.append(claim)
        pool = self._pool_for(claim)
        node_class = self._node_class_for(pool)
        reqs = Requirements(claim.requirements)
        chosen = choose(reqs, self._types(pool, node_class))
        if chosen is None:
            raise errors.InsufficientCapacity(f"no compatible available offering for NodeClaim {claim.name}")
        it, offering = chosen
        key = (it.name, offering.zone, offering.capacity_type)
        if key in self.ice:
            self.mark_unavailable(*key)
            raise errors.InsufficientCapacity(
                f"insufficient capacity for {it.name} in {offering.zone} ({offering.capacity_type})",
                offerings=(key,),
            )
        node_name = f"{claim.name or 'nodeclaim'}-{next(self._ids)}"
        provider_id = PROVIDER_PREFIX + node_name
        launch_labels = {
            **node_labels(
                reqs,
                it,
                offering,
                template_labels=claim.labels,
                node_pool=claim.node_pool,
                hostname=node_name,
            ),
            **claim.labels,
            KWOK_LABEL: "fake",
        }
        if not claim.node_pool:
            launch_labels.pop(labels.NODEPOOL, None)
        node = Node(
            name=node_name,
            labels=launch_labels,
            taints=_dedupe((UNREGISTERED_TAINT, *claim.taints, *claim.startup_taints)),
            capacity=it.capacity,
            allocatable=it.allocatable,
            provider_id=provider_id,
            conditions=(Condition("Ready", "True", reason="KubeletReady"),),
        )
        hydrated = dataclasses.replace(
            claim,
            provider_id=provider_id,
            labels={k: v for k, v in launch_labels.items() if k != labels.HOSTNAME},
            capacity=it.capacity,
            allocatable=it.allocatable,
        )
        delay = self.registration_delay
        if isinstance(node_class, KWOKNodeClass) and node_class.node_registration_delay > 0:
            delay = node_class.node_registration_delay
        if self._loop is not None and delay > 0:
            self._pending[provider_id] = hydrated
            self._loop.call_later(delay, lambda: self._register(provider_id, node), name=f"kwok:{node_name}")
        else:
            self._write(node)
        return hydrated

    def _register(self, provider_id: str, node: Node) -> None:
        if self._pending.pop(provider_id, None) is not None:
            self._write(node)

    def _write(self, node: Node) -> None:
        with contextlib.suppress(errors.AlreadyExists):
            self._kube.create(encode.node(node))

    def delete(self, claim: NodeClaim) -> None:
        self.delete_calls.append(claim)
        provider_id = claim.provider_id
        if not provider_id.startswith(PROVIDER_PREFIX) or provider_id in self._terminated:
            raise errors.NodeClaimNotFound(f"instance {provider_id or claim.name!r} not found")
        if self._pending.pop(provider_id, None) is not None:
            return
        try:
            self._kube.delete("Node", provider_id[len(PROVIDER_PREFIX) :])
        except errors.NotFound:
            raise errors.NodeClaimNotFound(f"instance {provider_id} not found") from None
        self._terminated.add(provider_id)

    def get(self, provider_id: str) -> NodeClaim:
        if provider_id in self._pending:
            return self._pending[provider_id]
        if provider_id.startswith(PROVIDER_PREFIX) and provider_id not in self._terminated:
            try:
                raw = self._kube.get("Node", provider_id[len(PROVIDER_PREFIX) :])
            except errors.NotFound:
                pass
            else:
                claim = _from_node(raw)
                if claim is not None and claim.provider_id == provider_id:
                    return claim
        raise errors.NodeClaimNotFound(f"instance {provider_id} not found")

    def list(self) -> list[NodeClaim]:
        found: dict[str, NodeClaim] = dict(self._pending)
        seen: set[str] = set()
        parsed: dict[str, tuple[str, NodeClaim | None]] = {}
        for raw in self._kube.list("Node", read_only=True):  # (only read, here)
            meta = raw.get("metadata") or {}
            name, version = meta.get("name", ""), str(meta.get("resourceVersion", ""))
            known = self._parsed.get(name)
            claim = known[1] if known is not None and version and known[0] == version else _from_node(raw)
            parsed[name] = (version, claim)
            if claim is None:
                continue
            seen.add(claim.provider_id)
            if claim.provider_id not in self._terminated:
                found[claim.provider_id] = claim
        self._terminated &= seen  # forget instances whose Node is gone for good
        self._parsed = parsed
        return [found[k] for k in sorted(found)]

    def is_drifted(self, claim: NodeClaim) -> str:
        return ""


def _from_node(raw: dict[str, Any]) -> NodeClaim | None:
    """The instance a kwok Node stands for (None for other Nodes)."""
    if not str((raw.get("spec") or {}).get("providerID", "")).startswith(PROVIDER_PREFIX):
        return None
    node = api_load.convert_node(raw)
    return NodeClaim(
        name=node.name,
        node_pool=node.labels.get(labels.NODEPOOL, ""),
        labels={k: v for k, v in node.labels.items() if k != labels.HOSTNAME},
        provider_id=node.provider_id,
        node_name=node.name,
        capacity=node.capacity,
        allocatable=node.allocatable,
        created=node.created,
        deleting=node.deleting,
    )


def _without(it: InstanceType, gone: frozenset[OfferingKey]) -> InstanceType:
    if not any((it.name, o.zone, o.capacity_type) in gone for o in it.offerings):
        return it
    offerings = tuple(
        dataclasses.replace(o, available=False) if (it.name, o.zone, o.capacity_type) in gone else o
        for o in it.offerings
    )
    return dataclasses.replace(it, offerings=offerings)


def _dedupe(taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
    return tuple(dict.fromkeys(taints))


def _conforms(provider: KwokCloudProvider) -> CloudProvider:
    """mypy checks here that the kwok provider satisfies the port."""
    return provider
