"""NodeClaim lifecycle: launch -> registration -> initialization, liveness and garbage collection.

Karpenter's ``nodeclaim/lifecycle`` and ``nodeclaim/garbagecollection``. Every pass takes the
NodeClaims of the cluster state in name order (claims being deleted belong to
:mod:`karpy.controllers.termination`) through phases, each claim as far as it goes now:

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

Within a phase the API calls of the claims are independent (one object each): they go out as one
``KubeAPI.batch`` per step (the finalizer reads, the metadata patches, the status patches, the
Node reads and patches, the deletes), which the operator's kube client runs concurrently and the
in-memory API server in order. The answers are taken in the claims' name order, so each claim sees
the same calls, answers and state as it would one claim after the other. A call that fails with
anything but NotFound stops only its claim; the pass takes the other answers, then raises the first
such error (the operator logs it and retries the pass).

Registered as a loop task by the wiring (woken by Node and NodeClaim changes); returns the
soonest deadline, or a short poll while a claim waits on something.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.api import encode
from karpy.controllers.claims import with_finalizer
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core.disruption import drift
from karpy.model import errors, labels
from karpy.model.objects import Condition, Node, NodeClaim
from karpy.model.taints import NO_EXECUTE, NO_SCHEDULE, UNREGISTERED, Taint
from karpy.ports import BatchLauncher, KubeOp, RawObject

__all__ = [
    "GC_INTERVAL",
    "LAUNCH_TTL",
    "REGISTRATION_TTL",
    "NodeClaimLifecycle",
    "ephemeral",
    "set_conditions",
]

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
    UNREGISTERED,
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
        # claims found gone (NotFound) right after their launch: their instance was deleted, and
        # they are not launched again while the state still lists them (until the watch catches up)
        self._gone: set[str] = set()
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
        self._last_error: dict[str, str] = {}  # the last launch error per claim (one event per new one)
        self._error: errors.KubeError | None = None  # the pass's first failed call (raised at its end)

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
        self._error = None
        todo: list[NodeClaim] = []
        for name in visit:
            claim = cluster.claims.get(name)
            if claim is not None and not claim.deleting and self._settled.get(name) is not claim:
                todo.append(claim)
        self._advance(todo, now, waits)
        for claim in todo:
            if self._settled.get(claim.name) is not cluster.claims.get(claim.name):
                self._open.add(claim.name)
        names = cluster.claim_names()
        if names is not self._cleaned_for:  # claims came or went since the last clean-up
            known = set(names)
            for store in (self._attempts, self._retry_at, self._last_error):
                for name in [n for n in store if n not in known]:
                    del store[name]
            self._finalized &= known
            self._gone &= known
            for name in [n for n in self._settled if n not in known]:
                del self._settled[name]
            self._cleaned_for = names
        if self._next_gc is None:
            self._next_gc = now + GC_INTERVAL
        elif now >= self._next_gc:
            self._garbage_collect(now)
            self._next_gc = now + GC_INTERVAL
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        waits.append(self._next_gc - now)
        return Result(requeue_after=max(0.0, min(waits)))

    def _advance(self, claims: Sequence[NodeClaim], now: float, waits: list[float]) -> None:
        """Take ``claims`` (name order) through the phases, each as far as it goes now; ``waits``
        gets the delay after which a claim that stopped wants another look."""
        launch: list[NodeClaim] = []
        register: list[NodeClaim] = []
        initialize: list[NodeClaim] = []
        for current in self._metadata(claims):
            if not current.is_true("Launched"):
                launch.append(current)
            elif not current.is_true("Registered"):
                register.append(current)
            elif not current.is_true("Initialized"):
                initialize.append(current)
            elif current.annotations.get(drift.HASH_VERSION_ANNOTATION) == drift.HASH_VERSION:
                self._settled[current.name] = current  # nothing left to do until the claim changes
        register = _by_name([*self._launch(launch, now, waits), *register])
        initialize = _by_name([*self._register(register, now, waits), *initialize])
        self._initialize(initialize, now, waits)

    def _fresh(self, name: str) -> NodeClaim | None:
        claim = self.ctx.cluster.claims.get(name)
        return None if claim is None or claim.deleting else claim

    def _batch(self, ops: Sequence[KubeOp], not_found: set[int] | None = None) -> list[RawObject | None]:
        """The answers of independent calls (made at once, see the module docstring); None for
        a call that failed: NotFound (its position added to ``not_found``), or another error kept
        for the pass to raise at its end."""
        if not ops:
            return []
        out: list[RawObject | None] = []
        for i, result in enumerate(self.ctx.kube.batch(ops)):
            if isinstance(result, errors.KubeError):
                if isinstance(result, errors.NotFound):
                    if not_found is not None:
                        not_found.add(i)
                elif self._error is None:
                    self._error = result
                out.append(None)
            else:
                out.append(result)
        return out

    # -- finalizer and hash --------------------------------------------------------------
    def _metadata(self, claims: Sequence[NodeClaim]) -> list[NodeClaim]:
        """The claims with the finalizer and the hash annotations (patched where missing), as
        the state has them after; claims gone (or going) meanwhile are left out."""
        reads = [c for c in claims if c.name not in self._finalized]
        answers = self._batch([KubeOp("get", "NodeClaim", c.name) for c in reads])
        raws = dict(zip([c.name for c in reads], answers, strict=True))
        out: dict[str, NodeClaim] = {}
        patches: list[tuple[NodeClaim, dict[str, Any]]] = []
        for claim in claims:
            patch: dict[str, Any] = {}
            if claim.name in raws:
                raw = raws[claim.name]
                if raw is None:
                    continue
                finalizers = list(raw["metadata"].get("finalizers") or [])
                if (added := with_finalizer(finalizers)) is not None:
                    patch["finalizers"] = added
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
                patches.append((claim, {"metadata": patch}))
            else:
                self._finalized.add(claim.name)
                out[claim.name] = claim
        answers = self._batch([KubeOp("patch", "NodeClaim", c.name, body=p) for c, p in patches])
        for (claim, _), answer in zip(patches, answers, strict=True):
            if answer is None:
                continue
            self._finalized.add(claim.name)
            fresh = self._fresh(claim.name)
            if fresh is not None:
                out[claim.name] = fresh
        return [out[c.name] for c in claims if c.name in out]

    # -- launch --------------------------------------------------------------------------
    def _create(self, claims: Sequence[NodeClaim]) -> list[NodeClaim | errors.CloudError]:
        """The provider's answer per claim, in order: one ``create_batch`` for several claims of a
        :class:`~karpy.ports.BatchLauncher`, else ``create`` one by one. A Kubernetes error (a
        provider writing Nodes) stops the launches there: the answers so far are returned."""
        cloud = self.ctx.cloud
        if isinstance(cloud, BatchLauncher) and len(claims) >= 2:
            try:
                return list(cloud.create_batch(claims))
            except errors.KubeError as exc:
                self._error = self._error or exc
                return []
        out: list[NodeClaim | errors.CloudError] = []
        for claim in claims:
            try:
                out.append(cloud.create(claim))
            except errors.CloudError as exc:
                out.append(exc)
            except errors.KubeError as exc:
                self._error = self._error or exc
                break
        return out

    def _launch(self, claims: Sequence[NodeClaim], now: float, waits: list[float]) -> list[NodeClaim]:
        """Launch the claims that are due; the ones launched, as the state has them after."""
        due: list[NodeClaim] = []
        deletes: list[tuple[NodeClaim, str, str, str]] = []
        for claim in claims:
            if claim.name in self._gone:
                continue
            deadline = claim.created + LAUNCH_TTL
            if now >= deadline:
                deletes.append((claim, "liveness", "LaunchTimeout", f"not launched within {LAUNCH_TTL:.0f}s"))
                continue
            retry_at = self._retry_at.get(claim.name)
            if retry_at is not None and now < retry_at:
                waits.append(min(retry_at, deadline) - now)
                continue
            due.append(claim)
        statuses: list[tuple[NodeClaim, dict[str, Any]]] = []
        launched: list[tuple[NodeClaim, NodeClaim]] = []  # (claim, the provider's hydrated claim)
        for claim, result in zip(due, self._create(due), strict=False):
            if isinstance(result, errors.InsufficientCapacity):
                self.ctx.event(
                    "NodeClaim", claim.name, "InsufficientCapacityError", str(result), warning=True
                )
                deletes.append((claim, "insufficient_capacity", "", ""))
            elif isinstance(result, errors.NodeClassNotReady):
                self.ctx.event("NodeClaim", claim.name, "NodeClassNotReady", str(result), warning=True)
                deletes.append((claim, "nodeclass_not_ready", "", ""))
            elif isinstance(result, errors.CloudError):
                waits.append(self._failed_launch(claim, result, now))
                condition = Condition("Launched", "Unknown", "CreateError", str(result))
                statuses.append((claim, _status_body(claim, {}, [condition], now=now)))
            else:
                statuses.append((claim, self._launched_body(claim, result, now)))
                launched.append((claim, result))
        gone = {statuses[i][0].name for i in self._write_statuses(statuses)}
        for claim, hydrated in launched:
            if claim.name in gone:
                self._abandon(claim, hydrated)
        self._delete_all(deletes)
        kept = [c for c, _ in launched if c.name not in gone]
        return [fresh for c in kept if (fresh := self._fresh(c.name)) is not None]

    def _abandon(self, claim: NodeClaim, hydrated: NodeClaim) -> None:
        """The claim was deleted (or the API server lost it) while its instance launched: delete
        the instance now rather than leave it running until garbage collection, and never
        launch the claim again."""
        self._gone.add(claim.name)
        self._attempts.pop(claim.name, None)
        self._retry_at.pop(claim.name, None)
        self.ctx.log.warning(
            "NodeClaim %s is gone (NotFound) after its launch: deleting its instance %s",
            claim.name,
            hydrated.provider_id,
        )
        try:
            self.ctx.cloud.delete(hydrated)
        except errors.CloudError:
            pass  # already gone
        except errors.KubeError as exc:  # a provider writing Nodes: garbage collection retries
            self._error = self._error or exc

    def _failed_launch(self, claim: NodeClaim, exc: errors.CloudError, now: float) -> float:
        """Back off (a Warning event once per distinct error); the delay until the retry."""
        attempts = self._attempts.get(claim.name, 0) + 1
        self._attempts[claim.name] = attempts
        delay = min(BACKOFF_MAX, BACKOFF_MIN * 2.0 ** (attempts - 1))
        self._retry_at[claim.name] = now + delay
        self.ctx.log.warning("launching NodeClaim %s failed: %s", claim.name, exc)
        if attempts == 1 or str(exc) != self._last_error.get(claim.name):
            self.ctx.event("NodeClaim", claim.name, "FailedLaunch", str(exc), warning=True)
        self._last_error[claim.name] = str(exc)
        return min(delay, claim.created + LAUNCH_TTL - now)

    def _launched_body(self, claim: NodeClaim, hydrated: NodeClaim, now: float) -> dict[str, Any]:
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
        launched = [Condition("Launched", "True")]
        return _status_body(claim, status, launched, now=now, labels_=merged, annotations=added)

    # -- registration --------------------------------------------------------------------
    def _node_for(self, provider_id: str) -> Node | None:
        """The Node with this providerID (the last in the order of ``nodes`` if several)."""
        found = self.ctx.cluster.nodes_with_provider(provider_id)
        return found[-1] if found else None

    def _register(self, claims: Sequence[NodeClaim], now: float, waits: list[float]) -> list[NodeClaim]:
        """Register the claims whose Node is there; the ones registered, as the state has them after."""
        found: list[tuple[NodeClaim, Node]] = []
        deletes: list[tuple[NodeClaim, str, str, str]] = []
        for claim in claims:
            node = self._node_for(claim.provider_id)
            if node is not None:
                found.append((claim, node))
                continue
            launched = claim.condition("Launched")
            since = launched.last_transition if launched and launched.last_transition else claim.created
            deadline = since + REGISTRATION_TTL
            if now >= deadline:
                message = f"no Node registered within {REGISTRATION_TTL:.0f}s of launch"
                deletes.append((claim, "liveness", "RegistrationTimeout", message))
            else:
                waits.append(min(POLL, deadline - now))
        raws = self._batch([KubeOp("get", "Node", node.name) for _, node in found])
        patches: list[tuple[NodeClaim, Node, dict[str, Any]]] = []
        for (claim, node), raw in zip(found, raws, strict=True):
            if raw is None:
                waits.append(POLL)
            else:
                patches.append((claim, node, self._node_patch(claim, node, raw)))
        answers = self._batch([KubeOp("patch", "Node", node.name, body=p) for _, node, p in patches])
        statuses: list[tuple[NodeClaim, dict[str, Any]]] = []
        for (claim, node, _), answer in zip(patches, answers, strict=True):
            if answer is None:
                waits.append(POLL)
                continue
            registered = [Condition("Registered", "True")]
            statuses.append((claim, _status_body(claim, {"nodeName": node.name}, registered, now=now)))
        self._write_statuses(statuses)
        self._delete_all(deletes)
        out: list[NodeClaim] = []
        for claim, _ in statuses:
            self.ctx.metrics.nodes_created.labels(nodepool=claim.node_pool).inc()
            fresh = self._fresh(claim.name)
            if fresh is not None:
                out.append(fresh)
        return out

    def _node_patch(self, claim: NodeClaim, node: Node, raw: RawObject) -> dict[str, Any]:
        """The Node's registration patch: finalizer, the claim's labels and taints, registered."""
        finalizers = list(raw["metadata"].get("finalizers") or [])
        node_labels = {
            **node.labels,
            **claim.labels,
            labels.REGISTERED: "true",
        }
        if claim.node_pool:
            node_labels[labels.NODEPOOL] = claim.node_pool
        taints = [t for t in node.taints if t.key != UNREGISTERED.key]
        if len(taints) == len(node.taints):
            self.ctx.event(
                "Node",
                node.name,
                "UnregisteredTaintMissing",
                f"missing {UNREGISTERED.key} taint",
                warning=True,
            )
        if node.labels.get(DO_NOT_SYNC_TAINTS) != "true":
            taints += [t for t in (*claim.taints, *claim.startup_taints) if t not in taints]
        node_patch: dict[str, Any] = {
            "metadata": {"labels": node_labels},
            "spec": {"taints": [encode.taint(t) for t in taints] or None},
        }
        if (added := with_finalizer(finalizers)) is not None:
            node_patch["metadata"]["finalizers"] = added
        return node_patch

    # -- initialization ------------------------------------------------------------------
    def _initialize(self, claims: Sequence[NodeClaim], now: float, waits: list[float]) -> None:
        ready: list[tuple[NodeClaim, Node]] = []
        for claim in claims:
            node = self._node_for(claim.provider_id)
            if node is None:
                continue  # the Node went away; garbage collection decides
            if not _initialized(node, claim):
                waits.append(POLL)
                continue
            ready.append((claim, node))
        unlabeled = [(c, n) for c, n in ready if n.labels.get(labels.INITIALIZED) != "true"]
        patch = {"metadata": {"labels": {labels.INITIALIZED: "true"}}}
        answers = self._batch([KubeOp("patch", "Node", n.name, body=patch) for _, n in unlabeled])
        failed = {c.name for (c, _), answer in zip(unlabeled, answers, strict=True) if answer is None}
        initialized = [Condition("Initialized", "True")]
        self._write_statuses(
            [(c, _status_body(c, {}, initialized, now=now)) for c, _ in ready if c.name not in failed]
        )

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
    def _write_statuses(self, writes: Sequence[tuple[NodeClaim, Mapping[str, Any]]]) -> set[int]:
        """Patch the claims' statuses (and labels, annotations) at once; a claim gone is no error.
        The positions in ``writes`` of the claims that were gone (NotFound)."""
        gone: set[int] = set()
        self._batch([KubeOp("patch", "NodeClaim", claim.name, body=body) for claim, body in writes], gone)
        return gone

    def _delete(self, claim: NodeClaim, reason: str, event: str = "", message: str = "") -> None:
        self._delete_all([(claim, reason, event, message)])

    def _delete_all(self, deletes: Sequence[tuple[NodeClaim, str, str, str]]) -> None:
        """Delete the claims at once: each (claim, reason, event reason, message), the event (if
        any) and log line first, the disruption metric for those actually deleted."""
        for claim, reason, event, message in deletes:
            if event:
                self.ctx.event("NodeClaim", claim.name, event, message, warning=True)
            self.ctx.log.info("deleting NodeClaim %s (%s)", claim.name, reason)
        answers = self._batch([KubeOp("delete", "NodeClaim", claim.name) for claim, *_ in deletes])
        for (claim, reason, _, _), answer in zip(deletes, answers, strict=True):
            if answer is None:
                continue
            self.ctx.metrics.nodeclaims_disrupted.labels(
                reason=reason,
                nodepool=claim.node_pool,
                capacity_type=claim.labels.get(labels.CAPACITY_TYPE, ""),
            ).inc()
            self._attempts.pop(claim.name, None)
            self._retry_at.pop(claim.name, None)


def _by_name(claims: Iterable[NodeClaim]) -> list[NodeClaim]:
    return sorted(claims, key=lambda c: c.name)


def _status_body(
    claim: NodeClaim,
    status: Mapping[str, Any],
    conditions: Iterable[Condition],
    *,
    now: float,
    labels_: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The patch of a claim's status (its conditions updated), labels and annotations."""
    body: dict[str, Any] = {
        "status": {**status, "conditions": set_conditions(claim.conditions, conditions, now=now)}
    }
    if labels_ is not None:
        body["metadata"] = {"labels": dict(labels_)}
    if annotations:
        body.setdefault("metadata", {})["annotations"] = dict(annotations)
    return body


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
