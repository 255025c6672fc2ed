"""Which nodes may be disrupted, and at what cost (Karpenter's ``NewCandidate``).

Base conditions (both classes): a managed node (Node and NodeClaim), initialized, not
being deleted, not nominated, no ``karpenter.sh/do-not-disrupt`` on the Node, a known
NodePool. Graceful disruption (emptiness, consolidation) also needs every pod evictable:
no active ``do-not-disrupt`` pod (``"true"`` or a duration since the pod started) and no pod
a PDB protects. Eventual disruption (drift) keeps a node whose pods block eviction when its
NodeClaim has a ``terminationGracePeriod``. Pods without an owner are evicted, not
blocking.

Which pods move follows upstream ``pkg/utils/pod/scheduling.go`` (kubernetes-sigs/karpenter):
a pod is *reschedulable* (:func:`reschedulable`, ``IsReschedulable``) when it is active (not
Succeeded/Failed, not terminating) or is a terminating StatefulSet pod, and is owned by neither
a DaemonSet nor a Node (a mirror pod). A candidate is *empty* when its reschedulable pods add
nothing to its rescheduling cost (``Candidate.IsEmpty``: every one has an eviction cost <= 0).
The pods a disruption solve places are the *currently* reschedulable ones
(:func:`currently_reschedulable`, ``pdb.Limits.IsCurrentlyReschedulable``): no active
do-not-disrupt and no PDB that blocks eviction for good.

:func:`build_classes` builds both classes in one walk over the nodes. What does not depend on
``now`` is split out (:class:`PodFacts` per pod, :class:`NodeFacts` per node: live pods, the
pods that may block eviction, costs, price labels) so that a
:class:`~karpy.core.disruption.memo.Memo` can keep it across passes; do-not-disrupt
durations, what PDBs allow and the remaining lifetime are evaluated per pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from karpy.core.disruption import headroom_guard
from karpy.core.disruption import pdbs as pdbs_mod
from karpy.core.disruption.types import Candidate
from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirements
from karpy.model.taints import DISRUPTED, first_untolerated

__all__ = [
    "EVENTUAL",
    "GRACEFUL",
    "Classes",
    "NodeFacts",
    "PodFacts",
    "build",
    "build_all",
    "build_classes",
    "currently_reschedulable",
    "do_not_disrupt_active",
    "do_not_disrupt_until",
    "evictable",
    "eviction_cost",
    "leaving_pods",
    "node_facts",
    "owned_by",
    "pod_facts",
    "price",
    "reschedulable",
]

GRACEFUL = "graceful"
EVENTUAL = "eventual"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def _duration(text: str) -> float | None:
    units = {"s": 1, "m": 60, "h": 3600}
    total = 0.0
    number = ""
    for char in text.strip():
        if char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            total += float(number) * units[char]
            number = ""
        else:
            return None
    return total if not number and total > 0 else None


def do_not_disrupt_active(pod: Pod, now: float) -> bool:
    """``karpenter.sh/do-not-disrupt``: ``"true"``, or a duration counted from the pod's start."""
    value = pod.annotations.get(labels.DO_NOT_DISRUPT)
    if value is None or pod.is_terminal() or pod.deleting:
        return False
    if value == "true":
        return True
    until = do_not_disrupt_until(pod)
    return until is not None and now < until  # invalid values are ignored (upstream emits an event)


def do_not_disrupt_until(pod: Pod) -> float | None:
    """When a ``karpenter.sh/do-not-disrupt`` duration ends (None: no valid duration)."""
    value = pod.annotations.get(labels.DO_NOT_DISRUPT)
    seconds = _duration(value) if value is not None and value != "true" else None
    if seconds is None:
        return None
    return (pod.started if pod.started is not None else pod.created) + seconds


# (API version, kind) of the owners upstream's IsOwnedByStatefulSet / DaemonSet / Node look for
# (karpy matches the kind: see owned_by)
STATEFULSET = ("apps/v1", "StatefulSet")
DAEMONSET = ("apps/v1", "DaemonSet")
NODE = ("v1", "Node")  # a mirror (static) pod


