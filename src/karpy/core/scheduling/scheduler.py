"""``solve(snapshot, pods)``: Karpenter's provisioning simulation.

Pods are queued by CPU, then memory (descending), then age and name. Each pod tries, in
order: existing nodes (initialized first, then by name; including launched but not yet
registered NodeClaims), the NodeClaims opened earlier in this solve (fewest pods first),
then a new NodeClaim from the NodePools by weight (ties by name, descending). A pod that
fits nowhere has its soft constraints relaxed one step at a time
(:mod:`~karpy.core.scheduling.preferences`); if it still fails it goes back to the queue
with its original spec, and the solve ends after a full pass without progress.
NodePool limits shrink the instance-type options of new claims (pessimistically by the
largest option). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from karpy.core import lifecycle
from karpy.core.scheduling import daemons, podinfo, preferences
from karpy.core.scheduling.existing import ExistingNode
from karpy.core.scheduling.nodeclaim import (
    ClaimInProgress,
    Template,
    Unfit,
    filter_instance_types,
    min_values_shortfall,
    order_by_price,
)
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.results import PlannedClaim, PodError, Results
from karpy.core.scheduling.topology import Topology, build_domain_groups
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import CPU, MEMORY, Resources, total
from karpy.model.taints import PREFER_NO_SCHEDULE

__all__ = ["order_pools", "queue_order", "solve"]


def queue_order(pods: Sequence[Pod]) -> list[Pod]:
    """Karpenter's queue order: CPU desc, memory desc, creation asc, then name."""
    return sorted(
        pods,
        key=lambda p: (-p.requests.get(CPU), -p.requests.get(MEMORY), p.created, p.namespace, p.name, p.uid),
    )


def order_pools(pools: Sequence[NodePool]) -> list[NodePool]:
    """Weight descending; ties by name descending (upstream ``OrderByWeight``)."""
    by_name = sorted(pools, key=lambda p: p.name, reverse=True)
    return sorted(by_name, key=lambda p: -p.weight)


def _pool_usage(pool: NodePool, nodes: Sequence[StateNode]) -> Resources:
    used: list[Resources] = []
    for node in nodes:
        if node.node_pool != pool.name:
            continue
        capacity = node.node.capacity if node.node is not None and node.node.capacity else node.allocatable
        if node.claim is not None and node.claim.capacity:
            capacity = node.claim.capacity
        used.append(capacity + Resources({"nodes": 1}))
    return total(used)


def _max_capacity(its: Sequence[InstanceType]) -> Resources:
    out = Resources()
    for it in its:
        out = out.max(it.capacity)
    return out


def _within_limits(it: InstanceType, remaining: dict[str, int] | None) -> bool:
    if remaining is None:
        return True
    return all(it.capacity.get(name, 0) <= left for name, left in remaining.items() if name in it.capacity)


@dataclass(slots=True)
class _Queue:
    pods: deque[Pod]
    last_len: dict[str, int]

    def pop(self) -> Pod | None:
        if not self.pods:
            return None
        pod = self.pods[0]
        if self.last_len.get(Topology.uid(pod)) == len(self.pods):
            return None
        self.pods.popleft()
        return pod

    def push(self, pod: Pod) -> None:
        self.pods.append(pod)
        self.last_len[Topology.uid(pod)] = len(self.pods)


