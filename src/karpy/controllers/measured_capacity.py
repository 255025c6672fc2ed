"""Measured capacity: the capacity Nodes register with replaces the catalog's estimate.

Opt-in (``Settings.features.measured_capacity``: ``karpy operator --measured-capacity``, the
scenario's ``settings.measuredCapacity``); off, this controller is not built and nothing
changes. On, :class:`MeasuredCapacity`:

- **wraps the cluster state's instance-type source** when built: the instance types of every
  NodePool come back with the measured capacity and allocatable of their type under the pool's
  NodeClass (:func:`karpy.core.measured.override`), so provisioning, consolidation and the
  limits all decide with them. The same tuple comes back while nothing changed (the scheduler's
  caches go by identity);
- **measures** on every pass the Nodes that count (:func:`karpy.core.measured.measurable`:
  Ready, initialized, launched from the NodeClass as it is now), keeping per instance type and
  NodeClass identity the per-resource minimum (:func:`karpy.core.measured.fold`). A
  measurement that changes posts a ``CapacityMeasured`` event on the Node;
- **corrects in-flight NodeClaims**: a launched claim whose Node has not registered yet carries
  the cloud provider's estimate in ``status.capacity``/``status.allocatable``, which the
  scheduler packs later pods against; a measured type's claim gets the measured amounts
  patched in (event ``CapacityCorrected``);
- **persists** through an optional :class:`Store` (the operator's ConfigMap,
  :mod:`karpy.adapters.kube.measured_store`): read at the first pass (merged, by minimum, with
  what was measured meanwhile), written at most once per :attr:`MeasuredCapacity.save_interval`
  after a change, merged with what the store holds, and without the identities no NodeClass
  has any more (an AMI change expired them). A store that fails is retried later; the
  measurements in memory keep working.

Registered by :func:`karpy.runtime.wiring.build` right after the lifecycle, so a claim launched
in a pass is corrected before provisioning runs at the same instant; woken by Node, NodeClaim
and NodeClass changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core import measured
from karpy.model import errors, labels
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass, NodeClass
from karpy.model.objects import Node, NodeClaim, NodePool
from karpy.model.resources import Resources
from karpy.ports import KubeOp
from karpy.state.cluster import InstanceTypeSource
from karpy.state.events import ObjectEvent

__all__ = ["SAVE_INTERVAL", "MeasuredCapacity", "Store"]

SAVE_INTERVAL = 60.0  # seconds between two writes of the store, at most
_IDENTITIES_KEPT = 256  # NodeClass objects whose identity is remembered (by object)
_EMPTY_DOC = {"version": measured.DOC_VERSION, "entries": []}

Key = tuple[str, str]  # (identity, instance type)


class Store(Protocol):
    """Where measurements outlive the process: a JSON document (:func:`karpy.core.measured.to_doc`)."""

    def load(self) -> Mapping[str, Any] | None: ...  # None: nothing stored yet

    def save(self, doc: Mapping[str, Any]) -> None: ...


class MeasuredCapacity:
    name = "measured-capacity"

    def __init__(
        self, ctx: Context, *, store: Store | None = None, save_interval: float = SAVE_INTERVAL
    ) -> None:
        self.ctx = ctx
        self.store = store
        self.save_interval = save_interval
        self.entries: dict[Key, measured.Measurement] = {}
        self.version = 0  # bumped on every change of ``entries``
        self.corrected = 0  # in-flight NodeClaims corrected (tests, the simulator)
        self._by_identity: dict[str, dict[str, measured.Measurement]] = {}
        self._loaded = False
        self._dirty = False
        self._saved_at: float | None = None
        self._folded: dict[str, Node] = {}  # Node name -> the Node object measured last
        self._launched: dict[str, str] = {}  # NodeClaim name -> the identity it was first seen with
        self._identities: dict[int, tuple[NodeClass | None, str]] = {}
        self._memo: dict[str, tuple[tuple[InstanceType, ...], int, str, tuple[InstanceType, ...]]] = {}
        self.inner: InstanceTypeSource = ctx.cluster.instance_types
        ctx.cluster.instance_types = self.instance_types

    # -- the instance-type source ----------------------------------------------------------------
    def identity(self, node_class: NodeClass | None) -> str:
        """:func:`karpy.core.measured.identity`, remembered per NodeClass object."""
        key = id(node_class)
        found = self._identities.get(key)
        if found is not None and found[0] is node_class:
            return found[1]
        if len(self._identities) >= _IDENTITIES_KEPT:
            self._identities.clear()
        ident = measured.identity(node_class)
        self._identities[key] = (node_class, ident)
        return ident

    def instance_types(self, pool: NodePool, node_class: NodeClass | None) -> tuple[InstanceType, ...]:
        """The inner source's types for ``pool`` with the measured ones replaced."""
        types = self.inner(pool, node_class)
        if not self.entries:
            return types
        ident = self.identity(node_class)
        memo = self._memo.get(pool.name)
        if memo is not None and memo[0] is types and memo[1] == self.version and memo[2] == ident:
            return memo[3]
        out = measured.override(types, self._by_identity.get(ident, {}))
        self._memo[pool.name] = (types, self.version, ident, out)
        return out

    def lookup(self, node_class: NodeClass | None, instance_type: str) -> measured.Measurement | None:
        return self.entries.get((self.identity(node_class), instance_type))

    # -- events ----------------------------------------------------------------------------------
    def on_event(self, event: ObjectEvent) -> bool:
        """Nodes, NodeClaims and NodeClasses are what a pass reads."""
        return isinstance(event.obj, Node | NodeClaim | EC2NodeClass | KWOKNodeClass)

    # -- reconcile -------------------------------------------------------------------------------
    def reconcile(self) -> Result:
        now = self.ctx.now()
        if not self._loaded:
            self._load()
        self._measure(now)
        self._correct()
        return self._persist(now)

    def _put(self, m: measured.Measurement) -> None:
        self.entries[m.key] = m
        self._by_identity.setdefault(m.identity, {})[m.instance_type] = m
        self.version += 1
        self._dirty = True

    def _node_class(self, claim: NodeClaim) -> NodeClass | None:
        ref = claim.node_class_ref
        return None if ref is None else self.ctx.cluster.node_classes.get((ref.kind, ref.name))

    def _measure(self, now: float) -> None:
        folded: dict[str, Node] = {}
        launched: dict[str, str] = {}
        for sn in self.ctx.cluster.state_nodes(now):
            node, claim = sn.node, sn.claim
            if claim is None:
                continue
            node_class = self._node_class(claim)
            if claim.node_class_ref is not None and node_class is None:
                continue  # its NodeClass is not known (yet): nothing to key a measurement by
            ident = self.identity(node_class)
            # the identity when this controller first saw the claim: a Node launched before the
            # NodeClass changed does not count for the new identity
            launched[claim.name] = self._launched.get(claim.name, ident)
            if node is None:
                continue
            if self._folded.get(node.name) is node:
                folded[node.name] = node
                continue
            if (
                launched[claim.name] != ident
                or not measured.measurable(node, claim)
                or not measured.launched_from(claim, node_class)
            ):
                continue
            folded[node.name] = node
            it_name = node.labels[labels.INSTANCE_TYPE]
            before = self.entries.get((ident, it_name))
            after = measured.fold(
                before, it_name, ident, node.capacity, node.allocatable, node=node.name, now=now
            )
            if after is not before:
                self._put(after)
                self.ctx.event(
                    "Node",
                    node.name,
                    "CapacityMeasured",
                    f"{it_name} ({_class_name(claim)}): allocatable counted as {after.allocatable.format()}",
                )
        self._folded = folded
        self._launched = launched

    def _correct(self) -> None:
        """Patch the measured amounts into launched claims whose Node has not registered."""
        if not self.entries:
            return
        writes: list[tuple[NodeClaim, Resources]] = []
        ops: list[KubeOp] = []
        for sn in self.ctx.cluster.state_nodes(self.ctx.now()):
            claim = sn.claim
            if sn.node is not None or claim is None or claim.deleting or not claim.allocatable:
                continue
            node_class = self._node_class(claim)
            ident = self.identity(node_class)
            if self._launched.get(claim.name, ident) != ident:
                continue  # launched before its NodeClass changed
            m = self.entries.get((ident, claim.labels.get(labels.INSTANCE_TYPE, "")))
            if m is None:
                continue
            capacity = measured.replaced(claim.capacity, m.capacity)
            allocatable = measured.replaced(claim.allocatable, m.allocatable)
            if capacity == claim.capacity and allocatable == claim.allocatable:
                continue
            status = {"capacity": encode.resources(capacity), "allocatable": encode.resources(allocatable)}
            writes.append((claim, allocatable))
            ops.append(KubeOp("patch", "NodeClaim", claim.name, body={"status": status}))
        if not ops:
            return
        for (claim, allocatable), answer in zip(writes, self.ctx.kube.batch(ops), strict=True):
            if isinstance(answer, errors.NotFound):
                continue
            if isinstance(answer, errors.KubeError):
                self.ctx.log.warning(
                    "correcting NodeClaim %s to its measured capacity: %s", claim.name, answer
                )
                continue
            self.corrected += 1
            self.ctx.event(
                "NodeClaim",
                claim.name,
                "CapacityCorrected",
                f"allocatable {claim.allocatable.format()} -> measured {allocatable.format()}",
            )

    # -- the store -------------------------------------------------------------------------------
    def _load(self) -> None:
        if self.store is None:
            self._loaded = True
            return
        try:
            doc = self.store.load()
        except errors.KubeError as exc:
            self.ctx.log.warning("reading the measured capacity: %s (retried at the next pass)", exc)
            return
        self._loaded = True
        if doc is None:
            return
        found, problems = measured.from_doc(doc)
        for problem in problems:
            self.ctx.log.warning("measured capacity: %s", problem)
        dirty = self._dirty
        for m in found:
            before = self.entries.get(m.key)
            after = m if before is None else measured.merge(before, m)
            if after is not before:
                self._put(after)
        self._dirty = dirty  # loaded entries need no write of their own
        self.ctx.log.info("measured capacity: %d entries read", len(found))

    def _persist(self, now: float) -> Result:
        if self.store is None or not self._dirty:
            return Result()
        if self._saved_at is not None and now < self._saved_at + self.save_interval:
            return Result(requeue_after=self._saved_at + self.save_interval - now)
        self._saved_at = now
        try:
            stored, _ = measured.from_doc(self.store.load() or _EMPTY_DOC)
            live = self._live()
            for m in stored:  # what another leader measured meanwhile
                before = self.entries.get(m.key)
                after = m if before is None else measured.merge(before, m)
                if m.identity in live and after is not before:
                    self._put(after)
            self.store.save(measured.to_doc(m for k, m in sorted(self.entries.items()) if k[0] in live))
        except errors.KubeError as exc:
            self.ctx.log.warning(
                "writing the measured capacity: %s (retried in %.0f s)", exc, self.save_interval
            )
            return Result(requeue_after=self.save_interval)
        self._dirty = False
        return Result()

    def _live(self) -> set[str]:
        """The identities some NodeClass (or no NodeClass) has now; the others expired."""
        live = {self.identity(nc) for nc in self.ctx.cluster.node_classes.values()}
        live.add(self.identity(None))
        return live


def _class_name(claim: NodeClaim) -> str:
    ref = claim.node_class_ref
    return "no NodeClass" if ref is None else f"{ref.kind} {ref.name}"
