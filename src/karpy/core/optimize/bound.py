"""A lower bound on the hourly cost of any node set that fits some pods.

The packing of pods onto new nodes is relaxed into a linear programme (solved with
HiGHS through ``scipy.optimize.linprog``):

    minimise    Σ_k price_k · x_k
    subject to  Σ_k z_{g,k} = n_g                                for every pod group g
                Σ_g req_{g,r} · z_{g,k} ≤ alloc_{k,r} · x_k      for every node kind k, resource r
                x_k, z_{g,k} ≥ 0;  x_k ≤ 1 for an existing node (price 0)

A *pod group* is the pods with the same scheduling signature (nodeSelector, required node
affinity, tolerations) and the same requests (plus the one ``pods`` slot each takes). A
*node kind* is a NodePool × instance type × a set of offerings that admit the same groups,
priced at the cheapest of them; ``alloc`` is the type's allocatable minus the NodePool's
DaemonSet overhead on it. ``z_{g,k}`` counts the pods of g on nodes of kind k and ``x_k``
counts those nodes, fractionally. A group may use a kind only if the scheduler's own rules
allow it: the NodePool's taints are tolerated (``first_untolerated``), the pod's
requirements are ``compatible`` with the NodePool's, the type ``overlaps`` both, an
available offering is compatible with them, and one pod fits beside the DaemonSets.
Existing nodes (and launched NodeClaims) are free kinds holding what their bound pods
leave.

Any real placement gives a feasible point of the LP at its own cost, so the optimum is a
valid lower bound. It ignores (and is therefore below what a placement honouring them can
reach): topology spread, pod (anti-)affinity, host ports, preferred node affinity (only the
strict requirements count, and any of a pod's required terms), NodePool limits and
weights, ``minValues``, DaemonSet pods still to arrive on existing nodes, and the
integrality of nodes. :func:`per_pod_floor` is a cruder bound (each resource alone, each
pod on its cheapest kind per unit) kept as a sanity floor: ``floor <= LP``.

Pure: no I/O, no clock. Used by :mod:`karpy.planning` (``karpy plan --bound``) and by
:mod:`karpy.core.optimize.repack`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from karpy.core.scheduling import daemons, podinfo
from karpy.core.scheduling.existing import scheduling_taints
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.catalog import InstanceType, Offering
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirements
from karpy.model.resources import CPU, EMPTY, MEMORY, Resources, total
from karpy.model.taints import PREFER_NO_SCHEDULE, Taint, Toleration, first_untolerated

__all__ = [
    "IGNORES",
    "METHOD",
    "Bound",
    "NodeKind",
    "PodGroup",
    "Problem",
    "Room",
    "Solution",
    "alternatives",
    "build_problem",
    "existing_rooms",
    "lower_bound",
    "per_pod_floor",
    "pool_types",
    "solve_lp",
    "template_requirements",
]

METHOD = "LP relaxation (HiGHS)"
IGNORES = (
    "topology spread constraints",
    "pod affinity and anti-affinity",
    "host ports",
    "preferred node affinity (strict requirements only; any required term)",
    "NodePool limits and weights",
    "minValues",
    "DaemonSet pods still to arrive on existing nodes",
    "whole nodes (node counts are fractional)",
)

Signature = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class NodeKind:
    """A kind of node a pod group may use: new (pool × type × offerings) or one existing node."""

    pool: str
    instance_type: InstanceType | None
    offering: Offering | None
    allocatable: Resources  # room for pods (DaemonSet overhead taken out for new nodes)
    price: float
    node: str = ""  # an existing node's name; then price is 0 and at most one is "bought"
    signatures: frozenset[int] = frozenset()  # indices of the signatures it admits

    @property
    def name(self) -> str:
        if self.node:
            return f"node/{self.node}"
        assert self.instance_type is not None
        return f"{self.pool}/{self.instance_type.name}"


@dataclass(frozen=True, slots=True)
class PodGroup:
    pods: tuple[Pod, ...]
    requests: Resources  # one pod's, including its ``pods`` slot
    signature: int


@dataclass(frozen=True, slots=True)
class Problem:
    groups: tuple[PodGroup, ...]
    kinds: tuple[NodeKind, ...]
    allowed: tuple[tuple[int, ...], ...]  # per group: the kinds it may use
    resources: tuple[str, ...]
    signatures: tuple[Signature, ...]
    uncovered: tuple[Pod, ...] = ()  # pods no kind admits (left out of the LP)
    lp_kinds: tuple[int, ...] = ()  # the kinds the LP uses: the others are dominated by them


@dataclass(frozen=True, slots=True)
class Solution:
    status: str  # "optimal" or the solver's message
    value: float
    x: tuple[float, ...]  # nodes per kind
    z: Mapping[tuple[int, int], float]  # (group, kind) -> pods
    duals: tuple[float, ...]  # per group: the LP price of one more pod


@dataclass(frozen=True, slots=True)
class Bound:
    """``karpy plan --bound``'s figures."""

    lower_bound: float  # max(LP optimum, per-pod floor)
    lp: float
    floor: float
    pods: int
    groups: int
    kinds: int
    status: str
    mix: tuple[tuple[str, float], ...] = ()  # kind name -> fractional nodes, largest first
    uncovered: tuple[str, ...] = ()
    method: str = METHOD
    ignores: tuple[str, ...] = field(default=IGNORES)


