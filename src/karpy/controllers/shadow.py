"""Shadow mode: what karpy would launch and disrupt beside an autoscaler that acts (``--shadow``).

Who calls it: :func:`karpy.runtime.wiring.build_shadow` registers :class:`Shadow` as the loop task
``shadow`` (instead of the acting controllers) and hands it every applied feed event; the
operator (``karpy operator --shadow``) and the tests drive it like any controller. It writes no
object: its outputs are Events, metrics and log lines.

It runs the acting controllers' core on the same cluster state, without their writes (their
writes are applied to the state at once, so swallowed NodeClaims would become phantom capacity):

- **Launches**, after the provisioner's batch window (1 s idle, 10 s max; re-tried every 10 s
  while pods wait): the provisioner's pods (:func:`~karpy.controllers.provisioning.select_pods`)
  solved with :func:`karpy.core.scheduling.solve`; each new claim becomes a :class:`WouldLaunch`
  (the launch rule's instance type, zone, capacity type and price), counted in
  ``karpy_shadow_launches_total{nodepool,instance_type}``, with a ``ShadowWouldLaunch`` Event on
  each of its pods.
- **Disruptions**, one pass of :func:`karpy.core.disruption.compute` every 10 s: its command
  becomes a :class:`WouldDisrupt` (``Empty`` and ``Underutilized`` ones only if still valid 15 s
  later, as the disruption controller validates them), counted per node in
  ``karpy_shadow_disruptions_total{reason}``, with a ``ShadowWouldDisrupt`` Event on each node;
  its replacements count as launches.

**One decision, not one per pass.** A decision stays *live* in the state the shadow solves on,
as if karpy had acted: a would-launch claim is an in-flight NodeClaim (hydrated with its type)
while one of its pods still waits, and at least :data:`HOLD_SECONDS`; a would-disrupt command's
nodes are marked for deletion and its replacements in flight for :data:`HOLD_SECONDS` (or until
the nodes are gone). So a pod pending for minutes is one decision, and a command the installed
autoscaler never carries out is decided once per :data:`DISRUPT_DEDUPE`. The NodeClaims the
installed autoscaler created since the shadow started and that have no Node yet are left out of
that state: karpy decides as if alone, not on the capacity the other one is launching.

**Comparison.** :class:`~karpy.controllers.shadow_installed.Installed` counts the installed
autoscaler's launches and removals. When a pod of a would-launch decision binds, it counts in
``karpy_shadow_pods_matched_total{result}``: ``same_type`` or ``other_type`` (a node launched since
the shadow started, of karpy's instance type or not) or ``existing_node``;
``karpy_shadow_launch_agreement_ratio`` is same / (same + other). A node the installed
autoscaler removes that karpy decided to disrupt counts in
``karpy_shadow_disruptions_agreed_total{reason}``. Every minute (when something changed) the
fleets' hourly prices (:mod:`~karpy.controllers.shadow_fleet`) set
``karpy_shadow_fleet_cost_per_hour{fleet=installed|karpy}`` and their node counts.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from karpy.controllers import disruption, provisioning, shadow_fleet, shadow_installed
from karpy.controllers.context import Context
from karpy.controllers.dedupe import Dedupe
from karpy.controllers.result import Result
from karpy.core import disruption as core
from karpy.core import scheduling
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Condition, NodeClaim, Pod
from karpy.state.events import DELETED, ObjectEvent

__all__ = [
    "DISRUPT_DEDUPE",
    "FLEET_SECONDS",
    "HOLD_SECONDS",
    "Shadow",
    "WouldDisrupt",
    "WouldLaunch",
    "virtual_claim",
]

PASS_SECONDS = disruption.PASS_SECONDS
VALIDATION_SECONDS = disruption.VALIDATION_SECONDS
HOLD_SECONDS = 300.0  # how long a decision stays live (karpy would have carried it out by then)
DISRUPT_DEDUPE = 3600.0  # the same command (reason and nodes) is counted once per hour at most
FLEET_SECONDS = 60.0
EVENT_DEDUPE = 600.0
KEPT = 1000  # decisions kept in ``launches`` and ``disruptions`` (the newest)
PROVIDER_PREFIX = "shadow://"
_EPSILON = 1e-6
_CONSOLIDATION = (core.EMPTY, core.UNDERUTILIZED)


@dataclass(frozen=True, slots=True)
class WouldLaunch:
    """A NodeClaim karpy would have launched."""

    name: str  # shadow-N: the in-flight claim it stands for in the shadow's state
    time: float
    node_pool: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    pods: tuple[str, ...]  # the pods it was launched for (namespace/name)
    reason: str = "provisioned"  # or the disruption reason of a replacement


@dataclass(frozen=True, slots=True)
class WouldDisrupt:
    """A disruption command karpy would have carried out."""

    time: float
    reason: str  # Empty | Underutilized | Drifted | Expired
    method: str
    decision: str  # delete | replace
    nodes: tuple[str, ...]
    replacements: tuple[str, ...]  # instance types
    savings_per_hour: float | None


@dataclass
class _Live:
    """A would-launch decision still standing in the shadow's state."""

    decision: WouldLaunch
    state: StateNode
    pods: dict[str, str] = field(default_factory=dict)  # pod key -> its node when decided ("": pending)


