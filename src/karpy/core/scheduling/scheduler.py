"""``solve(snapshot, pods)``: Karpenter's provisioning simulation.

Pods are queued by CPU, then memory (descending), then age and name. Each pod tries, in
order: existing nodes (initialized first, then by name; including launched but not yet
registered NodeClaims), the NodeClaims opened earlier in this solve (fewest pods first),
then a new NodeClaim from the NodePools by weight (ties by name, descending). A pod that
fits nowhere has its soft constraints relaxed (:mod:`~karpy.core.scheduling.preferences`); if it
still fails it goes back to the queue with its original spec, and the solve ends after a full
pass without progress. NodePool limits shrink the instance-type options of new claims
(pessimistically by the largest option); a pod's volumes are read once per spec, and a pod whose
volumes cannot be used is refused (:mod:`~karpy.core.scheduling.volumes`). Pure: no clock, no I/O.

Fast paths (each gives exactly the one-by-one result of
:mod:`~karpy.core.scheduling.reference`, which the equivalence tests compare): pods with the
same signature and requests share their :class:`PodData`; a place that rejected a pod *for
good* (``Unfit.monotone``: taints, host ports, requirement conflicts, resources,
anti-affinity, hostname spread) is skipped by its identical siblings; within one pod, places
with the same topology domains as one that failed the topology are skipped; an identical pod
that failed with nothing placed since fails the same way; the claim order is kept in buckets
(:mod:`~karpy.core.scheduling.claimorder`). Structures shared between solves live in the
caller's :class:`~karpy.core.scheduling.caches.SchedulingCaches`.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpy.core.scheduling import podinfo, preferences, queueing, templates, topocounts, volumes
from karpy.core.scheduling.boundpods import bound_index
from karpy.core.scheduling.cache import domain_key_of
from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.scheduling.claimorder import ClaimOrder, Rejections
from karpy.core.scheduling.existing import (
    ExistingNode,
    cut,
    existing_places,
    pod_kind,
    register_hostnames,
)
from karpy.core.scheduling.finalize import Finalizer
from karpy.core.scheduling.limits import max_capacity, remaining_limits
from karpy.core.scheduling.nodeclaim import ClaimInProgress, Template, Unfit, domain_key
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.queueing import order_pools, queue_order
from karpy.core.scheduling.results import STOP_CLAIMS, STOP_POOL, PodError, Results, StopWhen
from karpy.core.scheduling.topology import Topology, build_domain_groups
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import PREFER_NO_SCHEDULE

__all__ = ["Failure", "SchedulingCaches", "Solver", "order_pools", "queue_order", "solve"]


def _zone_pin(claim: ClaimInProgress) -> Requirement | None:
    """The claim's zone requirement when it allows exactly one zone (the claim order's pin)."""
    zone = claim.requirements.get(labels.ZONE)
    if zone is None or zone.complement or len(zone.values) != 1:
        return None
    return zone


@dataclass(slots=True)
class _Scan:
    """The existing-node walk of pods with one signature and requests in one solve: the nodes that
    may take them (in order), those that rejected them for good, and where the walk starts."""

    order: Sequence[int]
    kind: int
    dead: set[int] = dataclasses.field(default_factory=set)
    start: int = 0  # positions of ``order`` before this are all dead


@dataclass(slots=True)
class Failure:
    """How a pod of one signature and requests failed, and the placements made before."""

    placed: int  # ``Solver.placed`` when it failed
    reasons: dict[str, str]
    steps: tuple[str, ...]


@dataclass(slots=True)
class _Live:
    """The claims not (yet) known to reject pods of one signature for good, by ``id``."""

    seen: int  # claims of ``ClaimOrder.created`` looked at so far
    claims: dict[int, ClaimInProgress]


class _Stopped(Exception):
    """Raised when a solve opens a new NodeClaim its ``StopWhen`` names (the reason is the arg)."""


class Solver:
    """One solve: the production algorithm (see the module doc). The hooks marked *reference*
    are overridden by :class:`~karpy.core.scheduling.reference.ReferenceSolver`."""

    def __init__(
        self,
        snapshot: Snapshot,
        pods: Sequence[Pod],
        *,
        consolidation: bool = False,
        stop: StopWhen | None = None,
        without: frozenset[str] = frozenset(),
        caches: SchedulingCaches | None = None,
    ) -> None:
        self.caches = caches if caches is not None else SchedulingCaches()
        self.places = places = existing_places(snapshot, self.caches.places)
        self.full = snapshot
        if without:
            snapshot = dataclasses.replace(snapshot, nodes=places.nodes_without(without))
        self.snapshot = snapshot
        self.stop = stop
        self.without = without
        self.volumes = volumes.VolumeContext(snapshot.storage, snapshot.instance_types)
        self._read_settings()
        self._cut_places(consolidation)
        self.topology = self._topology(pods)
        self.existing: list[ExistingNode | None] = self._existing_nodes()
        self.templates = [self._template(p) for p in self.pools]
        self.remaining = remaining_limits(self.pools, self.full.nodes, without)
        self.order: ClaimOrder[ClaimInProgress] = self._claim_order()
        self._start_state()

    def _read_settings(self) -> None:
        """The NodePools to open claims from (by weight) and the scheduling settings."""
        snapshot = self.snapshot
        self.well_known = snapshot.well_known
        settings = snapshot.settings.scheduling
        self.respect = settings.preference_policy != "Ignore"
        self.max_types = settings.max_instance_types
        pools = [p for p in snapshot.node_pools if not p.deleting and p.replicas is None]
        self.pools = order_pools(pools)
        self.prefer_no_schedule_pools = any(
            t.effect == PREFER_NO_SCHEDULE for p in self.pools for t in p.taints
        )

    def _cut_places(self, consolidation: bool) -> None:
        """This solve's existing nodes: the snapshot's less ``without``. A consolidation moves
        no running pods onto a node inside its consolidateAfter window (``unders``)."""
        places, without = self.places, self.without
        self.removed = removed = places.positions(without) if without else []
        self.states = cut(places.active, removed)
        self.bases = cut(places.bases, removed)
        self.inside: tuple[bool, ...] | None = None
        self.unders: Sequence[bool] = [False] * len(self.states)
        if consolidation:
            self.inside = places.inside_windows(self.full.node_pools, self.full.now)
            self.unders = cut(self.inside, removed)

    def _topology(self, pods: Sequence[Pod]) -> Topology:
        snapshot = self.snapshot
        domain_groups = self.caches.domain_groups.get(
            domain_key_of(snapshot.node_pools, snapshot.instance_types),
            lambda: build_domain_groups(snapshot.node_pools, snapshot.instance_types),
        )
        return Topology(
            snapshot=snapshot,
            nodes=self.states,
            domain_groups=domain_groups,
            pods=pods,
            respect_preferences=self.respect,
            bound=bound_index(snapshot.pods, self.caches.bound_indexes),
            whole=self._whole(),
            without=self.without,
        )

    def _whole(self) -> topocounts.Whole | None:
        """The whole snapshot's topology counts, shared by the solves of a pass (*reference*: none)."""
        nodes, pods = self.full.nodes, self.snapshot.pods
        if not isinstance(nodes, tuple) or not isinstance(pods, tuple):
            return None
        return topocounts.whole_of(self.caches.wholes, self.places.active, nodes, pods)

    def _existing_nodes(self) -> list[ExistingNode | None]:
        """Existing nodes are built when a pod gets past what their NodeBase answers: most nodes
        of a consolidation solve are never asked more (*reference*: all built up front)."""
        register_hostnames(self.states, self.topology)
        return [None] * len(self.states)

    def _template(self, pool: NodePool) -> Template:
        """The pool's template, shared between solves (*reference*: built afresh)."""
        return templates.template(self.caches.templates, self.snapshot, pool)

    def _claim_order(self) -> ClaimOrder[ClaimInProgress]:
        """The claims opened in this solve, in buckets (*reference*: upstream's sorted list)."""
        return ClaimOrder(lambda c: len(c.pods), pin=_zone_pin)

    def _start_state(self) -> None:
        """What the solve learns as it goes."""
        self.rejected = Rejections()
        self.finalizer = Finalizer(self.max_types)
        self.placed = 0  # successful placements so far: any state change
        self.failures: dict[object, Failure] = {}
        self.live: dict[object, _Live] = {}
        self.existing_scan: dict[object, _Scan] = {}
        self.data: dict[str, PodData] = {}
        self.data_by_spec: dict[object, PodData] = {}
        self.specs: dict[tuple[object, ...], tuple[object, ...]] = {}
        self.seq = 0

    def pod_data(self, pod: Pod) -> PodData:
        uid = Topology.uid(pod)
        data = self.data.get(uid)
        if data is None:
            spec = podinfo.signature(pod)
            spec = self.specs.setdefault(spec, spec)  # one tuple per signature: ids are keys
            key = (spec, pod.requests)
            data = self.data_by_spec.get(key)
            if data is None:
                data = podinfo.pod_data(pod, respect_preferences=self.respect)
                data = dataclasses.replace(data, signature=spec, volumes=self.volumes.resolve(pod))
                self.data_by_spec[key] = data
            self.data[uid] = data
        return data

    def _on_existing(self, pod: Pod, data: PodData, reasons: dict[str, str]) -> bool:
        """First fit over existing nodes, skipping those that rejected this signature for good
        (*reference*: every node in order)."""
        nodes = self.existing
        scan = self.existing_scan.get((data.signature, data.requests))
        if scan is None:
            scan = self.existing_scan[(data.signature, data.requests)] = self._scan(pod, data)
        order, dead, kind = scan.order, scan.dead, scan.kind
        prefix = True
        # topology verdicts of this call (no count changes): key -> node domains (ExistingNode.domain)
        blocked: dict[str, set[tuple[object, ...]]] = {}
        bases, unders = self.bases, self.unders
        for position in range(scan.start, len(order)):
            i = order[position]
            if i in dead:
                if prefix:
                    scan.start = position + 1
                continue
            node = nodes[i]
            if blocked and any(
                (node.domain(k) if node is not None else bases[i].domain(k)) in d for k, d in blocked.items()
            ):
                prefix = False
                continue
            # a node no pod joined yet answers as in earlier solves (shared: never raised)
            if node is None:
                exc = bases[i].known_unfit(unders[i], pod, data, kind)
                if exc is None:
                    node = nodes[i] = ExistingNode.materialize(
                        self.states[i], bases[i], self.topology, unders[i]
                    )
            else:
                exc = node.known_unfit(pod, data, kind)
            if exc is None:
                assert node is not None
                try:
                    reqs = node.can_add(pod, data)
                except Unfit as caught:
                    exc = caught
            if exc is not None:
                if exc.monotone:
                    dead.add(i)
                    if prefix:
                        scan.start = position + 1
                else:
                    prefix = False
                    if exc.domains is not None:
                        assert node is not None  # only a topology check names domains
                        key = exc.domains[0]
                        blocked.setdefault(key, set()).add(node.domain(key))
                continue
            assert node is not None
            node.add(pod, data, reqs)
            return True
        self._existing_reason(pod, data, kind, reasons)
        return False

    def _scan(self, pod: Pod, data: PodData) -> _Scan:
        """Where pods like ``pod`` may fit: the pass's :meth:`Places.fitting` in this solve's indices."""
        kind = pod_kind(pod, data)
        fitting = self.places.fitting(self.inside, pod, data, kind)
        removed = self.removed
        if not removed:
            return _Scan(fitting, kind)
        order: list[int] = []
        below = 0  # removed indices below i
        for i in fitting:
            while below < len(removed) and removed[below] < i:
                below += 1
            if below < len(removed) and removed[below] == i:
                continue
            order.append(i - below)
        return _Scan(order, kind)

    def _existing_reason(self, pod: Pod, data: PodData, kind: int, reasons: dict[str, str]) -> None:
        """Why no existing node took the pod: every one failed, so name the first and count them."""
        if not self.existing:
            return
        why = self._why_existing(0, pod, data, kind)
        assert why, f"{self.states[0].name} was recorded as rejecting {pod.key}"
        first = f"{self.states[0].name}: {why}"
        count = len(self.existing)
        reasons["existing nodes"] = first if count == 1 else f"{count} nodes did not fit, e.g. {first}"

    def why_not_existing(self, pod: Pod) -> dict[str, str]:
        """Node name -> why ``pod`` does not fit there now ("" where it would), for every existing
        node, in the solve's order: what ``karpy explain pod`` shows after the solve."""
        data = self.pod_data(pod)
        kind = pod_kind(pod, data)
        out: dict[str, str] = {}
        for index, state in enumerate(self.states):
            out[state.name] = self._why_existing(index, pod, data, kind)
        return out

    def _why_existing(self, index: int, pod: Pod, data: PodData, kind: int) -> str:
        node = self.existing[index]
        if node is None:
            unfit = self.bases[index].known_unfit(self.unders[index], pod, data, kind)
            if unfit is not None:
                return str(unfit)
            node = self.existing[index] = ExistingNode.materialize(
                self.states[index], self.bases[index], self.topology, self.unders[index]
            )
        known = node.known_unfit(pod, data, kind)
        if known is not None:
            return str(known)
        try:
            node.can_add(pod, data)
        except Unfit as exc:
            return str(exc)
        return ""  # it fits

    def _on_claims(self, pod: Pod, data: PodData) -> bool:
        """The claims opened in this solve, fewest pods first; skips known rejections
        (*reference*: tries every claim)."""
        by_spec = self.rejected.of(data.signature)
        by_requests = self.rejected.of((data.signature, data.requests))
        candidates: Iterable[ClaimInProgress]
        live = self._live(data.signature, by_spec)
        # zones pinned by claims whose zone domains failed this pod's topology (see below)
        skip: set[object] | None = None
        if not live:
            return False  # every claim rejects pods like this one for good
        elif len(live) * 8 < self.order.count:
            self.order.settle()
            candidates = sorted(live.values(), key=self.order.key)
        elif labels.ZONE not in data.requirements and labels.CAPACITY_TYPE not in data.requirements:
            # For such a pod, every claim pinned to one zone requirement hands the topology the
            # same zone domains (``ClaimInProgress.domain_key``: its options are all offered
            # there), so once one fails the zone topology the others would be skipped by
            # ``_blocked``: the order skips them without visiting them.
            skip = set()
            candidates = self.order.ordered_unpinned(skip)
        else:
            candidates = self.order.ordered()
        # topology verdicts of this call (no count changes): key -> failed domains (as domain_key)
        blocked: dict[str, set[tuple[object, ...]]] = {}
        spec_id = id(data.signature)
        for claim in candidates:
            key = id(claim)
            if key in by_spec or key in by_requests:
                continue
            if blocked and self._blocked(claim, blocked, spec_id, pod, data):
                continue
            try:
                reqs, options = claim.can_add(pod, data)
            except Unfit as exc:
                if exc.monotone:
                    (by_requests if exc.resources else by_spec).add(key)
                    if not exc.resources:
                        live.pop(key, None)
                elif exc.domains is not None:
                    blocked.setdefault(exc.domains[0], set()).add(domain_key(exc.domains[1]))
                    if skip is not None and exc.domains[0] == labels.ZONE:
                        pin = self.order.pin(claim)
                        if pin is not None:
                            skip.add(pin)
                continue
            before = len(claim.pods)
            claim.add(pod, data, reqs, options)
            self.order.grew(claim, before)
            return True
        return False

    @staticmethod
    def _blocked(
        claim: ClaimInProgress,
        blocked: dict[str, set[tuple[object, ...]]],
        spec_id: int,
        pod: Pod,
        data: PodData,
    ) -> bool:
        memo = claim.domain_memo
        for k, failed in blocked.items():
            domains = memo.get((k, spec_id))
            if domains is None:
                domains = claim.domain_key(k, pod, data)
            if domains in failed:
                return True
        return False

    def _live(self, spec: object, dead: set[int]) -> dict[int, ClaimInProgress]:
        """The claims not (yet) known to reject ``spec`` for good."""
        state = self.live.get(spec)
        if state is None:
            state = self.live[spec] = _Live(0, {})
        created = self.order.created
        if state.seen < len(created):
            for claim in created[state.seen :]:
                if id(claim) not in dead:
                    state.claims[id(claim)] = claim
            state.seen = len(created)
        return state.claims

    def add(self, pod: Pod, reasons: dict[str, str]) -> bool:
        data = self.pod_data(pod)
        self.topology.forget()
        if self._on_existing(pod, data, reasons):
            return True
        if self._on_claims(pod, data):
            return True
        for template in self.templates:
            pool = template.pool
            where = f"nodepool/{pool.name}"
            remaining = self.remaining[pool.name]
            if remaining is not None and remaining.get("nodes", 1) <= 0:
                reasons[where] = "would exceed NodePool limit nodes"
                continue
            index = template.index
            assert index is not None
            options = index.all if remaining is None else index.within(remaining)
            if not template.instance_types:
                reasons[where] = "no instance type is compatible with the NodePool's requirements"
                continue
            if len(options) == 0:
                reasons[where] = self._limit_reason(template, pod, data, remaining)
                continue
            self.seq += 1
            claim = ClaimInProgress.open(
                template, f"{pool.name}-{self.seq:05d}", options, self.topology, self.well_known
            )
            try:
                reqs, kept = claim.can_add(pod, data)
            except Unfit as exc:
                self.seq -= 1  # only kept claims consume a name, so skipped attempts change no names
                if len(options) < len(template.instance_types):
                    reasons[where] = self._limit_reason(template, pod, data, remaining, str(exc))
                else:
                    reasons[where] = str(exc)
                continue
            claim.add(pod, data, reqs, kept)
            self.order.opened(claim)
            stop = self.stop
            if stop is not None:
                if len(self.order.created) > stop.claims_over:
                    raise _Stopped(STOP_CLAIMS)
                if pool.name in stop.any_claim_of:
                    raise _Stopped(STOP_POOL)
            if remaining is not None:
                spent = max_capacity(index.select(kept)) + Resources({"nodes": 1})
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
        assert template.index is not None
        probe = ClaimInProgress.open(
            template, "limit-probe", template.index.all, self.topology, self.well_known
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
        data = self.pod_data(pod)
        memo = (data.signature, data.requests)
        known = self._known_failure(memo)
        if known is not None:
            return False, dict(known.reasons), list(known.steps)
        steps: list[str] = []
        current = pod
        while True:
            reasons: dict[str, str] = {}
            if self.add(current, reasons):
                self.placed += 1
                return True, reasons, steps
            relaxed = preferences.relax(current, prefer_no_schedule_pools=self.prefer_no_schedule_pools)
            if relaxed is None:
                if not reasons:
                    reasons["nodepools"] = "no NodePool can launch nodes"
                self.failures[memo] = Failure(self.placed, dict(reasons), tuple(steps))
                return False, reasons, steps
            current, step = relaxed
            steps.append(step)
            self.topology.update(current)
            self.data.pop(Topology.uid(current), None)

    def _known_failure(self, memo: object) -> Failure | None:
        """An identical pod failed and nothing was placed since: it fails the same way
        (*reference*: tries again)."""
        known = self.failures.get(memo)
        return known if known is not None and known.placed == self.placed else None

    def _place(
        self, queue: queueing.PodQueue, errors: dict[str, PodError], relaxations: dict[str, tuple[str, ...]]
    ) -> None:
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

    def solve(self, pods: Sequence[Pod]) -> Results:
        errors: dict[str, PodError] = {}
        relaxations: dict[str, tuple[str, ...]] = {}
        schedulable: list[Pod] = []
        for candidate in pods:
            problem = podinfo.validate(candidate, self.well_known)
            if problem is None and candidate.volumes:
                problem = volumes.problem_of(self.pod_data(candidate).volumes)
            if problem is not None:
                errors[Topology.uid(candidate)] = PodError(candidate, {"validation": problem})
            else:
                schedulable.append(candidate)
        queue = queueing.PodQueue(deque(queue_order(schedulable)), {})
        try:
            self._place(queue, errors, relaxations)
        except _Stopped as stopped:
            return Results((), {}, (), {}, stopped=str(stopped))
        existing: dict[str, str] = {}
        for node in self.existing:
            if node is None:
                continue
            for pod in node.pods:
                existing[pod.key] = node.name
        claims = []
        for claim in self.order.final():
            planned = self.finalizer.finalize(claim)
            if isinstance(planned, str):
                for pod in claim.pods:
                    errors[Topology.uid(pod)] = PodError(
                        pod, {f"nodepool/{claim.template.pool.name}": planned}
                    )
            else:
                claims.append(planned)
        ordered_errors = sorted(errors.values(), key=lambda e: (e.pod.namespace, e.pod.name))
        return Results(tuple(claims), existing, tuple(ordered_errors), relaxations)


def solve(
    snapshot: Snapshot,
    pods: Sequence[Pod] | None = None,
    *,
    consolidation: bool = False,
    stop: StopWhen | None = None,
    without: frozenset[str] = frozenset(),
    caches: SchedulingCaches | None = None,
) -> Results:
    """Simulate scheduling ``pods`` (default: the snapshot's pending pods).

    ``consolidation=True`` marks a disruption simulation: running pods (those with a
    ``nodeName``) are not placed on nodes still inside their consolidateAfter window.
    ``stop``: the caller has no use for the result once the solve opens the new NodeClaims it
    names, so the solve ends there and returns empty Results with ``stopped`` set.
    ``without``: solve the snapshot without the nodes of these names (a disruption pass solves
    one snapshot without one candidate after another, and shares the work of its nodes).
    ``caches``: the caller's structures shared between solves (default: a fresh, empty one).
    """
    chosen = snapshot.pending_pods() if pods is None else tuple(pods)
    solver = Solver(snapshot, chosen, consolidation=consolidation, stop=stop, without=without, caches=caches)
    return solver.solve(chosen)