def owned_by(pod: Pod, owner: tuple[str, str]) -> bool:
    """Upstream ``IsOwnedBy``: any owner reference (controller or not) of that kind. Upstream also
    compares the API version; karpy matches the kind alone (each of these kinds is served at one
    version, and objects written by hand or by karpy's own builders may name another or none)."""
    kind = owner[1]
    return any(o.kind == kind for o in pod.owners)


def reschedulable(pod: Pod) -> bool:
    """Upstream ``IsReschedulable``: active, or a terminating StatefulSet pod (it must go before
    its replacement is made, so its place is planned); not a DaemonSet or mirror pod."""
    if pod.deleting:
        if not owned_by(pod, STATEFULSET):
            return False
    elif pod.is_terminal():
        return False
    return not owned_by(pod, DAEMONSET) and not owned_by(pod, NODE)


Leaving = tuple[tuple[str, tuple[Pod, ...]], ...]
_LEAVING: ObjectMemo[Leaving] = ObjectMemo(4)  # per snapshot object


def leaving_pods(snapshot: Snapshot) -> Leaving:
    """The nodes being deleted (or marked for deletion), each with its currently reschedulable
    pods at ``snapshot.now``: what every disruption solve must also find a place for."""
    return _LEAVING.of(snapshot, _leaving)


def _leaving(snapshot: Snapshot) -> Leaving:
    limits = pdbs_mod.Limits(snapshot.pdbs, ())  # (whether a PDB blocks for good needs no pod counts)
    return tuple(
        (n.name, tuple(p for p in n.pods if currently_reschedulable(p, snapshot.now, limits)))
        for n in snapshot.nodes
        if n.marked_for_deletion
        or (n.node is not None and n.node.deleting)
        or (n.claim is not None and n.claim.deleting)
    )


def evictable(pod: Pod) -> bool:
    """Pods a drain evicts: active, not mirror pods, not tolerating ``karpenter.sh/disrupted``."""
    if pod.is_terminal() or pod.deleting or owned_by(pod, NODE):
        return False
    return first_untolerated(pod.tolerations, (DISRUPTED,)) is not None


def currently_reschedulable(pod: Pod, now: float, limits: pdbs_mod.Limits) -> bool:
    """Upstream ``IsCurrentlyReschedulable``: reschedulable, no active do-not-disrupt, and not
    held by a PDB that never allows an eviction (the pod would stay where it is)."""
    if not reschedulable(pod) or do_not_disrupt_active(pod, now):
        return False
    return not (evictable(pod) and limits.fully_blocked(pod))


def eviction_cost(pod: Pod) -> float:
    """``1 + deletion-cost/2^27 + priority/2^25``, clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get(DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += int(raw) / 2**27
    cost += pod.priority / 2**25
    return max(-10.0, min(10.0, cost))


def price(it: InstanceType, price_labels: tuple[tuple[str, str], ...]) -> float | None:
    """The cheapest offering of ``it`` compatible with the node's zone and capacity-type labels."""
    reqs = Requirements.from_labels(dict(price_labels))
    compatible = [o.price for o in it.offerings if o.compatible(reqs)]
    return min(compatible) if compatible else None


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What a disruption pass needs of one pod that does not depend on ``now``."""

    pod: Pod
    terminal: bool
    dnd_always: bool  # do-not-disrupt "true" (and the pod active)
    dnd_until: float | None  # do-not-disrupt duration: active while now < this
    evictable: bool
    reschedulable: bool
    eviction_cost: float

    def do_not_disrupt(self, now: float) -> bool:
        """:func:`do_not_disrupt_active` at ``now``."""
        return self.dnd_always or (self.dnd_until is not None and now < self.dnd_until)


def pod_facts(pod: Pod) -> PodFacts:
    dnd_always = False
    dnd_until = None
    value = pod.annotations.get(labels.DO_NOT_DISRUPT)
    if value is not None and not pod.is_terminal() and not pod.deleting:
        if value == "true":
            dnd_always = True
        else:
            dnd_until = do_not_disrupt_until(pod)
    return PodFacts(
        pod,
        pod.is_terminal(),
        dnd_always,
        dnd_until,
        evictable(pod),
        reschedulable(pod),
        eviction_cost(pod),
    )


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What a disruption pass needs of one managed node that does not depend on ``now``.

    Valid for the PDB selection it was computed with (``checks`` names the pods PDBs select).
    """

    instance_type: str  # the instance-type label ("" when absent)
    capacity_type: str
    zone: str
    price_labels: tuple[tuple[str, str], ...]  # the zone and capacity-type labels, as the price reads them
    pods: tuple[Pod, ...]  # not terminal
    checks: tuple[tuple[PodFacts, tuple[int, ...]], ...]  # pods that may block eviction, with their PDBs
    reschedulable: tuple[Pod, ...]
    reschedule_cost: float  # 1 + sum of positive eviction costs of the reschedulable pods
    eviction_cost: float  # sum of eviction costs of ``pods``