class _Solver:
    def __init__(self, snapshot: Snapshot, pods: Sequence[Pod], *, consolidation: bool = False) -> None:
        self.snapshot = snapshot
        self.well_known = snapshot.well_known
        settings = snapshot.settings.scheduling
        self.respect = settings.preference_policy != "Ignore"
        self.max_types = settings.max_instance_types
        pools = [p for p in snapshot.node_pools if not p.deleting and p.replicas is None]
        self.pools = order_pools(pools)
        self.prefer_no_schedule_pools = any(
            t.effect == PREFER_NO_SCHEDULE for p in self.pools for t in p.taints
        )
        active = [n for n in snapshot.nodes if not n.marked_for_deletion and not (n.node and n.node.deleting)]
        active.sort(key=lambda n: (not n.initialized, n.name))
        self.topology = Topology(
            snapshot=snapshot,
            nodes=active,
            domain_groups=build_domain_groups(snapshot.node_pools, snapshot.instance_types),
            pods=pods,
            respect_preferences=self.respect,
        )
        pools_by_name = {p.name: p for p in snapshot.node_pools}
        self.existing = [
            ExistingNode.build(
                n,
                self.topology,
                snapshot.daemonsets,
                under_consolidate_after=consolidation
                and lifecycle.under_consolidate_after(pools_by_name.get(n.node_pool), n.claim, snapshot.now),
            )
            for n in active
        ]
        self.templates = [self._template(p) for p in self.pools]
        self.remaining: dict[str, dict[str, int] | None] = {}
        for pool in self.pools:
            if pool.limits is None:
                self.remaining[pool.name] = None
            else:
                used = _pool_usage(pool, snapshot.nodes)
                self.remaining[pool.name] = {k: v - used.get(k, 0) for k, v in pool.limits.items()}
        self.claims: list[ClaimInProgress] = []
        self.data: dict[str, PodData] = {}
        self.seq = 0

    def _template(self, pool: NodePool) -> Template:
        template_labels = {**pool.labels, labels.NODEPOOL: pool.name}
        reqs = Requirements(pool.requirements).union_with(Requirements.from_labels(template_labels))
        filter_reqs = reqs.union_with(
            Requirements.from_labels({labels.REGISTERED: "true", labels.INITIALIZED: "true"})
        )
        its = self.snapshot.instance_types.get(pool.name, ())
        overhead = daemons.template_overhead(
            self.snapshot.daemonsets,
            taints=pool.taints,
            requirements=filter_reqs,
            instance_types=its,
            well_known=self.well_known,
        )
        kept, _ = filter_instance_types(its, reqs, requests=Resources(), daemon={})
        return Template(pool, reqs, kept, overhead, template_labels, pool.taints, pool.startup_taints)

    def pod_data(self, pod: Pod) -> PodData:
        uid = Topology.uid(pod)
        data = self.data.get(uid)
        if data is None:
            data = podinfo.pod_data(pod, respect_preferences=self.respect)
            self.data[uid] = data
        return data

    def add(self, pod: Pod, reasons: dict[str, str]) -> bool:
        data = self.pod_data(pod)
        existing_reasons: list[str] = []
        for node in self.existing:
            try:
                reqs = node.can_add(pod, data)
            except Unfit as exc:
                existing_reasons.append(f"{node.name}: {exc}")
                continue
            node.add(pod, data, reqs)
            return True
        if existing_reasons:
            reasons["existing nodes"] = (
                existing_reasons[0]
                if len(existing_reasons) == 1
                else (f"{len(existing_reasons)} nodes did not fit, e.g. {existing_reasons[0]}")
            )
        self.claims.sort(key=lambda c: len(c.pods))
        for claim in self.claims:
            try:
                reqs, its = claim.can_add(pod, data)
            except Unfit:
                continue
            claim.add(pod, data, reqs, its)
            return True
        for template in self.templates:
            pool = template.pool
            where = f"nodepool/{pool.name}"
            remaining = self.remaining[pool.name]
            if remaining is not None and remaining.get("nodes", 1) <= 0:
                reasons[where] = "would exceed NodePool limit nodes"
                continue
            its = [it for it in template.instance_types if _within_limits(it, remaining)]
            if not template.instance_types:
                reasons[where] = "no instance type is compatible with the NodePool's requirements"
                continue
            if not its:
                reasons[where] = self._limit_reason(template, pod, data, remaining)
                continue
            self.seq += 1
            claim = ClaimInProgress.open(
                template, f"{pool.name}-{self.seq:05d}", its, self.topology, self.well_known
            )
            try:
                reqs, kept = claim.can_add(pod, data)
            except Unfit as exc:
                if len(its) < len(template.instance_types):
                    reasons[where] = self._limit_reason(template, pod, data, remaining, str(exc))
                else:
                    reasons[where] = str(exc)
                continue
            claim.add(pod, data, reqs, kept)
            self.claims.append(claim)
            if remaining is not None:
                spent = _max_capacity(kept) + Resources({"nodes": 1})
                self.remaining[pool.name] = {k: v - spent.get(k, 0) for k, v in remaining.items()}
            return True
        return False

    def _limit_reason(
        self,
        template: Template,
        pod: Pod,
        data: PodData,
        remaining: dict[str, int] | None,
        otherwise: str = "",
    ) -> str:
        """Why a pool failed when its limits removed options: the limit, unless the pod fails anyway."""
        probe = ClaimInProgress.open(
            template, "limit-probe", template.instance_types, self.topology, self.well_known
        )
        try:
            probe.can_add(pod, data)
        except Unfit as exc:
            return otherwise or str(exc)
        over = sorted(
            {
                name
                for it in template.instance_types
                for name, left in (remaining or {}).items()
                if name in it.capacity and it.capacity[name] > left
            }
        )
        return "would exceed NodePool limit " + ", ".join(over)

    def try_schedule(self, pod: Pod) -> tuple[bool, dict[str, str], list[str]]:
        steps: list[str] = []
        current = pod
        while True:
            reasons: dict[str, str] = {}
            if self.add(current, reasons):
                return True, reasons, steps
            relaxed = preferences.relax(current, prefer_no_schedule_pools=self.prefer_no_schedule_pools)
            if relaxed is None:
                if not reasons:
                    reasons["nodepools"] = "no NodePool can launch nodes"
                return False, reasons, steps
            current, step = relaxed
            steps.append(step)
            self.topology.update(current)
            self.data.pop(Topology.uid(current), None)

    def solve(self, pods: Sequence[Pod]) -> Results:
        errors: dict[str, PodError] = {}
        relaxations: dict[str, tuple[str, ...]] = {}
        schedulable: list[Pod] = []
        for candidate in pods:
            problem = podinfo.validate(candidate, self.well_known)
            if problem is not None:
                errors[Topology.uid(candidate)] = PodError(candidate, {"validation": problem})
            else:
                schedulable.append(candidate)
        queue = _Queue(deque(queue_order(schedulable)), {})
        while (pod := queue.pop()) is not None:
            ok, reasons, steps = self.try_schedule(pod)
            uid = Topology.uid(pod)
            if ok:
                errors.pop(uid, None)
                if steps:
                    relaxations[pod.key] = tuple(steps)
                continue
            errors[uid] = PodError(pod, reasons, tuple(steps))
            if steps:
                self.topology.update(pod)
                self.data.pop(uid, None)
            queue.push(pod)
        existing: dict[str, str] = {}
        for node in self.existing:
            for pod in node.pods:
                existing[pod.key] = node.name
        claims = []
        for claim in self.claims:
            planned = self._finalize(claim)
            if isinstance(planned, str):
                for pod in claim.pods:
                    errors[Topology.uid(pod)] = PodError(
                        pod, {f"nodepool/{claim.template.pool.name}": planned}
                    )
            else:
                claims.append(planned)
        ordered_errors = sorted(errors.values(), key=lambda e: (e.pod.namespace, e.pod.name))
        return Results(tuple(claims), existing, tuple(ordered_errors), relaxations)

    def _finalize(self, claim: ClaimInProgress) -> PlannedClaim | str:
        reqs = claim.requirements.without(labels.HOSTNAME)
        its = order_by_price(claim.instance_types, reqs)[: self.max_types]
        if reqs.has_min_values():
            shortfall = min_values_shortfall(its, reqs)
            if shortfall is not None:
                return f"NodePool couldn't meet minValues requirements after truncation ({shortfall})"
        type_req = reqs.get(labels.INSTANCE_TYPE)
        min_values = type_req.min_values if type_req is not None else None
        reqs = reqs.add(
            Requirement(labels.INSTANCE_TYPE, False, frozenset(it.name for it in its), min_values=min_values)
        )
        capacity_types = sorted(
            {o.capacity_type for it in its for o in it.offerings if o.available and o.compatible(reqs)}
        )
        reqs = reqs.add(Requirement(labels.CAPACITY_TYPE, False, frozenset(capacity_types)))
        daemon = [claim.template.daemon[it.name].requests for it in its if it.name in claim.template.daemon]
        smallest = min(daemon, key=lambda r: (r.get(CPU), r.get(MEMORY))) if daemon else Resources()
        return PlannedClaim(
            name=claim.hostname,
            node_pool=claim.template.pool.name,
            requirements=reqs,
            instance_types=tuple(its),
            pods=tuple(claim.pods),
            requests=claim.requests + smallest,
            labels=dict(claim.template.labels),
            taints=claim.template.taints,
            startup_taints=claim.template.startup_taints,
        )


def solve(snapshot: Snapshot, pods: Sequence[Pod] | None = None, *, consolidation: bool = False) -> Results:
    """Simulate scheduling ``pods`` (default: the snapshot's pending pods).

    ``consolidation=True`` marks a disruption simulation: running pods (those with a
    ``nodeName``) are not placed on nodes still inside their consolidateAfter window.
    """
    chosen = snapshot.pending_pods() if pods is None else tuple(pods)
    return _Solver(snapshot, chosen, consolidation=consolidation).solve(chosen)
