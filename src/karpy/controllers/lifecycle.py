"""NodeClaim lifecycle: launch -> registration -> initialization, liveness and garbage collection.

Karpenter's ``nodeclaim/lifecycle`` and ``nodeclaim/garbagecollection``. Every pass walks the
NodeClaims of the cluster state in name order (claims being deleted belong to
:mod:`karpy.controllers.termination`):

- the ``karpenter.sh/termination`` finalizer and the NodePool hash annotations (stamped when
  missing or of another hash version, so adopted claims do not all drift);
- **launch**: ``CloudProvider.create`` (a :class:`~karpy.ports.BatchLauncher` provider gets every
  claim the pass launches in one ``create_batch``); the providerID, image, labels, capacity,
  allocatable and the provider's annotations go to the claim with ``Launched=True``.
  Insufficient capacity (the provider caches the offering as unavailable) or a NodeClass that
  is not ready deletes the claim, so its pods are provisioned again; other cloud errors set
  ``Launched=Unknown`` with the error, a ``FailedLaunch`` Warning event (once per distinct
  error) and retry with backoff;
- **registration**: once a Node carries the claim's providerID it gets the finalizer, the
  claim's labels, taints and startup taints (unless ``karpenter.sh/do-not-sync-taints``),
  ``karpenter.sh/registered=true``, loses ``karpenter.sh/unregistered``; ``Registered=True``;
- **initialization**: Node Ready, startup and known ephemeral taints gone, requested
  extended resources allocatable -> ``Initialized=True`` and ``karpenter.sh/initialized``;
- **liveness**: not launched 5 min after creation, or not registered 15 min after launch ->
  the claim is deleted;
- **garbage collection** (every 2 min): instances without a claim are deleted; Registered
  claims whose instance is gone (a spot interruption) are deleted.

Registered as a loop task by the wiring (woken by Node and NodeClaim changes); returns the
soonest deadline, or a short poll while a claim waits on something.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core.disruption import drift
from karpy.model import errors, labels
from karpy.model.objects import Condition, Node, NodeClaim
from karpy.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint
from karpy.ports import BatchLauncher

__all__ = [
    "FINALIZER",
    "GC_INTERVAL",
    "LAUNCH_TTL",
    "REGISTRATION_TTL",
    "NodeClaimLifecycle",
    "ephemeral",
    "set_conditions",
]

FINALIZER = "karpenter.sh/termination"
UNREGISTERED = "karpenter.sh/unregistered"
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
LAUNCH_TTL = 5 * 60.0
REGISTRATION_TTL = 15 * 60.0
GC_INTERVAL = 2 * 60.0
INSTANCE_GC_GRACE = 30.0  # an instance younger than this may not have its claim patched yet
POLL = 5.0  # while a claim waits on the cloud or the kubelet
BACKOFF_MIN, BACKOFF_MAX = 1.0, 60.0
_BASE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})
_EPHEMERAL = (
    Taint("node.kubernetes.io/not-ready", NO_SCHEDULE),
    Taint("node.kubernetes.io/not-ready", NO_EXECUTE),
    Taint("node.kubernetes.io/unreachable", NO_SCHEDULE),
    Taint("node.kubernetes.io/unreachable", NO_EXECUTE),
    Taint("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE, "true"),
    Taint(UNREGISTERED, NO_EXECUTE),
)


def ephemeral(taint: Taint) -> bool:
    """Known ephemeral taints (upstream ``pkg/scheduling/taints.go``), waited on at initialization."""
    if taint.key.startswith("readiness.k8s.io/"):
        return True
    return any(t.key == taint.key and t.effect == taint.effect for t in _EPHEMERAL)


def set_conditions(
    current: Iterable[Condition], updates: Iterable[Condition], *, now: float
) -> list[dict[str, Any]]:
    """Raw conditions with ``updates`` applied (a transition time moves only on a status change)."""
    merged = {c.type: c for c in current}
    for new in updates:
        old = merged.get(new.type)
        since = old.last_transition if old is not None and old.status == new.status else now
        merged[new.type] = Condition(new.type, new.status, new.reason, new.message, since)
    return [encode.condition(c) for c in merged.values()]


class NodeClaimLifecycle:
    name = "nodeclaim.lifecycle"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._finalized: set[str] = set()  # claims known to carry the finalizer
        self._attempts: dict[str, int] = {}  # launch attempts that failed, per claim
        self._retry_at: dict[str, float] = {}
        self._next_gc: float | None = None
        # claims found launched, registered and initialized: skipped while the object is the same
        self._settled: dict[str, NodeClaim] = {}
        # the claim names at the last clean-up of the per-claim tables: while the cluster hands
        # back the same tuple, no claim went, and every entry (all made for claims then known) stays
        self._cleaned_for: tuple[str, ...] | None = None
        self._since: int | None = None  # the claims store version when the last pass began
        self._open: set[str] = set()  # claims the last pass advanced that are not settled
        self._launched: dict[str, NodeClaim | errors.CloudError] = {}  # batch results not yet taken
        self._last_error: dict[str, str] = {}  # the last launch error per claim (one event per new one)

    # -- the pass ------------------------------------------------------------------------
    def reconcile(self) -> Result:
        now = self.ctx.now()
        waits: list[float] = []
        cluster = self.ctx.cluster
        changed = cluster.changed_since("claims", self._since) if self._since is not None else None
        self._since = cluster.store_version("claims")
        # a claim neither changed since the last pass began nor advanced by it is one that pass
        # skipped (settled, deleting or gone) and would skip again: only the others are visited
        visit = cluster.claim_names() if changed is None else sorted(self._open.union(changed))
        self._open = set()
        if isinstance(self.ctx.cloud, BatchLauncher):
            self._prelaunch(self.ctx.cloud, visit, now)
        for name in visit:
            claim = cluster.claims.get(name)
            if claim is None or claim.deleting or self._settled.get(name) is claim:
                continue
            wait = self._claim(claim, now)
            if wait is not None:
                waits.append(wait)
            if self._settled.get(name) is not cluster.claims.get(name):
                self._open.add(name)
        names = cluster.claim_names()
        if names is not self._cleaned_for:  # claims came or went since the last clean-up
            known = set(names)
            for store in (self._attempts, self._retry_at, self._launched, self._last_error):
                for name in [n for n in store if n not in known]:
                    del store[name]
            self._finalized &= known
            for name in [n for n in self._settled if n not in known]:
                del self._settled[name]
            self._cleaned_for = names
        if self._next_gc is None:
            self._next_gc = now + GC_INTERVAL
        elif now >= self._next_gc:
            self._garbage_collect(now)
            self._next_gc = now + GC_INTERVAL
        waits.append(self._next_gc - now)
        return Result(requeue_after=max(0.0, min(waits)))

    def _claim(self, claim: NodeClaim, now: float) -> float | None:
        """Advance one claim as far as it goes now; the delay until it wants another look."""
        current = self._metadata(claim)
        if current is None:
            return None
        if not current.is_true("Launched"):
            return self._launch(current, now)
        if not current.is_true("Registered"):
            return self._register(current, now)
        if not current.is_true("Initialized"):
            return self._initialize(current, now)
        if current.annotations.get(drift.HASH_VERSION_ANNOTATION) == drift.HASH_VERSION:
            self._settled[current.name] = current  # nothing left to do until the claim changes
        return None

    def _fresh(self, name: str) -> NodeClaim | None:
        claim = self.ctx.cluster.claims.get(name)
        return None if claim is None or claim.deleting else claim

    # -- finalizer and hash --------------------------------------------------------------
    def _metadata(self, claim: NodeClaim) -> NodeClaim | None:
        patch: dict[str, Any] = {}
        if claim.name not in self._finalized:
            try:
                raw = self.ctx.kube.get("NodeClaim", claim.name)
            except errors.NotFound:
                return None
            finalizers = list(raw["metadata"].get("finalizers") or [])
            if FINALIZER not in finalizers:
                patch["finalizers"] = [*finalizers, FINALIZER]
        pool = self.ctx.cluster.node_pools.get(claim.node_pool)
        version = claim.annotations.get(drift.HASH_VERSION_ANNOTATION)
        if pool is not None and (
            version != drift.HASH_VERSION or drift.HASH_ANNOTATION not in claim.annotations
        ):
            patch["annotations"] = {
                drift.HASH_ANNOTATION: drift.pool_hash(pool),
                drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION,
            }
        if patch:
            try:
                self.ctx.kube.patch("NodeClaim", claim.name, {"metadata": patch})
            except errors.NotFound:
                return None
        self._finalized.add(claim.name)
        return self._fresh(claim.name) if patch else claim

    # -- launch --------------------------------------------------------------------------
    def _due(self, claim: NodeClaim, now: float) -> bool:
        """Whether a launch of ``claim`` would be attempted now (not timed out, not backing off)."""
        if now >= claim.created + LAUNCH_TTL:
            return False
        retry_at = self._retry_at.get(claim.name)
        return retry_at is None or now >= retry_at

    def _prelaunch(self, cloud: BatchLauncher, visit: Iterable[str], now: float) -> None:
        """Launch every claim this pass would launch in one batch (a provider that batches
        identical requests makes one cloud call for many claims); the pass then takes each result
        where it would have called ``create``."""
        batch: list[NodeClaim] = []
        for name in visit:
            claim = self.ctx.cluster.claims.get(name)
            if (
                claim is None
                or claim.deleting
                or claim.is_true("Launched")
                or self._settled.get(name) is claim
            ):
                continue
            current = self._metadata(claim)
            if current is not None and not current.is_true("Launched") and self._due(current, now):
                batch.append(current)
        if len(batch) < 2:
            return  # one claim: the ordinary path launches it
        for claim, result in zip(batch, cloud.create_batch(batch), strict=True):
            self._launched[claim.name] = result

    def _create(self, claim: NodeClaim) -> NodeClaim:
        result = self._launched.pop(claim.name, None)
        if result is None:
            return self.ctx.cloud.create(claim)
        if isinstance(result, errors.CloudError):
            raise result
        return result

    def _launch(self, claim: NodeClaim, now: float) -> float | None:
        deadline = claim.created + LAUNCH_TTL
        if now >= deadline:
            self._delete(claim, "liveness", "LaunchTimeout", f"not launched within {LAUNCH_TTL:.0f}s")
            return None
        retry_at = self._retry_at.get(claim.name)
        if retry_at is not None and now < retry_at:
            return min(retry_at, deadline) - now
        try:
            hydrated = self._create(claim)
        except errors.InsufficientCapacity as exc:
            self.ctx.event("NodeClaim", claim.name, "InsufficientCapacityError", str(exc), warning=True)
            self._delete(claim, "insufficient_capacity")
            return None
        except errors.NodeClassNotReady as exc:
            self.ctx.event("NodeClaim", claim.name, "NodeClassNotReady", str(exc), warning=True)
            self._delete(claim, "nodeclass_not_ready")
            return None
        except errors.CloudError as exc:
            attempts = self._attempts.get(claim.name, 0) + 1
            self._attempts[claim.name] = attempts
            delay = min(BACKOFF_MAX, BACKOFF_MIN * 2.0 ** (attempts - 1))
            self._retry_at[claim.name] = now + delay
            self.ctx.log.warning("launching NodeClaim %s failed: %s", claim.name, exc)
            if attempts == 1 or str(exc) != self._last_error.get(claim.name):
                self.ctx.event("NodeClaim", claim.name, "FailedLaunch", str(exc), warning=True)
            self._last_error[claim.name] = str(exc)
            self._patch_status(
                claim,
                {},
                [Condition("Launched", "Unknown", "CreateError", str(exc))],
                now=now,
            )
            return min(delay, deadline - now)
        self._attempts.pop(claim.name, None)
        self._retry_at.pop(claim.name, None)
        status: dict[str, Any] = {
            "providerID": hydrated.provider_id,
            "capacity": encode.resources(hydrated.capacity),
            "allocatable": encode.resources(hydrated.allocatable),
        }
        if hydrated.image_id:
            status["imageID"] = hydrated.image_id
        merged = {**hydrated.labels, **claim.labels}
        added = {k: v for k, v in hydrated.annotations.items() if claim.annotations.get(k) != v}
        self._patch_status(
            claim, status, [Condition("Launched", "True")], now=now, labels_=merged, annotations=added
        )
        launched = self._fresh(claim.name)
        return None if launched is None else self._register(launched, now)

    # -- registration --------------------------------------------------------------------
    def _node_for(self, provider_id: str) -> Node | None:
        """The Node with this providerID (the last in the order of ``nodes`` if several)."""
        found = self.ctx.cluster.nodes_with_provider(provider_id)
        return found[-1] if found else None

    def _register(self, claim: NodeClaim, now: float) -> float | None:
        node = self._node_for(claim.provider_id)
        if node is None:
            launched = claim.condition("Launched")
            since = launched.last_transition if launched and launched.last_transition else claim.created
            deadline = since + REGISTRATION_TTL
            if now >= deadline:
                message = f"no Node registered within {REGISTRATION_TTL:.0f}s of launch"
                self._delete(claim, "liveness", "RegistrationTimeout", message)
                return None
            return min(POLL, deadline - now)
        try:
            raw = self.ctx.kube.get("Node", node.name)
        except errors.NotFound:
            return POLL
        meta = raw["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        node_labels = {
            **node.labels,
            **claim.labels,
            labels.REGISTERED: "true",
        }
        if claim.node_pool:
            node_labels[labels.NODEPOOL] = claim.node_pool
        taints = [t for t in node.taints if t.key != UNREGISTERED]
        if len(taints) == len(node.taints):
            self.ctx.event(
                "Node", node.name, "UnregisteredTaintMissing", f"missing {UNREGISTERED} taint", warning=True
            )
        if node.labels.get(DO_NOT_SYNC_TAINTS) != "true":
            taints += [t for t in (*claim.taints, *claim.startup_taints) if t not in taints]
        node_patch: dict[str, Any] = {
            "metadata": {"labels": node_labels},
            "spec": {"taints": [encode.taint(t) for t in taints] or None},
        }
        if FINALIZER not in finalizers:
            node_patch["metadata"]["finalizers"] = [*finalizers, FINALIZER]
        try:
            self.ctx.kube.patch("Node", node.name, node_patch)
        except errors.NotFound:
            return POLL
        self._patch_status(claim, {"nodeName": node.name}, [Condition("Registered", "True")], now=now)
        self.ctx.metrics.nodes_created.labels(nodepool=claim.node_pool).inc()
        registered = self._fresh(claim.name)
        return None if registered is None else self._initialize(registered, now)

    # -- initialization ------------------------------------------------------------------
    def _initialize(self, claim: NodeClaim, now: float) -> float | None:
        node = self._node_for(claim.provider_id)
        if node is None:
            return None  # the Node went away; garbage collection decides
        if not _initialized(node, claim):
            return POLL
        if node.labels.get(labels.INITIALIZED) != "true":
            try:
                self.ctx.kube.patch("Node", node.name, {"metadata": {"labels": {labels.INITIALIZED: "true"}}})
            except errors.NotFound:
                return None
        self._patch_status(claim, {}, [Condition("Initialized", "True")], now=now)
        return None

    # -- garbage collection --------------------------------------------------------------
    def _garbage_collect(self, now: float) -> None:
        try:
            instances = self.ctx.cloud.list()
        except errors.CloudError as exc:
            self.ctx.log.warning("listing instances failed: %s", exc)
            return
        claims = self.ctx.cluster.claims
        claimed = {c.provider_id for c in claims.values() if c.provider_id}
        for instance in instances:
            if instance.provider_id in claimed or now - instance.created < INSTANCE_GC_GRACE:
                continue
            self.ctx.log.info("garbage collecting instance %s (no NodeClaim)", instance.provider_id)
            with contextlib.suppress(errors.CloudError):
                self.ctx.cloud.delete(instance)
        alive = {i.provider_id for i in instances}
        for name in sorted(claims):
            claim = claims[name]
            if claim.deleting or not claim.is_true("Registered") or claim.provider_id in alive:
                continue
            node = self._node_for(claim.provider_id)
            if node is not None and node.ready and not node.deleting:
                continue  # the kubelet still reports in: trust it over the cloud's list
            self._delete(claim, "garbage_collected")

    # -- writes --------------------------------------------------------------------------
    def _patch_status(
        self,
        claim: NodeClaim,
        status: Mapping[str, Any],
        conditions: Iterable[Condition],
        *,
        now: float,
        labels_: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        body: dict[str, Any] = {
            "status": {**status, "conditions": set_conditions(claim.conditions, conditions, now=now)}
        }
        if labels_ is not None:
            body["metadata"] = {"labels": dict(labels_)}
        if annotations:
            body.setdefault("metadata", {})["annotations"] = dict(annotations)
        with contextlib.suppress(errors.NotFound):
            self.ctx.kube.patch("NodeClaim", claim.name, body)

    def _delete(self, claim: NodeClaim, reason: str, event: str = "", message: str = "") -> None:
        if event:
            self.ctx.event("NodeClaim", claim.name, event, message, warning=True)
        self.ctx.log.info("deleting NodeClaim %s (%s)", claim.name, reason)
        try:
            self.ctx.kube.delete("NodeClaim", claim.name)
        except errors.NotFound:
            return
        self.ctx.metrics.nodeclaims_disrupted.labels(
            reason=reason,
            nodepool=claim.node_pool,
            capacity_type=claim.labels.get(labels.CAPACITY_TYPE, ""),
        ).inc()
        self._attempts.pop(claim.name, None)
        self._retry_at.pop(claim.name, None)


def _initialized(node: Node, claim: NodeClaim) -> bool:
    if not node.ready:
        return False
    if any(t in node.taints for t in claim.startup_taints):
        return False
    if any(ephemeral(t) for t in node.taints):
        return False
    for resource, amount in claim.requests.items():
        if resource not in _BASE_RESOURCES and amount > 0 and node.allocatable.get(resource) <= 0:
            return False
    return True