def node_facts(
    node: StateNode,
    facts: Callable[[Pod], PodFacts],
    selected: Callable[[Pod], tuple[int, ...]],
) -> NodeFacts:
    """:class:`NodeFacts` from per-pod facts and PDB selections (``selected``: the snapshot's PDBs)."""
    every = list(map(facts, node.pods))
    live = [f for f in every if not f.terminal]
    checks = []
    for f in live:
        chosen = selected(f.pod) if f.evictable else ()
        if f.dnd_always or f.dnd_until is not None or chosen:
            checks.append((f, chosen))
    moving = [f for f in every if f.reschedulable]  # (a terminating StatefulSet pod may be terminal)
    node_labels = node.labels
    return NodeFacts(
        instance_type=node_labels.get(labels.INSTANCE_TYPE, ""),
        capacity_type=node_labels.get(labels.CAPACITY_TYPE, ""),
        zone=node_labels.get(labels.ZONE, ""),
        price_labels=tuple(
            (k, v) for k, v in node_labels.items() if k in (labels.ZONE, labels.CAPACITY_TYPE)
        ),
        pods=tuple(f.pod for f in live),
        checks=tuple(checks),
        reschedulable=tuple(f.pod for f in moving),
        reschedule_cost=1 + sum((max(0.0, f.eviction_cost) for f in moving), 0.0),  # (0.0: mypyc)
        eviction_cost=sum(f.eviction_cost for f in live),
    )


@dataclass(frozen=True, slots=True)
class Classes:
    """Candidates of one pass for both disruption classes, and why the other nodes are not."""

    graceful: list[Candidate]
    graceful_why: dict[str, str]
    eventual: list[Candidate]
    eventual_why: dict[str, str]


def _not_candidate(node: StateNode, pools: Mapping[str, NodePool]) -> tuple[NodePool | None, str]:
    if node.claim is None or node.node is None:
        return (
            None,
            "not managed: no NodeClaim" if node.claim is None else "NodeClaim has not registered a Node",
        )
    if not node.initialized:
        return None, "not initialized"
    if node.marked_for_deletion or node.node.deleting or node.claim.deleting:
        return None, "already being deleted"
    if node.nominated:
        return None, "nominated for pending pods"
    if node.node.annotations.get(labels.DO_NOT_DISRUPT) == "true":
        return None, "node annotated karpenter.sh/do-not-disrupt=true"
    pool = pools.get(node.node_pool)
    if pool is None:
        return None, f"NodePool {node.node_pool!r} not found"
    return pool, ""


