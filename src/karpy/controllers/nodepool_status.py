"""NodePool status: ``status.resources`` (capacity of its nodes, plus ``nodes``), ``status.nodes``
and the ``ValidationSucceeded``, ``NodeClassReady`` and ``Ready`` conditions.

Upstream's ``nodepool.counter``: every 5 s, for each NodePool, the summed capacity of the
nodes it owns (cpu, memory, pods, ephemeral-storage, and every other resource they report)
and their count, written with a merge patch only when it changed.

The sums read only the Nodes and NodeClaims (how they join, their capacity), so they are kept
while neither store changed (``Cluster.store_version``), and summed again only when the
(NodePool, capacity) of the managed nodes differ: pods binding and claim status writes do not
redo them.

Upstream's ``nodepool.validation`` and ``nodepool.readiness`` (operatorpkg's condition set, root
``Ready``), for the NodePools in the cluster state, which are the ones that validated (the
operator writes ``ValidationSucceeded=False`` for the others: a bad value, or with ``--strict`` a
field karpy does not know; :func:`failed_validation_conditions` gives it the matching
conditions). ``ValidationSucceeded=True``; ``NodeClassReady`` True when the
``nodeClassRef`` names a NodeClass in the state that is not terminating and, for an EC2NodeClass,
is Ready for its generation, else False (``NodeClassNotFound``, ``NodeClassTerminating``, or the
EC2NodeClass's own reason); ``Ready`` True when both are, else False with reason
``UnhealthyDependents`` and a message naming them (``NodeClassReady=False``). A condition that is
True has its type as its reason and an empty message; each carries the NodePool's
``metadata.generation`` as ``observedGeneration`` and keeps its ``lastTransitionTime`` while its
status stays. The conditions of other types are kept. They are informational: karpy's decisions
read the NodePool's spec, never these. The NodePool is read (a GET, for its generation and its
current conditions) only when the pool or its desired conditions changed since the last write,
and written in the same merge patch as the resources when both changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model import errors
from karpy.model.nodeclass import EC2NodeClass, NodeClass
from karpy.model.objects import Condition, NodePool
from karpy.model.resources import Resources, total

__all__ = [
    "CONDITION_TYPES",
    "NODE_CLASS_READY",
    "READY",
    "VALIDATION_SUCCEEDED",
    "NodePoolStatus",
    "failed_validation_conditions",
    "merge_conditions",
    "pool_conditions",
]

VALIDATION_SUCCEEDED = "ValidationSucceeded"
NODE_CLASS_READY = "NodeClassReady"
READY = "Ready"
CONDITION_TYPES = (NODE_CLASS_READY, READY, VALIDATION_SUCCEEDED)
FAILED_VALIDATION = "FailedValidation"  # the operator's reason (and event reason) for an invalid NodePool

RawConditions = Sequence[Mapping[str, Any]]


def _true(kind: str) -> Condition:
    return Condition(kind, "True", kind)


def node_class_ready(pool: NodePool, node_class: NodeClass | None) -> Condition:
    """``NodeClassReady`` of ``pool`` whose NodeClass (from the state) is ``node_class``."""
    ref = pool.node_class_ref
    if ref is None:
        return Condition(NODE_CLASS_READY, "False", "NodeClassNotFound", "the NodePool has no nodeClassRef")
    if node_class is None:
        return Condition(
            NODE_CLASS_READY, "False", "NodeClassNotFound", f"{ref.kind} {ref.name} not found on the cluster"
        )
    if isinstance(node_class, EC2NodeClass):
        if node_class.deleting:
            return Condition(
                NODE_CLASS_READY, "False", "NodeClassTerminating", f"{ref.kind} {ref.name} is terminating"
            )
        if not node_class.ready():
            cond = node_class.status.condition(READY)
            if cond is not None and cond.status != "True":
                message = cond.message or f"{ref.kind} {ref.name} is {READY}={cond.status}"
                return Condition(NODE_CLASS_READY, "False", cond.reason or "NodeClassNotReady", message)
            return Condition(
                NODE_CLASS_READY,
                "False",
                "NodeClassNotReady",
                f"{ref.kind} {ref.name}: {READY} not reported for generation {node_class.generation}",
            )
    return _true(NODE_CLASS_READY)


def _ready(dependents: Sequence[Condition]) -> Condition:
    unhealthy = [c for c in dependents if c.status != "True"]
    if not unhealthy:
        return _true(READY)
    status = "False" if any(c.status == "False" for c in unhealthy) else "Unknown"
    message = ", ".join(f"{c.type}={c.status}" for c in unhealthy)
    return Condition(READY, status, "UnhealthyDependents", message)


def pool_conditions(pool: NodePool, node_class: NodeClass | None) -> tuple[Condition, ...]:
    """The conditions of a NodePool that validated, sorted by type (times and generation not set)."""
    validation = _true(VALIDATION_SUCCEEDED)
    class_ready = node_class_ready(pool, node_class)
    return (class_ready, _ready((validation, class_ready)), validation)


def merge_conditions(
    existing: RawConditions, desired: Sequence[Condition], *, generation: int, now: float
) -> list[dict[str, Any]]:
    """``existing`` (raw) with ``desired`` set, sorted by type: a condition whose status stays
    keeps its ``lastTransitionTime``; conditions of other types are kept as they are."""
    kinds = {c.type for c in desired}
    prior = {str(c.get("type")): c for c in existing if isinstance(c, Mapping)}
    out = [dict(c) for c in existing if isinstance(c, Mapping) and c.get("type") not in kinds]
    for cond in desired:
        before = prior.get(cond.type)
        since = encode.time(now)
        if before is not None and before.get("status") == cond.status and before.get("lastTransitionTime"):
            since = str(before["lastTransitionTime"])
        out.append(
            {
                "type": cond.type,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message[:1024],
                "lastTransitionTime": since,
                "observedGeneration": generation,
            }
        )
    return sorted(out, key=lambda c: str(c.get("type")))


def failed_validation_conditions(
    existing: RawConditions, message: str, *, generation: int, now: float
) -> list[dict[str, Any]]:
    """The conditions of a NodePool that does not validate (the operator writes them):
    ``ValidationSucceeded`` False (reason ``FailedValidation``, the problem as message) and ``Ready``
    False; ``NodeClassReady`` kept."""
    failed = Condition(VALIDATION_SUCCEEDED, "False", FAILED_VALIDATION, message)
    dependents = [failed]
    for raw in existing:
        if isinstance(raw, Mapping) and raw.get("type") == NODE_CLASS_READY:
            dependents.append(Condition(NODE_CLASS_READY, str(raw.get("status") or "Unknown")))
    return merge_conditions(existing, (failed, _ready(dependents)), generation=generation, now=now)


def _same(existing: RawConditions, merged: Sequence[Mapping[str, Any]]) -> bool:
    return [dict(c) for c in existing if isinstance(c, Mapping)] == [dict(c) for c in merged]


class NodePoolStatus:
    name = "nodepool.status"

    def __init__(self, ctx: Context, *, interval: float = 5.0) -> None:
        self.ctx = ctx
        self.interval = interval
        self._written: dict[str, tuple[Resources, int]] = {}
        # NodePool name -> (the pool, its desired conditions) as last written (or found written)
        self._conditions: dict[str, tuple[NodePool, tuple[Condition, ...]]] = {}
        self._versions: tuple[int, int] | None = None  # (nodes, claims) store versions of ``_usage``
        self._usage: dict[str, tuple[Resources, int]] = {}
        self._parts: list[tuple[str, Resources]] | None = None  # (NodePool, capacity) summed in ``_usage``

    def _pool_usage(self) -> dict[str, tuple[Resources, int]]:
        """NodePool name -> (summed capacity, count) of the managed nodes it owns."""
        cluster = self.ctx.cluster
        versions = (cluster.store_version("nodes"), cluster.store_version("claims"))
        if versions != self._versions:
            parts = [
                (n.node_pool, n.node.capacity if n.node is not None and n.node.capacity else n.claim.capacity)
                for n in cluster.state_nodes(self.ctx.now())
                if n.claim
            ]
            if parts != self._parts:  # (a claim's status write alone leaves them equal: no new sums)
                members: dict[str, list[Resources]] = {}
                for pool, capacity in parts:
                    members.setdefault(pool, []).append(capacity)
                self._usage = {pool: (total(owned), len(owned)) for pool, owned in members.items()}
                self._parts = parts
            self._versions = versions
        return self._usage

    def _new_conditions(self, name: str, desired: tuple[Condition, ...]) -> list[dict[str, Any]] | None:
        """The conditions to write for pool ``name`` (None: those it has are right). Raises
        NotFound when the NodePool is gone."""
        raw = self.ctx.kube.get("NodePool", name)
        existing = list((raw.get("status") or {}).get("conditions") or [])
        generation = int((raw.get("metadata") or {}).get("generation") or 0)
        merged = merge_conditions(existing, desired, generation=generation, now=self.ctx.now())
        return None if _same(existing, merged) else merged

    def reconcile(self) -> Result:
        cluster = self.ctx.cluster
        usage = self._pool_usage()
        for gone in [
            n for n in (self._written.keys() | self._conditions.keys()) if n not in cluster.node_pools
        ]:
            self._written.pop(gone, None)
            self._conditions.pop(gone, None)
        for pool_name in sorted(cluster.node_pools):
            pool = cluster.node_pools[pool_name]
            current = usage.get(pool_name) or (total(()), 0)
            desired = pool_conditions(pool, cluster.node_class_for(pool))
            status: dict[str, Any] = {}
            if self._written.get(pool_name) != current:
                capacity, count = current
                status["resources"] = {**encode.resources(capacity), "nodes": str(count)}
                status["nodes"] = count
            try:
                if self._conditions.get(pool_name) != (pool, desired):
                    conditions = self._new_conditions(pool_name, desired)
                    if conditions is not None:
                        status["conditions"] = conditions
                if status:
                    self.ctx.kube.patch("NodePool", pool_name, {"status": status})
            except errors.NotFound:
                continue
            self._written[pool_name] = current
            self._conditions[pool_name] = (pool, desired)
        return Result(requeue_after=self.interval)