def alternatives(pod: Pod) -> list[Requirements]:
    """The pod's strict requirements, one set per required node-affinity term (ORed)."""
    base = Requirements.from_labels(pod.node_selector)
    return [base.add(*term.requirements) for term in pod.required_terms] or [base]


def _hard(taints: Iterable[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect != PREFER_NO_SCHEDULE]


def _signature(pod: Pod) -> Signature:
    return (tuple(sorted(pod.node_selector.items())), pod.required_terms, pod.tolerations)


def template_requirements(pool: NodePool) -> Requirements:
    """A NodePool's requirements with its template labels and its name, as the scheduler builds them."""
    template_labels = {**pool.labels, labels.NODEPOOL: pool.name}
    return Requirements(pool.requirements).union_with(Requirements.from_labels(template_labels))


def _offered(it: InstanceType, reqs: Requirements) -> bool:
    return any(o.available and o.compatible(reqs) for o in it.offerings)


def _active_pools(snapshot: Snapshot) -> list[NodePool]:
    pools = [p for p in snapshot.node_pools if not p.deleting and p.replicas is None]
    return sorted(pools, key=lambda p: p.name)


def pool_types(snapshot: Snapshot, pool: NodePool) -> tuple[list[InstanceType], dict[str, Resources]]:
    """The pool's instance types its requirements allow (with an offering), and the
    DaemonSet overhead on each, computed as the scheduler does for its NodePool template."""
    template = template_requirements(pool)
    types = [
        it
        for it in snapshot.instance_types.get(pool.name, ())
        if it.requirements.overlaps(template) and _offered(it, template)
    ]
    filter_reqs = template.union_with(
        Requirements.from_labels({labels.REGISTERED: "true", labels.INITIALIZED: "true"})
    )
    overhead = daemons.template_overhead(
        snapshot.daemonsets,
        taints=pool.taints,
        requirements=filter_reqs,
        instance_types=types,
        well_known=snapshot.well_known,
    )
    return types, {it.name: overhead[it.name].requests if it.name in overhead else EMPTY for it in types}


def _pool_kinds(
    snapshot: Snapshot,
    pool: NodePool,
    sig_alts: Sequence[tuple[int, list[Requirements], tuple[Toleration, ...]]],
) -> list[NodeKind]:
    """Kinds of new node the pool offers, each tagged with the signatures it admits."""
    template = template_requirements(pool)
    hard = _hard(pool.taints)
    # the signatures whose pods may use this pool: taints tolerated, requirements compatible
    combos: list[tuple[int, list[Requirements]]] = []
    for index, alts, tolerations in sig_alts:
        if first_untolerated(tolerations, hard) is not None:
            continue
        joined = [template.union_with(a) for a in alts if not template.compatible(a, snapshot.well_known)]
        if joined:
            combos.append((index, joined))
    if not combos:
        return []
    types, overhead = pool_types(snapshot, pool)
    kinds: list[NodeKind] = []
    for it in types:
        extra = overhead[it.name]
        if not extra.fits(it.allocatable):
            continue
        room = Resources({k: v - extra.get(k, 0) for k, v in it.allocatable.items()})
        # which signatures each available offering admits
        masks: dict[frozenset[int], Offering] = {}
        users = [(i, [j for j in joined if it.requirements.overlaps(j)]) for i, joined in combos]
        users = [(i, js) for i, js in users if js]
        if not users:
            continue
        for offering in it.offerings:
            if not offering.available:
                continue
            mask = frozenset(i for i, js in users if any(offering.compatible(j) for j in js))
            if not mask:
                continue
            best = masks.get(mask)
            if best is None or offering.price < best.price:
                masks[mask] = offering
        # drop a mask when another admits a superset for at most its price
        for mask, offering in masks.items():
            if any(mask < other and masks[other].price <= offering.price for other in masks):
                continue
            kinds.append(NodeKind(pool.name, it, offering, room, offering.price, signatures=mask))
    return kinds


@dataclass(frozen=True, slots=True)
class Room:
    """Room already paid for: an existing node, or a NodeClaim a plan keeps (price 0, used once)."""

    name: str
    pool: str
    requirements: Requirements
    taints: tuple[Taint, ...]
    room: Resources
    allow_undefined: frozenset[str] = frozenset()  # keys the pods may select that are not defined


def existing_rooms(snapshot: Snapshot) -> list[Room]:
    """The snapshot's live nodes and launched NodeClaims: allocatable minus their bound pods."""
    rooms: list[Room] = []
    for state in sorted(snapshot.nodes, key=lambda n: n.name):
        if state.marked_for_deletion or (state.node is not None and state.node.deleting):
            continue
        used = total(podinfo.pod_requests(p) for p in state.pods if not p.is_terminal())
        room = Resources({k: v - used.get(k, 0) for k, v in state.allocatable.items()})
        reqs = Requirements.from_labels(state.labels)
        rooms.append(Room(state.name, state.node_pool, reqs, scheduling_taints(state), room))
    return rooms


def _room_kinds(
    rooms: Sequence[Room],
    sig_alts: Sequence[tuple[int, list[Requirements], tuple[Toleration, ...]]],
    sig_pool: Mapping[int, str] | None,
) -> list[NodeKind]:
    kinds: list[NodeKind] = []
    for room in rooms:
        hard = _hard(room.taints)
        mask = frozenset(
            index
            for index, alts, tolerations in sig_alts
            if (sig_pool is None or sig_pool[index] == room.pool)
            and first_untolerated(tolerations, hard) is None
            and any(not room.requirements.compatible(a, room.allow_undefined) for a in alts)
        )
        if mask:
            kinds.append(NodeKind(room.pool, None, None, room.room, 0.0, node=room.name, signatures=mask))
    return kinds


def _fits(requests: Resources, room: Resources) -> bool:
    return all(v <= room.get(k, 0) for k, v in requests.items() if v > 0)


def build_problem(
    snapshot: Snapshot,
    pods: Sequence[Pod],
    *,
    existing: bool = True,
    pool_of: Mapping[str, str] | None = None,
    rooms: Sequence[Room] = (),
) -> Problem:
    """Groups, kinds and who may use what, for ``pods`` under ``snapshot``'s NodePools.

    ``existing`` adds the snapshot's nodes as free kinds, ``rooms`` more of them; ``pool_of``
    (pod key -> NodePool) restricts each pod to one NodePool (the repacker keeps pods in
    their pool; rooms then count as their ``pool``'s).
    """
    sig_index: dict[Signature, int] = {}
    sig_pods: dict[int, Pod] = {}
    grouped: dict[tuple[int, Resources], list[Pod]] = {}
    for pod in pods:
        key = _signature(pod)
        if pool_of is not None:
            key = (*key, pool_of.get(pod.key, ""))
        index = sig_index.setdefault(key, len(sig_index))
        sig_pods.setdefault(index, pod)
        grouped.setdefault((index, podinfo.pod_requests(pod)), []).append(pod)
    sig_alts = [(i, alternatives(sig_pods[i]), sig_pods[i].tolerations) for i in range(len(sig_index))]
    kinds: list[NodeKind] = []
    for pool in _active_pools(snapshot):
        usable = sig_alts
        if pool_of is not None:
            usable = [s for s in sig_alts if pool_of.get(sig_pods[s[0]].key, "") == pool.name]
        kinds.extend(_pool_kinds(snapshot, pool, usable))
    all_rooms = [*(existing_rooms(snapshot) if existing else ()), *rooms]
    if all_rooms:
        sig_pool = None if pool_of is None else {s[0]: pool_of.get(sig_pods[s[0]].key, "") for s in sig_alts}
        kinds.extend(_room_kinds(all_rooms, sig_alts, sig_pool))
    ordered = sorted(
        grouped.items(),
        key=lambda item: (
            -item[0][1].get(CPU),
            -item[0][1].get(MEMORY),
            item[0][0],
            sorted(item[0][1].items()),
        ),
    )
    groups: list[PodGroup] = []
    allowed: list[tuple[int, ...]] = []
    uncovered: list[Pod] = []
    for (index, requests), members in ordered:
        usable_kinds = tuple(
            k
            for k, kind in enumerate(kinds)
            if index in kind.signatures and _fits(requests, kind.allocatable)
        )
        if not usable_kinds:
            uncovered.extend(members)
            continue
        groups.append(PodGroup(tuple(members), requests, index))
        allowed.append(usable_kinds)
    resources = sorted({k for g in groups for k, v in g.requests.items() if v > 0})
    problem = Problem(
        tuple(groups),
        tuple(kinds),
        tuple(allowed),
        tuple(resources),
        tuple(sig_index),
        tuple(sorted(uncovered, key=lambda p: p.key)),
    )
    return replace(problem, lp_kinds=_undominated(problem))


def _undominated(problem: Problem) -> tuple[int, ...]:
    """Kinds no other kind dominates for the LP.

    New-node kind A is dominated by kind B when every group that may use A may use B and
    λ = max_r alloc_A,r / alloc_B,r (over the resources A's groups request) copies of B
    cost less than one A (ties: the kind more groups may use wins, then the larger, then the
    earlier one; a strict order, so no two kinds remove each other). Fractional copies of B then
    replace A in any LP solution at no more cost, so dropping A leaves the optimum as
    is. Existing nodes are always kept.
    """
    n_kinds, n_groups = len(problem.kinds), len(problem.groups)
    if n_kinds == 0 or n_groups == 0:
        return ()
    member = np.zeros((n_kinds, n_groups), dtype=bool)
    for g, kinds in enumerate(problem.allowed):
        member[list(kinds), g] = True
    used = member.any(axis=1)
    req, alloc = _matrices(problem)
    needs = (member.astype(float) @ (req > 0).astype(float)) > 0  # kinds × resources
    price = np.array([k.price for k in problem.kinds])
    new = np.array([not k.node for k in problem.kinds]) & used
    keep: np.ndarray = np.array(used, dtype=bool)
    order = np.arange(n_kinds)
    width = member.sum(axis=1)
    size = alloc.sum(axis=1)
    for a in np.flatnonzero(new):
        others = keep & new & (order != a)
        others &= ~(member[a] & ~member).any(axis=1)  # G_A ⊆ G_B
        if not others.any():
            continue
        cols = needs[a]
        if not cols.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.where(alloc[:, cols] > 0, alloc[a, cols] / alloc[:, cols], np.inf)
            cost = price * ratio.max(axis=1)
        strict = cost < price[a] * (1 - 1e-9)
        ahead = (width > width[a]) | (
            (width == width[a]) & ((size > size[a]) | ((size == size[a]) & (order < a)))
        )
        tie = (np.abs(cost - price[a]) <= price[a] * 1e-9) & ahead
        if (others & (strict | tie)).any():
            keep[a] = False
    return tuple(int(k) for k in np.flatnonzero(keep))


def _matrices(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Requests (groups × resources) and allocatable (kinds × resources), each resource scaled."""
    req = np.array(
        [[g.requests.get(r, 0) for r in problem.resources] for g in problem.groups], dtype=float
    ).reshape(len(problem.groups), len(problem.resources))
    alloc = np.array(
        [[max(k.allocatable.get(r, 0), 0) for r in problem.resources] for k in problem.kinds], dtype=float
    ).reshape(len(problem.kinds), len(problem.resources))
    scale = req.max(axis=0, initial=0.0) if len(problem.groups) else np.ones(len(problem.resources))
    scale[scale == 0] = 1.0
    return req / scale, alloc / scale


def per_pod_floor(problem: Problem) -> float:
    """max over resources r of Σ_pods min over its kinds of price · request_r / allocatable_r.

    Each node of kind k costs at least Σ_{pods on it} price_k · req_r / alloc_r for every r,
    so this is a lower bound too (a weaker one: one resource at a time).
    """
    if not problem.groups:
        return 0.0
    req, alloc = _matrices(problem)
    price = np.array([k.price for k in problem.kinds])
    per_resource = np.zeros(len(problem.resources))
    for g, group in enumerate(problem.groups):
        kinds = np.array(problem.allowed[g])
        a = alloc[kinds]
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = np.where(req[g] > 0, price[kinds, None] * req[g] / a, 0.0)
        per_resource += len(group.pods) * unit.min(axis=0)
    return float(per_resource.max(initial=0.0))


def solve_lp(problem: Problem) -> Solution:
    """The LP above, solved with HiGHS; ``value`` is its optimum (0 for no pods)."""
    from scipy import optimize, sparse  # imported here: a plan without --bound never loads scipy

    n_kinds, n_groups, n_res = len(problem.kinds), len(problem.groups), len(problem.resources)
    if n_groups == 0:
        return Solution("optimal", 0.0, (0.0,) * n_kinds, {}, ())
    req, alloc = _matrices(problem)
    lp_kinds = set(problem.lp_kinds)
    pairs = [(g, k) for g in range(n_groups) for k in problem.allowed[g] if k in lp_kinds]
    n_z = len(pairs)
    cost = np.concatenate([np.array([k.price for k in problem.kinds]), np.zeros(n_z)])
    # demand: Σ_k z_{g,k} = n_g
    eq_rows = np.array([g for g, _ in pairs])
    eq_cols = n_kinds + np.arange(n_z)
    a_eq = sparse.csr_array((np.ones(n_z), (eq_rows, eq_cols)), shape=(n_groups, n_kinds + n_z))
    b_eq = np.array([len(g.pods) for g in problem.groups], dtype=float)
    # capacity: Σ_g req_{g,r} z_{g,k} - alloc_{k,r} x_k <= 0, one row per used (kind, resource)
    used_kinds = sorted({k for _, k in pairs})
    row_of = {(k, r): i for i, (k, r) in enumerate((k, r) for k in used_kinds for r in range(n_res))}
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for (k, r), i in row_of.items():
        rows.append(i)
        cols.append(k)
        vals.append(-alloc[k, r])
    for j, (g, k) in enumerate(pairs):
        for r in range(n_res):
            if req[g, r] > 0:
                rows.append(row_of[(k, r)])
                cols.append(n_kinds + j)
                vals.append(req[g, r])
    a_ub = sparse.csr_array((vals, (rows, cols)), shape=(len(row_of), n_kinds + n_z))
    b_ub = np.zeros(len(row_of))
    bounds = [(0.0, 1.0 if k.node else None) for k in problem.kinds] + [(0.0, None)] * n_z
    result = optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if result.status != 0:
        return Solution(str(result.message), math.nan, (0.0,) * n_kinds, {}, (0.0,) * n_groups)
    values = np.asarray(result.x)
    z = {pair: float(values[n_kinds + j]) for j, pair in enumerate(pairs) if values[n_kinds + j] > 1e-9}
    duals = tuple(float(d) for d in np.asarray(result.eqlin.marginals))
    return Solution("optimal", float(result.fun), tuple(float(v) for v in values[:n_kinds]), z, duals)


def lower_bound(snapshot: Snapshot, pods: Sequence[Pod], *, existing: bool = True) -> Bound:
    """The LP lower bound (and the per-pod floor) for placing ``pods`` under ``snapshot``."""
    problem = build_problem(snapshot, pods, existing=existing)
    solution = solve_lp(problem)
    floor = per_pod_floor(problem)
    lp = solution.value
    best = max(lp, floor) if not math.isnan(lp) else floor
    mix: dict[str, float] = {}
    for kind, count in zip(problem.kinds, solution.x, strict=True):
        if count > 1e-9:
            mix[kind.name] = mix.get(kind.name, 0.0) + count
    ordered = tuple(sorted(mix.items(), key=lambda item: (-item[1], item[0])))
    return Bound(
        lower_bound=best,
        lp=lp,
        floor=floor,
        pods=sum(len(g.pods) for g in problem.groups),
        groups=len(problem.groups),
        kinds=len(problem.kinds),
        status=solution.status,
        mix=ordered,
        uncovered=tuple(p.key for p in problem.uncovered),
    )