def build_classes(
    nodes: Sequence[StateNode],
    *,
    pools: Mapping[str, NodePool],
    instance_types: Mapping[str, Mapping[str, InstanceType]],
    limits: pdbs_mod.Limits,
    now: float,
    facts: Callable[[StateNode], NodeFacts] | None = None,
    price_of: Callable[[InstanceType, tuple[tuple[str, str], ...]], float | None] = price,
) -> Classes:
    """The candidates of both classes in one walk over ``nodes``.

    The classes differ only for a node whose pods block eviction: graceful disruption skips
    it, eventual disruption keeps it when its NodeClaim has a ``terminationGracePeriod``.
    ``facts`` and ``price_of`` may be memoized (:class:`karpy.core.disruption.memo.Memo`).
    """
    if facts is None:
        selected = limits.selected

        def fresh_facts(node: StateNode) -> NodeFacts:
            return node_facts(node, pod_facts, selected)

        facts = fresh_facts  # (a nested def under the parameter's own name trips mypyc)

    graceful: list[Candidate] = []
    graceful_why: dict[str, str] = {}
    eventual: list[Candidate] = []
    eventual_why: dict[str, str] = {}
    for node in nodes:
        pool, why = _not_candidate(node, pools)
        if pool is None:
            graceful_why[node.name] = why
            eventual_why[node.name] = why
            continue
        claim = node.claim
        assert claim is not None
        f = facts(node)
        blocked = ""
        for pf, chosen in f.checks:
            if pf.do_not_disrupt(now):
                pod = pf.pod
                blocked = (
                    f"pod {pod.key} has karpenter.sh/do-not-disrupt={pod.annotations[labels.DO_NOT_DISRUPT]}"
                )
                break
            if chosen:
                pdb_why = limits.blocking(pf.pod, chosen)
                if pdb_why is not None:
                    blocked = pdb_why
                    break
        if blocked:
            graceful_why[node.name] = blocked
            if claim.termination_grace_period is None:
                eventual_why[node.name] = blocked
                continue
        moving = _held_back(f, limits, now) if f.checks else None
        it = instance_types.get(pool.name, {}).get(f.instance_type)
        node_price = price_of(it, f.price_labels) if it is not None else None
        # the last candidate of this StateNode, when it is made of the same parts (every field
        # but these comes from the facts): one object from pass to pass
        held = node._derived.get("candidate")
        if (
            held is not None
            and held[0] is f
            and held[1].pool is pool
            and held[1].instance_type is it
            and held[1].price == node_price
            and held[1].blocked_eviction == blocked
            and held[1].moving == moving
        ):
            candidate: Candidate = held[1]
        else:
            candidate = Candidate(
                node=node,
                pool=pool,
                instance_type=it,
                capacity_type=f.capacity_type,
                zone=f.zone,
                price=node_price,
                reschedulable=f.reschedulable,
                pods=f.pods,
                reschedule_cost=f.reschedule_cost,
                eviction_cost=f.eviction_cost,
                blocked_eviction=blocked,
                moving=moving,
            )
            node._derived["candidate"] = (f, candidate)
        if not blocked:
            graceful.append(candidate)
        eventual.append(candidate)
    # karpy.sh/headroom: the empty nodes an open headroom needs stay
    graceful = headroom_guard.keep(nodes, graceful, graceful_why, pools, instance_types, now)
    return Classes(graceful, graceful_why, eventual, eventual_why)


def _held_back(f: NodeFacts, limits: pdbs_mod.Limits, now: float) -> tuple[Pod, ...] | None:
    """The reschedulable pods that are also currently reschedulable, when some are not (None:
    all are). Only pods of ``f.checks`` (do-not-disrupt or under a PDB) can be held back."""
    held = {
        id(pf.pod)
        for pf, chosen in f.checks
        if pf.do_not_disrupt(now) or (chosen and limits.fully_blocked(pf.pod, chosen))
    }
    if not held:
        return None
    return tuple(p for p in f.reschedulable if id(p) not in held)


def build(
    node: StateNode,
    *,
    pools: Mapping[str, NodePool],
    instance_types: Mapping[str, Mapping[str, InstanceType]],
    limits: pdbs_mod.Limits,
    now: float,
    disruption_class: str,
) -> tuple[Candidate | None, str]:
    """The candidate for ``node`` under a disruption class, or None and why not."""
    found, why = build_all(
        (node,),
        pools=pools,
        instance_types=instance_types,
        limits=limits,
        now=now,
        disruption_class=disruption_class,
    )
    return (found[0] if found else None), why.get(node.name, "")


def build_all(
    nodes: Sequence[StateNode],
    *,
    pools: Mapping[str, NodePool],
    instance_types: Mapping[str, Mapping[str, InstanceType]],
    limits: pdbs_mod.Limits,
    now: float,
    disruption_class: str,
) -> tuple[list[Candidate], dict[str, str]]:
    classes = build_classes(nodes, pools=pools, instance_types=instance_types, limits=limits, now=now)
    if disruption_class == EVENTUAL:
        return classes.eventual, classes.eventual_why
    return classes.graceful, classes.graceful_why
