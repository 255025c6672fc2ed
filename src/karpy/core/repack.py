"""``packing: optimized``: re-pack a plan's new NodeClaims onto the LP's instance-type mix.

Opt-in; the default packing stays upstream-faithful (:func:`karpy.core.scheduling.solve`).
Starting from the faithful results, only NodeClaims all of whose pods are *free* are
re-packed: a free pod has no topology spread, no pod (anti-)affinity (required or
preferred), no host ports, no preferred node affinity and at most one required node
selector term, and no pod in the snapshot has a spread or (anti-)affinity term whose
selector matches its labels (namespaces are not looked at, which only makes fewer pods
free). Pods stay in the NodePool the faithful plan chose (so weights keep their meaning);
NodePools with limits or ``minValues`` are left alone. Every other NodeClaim is kept as
planned.

The free pods are grouped and the LP of :mod:`karpy.core.bound` is solved for them alone.
Then nodes are opened one configuration at a time: for every kind of node the pods the
LP put on such a node are placed first, then the remaining pods first-fit decreasing
(largest CPU, then memory, first) while they fit and their requirements stay compatible;
the configuration whose pods are worth most per dollar (worth = the LP's dual price of
each pod) is opened, as many times as the remaining pods allow. Each node becomes a
NodeClaim whose instance-type options are the types of its NodePool that admit all its
pods and fit them, and the launch rule picks its offering as usual. The repacking is
kept only when it is cheaper than the faithful NodeClaims it replaces.

Pure: no I/O, no clock. Used by :mod:`karpy.planning`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from karpy.core import bound
from karpy.core.scheduling import Launched, PlannedClaim, Results, launch, podinfo
from karpy.core.scheduling.nodeclaim import min_values_shortfall
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import CPU, MEMORY, Resources, total
from karpy.model.selectors import LabelSelector

__all__ = ["Repacked", "free_pods", "repack"]


@dataclass(frozen=True, slots=True)
class Repacked:
    results: Results
    launched: tuple[Launched, ...]
    faithful_cost: float  # of the whole faithful plan
    cost: float  # of the whole plan after re-packing (== faithful_cost when nothing changed)
    claims_replaced: int = 0
    claims_created: int = 0
    pods_moved: int = 0
    note: str = ""


def _selectors(pods: Sequence[Pod]) -> list[LabelSelector]:
    out: list[LabelSelector] = []
    for pod in pods:
        out.extend(c.selector for c in pod.spread if c.selector is not None)
        for term in (*pod.affinity, *pod.anti_affinity):
            if term.selector is not None:
                out.append(term.selector)
        for weighted in (*pod.affinity_preferred, *pod.anti_affinity_preferred):
            if weighted.term.selector is not None:
                out.append(weighted.term.selector)
    return list(dict.fromkeys(out))


def free_pods(snapshot: Snapshot, pods: Sequence[Pod]) -> set[str]:
    """Keys of the ``pods`` that may move between new nodes without changing any constraint."""
    selectors = _selectors(snapshot.pods)
    out: set[str] = set()
    for pod in pods:
        if (
            pod.spread
            or pod.has_pod_affinity()
            or pod.host_ports
            or pod.preferred_terms
            or len(pod.required_terms) > 1
        ):
            continue
        if any(s.matches(pod.labels) for s in selectors):
            continue
        out.add(pod.key)
    return out


@dataclass(slots=True)
class _Config:
    kind: int
    counts: np.ndarray  # pods per group on one node
    copies: int


def _greedy(problem: bound.Problem, solution: bound.Solution) -> list[_Config] | None:
    """Open node configurations until every pod is placed (None when that gets stuck)."""
    groups, kinds = problem.groups, problem.kinds
    n_g, n_k = len(groups), len(kinds)
    res = problem.resources
    req = np.array([[g.requests.get(r, 0) for r in res] for g in groups], dtype=np.int64).reshape(
        n_g, len(res)
    )
    alloc = np.array([[max(k.allocatable.get(r, 0), 0) for r in res] for k in kinds], dtype=np.int64).reshape(
        n_k, len(res)
    )
    price = np.array([k.price for k in kinds])
    once = np.array([bool(k.node) for k in kinds], dtype=bool)
    allowed = np.zeros((n_k, n_g), dtype=bool)
    for g, ks in enumerate(problem.allowed):
        allowed[list(ks), g] = True
    # signatures that may share a node: their requirements intersect
    sigs = sorted({g.signature for g in groups})
    sig_pos = {s: i for i, s in enumerate(sigs)}
    reqs = {g.signature: bound.alternatives(g.pods[0])[0] for g in groups}
    clash = np.array([[not reqs[a].overlaps(reqs[b]) for b in sigs] for a in sigs], dtype=bool).reshape(
        len(sigs), len(sigs)
    )
    group_sig = np.array([sig_pos[g.signature] for g in groups])
    # worth of one pod: its LP dual, or (degenerate duals) a tiny share of its cheapest node
    duals = np.array(solution.duals) if solution.duals else np.zeros(n_g)
    cheapest = np.array([price[list(problem.allowed[g])].min() for g in range(n_g)])
    worth = np.where(duals > 1e-12, duals, 1e-6 * cheapest)
    # per-node targets from the LP: z_{g,k} / x_k pods of g on each node of kind k
    target = np.zeros((n_k, n_g), dtype=np.int64)
    for (g, k), pods in solution.z.items():
        if solution.x[k] > 1e-9:
            target[k, g] = math.floor(pods / solution.x[k] + 1e-9)
    remaining = np.array([len(g.pods) for g in groups], dtype=np.int64)
    configs: list[_Config] = []
    big = np.iinfo(np.int64).max
    while remaining.any():
        room = alloc.copy()
        fill = np.zeros((n_k, n_g), dtype=np.int64)
        placed = np.zeros((n_k, len(sigs)), dtype=bool)
        for phase in (0, 1):
            for g in range(n_g):
                if remaining[g] == 0:
                    continue
                ok = allowed[:, g] & ~(placed & clash[group_sig[g]]).any(axis=1)
                need = req[g]
                fit = np.full(n_k, big, dtype=np.int64)
                for r in np.flatnonzero(need > 0):
                    fit = np.minimum(fit, room[:, r] // need[r])
                want = remaining[g] - fill[:, g]
                if phase == 0:
                    want = np.minimum(want, target[:, g])
                n = np.where(ok, np.clip(np.minimum(fit, want), 0, None), 0)
                if not n.any():
                    continue
                fill[:, g] += n
                room -= n[:, None] * need[None, :]
                placed[n > 0, group_sig[g]] = True
        value = fill @ worth
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(price > 0, value / price, np.where(value > 0, np.inf, 0.0))
        best = int(np.argmax(score))
        if value[best] <= 0:
            return None
        counts = fill[best].copy()
        used = counts > 0
        copies = 1 if once[best] else max(int((remaining[used] // counts[used]).min()), 1)
        if once[best]:
            allowed[best] = False  # room already paid for: filled once
        configs.append(_Config(best, counts, copies))
        remaining -= counts * copies
    return configs


def _next_number(claims: Sequence[PlannedClaim]) -> int:
    numbers = [int(m.group(1)) for c in claims if (m := re.search(r"(\d+)$", c.name))]
    return max(numbers, default=0) + 1


class _Pools:
    """Per NodePool: instance types, DaemonSet overhead and room as arrays (built on first use)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.by_name = {p.name: p for p in snapshot.node_pools}
        self.max_types = snapshot.settings.scheduling.max_instance_types
        self._types: dict[str, tuple[list[InstanceType], dict[str, Resources]]] = {}
        self._matrix: dict[str, tuple[np.ndarray, np.ndarray, tuple[str, ...]]] = {}
        self._allowed: dict[
            tuple[str, Requirements], tuple[np.ndarray, np.ndarray, list[frozenset[str]]]
        ] = {}

    def types(self, pool: str) -> tuple[list[InstanceType], dict[str, Resources]]:
        if pool not in self._types:
            self._types[pool] = bound.pool_types(self.snapshot, self.by_name[pool])
        return self._types[pool]

    def matrix(self, pool: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """Room for pods (types × resources), the cheapest available price per type, resource names."""
        if pool not in self._matrix:
            types, overhead = self.types(pool)
            names = tuple(sorted({k for it in types for k in it.allocatable}))
            room = np.array(
                [[it.allocatable.get(r, 0) - overhead[it.name].get(r, 0) for r in names] for it in types],
                dtype=np.int64,
            ).reshape(len(types), len(names))
            prices = [min((o.price for o in it.offerings if o.available), default=math.inf) for it in types]
            self._matrix[pool] = (room, np.array(prices, dtype=float), names)
        return self._matrix[pool]

    def need(self, pool: str, pods: Sequence[Pod]) -> np.ndarray | None:
        """Summed requests as a vector over the pool's resources (None: a resource no type has)."""
        _, _, names = self.matrix(pool)
        requests = total(podinfo.pod_requests(p) for p in pods)
        if any(v > 0 and k not in names for k, v in requests.items()):
            return None
        return np.array([requests.get(r, 0) for r in names], dtype=np.int64)

    def allowed(self, pool: str, reqs: Requirements) -> tuple[np.ndarray, np.ndarray, list[frozenset[str]]]:
        """The pool's types ``reqs`` allow with an available offering: indices, cheapest prices
        and capacity types offered (adding instance-type options to ``reqs`` changes none of it)."""
        key = (pool, reqs)
        if key not in self._allowed:
            types, _ = self.types(pool)
            index: list[int] = []
            prices: list[float] = []
            kinds: list[frozenset[str]] = []
            for i, it in enumerate(types):
                if not it.requirements.overlaps(reqs):
                    continue
                offered = [o for o in it.offerings if o.available and o.compatible(reqs)]
                if offered:
                    index.append(i)
                    prices.append(min(o.price for o in offered))
                    kinds.append(frozenset(o.capacity_type for o in offered))
            self._allowed[key] = (np.array(index, dtype=np.int64), np.array(prices, dtype=float), kinds)
        return self._allowed[key]

    def claim(
        self, name: str, pool_name: str, reqs: Requirements, pods: Sequence[Pod]
    ) -> tuple[PlannedClaim, tuple[InstanceType, ...]] | None:
        """A NodeClaim for ``pods`` under ``reqs``: every type of the pool that allows them and
        fits them beside its DaemonSets is an option (cheapest first), as the scheduler finalizes;
        with the options that share the lowest price."""
        pool = self.by_name[pool_name]
        types, overhead = self.types(pool_name)
        need = self.need(pool_name, pods)
        if need is None:
            return None
        room, _, _ = self.matrix(pool_name)
        index, prices, offered = self.allowed(pool_name, reqs)
        if not len(index):
            return None
        fits = np.flatnonzero((room[index] >= need[None, :]).all(axis=1))
        ranked = sorted(fits, key=lambda j: (prices[j], types[int(index[j])].name))[: self.max_types]
        if not ranked:
            return None
        options = [types[int(index[j])] for j in ranked]
        if reqs.has_min_values() and min_values_shortfall(options, reqs) is not None:
            return None
        lowest = prices[ranked[0]]
        tied = tuple(types[int(index[j])] for j in ranked if prices[j] <= lowest)
        capacity_types = sorted(set().union(*(offered[j] for j in ranked)))
        reqs = reqs.add(
            Requirement(labels.INSTANCE_TYPE, False, frozenset(it.name for it in options)),
            Requirement(labels.CAPACITY_TYPE, False, frozenset(capacity_types)),
        )
        smallest = min((overhead[it.name] for it in options), key=lambda r: (r.get(CPU), r.get(MEMORY)))
        claim = PlannedClaim(
            name=name,
            node_pool=pool.name,
            requirements=reqs,
            instance_types=tuple(options),
            pods=tuple(pods),
            requests=total(podinfo.pod_requests(p) for p in pods) + smallest,
            labels={**pool.labels, labels.NODEPOOL: pool.name},
            taints=pool.taints,
            startup_taints=pool.startup_taints,
        )
        return claim, tied

    def frontier(self, pool: str) -> tuple[np.ndarray, np.ndarray]:
        """Room and price of the types no cheaper-or-equal type with as much room dominates."""
        room, price, _ = self.matrix(pool)
        order = np.lexsort((-room.sum(axis=1), price))
        kept: list[int] = []
        for i in order:
            if not np.isfinite(price[i]):
                continue
            if kept and (room[kept] >= room[i]).all(axis=1).any():
                continue
            kept.append(int(i))
        return room[kept], price[kept]


def _shrunk_requirements(
    claim: PlannedClaim, pool: NodePool, pods: Sequence[Pod], respect: bool
) -> Requirements:
    """The claim's requirements with the instance-type and capacity-type options it was finalized
    with taken out again (what its NodePool and its remaining pods ask for stays)."""
    reqs = claim.requirements.without(labels.INSTANCE_TYPE, labels.CAPACITY_TYPE)
    keys = (labels.INSTANCE_TYPE, labels.CAPACITY_TYPE)
    sources = [bound.template_requirements(pool)]
    sources += [podinfo.pod_data(p, respect_preferences=respect).requirements for p in pods]
    for source in sources:
        reqs = reqs.add(*(source[k] for k in keys if k in source))
    return reqs


@dataclass(slots=True)
class _Bin:
    """A node being re-packed: a shrunk faithful NodeClaim (``fixed``: it keeps pods that may
    not move) or a new one; ``reqs`` are its requirements before instance-type options."""

    name: str
    pool: str
    reqs: Requirements
    pods: list[Pod]
    fixed: bool
    claim: PlannedClaim | None = None
    node: Launched | None = None
    need: np.ndarray | None = None

    @property
    def price(self) -> float:
        return math.inf if self.node is None else self.node.price


class _Packer:
    def __init__(
        self,
        pools: _Pools,
        catalog_order: Sequence[str],
        well_known: frozenset[str],
        labels_of: dict[str, dict[str, str]],
    ) -> None:
        self.pools = pools
        self.catalog_order = catalog_order
        self.well_known = well_known
        self.labels_of = labels_of

    def settle(self, item: _Bin) -> bool:
        """Finalize ``item``'s claim and launch it; False when no option or offering is left."""
        made = self.pools.claim(item.name, item.pool, item.reqs, item.pods)
        if made is None:
            return False
        claim, tied = made
        if item.name in self.labels_of:
            claim = replace(claim, labels=dict(self.labels_of[item.name]))
        # the launch rule over the cheapest options only (no other option can win), for speed
        node = launch(replace(claim, instance_types=tied), self.catalog_order, well_known=self.well_known)
        if node is None:
            return False
        item.claim, item.node = claim, replace(node, claim=claim)
        item.need = self.pools.need(item.pool, item.pods)
        return True

    def merge(self, bins: list[_Bin]) -> None:
        """Merge two nodes of a pool into one wherever one node costs less (never two fixed ones)."""
        while True:
            merged_any = False
            taken: set[int] = set()
            for _, i, j in self._estimates(bins):
                if i in taken or j in taken:
                    continue
                a, b = bins[i], bins[j]
                if not a.reqs.overlaps(b.reqs):
                    continue
                keep, other = (a, b) if a.fixed or not b.fixed else (b, a)
                merged = _Bin(
                    keep.name,
                    keep.pool,
                    keep.reqs.union_with(other.reqs),
                    [*keep.pods, *other.pods],
                    keep.fixed,
                )
                if not self.settle(merged) or merged.price >= a.price + b.price - 1e-9:
                    continue
                bins[i] = merged
                bins[j] = merged  # placeholder, dropped below
                taken.update((i, j))
                merged_any = True
            if not merged_any:
                return
            seen: set[int] = set()
            kept: list[_Bin] = []
            for item in bins:
                if id(item) not in seen:
                    seen.add(id(item))
                    kept.append(item)
            bins[:] = kept

    def _estimates(self, bins: list[_Bin]) -> list[tuple[float, int, int]]:
        """Pairs whose pods fit one type priced below the pair (ignoring requirements), best first."""
        out: list[tuple[float, int, int]] = []
        by_pool: dict[str, list[int]] = {}
        for i, item in enumerate(bins):
            if item.need is not None:
                by_pool.setdefault(item.pool, []).append(i)
        for pool, members in by_pool.items():
            if len(members) < 2:
                continue
            room, price = self.pools.frontier(pool)
            need = np.array([bins[i].need for i in members], dtype=np.int64)
            cost = np.array([bins[i].price for i in members])
            fixed = np.array([bins[i].fixed for i in members])
            for x in range(len(members) - 1):
                pair = need[x] + need[x + 1 :]
                fits = (pair[:, None, :] <= room[None, :, :]).all(axis=2)
                cheapest = np.where(fits, price[None, :], np.inf).min(axis=1)
                saving = cost[x] + cost[x + 1 :] - cheapest
                ok = (saving > 1e-9) & ~(fixed[x] & fixed[x + 1 :])
                out.extend(
                    (float(saving[y]), members[x], members[x + 1 + int(y)]) for y in np.flatnonzero(ok)
                )
        out.sort(key=lambda item: (-item[0], item[1], item[2]))
        return out


class _Fallback(Exception):
    """Re-packing gave up; ``pool`` names the NodePool to leave alone on the next attempt."""

    def __init__(self, note: str, pool: str = "") -> None:
        super().__init__(note)
        self.note = note
        self.pool = pool


def _limit_room(snapshot: Snapshot, pool: NodePool) -> dict[str, int] | None:
    """What the pool's limits leave after its existing nodes (None: no limits)."""
    if pool.limits is None:
        return None
    used: dict[str, int] = {}
    for state in snapshot.nodes:
        if state.node_pool != pool.name:
            continue
        capacity: Mapping[str, int] = state.allocatable
        if state.node is not None and state.node.capacity:
            capacity = state.node.capacity
        if state.claim is not None and state.claim.capacity:
            capacity = state.claim.capacity
        for key, value in (*capacity.items(), ("nodes", 1)):
            used[key] = used.get(key, 0) + value
    return {k: v - used.get(k, 0) for k, v in pool.limits.items()}


def _largest(its: Sequence[InstanceType]) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in its:
        for key, value in it.capacity.items():
            out[key] = max(out.get(key, 0), value)
    return out


def _limit_options(claim: PlannedClaim, left: dict[str, int]) -> PlannedClaim | None:
    """The claim with only the options within what the limits leave (None: none is)."""
    kept = tuple(
        it
        for it in claim.instance_types
        if all(it.capacity.get(k, 0) <= v for k, v in left.items() if k in it.capacity)
    )
    if not kept:
        return None
    if len(kept) == len(claim.instance_types):
        return claim
    reqs = claim.requirements.without(labels.CAPACITY_TYPE).add(
        Requirement(labels.INSTANCE_TYPE, False, frozenset(it.name for it in kept))
    )
    capacity_types = sorted(
        {o.capacity_type for it in kept for o in it.offerings if o.available and o.compatible(reqs)}
    )
    reqs = reqs.add(Requirement(labels.CAPACITY_TYPE, False, frozenset(capacity_types)))
    return replace(claim, instance_types=kept, requirements=reqs)


def _spend(left: dict[str, int], claim: PlannedClaim) -> None:
    """The scheduler's pessimistic rule: a claim spends its largest option's capacity and a node."""
    largest = _largest(claim.instance_types)
    for key in left:
        left[key] -= 1 if key == "nodes" else largest.get(key, 0)


def repack(
    snapshot: Snapshot,
    results: Results,
    launched: Sequence[Launched],
    *,
    catalog_order: Sequence[str] = (),
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN,
) -> Repacked:
    """Re-pack the free pods of a faithful plan's NodeClaims (see the module docstring).

    A NodePool where re-packing fails (no option for a node, ``minValues`` not met, its
    limits exceeded) is left as planned and the others are tried again.
    """
    faithful_cost = sum(node.price for node in launched)
    unchanged = Repacked(results, tuple(launched), faithful_cost, faithful_cost)
    pools = _Pools(snapshot)
    excluded: set[str] = set()
    notes: list[str] = []
    while True:
        try:
            done = _attempt(snapshot, results, launched, pools, excluded, catalog_order, well_known)
        except _Fallback as stop:
            notes.append(stop.note)
            if stop.pool and stop.pool not in excluded:
                excluded.add(stop.pool)
                continue
            return replace(unchanged, note="; ".join(notes))
        return replace(done, note="; ".join(notes))


def _attempt(
    snapshot: Snapshot,
    results: Results,
    launched: Sequence[Launched],
    pools: _Pools,
    excluded: set[str],
    catalog_order: Sequence[str],
    well_known: frozenset[str],
) -> Repacked:
    faithful_cost = sum(node.price for node in launched)
    respect = snapshot.settings.scheduling.preference_policy != "Ignore"
    free = free_pods(snapshot, [p for node in launched for p in node.claim.pods])
    touched: list[Launched] = []
    moved: list[Pod] = []
    pool_of: dict[str, str] = {}
    for node in launched:
        pool = pools.by_name.get(node.claim.node_pool)
        if pool is None or pool.name in excluded:
            continue
        going = [p for p in node.claim.pods if p.key in free]
        if going:
            touched.append(node)
            moved.extend(going)
            pool_of.update((p.key, pool.name) for p in going)
    if not moved:
        raise _Fallback("no NodeClaim holds pods free to move")
    packer = _Packer(pools, catalog_order, well_known, {n.claim.name: n.claim.labels for n in touched})
    # shrink the claims that keep pods; what their cheapest type leaves is room for the moved pods
    bins: list[_Bin] = []
    shrunk: dict[str, _Bin] = {}
    rooms: list[bound.Room] = []
    for node in touched:
        staying = [p for p in node.claim.pods if p.key not in free]
        if not staying:
            continue
        pool = pools.by_name[node.claim.node_pool]
        reqs = _shrunk_requirements(node.claim, pool, staying, respect)
        item = _Bin(node.claim.name, pool.name, reqs, staying, True)
        if not packer.settle(item):
            raise _Fallback(f"{node.claim.name} has no option once shrunk", pool.name)
        assert item.node is not None
        bins.append(item)
        shrunk[item.name] = item
        it, offering = item.node.instance_type, item.node.offering
        _, overhead = pools.types(pool.name)
        left = it.allocatable - overhead[it.name] - total(podinfo.pod_requests(p) for p in staying)
        pinned = item.reqs.add(
            Requirement.in_(labels.INSTANCE_TYPE, it.name),
            Requirement.in_(labels.ZONE, offering.zone),
            Requirement.in_(labels.CAPACITY_TYPE, offering.capacity_type),
        )
        rooms.append(bound.Room(item.name, pool.name, pinned, pool.taints, left, well_known))
    problem = bound.build_problem(snapshot, moved, existing=False, pool_of=pool_of, rooms=rooms)
    if problem.uncovered:
        raise _Fallback("some pods fit no node kind of their NodePool", pool_of[problem.uncovered[0].key])
    solution = bound.solve_lp(problem)
    if solution.status != "optimal":
        raise _Fallback(f"LP: {solution.status}")
    configs = _greedy(problem, solution)
    if configs is None:
        raise _Fallback("re-packing got stuck")
    queues = [list(g.pods) for g in problem.groups]
    number = _next_number(results.new_claims)
    for config in configs:
        kind = problem.kinds[config.kind]
        used = [g for g in range(len(problem.groups)) if config.counts[g] > 0]
        for _ in range(config.copies):
            members: list[Pod] = []
            for g in used:
                take = int(config.counts[g])
                members.extend(queues[g][:take])
                del queues[g][:take]
            if kind.node:  # room in a shrunk claim
                item = shrunk[kind.node]
            else:
                template = bound.template_requirements(pools.by_name[kind.pool])
                item = _Bin(f"{kind.pool}-{number:05d}", kind.pool, template, [], False)
                number += 1
                bins.append(item)
            item.pods.extend(members)
            for g in used:
                item.reqs = item.reqs.union_with(bound.alternatives(problem.groups[g].pods[0])[0])
    if any(queues):
        raise _Fallback("re-packing left pods behind")
    for item in bins:
        if not packer.settle(item):
            raise _Fallback(f"{item.name}: no instance-type option or offering", item.pool)
    packer.merge(bins)
    replaced = {node.claim.name for node in touched}
    # NodePool limits, as the scheduler applies them: kept claims spend first, then each
    # re-packed claim keeps only the options within what is left and spends its largest
    for pool_name in sorted({item.pool for item in bins}):
        budget = _limit_room(snapshot, pools.by_name[pool_name])
        if budget is None:
            continue
        for node in launched:
            if node.claim.node_pool == pool_name and node.claim.name not in replaced:
                _spend(budget, node.claim)
        for item in bins:
            if item.pool != pool_name:
                continue
            assert item.claim is not None and item.node is not None
            limited = _limit_options(item.claim, budget) if min(budget.values(), default=0) >= 0 else None
            if limited is None or item.node.instance_type not in limited.instance_types:
                raise _Fallback(f"re-packing NodePool {pool_name} would exceed its limits", pool_name)
            item.claim, item.node = limited, replace(item.node, claim=limited)
            _spend(budget, limited)
        if any(v < 0 for v in budget.values()):
            raise _Fallback(f"re-packing NodePool {pool_name} would exceed its limits", pool_name)
    final = {item.name: item for item in bins}
    out_launched: list[Launched] = []
    claims: list[PlannedClaim] = []
    for node in launched:
        name = node.claim.name
        if name not in replaced:
            out_launched.append(node)
            claims.append(node.claim)
        elif name in final:
            kept = final.pop(name)
            assert kept.node is not None and kept.claim is not None
            out_launched.append(kept.node)
            claims.append(kept.claim)
    for item in final.values():
        assert item.node is not None and item.claim is not None
        out_launched.append(item.node)
        claims.append(item.claim)
    old = sum(node.price for node in touched)
    new = sum(item.price for item in bins)
    if new >= old - 1e-9:
        raise _Fallback("re-packing was not cheaper than the faithful NodeClaims")
    launched_names = {node.claim.name for node in launched}
    claims += [c for c in results.new_claims if c.name not in launched_names]  # unlaunchable ones stay
    return Repacked(
        replace(results, new_claims=tuple(claims)),
        tuple(out_launched),
        faithful_cost,
        faithful_cost - old + new,
        claims_replaced=len(touched),
        claims_created=len(bins),
        pods_moved=len(moved),
    )