@dataclass
class _Held:
    """A would-disrupt decision karpy would be carrying out."""

    decision: WouldDisrupt
    until: float
    replacements: tuple[StateNode, ...]


def virtual_claim(name: str, launched: scheduling.Launched, *, now: float) -> StateNode:
    """The in-flight NodeClaim (launched, hydrated with its type, no Node) a decision stands for."""
    planned = launched.claim
    claim = NodeClaim(
        name=name,
        node_pool=planned.node_pool,
        labels={k: v for k, v in launched.labels.items() if k != labels.HOSTNAME},
        requirements=tuple(req for _, req in sorted(planned.requirements.items())),
        taints=planned.taints,
        startup_taints=planned.startup_taints,
        requests=planned.requests,
        provider_id=PROVIDER_PREFIX + name,
        capacity=launched.instance_type.capacity,
        allocatable=launched.instance_type.allocatable,
        conditions=(Condition("Launched", "True", last_transition=now),),
        created=now,
    )
    return StateNode(name, claim=claim)


class Shadow:
    name = "shadow"

    def __init__(self, ctx: Context, *, catalog: Sequence[InstanceType]) -> None:
        self.ctx = ctx
        self.started = ctx.now()
        self.since = self.started - 1.0  # creation timestamps are whole seconds
        self._rank = scheduling.catalog_rank([it.name for it in catalog])
        self._types = {it.name: it for it in catalog}
        self.installed = shadow_installed.Installed(
            ctx.metrics, started=self.started, on_removed=self._removed
        )
        self.launches: collections.deque[WouldLaunch] = collections.deque(maxlen=KEPT)
        self.disruptions: collections.deque[WouldDisrupt] = collections.deque(maxlen=KEPT)
        self.matched: dict[str, int] = {"same_type": 0, "other_type": 0, "existing_node": 0}
        self._live: dict[str, _Live] = {}  # virtual claim name -> its decision
        self._covered: dict[str, str] = {}  # pod key -> the virtual claim it waits for
        self._held: dict[tuple[str, ...], _Held] = {}  # (reason, *nodes) -> the command held
        self._decided = Dedupe(DISRUPT_DEDUPE, {})  # (reason, *nodes) of commands counted
        self._disrupting: dict[str, tuple[str, float]] = {}  # node -> (karpy's reason, when decided)
        self._pending: tuple[core.Command, float] | None = None  # a command awaiting validation
        self._events = Dedupe(EVENT_DEDUPE, {})
        self._ids = itertools.count(1)
        self.memo = core.Memo()
        self.caches = scheduling.SchedulingCaches()
        self.window = provisioning.BatchWindow(ctx.settings.batch)  # as the provisioner's
        self._retrigger_at: float | None = self.started  # the first pass looks for pods already pending
        self._next_pass = self.started
        self._next_fleet = self.started
        self._fleet_key: tuple[int, int, int] | None = None

    # -- events and the batch window ---------------------------------------------------------
    def on_event(self, event: ObjectEvent) -> bool:
        """Count what the installed autoscaler did; True (wake me) for a pod to provision for, or a
        pod of a live decision that changed (bound: matched at once)."""
        self.installed.on_event(event, self.ctx.now())
        obj = event.obj
        if not isinstance(obj, Pod):
            return False
        if obj.key in self._covered:
            return True
        if event.type == DELETED:
            return False
        if not provisioning.provisionable(obj, self.ctx.cluster.nodes):
            return False
        self.trigger()
        return True

    def trigger(self) -> None:
        """Open the batch window, or move its end to ``idle`` from now (at most ``max`` after it opened)."""
        self.window.trigger(self.ctx.now())

    def deadline(self) -> float | None:
        """When the open batch window closes (None: no window open)."""
        return self.window.deadline()

    # -- the reconcile -------------------------------------------------------------------------
    def reconcile(self) -> Result:
        now = self.ctx.now()
        self.installed.watching = True  # what it hears from now on happens while karpy watches
        self._settle(now)
        if (
            self.window.opened is None
            and self._retrigger_at is not None
            and now + _EPSILON >= self._retrigger_at
        ):
            self._retrigger_at = None
            cluster = self.ctx.cluster
            waiting = any(provisioning.provisionable(p, cluster.nodes) for p in cluster.unbound_pods())
            if waiting or cluster.deleting_node_names() or self._held:
                self.trigger()
        waits: list[float] = []
        deadline = self.deadline()
        if deadline is not None and deadline - now <= _EPSILON:
            self.window.close()
            if self._provision(now):
                self._retrigger_at = now + provisioning.RETRIGGER_SECONDS
        elif deadline is not None:
            waits.append(deadline - now)
        if self._retrigger_at is not None and self.window.opened is None:
            waits.append(self._retrigger_at - now)
        if now + _EPSILON >= self._next_pass:
            self._next_pass = now + self._disrupt(now)
        if now + _EPSILON >= self._next_fleet:
            self._next_fleet = now + FLEET_SECONDS
            self._fleet(now)
        waits += [self._next_pass - now, self._next_fleet - now]
        return Result(requeue_after=max(0.0, min(waits)))

    def snapshot(self, now: float) -> Snapshot:
        """The cluster as karpy would see it had it acted: its live decisions in, the installed
        autoscaler's NodeClaims created since the start and without a Node out."""
        base = self.ctx.cluster.snapshot(now)
        marked = {n for held in self._held.values() for n in held.decision.nodes}
        nodes: list[StateNode] = []
        for state in base.nodes:
            if state.node is None and state.claim is not None and state.claim.created >= self.since:
                continue
            if state.name in marked and not state.marked_for_deletion:
                state = dataclasses.replace(state, marked_for_deletion=True)
            nodes.append(state)
        nodes += [live.state for live in self._live.values()]
        nodes += [s for held in self._held.values() for s in held.replacements]
        return dataclasses.replace(base, nodes=tuple(nodes))

    # -- live decisions ------------------------------------------------------------------------
    def _settle(self, now: float) -> None:
        """Pods of live decisions that bound (matched) or went; decisions and holds that ended."""
        cluster = self.ctx.cluster
        for name in sorted(self._live):
            live = self._live[name]
            for key in sorted(live.pods):
                pod = cluster.pods.get(key)
                if pod is not None and not pod.deleting and not pod.is_terminal():
                    if not pod.node_name or pod.node_name == live.pods[key]:
                        continue  # still waiting
                    result = self._where(pod.node_name, live.decision.instance_type)
                    if result is None:
                        continue  # its Node is not in the cache yet
                    self.matched[result] += 1
                    self.ctx.metrics.shadow_pods_matched.labels(result=result).inc()
                del live.pods[key]
                self._covered.pop(key, None)
            if not live.pods and now >= live.decision.time + HOLD_SECONDS:
                del self._live[name]
        same, other = self.matched["same_type"], self.matched["other_type"]
        if same + other:
            self.ctx.metrics.shadow_launch_agreement.set(same / (same + other))
        for command in sorted(self._held):
            held = self._held[command]
            nodes = [cluster.nodes.get(n) for n in held.decision.nodes]
            if now >= held.until or all(n is None or n.deleting for n in nodes):
                del self._held[command]
        self._decided.prune(now)
        self._events.prune(now)
        for node in [n for n, (_, t) in self._disrupting.items() if now - t >= DISRUPT_DEDUPE]:
            del self._disrupting[node]

    def _where(self, node_name: str, instance_type: str) -> str | None:
        node = self.ctx.cluster.nodes.get(node_name)
        if node is None:
            return None
        if node.created < self.since:
            return "existing_node"
        return "same_type" if node.labels.get(labels.INSTANCE_TYPE) == instance_type else "other_type"

    def _removed(self, node: str, _why: str) -> None:
        """The installed autoscaler removed ``node``: agreement when karpy decided so too."""
        found = self._disrupting.pop(node, None)
        if found is not None:
            self.ctx.metrics.shadow_disruptions_agreed.labels(reason=found[0]).inc()

    # -- launches ------------------------------------------------------------------------------
    def _provision(self, now: float) -> bool:
        """One batch; True while pods wait (tried again in 10 s)."""
        snapshot = self.snapshot(now)
        pending, moving = provisioning.select_pods(snapshot)
        if not pending and not moving:
            return False
        origin = {p.key: p.node_name for p in moving}
        results = scheduling.solve(snapshot, pending + moving, caches=self.caches)
        for key, where in sorted(results.existing.items()):
            live = self._live.get(where)
            if live is not None and key not in self._covered:
                live.pods[key] = origin.get(key, "")
                self._covered[key] = where
        launcher = scheduling.Launcher(self._rank, well_known=snapshot.well_known)
        for claim in results.new_claims:
            fresh = [p for p in claim.pods if p.key not in self._covered]
            if not fresh:
                continue
            launched = launcher.launch(claim)
            if launched is None:
                self.ctx.log.info(
                    "shadow: no available offering for a NodeClaim of NodePool %s (%d pods)",
                    claim.node_pool,
                    len(fresh),
                )
                continue
            decision = self._launch(launched, tuple(p.key for p in fresh), now=now)
            self._live[decision.name] = _Live(
                decision,
                virtual_claim(decision.name, launched, now=now),
                {p.key: origin.get(p.key, "") for p in fresh},
            )
            self._covered.update({p.key: decision.name for p in fresh})
            message = (
                f"karpy would launch a new NodeClaim from NodePool {decision.node_pool}: "
                f"{_offering(decision)} for {len(fresh)} pod(s) (shadow mode: not launched)"
            )
            for pod in fresh:
                self._event("Pod", pod.name, "ShadowWouldLaunch", message, namespace=pod.namespace)
        return True

    def _launch(
        self, launched: scheduling.Launched, pods: tuple[str, ...], *, now: float, reason: str = "provisioned"
    ) -> WouldLaunch:
        decision = WouldLaunch(
            name=f"shadow-{next(self._ids)}",
            time=now,
            node_pool=launched.claim.node_pool,
            instance_type=launched.instance_type.name,
            zone=launched.offering.zone,
            capacity_type=launched.offering.capacity_type,
            price=launched.price,
            pods=pods,
            reason=reason,
        )
        self.launches.append(decision)
        self.ctx.metrics.shadow_launches.labels(
            nodepool=decision.node_pool, instance_type=decision.instance_type
        ).inc()
        why = f"for {len(pods)} pods" if reason == "provisioned" else f"to replace a node ({reason})"
        self.ctx.log.info(
            "shadow: would launch %s from NodePool %s %s", _offering(decision), decision.node_pool, why
        )
        return decision

    # -- disruptions ---------------------------------------------------------------------------
    def _disrupt(self, now: float) -> float:
        """One pass, or the validation of the command found 15 s ago; when to run again."""
        snapshot = self.snapshot(now)
        if self._pending is not None:
            waiting, deadline = self._pending
            if deadline - now > _EPSILON:
                return deadline - now
            self._pending = None
            valid = self._validate(snapshot, waiting)
            if valid is not None:
                self._decide(snapshot, valid, now)
            return PASS_SECONDS
        command = core.compute(snapshot, now, memo=self.memo).command
        if command is None:
            return PASS_SECONDS
        if command.reason in _CONSOLIDATION and _key(command) not in self._decided.seen:
            self._pending = (command, now + VALIDATION_SECONDS)
            return VALIDATION_SECONDS
        self._decide(snapshot, command, now)
        return PASS_SECONDS

    def _validate(self, snapshot: Snapshot, command: core.Command) -> core.Command | None:
        """The command if still valid 15 s later (underutilized: upstream's validator; empty: the
        nodes a fresh pass still finds empty), else None (logged)."""
        if command.reason == core.UNDERUTILIZED:
            why = core.validate(snapshot, command, memo=self.memo)
            if why is None:
                return command
        else:
            fresh = core.compute(snapshot, snapshot.now, memo=self.memo).command
            now_empty = fresh.candidates if fresh is not None and fresh.reason == command.reason else ()
            still = tuple(n for n in command.candidates if n in now_empty)
            if still:
                return dataclasses.replace(command, candidates=still)
            why = "no longer empty"
        self.ctx.log.info(
            "shadow: %s of %s dropped at validation (%s)", command.method, command.candidates, why
        )
        return None

    def _decide(self, snapshot: Snapshot, command: core.Command, now: float) -> None:
        """Hold ``command`` as carried out; count it unless it was decided within the dedupe window."""
        key = _key(command)
        launcher = scheduling.Launcher(self._rank, well_known=snapshot.well_known)
        launched = [launcher.launch(r) for r in command.replacements]
        decision = WouldDisrupt(
            time=now,
            reason=command.reason,
            method=command.method,
            decision=command.decision,
            nodes=command.candidates,
            replacements=tuple(node.instance_type.name for node in launched if node is not None),
            savings_per_hour=command.savings_per_hour,
        )
        counted = self._decided.allow(key, now)
        reason = command.reason.lower()
        replacements: list[StateNode] = []
        for node in launched:
            if node is None:
                continue
            if counted:
                name = self._launch(node, (), now=now, reason=reason).name
            else:
                name = f"shadow-{next(self._ids)}"
            replacements.append(virtual_claim(name, node, now=now))
        self._held[key] = _Held(decision, now + HOLD_SECONDS, tuple(replacements))
        if not counted:
            return
        self.disruptions.append(decision)
        self.ctx.metrics.shadow_disruptions.labels(reason=reason).inc(len(command.candidates))
        what = f"{command.method} ({reason}): {command.decision} {', '.join(command.candidates)}"
        if decision.replacements:
            what += f" with {', '.join(decision.replacements)}"
        if command.savings_per_hour:
            what += f", saving ${command.savings_per_hour:.4f}/h"
        self.ctx.log.info("shadow: would disrupt: %s", what)
        for name in command.candidates:
            self._disrupting[name] = (reason, now)
            self._event(
                "Node",
                name,
                "ShadowWouldDisrupt",
                f"karpy would disrupt this node: {what} (shadow mode: not disrupted)",
            )

    # -- the fleets ----------------------------------------------------------------------------
    def _fleet(self, now: float) -> None:
        cluster = self.ctx.cluster
        key = (
            cluster.store_version("pods"),
            cluster.store_version("nodes"),
            cluster.store_version("node_pools"),
        )
        if key == self._fleet_key:
            return
        self._fleet_key = key
        metrics = self.ctx.metrics
        installed = shadow_fleet.installed_cost(cluster.nodes.values(), self._types)
        karpy = shadow_fleet.karpy_fleet(cluster.snapshot(now), rank=self._rank, caches=self.caches)
        for fleet, found in (("installed", installed), ("karpy", karpy)):
            metrics.shadow_fleet_cost.labels(fleet=fleet).set(found.cost)
            metrics.shadow_fleet_nodes.labels(fleet=fleet).set(found.nodes)
        metrics.shadow_fleet_unpriced.set(installed.left_out)
        metrics.shadow_fleet_unplaced.set(karpy.left_out)

    def _event(self, kind: str, name: str, reason: str, message: str, *, namespace: str = "") -> None:
        if self._events.allow((kind, namespace, name, reason, message), self.ctx.now()):
            self.ctx.event(kind, name, reason, message, namespace=namespace)


def _key(command: core.Command) -> tuple[str, ...]:
    return (command.reason, *command.candidates)


def _offering(decision: WouldLaunch) -> str:
    """``m5.large in us-east-1a (on-demand, $0.0960/h)``: explain's words for a new NodeClaim."""
    return f"{decision.instance_type} in {decision.zone} ({decision.capacity_type}, ${decision.price:.4f}/h)"
