"""Provisioning: batch pending pods, solve, create NodeClaims, nominate (upstream ``provisioning``).

Who calls it: the wiring registers :class:`Provisioner` as the loop task ``provisioning``
and calls :meth:`Provisioner.on_event` for every applied watch event (or :meth:`trigger`
directly), waking the task when it returns True.

**Batch window** (upstream ``batcher.go``) is state plus deadlines, never a sleep: the first
trigger opens the window; every trigger moves the idle deadline to ``now + idle`` (1 s); the
window closes at ``min(idle deadline, opened + max)`` (10 s). ``reconcile`` before that
returns ``Result(requeue_after=deadline - now)``.

**At the deadline** it takes a snapshot and selects the pods to provision for:

- *provisionable* pods (:func:`provisionable`): no ``nodeName``, not terminal or terminating,
  not owned by a DaemonSet or a Node (mirror pods), not scheduling-gated, and not preempting
  (``status.nominatedNodeName`` names a Node that still exists). Upstream also requires the
  PodScheduled condition to say ``Unschedulable``; karpy's Pod model does not carry pod
  conditions, so every unbound pod counts (a pod kube-scheduler has not tried yet may get
  capacity one batch early);
- the currently reschedulable pods of nodes marked for deletion or being deleted (upstream step
  4, ``CurrentlyReschedulablePods``; :func:`karpy.core.disruption.candidates.leaving_pods`, the
  very list every disruption solve adds): not terminal, not DaemonSet- or Node-owned, not
  terminating unless a StatefulSet's, without an active do-not-disrupt, and not held by a PDB
  that never allows an eviction.

It calls :func:`karpy.core.scheduling.solve`; for each new claim it re-checks the NodePool's
limits against the pool's *current* usage (the cluster state read after the solve, plus the
claims created earlier in this batch; the claim counts with its largest instance-type option,
as the solve does) and creates it with :func:`karpy.controllers.claims.new_claim_object`.
Placed pods nominate their claim or node for ``max(2 x batch max, 10 s)``; in-flight claims
are existing nodes in the next snapshot, so a pod waiting for one causes no second claim.
Events: ``Nominated`` per pod ("Pod should schedule on: nodeclaim/NAME" or "node/NAME"; 2 min
dedupe per pod and target), ``FailedScheduling`` with the PodError summary and its reason class
("... (reason: taint)", see :func:`pod_reason`; one per pod per 5 min). Every nomination (deduped
or not) is also handed to the callables in :attr:`Provisioner.nomination_listeners` as
``(pod, kind, name)`` with kind ``node`` or ``nodeclaim`` (the scheduler consistency check).
Metrics: ``nodeclaims_created{reason=provisioned}``, ``scheduler_unschedulable_pods_count``,
``pods_unschedulable{reason}`` (the pods of the solve's errors and those left out by a NodePool
limit at create, by reason class; a class seen before and absent now is set to 0, so the series
stays and reads 0; pods left out because the create call failed are in the count but have no
class), and ``scheduling_duration{controller=provisioner}`` only when a monotonic ``timer`` is
injected (no wall clock is read otherwise).
While provisionable pods remain, the provisioner re-triggers itself every 10 s (upstream
requeues each such pod every 10 s); its first pass also triggers for pods already pending.

**Headroom** (NodePool annotation ``karpy.sh/headroom``, :mod:`karpy.core.headroom`): while a
pool's window is open, each batch adds the pool's virtual pods (equal pieces of the free room it
keeps) to the pods it solves, and a batch runs even when no real pod is pending. The solve places
them on room the pool's nodes already have, or opens NodeClaims for them, which are created like
any other (``nodeclaims_created{reason=headroom}`` and the ``karpy.sh/creation-reason: headroom``
annotation when a claim holds only pieces). Virtual pods never get a nomination, an event or a
metric of unschedulable pods; a piece the solve cannot place is logged, and the batch is tried
again in 60 s. While a window is open, a bound pod, a Node or NodeClaim going away and a NodePool
change trigger a batch (each can take room away), and so does any Node change (the gauge reads
the room of initialized nodes); the task wakes at every window's next opening
or closing. ``nodepool_headroom{nodepool, resource, zone, kind}`` reads, per pool and zone
(``all`` for the whole pool), the headroom ``asked`` and the ``free`` allocatable of its
initialized nodes after each batch (0 once a window closes). An annotation karpy cannot read is
logged once per NodePool and value (the pool keeps no headroom).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Sequence

from karpy import settings as settings_mod
from karpy.controllers import claims
from karpy.controllers.context import Context
from karpy.controllers.dedupe import Dedupe
from karpy.controllers.result import Result
from karpy.core import headroom, scheduling
from karpy.core.disruption import candidates
from karpy.core.explain.reasons import reason_class
from karpy.core.scheduling import limits
from karpy.core.snapshot import Snapshot
from karpy.model import errors
from karpy.model.objects import Node, NodeClaim, NodePool, Pod
from karpy.model.resources import CPU, Resources
from karpy.model.taints import DISRUPTED
from karpy.state.events import DELETED, ObjectEvent

__all__ = [
    "FAILED_SCHEDULING_DEDUPE",
    "HEADROOM_RETRY_SECONDS",
    "NOMINATED_DEDUPE",
    "RETRIGGER_SECONDS",
    "BatchWindow",
    "NominationListener",
    "Provisioner",
    "nomination_ttl",
    "pod_reason",
    "provisionable",
    "reschedulable",
    "select_pods",
]

NominationListener = Callable[[Pod, str, str], None]  # (pod, "node" | "nodeclaim", name)

RETRIGGER_SECONDS = 10.0
HEADROOM_RETRY_SECONDS = 60.0  # a batch again after some headroom piece found no place
FAILED_SCHEDULING_DEDUPE = 300.0
NOMINATED_DEDUPE = 120.0
_EPSILON = 1e-6  # seconds; absorbs float rounding of deadlines near 1.7e9


class BatchWindow:
    """The batch window as state (module docstring): the first :meth:`trigger` opens it, each
    moves the idle deadline to ``now + idle``; it closes at ``min(idle deadline, opened + max)``.
    The provisioner's, and shadow mode's, which batches as the provisioner would."""

    __slots__ = ("_idle_deadline", "opened", "settings")

    def __init__(self, settings: settings_mod.BatchSettings) -> None:
        self.settings = settings
        self.opened: float | None = None
        self._idle_deadline = 0.0

    def trigger(self, now: float) -> None:
        """Open the window at ``now``, or move its idle deadline to ``now + idle``."""
        if self.opened is None:
            self.opened = now
        self._idle_deadline = now + self.settings.idle_seconds

    def deadline(self) -> float | None:
        """When the open window closes (None when no window is open)."""
        if self.opened is None:
            return None
        return min(self._idle_deadline, self.opened + self.settings.max_seconds)

    def close(self) -> None:
        self.opened = None


def nomination_ttl(batch_max: float) -> float:
    """How long a placed pod keeps its node nominated: ``max(2 x batch max, 10 s)``."""
    return max(2 * batch_max, 10.0)


def _node_owned(pod: Pod) -> bool:
    return any(owner.kind == "Node" for owner in pod.owners)


def provisionable(pod: Pod, nodes: Container[str]) -> bool:
    """Pending and ours to find capacity for (see the module docstring); ``nodes``: existing Node names."""
    return (
        not pod.node_name
        and not pod.is_terminal()
        and not pod.deleting
        and not pod.is_daemonset_pod()
        and not _node_owned(pod)
        and not pod.scheduling_gated
        and not (pod.nominated_node and pod.nominated_node in nodes)
    )


def reschedulable(pod: Pod) -> bool:
    """A pod of a node going away that will need a place elsewhere (upstream ``IsReschedulable``)."""
    return candidates.reschedulable(pod)


def select_pods(snapshot: Snapshot) -> tuple[list[Pod], list[Pod]]:
    """``(provisionable pending pods, currently reschedulable pods of leaving nodes)``, each
    sorted by key."""
    node_names = {n.node.name for n in snapshot.nodes if n.node is not None}
    pending = [p for p in snapshot.unbound_pods() if provisionable(p, node_names)]
    moving = [p for _, pods in candidates.leaving_pods(snapshot) for p in pods]
    return sorted(pending, key=lambda p: p.key), sorted(moving, key=lambda p: p.key)


def _largest(planned: scheduling.PlannedClaim) -> Resources:
    """The claim's largest option and one node: what its launch may add to the pool's usage."""
    return limits.max_capacity(planned.instance_types) + Resources({"nodes": 1})


def _created_name(answer: object) -> str:
    """The ``metadata.name`` of a create's answer ('' when it has none)."""
    meta = answer.get("metadata") if isinstance(answer, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _shown(answer: object) -> str:
    """An answer as JSON, cut to 300 characters (for a log line)."""
    text = json.dumps(answer, sort_keys=True, default=str)
    return text if len(text) <= 300 else text[:300] + " ..."


def _over_limits(pool: NodePool, usage: Resources, planned: scheduling.PlannedClaim) -> list[str]:
    """Limits that ``usage`` plus the claim's largest option would exceed (sorted)."""
    if pool.limits is None:
        return []
    after = usage + _largest(planned)
    return sorted(name for name, limit in pool.limits.items() if after.get(name, 0) > limit)


def pod_reason(error: scheduling.PodError) -> str:
    """The reason class (:func:`~karpy.core.explain.reasons.reason_class`) of the message that
    says most about why the pod was not placed: a validation problem; else the first NodePool's
    rejection (in the solve's order) that is not an untolerated taint (a NodePool kept for other
    pods), else the first NodePool's; else the existing nodes' or "no NodePool" message."""
    reasons = error.reasons
    if "validation" in reasons:
        return reason_class(reasons["validation"])
    pools = [reason_class(why) for where, why in reasons.items() if where.startswith("nodepool/")]
    if pools:
        return next((cls for cls in pools if cls != "taint"), pools[0])
    for where in ("nodepools", "existing nodes"):
        if where in reasons:
            return reason_class(reasons[where])
    return reason_class(error.summary())


class Provisioner:
    name = "provisioning"

    def __init__(self, ctx: Context, *, timer: Callable[[], float] | None = None) -> None:
        self.ctx = ctx
        self._timer = timer
        self.window = BatchWindow(ctx.settings.batch)
        self._retrigger_at: float | None = ctx.now()  # the first pass looks for pods already pending
        self._failed = Dedupe(FAILED_SCHEDULING_DEDUPE, {})
        self._nominated = Dedupe(NOMINATED_DEDUPE, {})
        self.nomination_listeners: list[NominationListener] = []  # told of every nomination
        self._reasons_seen: set[str] = set()  # pods_unschedulable labels set so far
        self.batches = 0  # batches run (for tests and the simulator's report)
        self._edge_at: float | None = None  # the next headroom window edge to wake at
        self._open: tuple[tuple[NodePool, ...], float, float, bool] | None = None  # see _headroom_open
        self._headroom_seen: set[tuple[str, str, str, str]] = set()  # gauge label sets set so far
        self._headroom_warned: set[tuple[str, str]] = set()
        self.caches = scheduling.SchedulingCaches()  # what this controller's solves share

    # -- the batch window ----------------------------------------------------------------
    def trigger(self) -> None:
        """A provisionable pod appeared or changed: open the window or extend its idle deadline."""
        self.window.trigger(self.ctx.now())

    def deadline(self) -> float | None:
        """When the open window closes (None when no window is open)."""
        return self.window.deadline()

    def on_event(self, event: ObjectEvent) -> bool:
        """Trigger for a provisionable pod, or a leaving Node or NodeClaim with pods, or (while a
        headroom window is open) a change that can take room away; True when triggered."""
        obj = event.obj
        if self._headroom_event(event):
            self.trigger()
            return True
        if event.type == DELETED:
            return False
        cluster = self.ctx.cluster
        if isinstance(obj, Pod):
            hit = provisionable(obj, cluster.nodes)
        elif isinstance(obj, Node):
            leaving = obj.deleting or obj.name in cluster.marked_for_deletion
            leaving = leaving or any(t.key == DISRUPTED.key for t in obj.taints)
            hit = leaving and any(reschedulable(p) for p in cluster.pods_on(obj.name))
        elif isinstance(obj, NodeClaim):
            hit = obj.deleting and any(reschedulable(p) for p in cluster.pods_on(obj.node_name or obj.name))
        else:
            return False
        if hit:
            self.trigger()
        return hit

    # -- headroom ------------------------------------------------------------------------
    def _headroom_open(self, now: float) -> bool:
        """Whether some NodePool's headroom window is open (kept until the pools or the window change)."""
        pools = tuple(self.ctx.cluster.node_pools.values())
        held = self._open
        if (
            held is not None
            and held[1] <= now < held[2]
            and len(held[0]) == len(pools)
            and all(a is b for a, b in zip(held[0], pools, strict=True))
        ):
            return held[3]
        found = bool(headroom.open_pools(pools, now))
        self._open = (pools, now, headroom.next_edge(pools, now), found)
        return found

    def _headroom_event(self, event: ObjectEvent) -> bool:
        """While a window is open: a bound pod (not a DaemonSet's), any Node change, a NodeClaim
        deleted or being deleted, or any NodePool change; outside one, a change to a pool that asks
        headroom."""
        obj = event.obj
        if isinstance(obj, NodePool):
            self._open = None  # the pools changed: the window flags and edges are read again
            return headroom.ANNOTATION in obj.meta_annotations or self._headroom_open(self.ctx.now())
        if isinstance(obj, Pod):
            if not obj.node_name or event.type == DELETED or obj.is_daemonset_pod():
                return False
        elif isinstance(obj, NodeClaim):
            if event.type != DELETED and not obj.deleting:
                return False
        elif not isinstance(obj, Node):  # (any Node change: room comes, goes or becomes ready)
            return False
        return bool(self.ctx.cluster.node_pools) and self._headroom_open(self.ctx.now())

    def _next_edge(self, now: float) -> float | None:
        """The next opening or closing of a NodePool's headroom window (None: no window)."""
        edge = headroom.next_edge(self.ctx.cluster.node_pools.values(), now)
        return None if edge == float("inf") else edge

    # -- the reconcile -------------------------------------------------------------------
    def reconcile(self) -> Result:
        now = self.ctx.now()
        if self._edge_at is not None and now + _EPSILON >= self._edge_at:
            self._edge_at = None  # a headroom window opened or closed: a batch adds or drops its demand
            self.trigger()
        result = self._reconcile(now)
        self._edge_at = self._next_edge(now)
        if self._edge_at is None:
            return result
        wait = max(0.0, self._edge_at - now)
        if result.requeue_after is not None and result.requeue_after <= wait:
            return result
        return Result(requeue_after=wait)

    def _reconcile(self, now: float) -> Result:
        if (
            self.window.opened is None
            and self._retrigger_at is not None
            and now + _EPSILON >= self._retrigger_at
        ):
            self._retrigger_at = None
            cluster = self.ctx.cluster
            if any(provisionable(p, cluster.nodes) for p in cluster.unbound_pods()) or (
                cluster.node_pools and self._headroom_open(now)
            ):
                self.trigger()
            else:
                self._set_unschedulable(0, {})
        deadline = self.deadline()
        if deadline is None:
            if self._retrigger_at is None:
                return Result()
            return Result(requeue_after=max(0.0, self._retrigger_at - now))
        if deadline - now > _EPSILON:
            return Result(requeue_after=deadline - now)
        if not self.ctx.cluster.synced():
            return Result(requeue_after=1.0)
        self.window.close()
        remaining, short = self._provision(now)
        if remaining or short:
            wait = RETRIGGER_SECONDS if remaining else HEADROOM_RETRY_SECONDS
            self._retrigger_at = now + wait
            return Result(requeue_after=wait)
        self._retrigger_at = None
        return Result()

    def _provision(self, now: float) -> tuple[bool, bool]:
        """One batch: (provisionable pods remain (re-trigger in 10 s), a headroom piece found no place)."""
        ctx = self.ctx
        self.batches += 1
        self._failed.prune(now)
        self._nominated.prune(now)
        snapshot = ctx.cluster.snapshot(now)
        pending, moving = select_pods(snapshot)
        needs = self._needs(snapshot, now)
        if not pending and not moving and not needs:
            self._set_unschedulable(0, {})
            if self._headroom_seen:  # a window closed: its gauges read 0
                self._set_headroom(snapshot, needs)
            return False, False
        started = self._timer() if self._timer is not None else None
        solved = pending + moving
        virtual = headroom.virtual_pods(needs)
        results = scheduling.solve(snapshot, solved + virtual if virtual else solved, caches=self.caches)
        if started is not None and self._timer is not None:
            ctx.metrics.scheduling_duration.labels(controller="provisioner").observe(self._timer() - started)
        until = now + nomination_ttl(ctx.settings.batch.max_seconds)
        by_reason: dict[str, int] = {}
        errors_ = [e for e in results.errors if not headroom.is_virtual(e.pod)]
        short = [e for e in results.errors if headroom.is_virtual(e.pod)]
        unschedulable = len(errors_)
        unschedulable += self._create(snapshot, results.new_claims, now=now, until=until, by_reason=by_reason)
        self._nominate_existing(snapshot, solved, results.existing, now=now, until=until)
        for error in errors_:
            cls = pod_reason(error)
            by_reason[cls] = by_reason.get(cls, 0) + 1
            self._failed_scheduling(error.pod, error.summary(), cls, now)
        if short:
            ctx.log.info(
                "%d headroom pieces found no place (first: %s: %s); trying again in %.0f s",
                len(short),
                short[0].pod.name,
                short[0].summary(),
                HEADROOM_RETRY_SECONDS,
            )
        self._set_unschedulable(unschedulable, by_reason)
        if needs or self._headroom_seen:
            self._set_headroom(snapshot, needs)
        return bool(pending), bool(short)

    def _needs(self, snapshot: Snapshot, now: float) -> tuple[headroom.Need, ...]:
        """The headroom kept now (warning once per pool and value about an annotation it cannot read)."""
        pools = snapshot.node_pools
        if not any(headroom.ANNOTATION in p.meta_annotations for p in pools):
            return ()
        for pool in pools:
            why = headroom.problem(pool)
            key = (pool.name, pool.meta_annotations.get(headroom.ANNOTATION, ""))
            if why is not None and key not in self._headroom_warned:
                if len(self._headroom_warned) < 1024:
                    self._headroom_warned.add(key)
                self.ctx.log.warning(
                    "NodePool %s: %s %r is invalid (%s); the pool keeps no headroom",
                    pool.name,
                    headroom.ANNOTATION,
                    key[1],
                    why,
                )
        return headroom.needs(pools, snapshot.instance_types, now)

    def _set_headroom(self, snapshot: Snapshot, needs: Sequence[headroom.Need]) -> None:
        """``nodepool_headroom``: asked and free per pool, zone and resource; 0 for label sets gone."""
        gauge = self.ctx.metrics.nodepool_headroom
        values: dict[tuple[str, str, str, str], float] = {}
        for need in needs:
            zone = need.zone or "all"
            free = headroom.free(snapshot.nodes, need)
            for name, asked in need.asked.items():
                scale = 1000.0 if name == CPU else 1.0
                values[(need.pool, name, zone, "asked")] = asked / scale
                values[(need.pool, name, zone, "free")] = free.get(name) / scale
        self._headroom_seen.update(values)
        for labels_ in sorted(self._headroom_seen):
            pool, resource, zone, kind = labels_
            gauge.labels(nodepool=pool, resource=resource, zone=zone, kind=kind).set(values.get(labels_, 0.0))

    def _set_unschedulable(self, count: int, by_reason: dict[str, int]) -> None:
        """Both gauges after a solve; a reason class set before and absent now reads 0."""
        metrics = self.ctx.metrics
        metrics.unschedulable_pods.set(count)
        self._reasons_seen.update(by_reason)
        for cls in sorted(self._reasons_seen):
            metrics.pods_unschedulable.labels(reason=cls).set(by_reason.get(cls, 0))

    def _create(
        self,
        snapshot: Snapshot,
        planned: Iterable[scheduling.PlannedClaim],
        *,
        now: float,
        until: float,
        by_reason: dict[str, int],
    ) -> int:
        """Create the planned claims that still fit their NodePool's limits; returns pods left out."""
        ctx = self.ctx
        pools = {p.name: p for p in snapshot.node_pools}
        current = ctx.cluster.state_nodes(now)  # read after the solve: the pool's current usage
        usage: dict[str, Resources] = {}
        left_out = 0
        for claim in planned:
            pool = ctx.cluster.node_pools.get(claim.node_pool) or pools[claim.node_pool]
            real = [p for p in claim.pods if not headroom.is_virtual(p)]  # all of them without headroom
            pieces = len(claim.pods) - len(real)
            used = usage.get(pool.name)
            if used is None:
                used = limits.pool_usage(pool, current)
            over = _over_limits(pool, used, claim)
            if over:
                left_out += len(real)
                reason = (
                    f"nodepool/{pool.name}: would exceed NodePool limit {', '.join(over)} (checked at create)"
                )
                ctx.log.info("not creating a NodeClaim for %s: %s", pool.name, reason)
                cls = reason_class(reason)
                if real:
                    by_reason[cls] = by_reason.get(cls, 0) + len(real)
                for pod in real:
                    self._failed_scheduling(pod, reason, cls, now)
                continue
            why = "provisioned" if real else "headroom"
            raw = claims.new_claim_object(claim, pool, reason=why)
            try:
                created = ctx.kube.create(raw)
            except errors.KubeError as exc:
                left_out += len(real)
                ctx.log.warning("creating a NodeClaim for %s failed: %s", pool.name, exc)
                continue
            usage[pool.name] = used + _largest(claim)  # it may exist even when its answer is unusable
            name = _created_name(created)
            if not name:
                left_out += len(real)
                ctx.log.error(
                    "creating a NodeClaim (generateName %s) for NodePool %s: the API server's answer "
                    "has no metadata.name, so its %d pods are left out (tried again with the next "
                    "batch); the answer: %s",
                    raw["metadata"].get("generateName") or raw["metadata"].get("name"),
                    pool.name,
                    len(real),
                    _shown(created),
                )
                continue
            ctx.cluster.nominate(name, until)
            ctx.metrics.nodeclaims_created.labels(reason=why, nodepool=pool.name).inc()
            if pieces:
                ctx.log.info(
                    "created nodeclaim %s for %d pods and %d headroom pieces (%d instance types)",
                    name,
                    len(real),
                    pieces,
                    len(claim.instance_types),
                )
            else:
                ctx.log.info(
                    "created nodeclaim %s for %d pods (%d instance types)",
                    name,
                    len(claim.pods),
                    len(claim.instance_types),
                )
            for pod in real:
                self._nominate_pod(pod, "nodeclaim", name, now)
        return left_out

    def _nominate_existing(
        self, snapshot: Snapshot, solved: Sequence[Pod], existing: dict[str, str], *, now: float, until: float
    ) -> None:
        """Nominate the nodes that ``existing`` places pods of ``solved`` on."""
        by_name = {n.name: n for n in snapshot.nodes}
        pods = {p.key: p for p in solved}
        for pod_key in sorted(existing):
            state = by_name.get(existing[pod_key])
            pod = pods.get(pod_key)
            if state is None or pod is None:
                continue
            if state.node is None and state.claim is not None:
                kind, target = "nodeclaim", state.claim.name
            else:
                kind, target = "node", state.name
            self.ctx.cluster.nominate(target, until)
            self._nominate_pod(pod, kind, target, now)

    # -- events --------------------------------------------------------------------------
    def _nominate_pod(self, pod: Pod, kind: str, target: str, now: float) -> None:
        """Tell the listeners; post ``Nominated`` (deduped per pod and target)."""
        for listener in self.nomination_listeners:
            listener(pod, kind, target)
        ref = f"{kind}/{target}"
        if self._nominated.allow((pod.key, ref), now):
            self.ctx.event(
                "Pod", pod.name, "Nominated", f"Pod should schedule on: {ref}", namespace=pod.namespace
            )

    def _failed_scheduling(self, pod: Pod, summary: str, cls: str, now: float) -> None:
        if self._failed.allow((pod.key,), now):
            self.ctx.event(
                "Pod",
                pod.name,
                "FailedScheduling",
                f"Failed to schedule pod, {summary} (reason: {cls})",
                namespace=pod.namespace,
                warning=True,
            )
