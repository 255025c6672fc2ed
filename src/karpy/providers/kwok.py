"""The kwok CloudProvider: an "instance" is a Node object written through the KubeAPI.

Karpenter's ``kwok/cloudprovider`` for the simulator and kwok clusters. ``create`` picks the
cheapest compatible available offering with :func:`karpy.core.scheduling.launch.choose`
(skipping offerings in the 3-minute unavailable-offerings cache), writes a Node named after the
NodeClaim (its name alone) with providerID ``kwok://<node>``, the launch labels, the
``karpenter.sh/unregistered:NoExecute`` taint plus the claim's taints and startup taints,
and the type's capacity; with a loop and a registration delay (constructor default, or the
KWOKNodeClass's ``nodeRegistrationDelay``) the Node appears only ``delay`` seconds later.

A launch is idempotent per NodeClaim, so a relaunch (after a crash, or after the claim's status
write failed) adopts the instance instead of making a second one: when the Node of that name
exists already (the create answers AlreadyExists; with a registration delay, a GET first) and
its providerID is ``kwok://<node>``, it is the launched instance and the claim is hydrated from
it (its type, zone, capacity); a Node of that name that is terminating, or that is someone
else's, is a :class:`~karpy.model.errors.CloudError` (the lifecycle retries with backoff). A
relaunch while the delayed Node is still to appear returns the same instance. A delayed Node
whose write fails (an outage) stays pending and is written again with backoff.

``create_batch`` (:class:`~karpy.ports.BatchLauncher`) launches several claims as ``create``
would one after the other (the same choices, in order), but reads each NodePool once and writes
the Nodes in one :meth:`~karpy.ports.KubeAPI.batch`, which the operator's kube client sends
concurrently: the launch rate is then bounded by the API server, not by two round trips per
claim in series. A Node write answered AlreadyExists adopts as above; any other failed write is
raised after the batch (the lifecycle retries the pass, and the Nodes written meanwhile are adopted).
``delete`` deletes the Node and forgets the instance; a later ``delete`` raises
``NodeClaimNotFound`` (so termination completes). ``get``/``list`` read the ``kwok://``
Nodes (plus instances whose Node is still to appear). ``ice`` injects insufficient capacity
for tests and the simulator. Wired by the simulator and the operator's kwok mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from karpy.api import encode
from karpy.api import load as api_load
from karpy.core.scheduling.launch import choose, node_labels
from karpy.model import errors, labels
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass, NodeClass
from karpy.model.objects import Condition, Node, NodeClaim, NodePool
from karpy.model.requirements import Requirements
from karpy.model.taints import UNREGISTERED, Taint
from karpy.ports import BatchLauncher, Clock, CloudProvider, KubeAPI, KubeOp

__all__ = ["KWOK_LABEL", "PROVIDER_PREFIX", "UNAVAILABLE_TTL", "KwokCloudProvider"]

PROVIDER_PREFIX = "kwok://"
KWOK_LABEL = "kwok.x-k8s.io/node"
UNAVAILABLE_TTL = 180.0  # upstream's unavailable-offerings cache: 3 minutes
REGISTER_RETRY_MIN, REGISTER_RETRY_MAX = 1.0, 30.0  # a delayed Node write that failed is retried

log = logging.getLogger("karpy.kwok")

OfferingKey = tuple[str, str, str]  # (instance type, zone, capacity type)
TypesFor = Callable[[NodePool, NodeClass | None], tuple[InstanceType, ...]]


class Scheduler(Protocol):
    """What the provider needs of :class:`karpy.runtime.loop.Loop` (a sibling layer)."""

    def call_later(
        self, delay: float, fn: Callable[[], object], *, name: str = ..., priority: int = ...
    ) -> object: ...


@dataclass
class _Batch:
    """A ``create_batch`` under way: the NodePools read (by name) and the Node writes held back."""

    pools: dict[str, NodePool] = field(default_factory=dict)
    writes: list[tuple[int, NodeClaim, Node]] = field(default_factory=list)  # (claim index, claim, Node)
    index: int = 0  # the claim being planned


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
        self._failing: set[str] = set()  # provider ids whose delayed Node write failed (retried)
        # Node name -> (resourceVersion, the instance it stands for): list() re-reads every Node
        self._parsed: dict[str, tuple[str, NodeClaim | None]] = {}
        self._types_cache: dict[str, tuple[NodePool, NodeClass | None, tuple[InstanceType, ...]]] = {}
        self.create_calls: list[NodeClaim] = []
        self.delete_calls: list[NodeClaim] = []
        self._batch: _Batch | None = None  # set while create_batch plans its claims

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
        batch = self._batch
        if batch is not None and claim.node_pool in batch.pools:
            return batch.pools[claim.node_pool]
        pool = NodePool(name=claim.node_pool, node_class_ref=claim.node_class_ref)
        if claim.node_pool:
            try:
                pool = api_load.convert_node_pool(self._kube.get("NodePool", claim.node_pool))
            except (errors.NotFound, errors.InputError):
                return pool  # (not remembered: another claim may carry another node class ref)
        if batch is not None:
            batch.pools[claim.node_pool] = pool
        return pool

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
        node_name = claim.name or f"nodeclaim-{next(self._ids)}"
        provider_id = PROVIDER_PREFIX + node_name
        if provider_id in self._pending:  # launched already, its Node still to appear
            return self._pending[provider_id]
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
            taints=_dedupe((UNREGISTERED, *claim.taints, *claim.startup_taints)),
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
            try:
                existing = self._kube.get("Node", node_name)
            except errors.NotFound:
                pass
            else:
                return self._adopt(claim, existing)
            self._pending[provider_id] = hydrated
            self._terminated.discard(provider_id)
            self._loop.call_later(delay, lambda: self._register(provider_id, node), name=f"kwok:{node_name}")
            return hydrated
        if self._batch is not None:  # written with the batch's other Nodes
            self._batch.writes.append((self._batch.index, claim, node))
            return hydrated
        try:
            self._kube.create(encode.node(node))
        except errors.AlreadyExists:
            return self._adopt(claim, self._kube.get("Node", node_name))
        self._terminated.discard(provider_id)
        return hydrated

    def create_batch(self, claims: Sequence[NodeClaim]) -> list[NodeClaim | errors.CloudError]:
        """Launch ``claims`` (see the module docstring): each one's hydrated claim or CloudError,
        in order. A Kubernetes error while planning is raised at once, nothing written; one of a
        Node write after the batch's other answers are taken."""
        batch = self._batch = _Batch()
        results: list[NodeClaim | errors.CloudError] = []
        try:
            for index, claim in enumerate(claims):
                batch.index = index
                try:
                    results.append(self.create(claim))  # (a subclass's create too: the simulator's)
                except errors.CloudError as exc:
                    results.append(exc)
        finally:
            self._batch = None
        if not batch.writes:
            return results
        answers = self._kube.batch(
            [KubeOp("create", "Node", body=encode.node(n)) for _, _, n in batch.writes]
        )
        failed: errors.KubeError | None = None
        for (index, claim, node), answer in zip(batch.writes, answers, strict=True):
            if isinstance(answer, errors.AlreadyExists):
                try:
                    results[index] = self._adopt(claim, self._kube.get("Node", node.name))
                except errors.CloudError as exc:
                    results[index] = exc
            elif isinstance(answer, errors.KubeError):
                failed = failed or answer
            else:
                self._terminated.discard(node.provider_id)
        if failed is not None:
            raise failed
        return results

    def _adopt(self, claim: NodeClaim, raw: dict[str, Any]) -> NodeClaim:
        """``claim`` hydrated from the existing Node named after it, when that Node is its instance."""
        name = str((raw.get("metadata") or {}).get("name") or "")
        expected = PROVIDER_PREFIX + name
        found = _from_node(raw)
        if found is None or found.provider_id != expected:
            other = (raw.get("spec") or {}).get("providerID") or "none"
            raise errors.CloudError(
                f"NodeClaim {claim.name}: a Node named {name} exists with providerID {other}, "
                f"not {expected}: it is not this claim's instance"
            )
        if found.deleting or expected in self._terminated:
            raise errors.CloudError(
                f"NodeClaim {claim.name}: Node {name} (its previous instance) is terminating"
            )
        return dataclasses.replace(
            claim,
            provider_id=expected,
            labels=found.labels,
            capacity=found.capacity,
            allocatable=found.allocatable,
        )

    def _register(self, provider_id: str, node: Node, attempt: int = 0) -> None:
        """Write the delayed Node; a failed write (the API server unreachable) is retried with
        backoff, the instance still pending (one warning line per failure streak, not per Node)."""
        hydrated = self._pending.pop(provider_id, None)
        if hydrated is None:
            return  # deleted before it registered
        try:
            self._write(node)
        except errors.KubeError as exc:
            self._pending[provider_id] = hydrated
            delay = min(REGISTER_RETRY_MAX, REGISTER_RETRY_MIN * 2.0**attempt)
            if not self._failing:
                log.warning("kwok: writing Node %s failed: %s; retrying in %.1f s", node.name, exc, delay)
            else:
                log.debug("kwok: writing Node %s failed again: %s; retrying in %.1f s", node.name, exc, delay)
            self._failing.add(provider_id)
            assert self._loop is not None
            self._loop.call_later(
                delay, lambda: self._register(provider_id, node, attempt + 1), name=f"kwok:{node.name}"
            )
            return
        if provider_id in self._failing:
            self._failing.discard(provider_id)
            if not self._failing:
                log.info("kwok: writing Nodes works again (Node %s written)", node.name)

    def _write(self, node: Node) -> None:
        with contextlib.suppress(errors.AlreadyExists):
            self._kube.create(encode.node(node))

    def delete(self, claim: NodeClaim) -> None:
        self.delete_calls.append(claim)
        provider_id = claim.provider_id
        if not provider_id.startswith(PROVIDER_PREFIX) or provider_id in self._terminated:
            raise errors.NodeClaimNotFound(f"instance {provider_id or claim.name!r} not found")
        if self._pending.pop(provider_id, None) is not None:
            self._failing.discard(provider_id)
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


def _batches(provider: KwokCloudProvider) -> BatchLauncher:
    return provider
