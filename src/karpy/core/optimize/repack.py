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

The free pods are grouped and the LP of :mod:`karpy.core.optimize.bound` is solved for them alone.
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

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from karpy.core.optimize import bound, greedy, limits
from karpy.core.optimize import pools as pools_mod
from karpy.core.optimize.packer import Bin, Packer, shrunk_requirements
from karpy.core.scheduling import Launched, PlannedClaim, Results, podinfo
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.objects import Pod
from karpy.model.requirements import Requirement
from karpy.model.resources import total
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


def _next_number(claims: Sequence[PlannedClaim]) -> int:
    numbers = [int(m.group(1)) for c in claims if (m := re.search(r"(\d+)$", c.name))]
    return max(numbers, default=0) + 1


class _Fallback(Exception):
    """Re-packing gave up; ``pool`` names the NodePool to leave alone on the next attempt."""

    def __init__(self, note: str, pool: str = "") -> None:
        super().__init__(note)
        self.note = note
        self.pool = pool


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
    pools = pools_mod.Pools(snapshot)
    excluded: set[str] = set()
    notes: list[str] = []
    while True:
        try:
            done = _attempt(
                snapshot,
                results,
                launched,
                pools=pools,
                excluded=excluded,
                catalog_order=catalog_order,
                well_known=well_known,
            )
        except _Fallback as stop:
            notes.append(stop.note)
            if stop.pool and stop.pool not in excluded:
                excluded.add(stop.pool)
                continue
            return replace(unchanged, note="; ".join(notes))
        return replace(done, note="; ".join(notes))


@dataclass(slots=True)
class _Moving:
    """The faithful NodeClaims a re-packing touches and the free pods it moves off them."""

    free: set[str]
    touched: list[Launched]
    moved: list[Pod]
    pool_of: dict[str, str]  # pod key -> the NodePool the faithful plan chose


@dataclass(slots=True)
class _Shrunk:
    """The touched claims that keep pods, shrunk to them, and the room each leaves."""

    bins: list[Bin]
    by_name: dict[str, Bin]
    rooms: list[bound.Room]


def _moving(
    snapshot: Snapshot, launched: Sequence[Launched], pools: pools_mod.Pools, excluded: set[str]
) -> _Moving:
    """The free pods of every launched claim whose NodePool is not ``excluded``."""
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
    return _Moving(free, touched, moved, pool_of)


def _room_left(item: Bin, pools: pools_mod.Pools, well_known: frozenset[str]) -> bound.Room:
    """What a settled shrunk claim's chosen type leaves beside its DaemonSets and its pods,
    pinned to that type, zone and capacity type."""
    assert item.node is not None
    pool = pools.by_name[item.pool]
    it, offering = item.node.instance_type, item.node.offering
    _, overhead = pools.types(pool.name)
    left = it.allocatable - overhead[it.name] - total(podinfo.pod_requests(p) for p in item.pods)
    pinned = item.reqs.add(
        Requirement.in_(labels.INSTANCE_TYPE, it.name),
        Requirement.in_(labels.ZONE, offering.zone),
        Requirement.in_(labels.CAPACITY_TYPE, offering.capacity_type),
    )
    return bound.Room(item.name, pool.name, pinned, pool.taints, left, well_known)


def _shrink(moving: _Moving, *, packer: Packer, respect: bool, well_known: frozenset[str]) -> _Shrunk:
    """Shrink the claims that keep pods; what their cheapest type leaves is room for the moved pods."""
    pools = packer.pools
    out = _Shrunk([], {}, [])
    for node in moving.touched:
        staying = [p for p in node.claim.pods if p.key not in moving.free]
        if not staying:
            continue
        pool = pools.by_name[node.claim.node_pool]
        reqs = shrunk_requirements(node.claim, pool, staying, respect)
        item = Bin(node.claim.name, pool.name, reqs, staying, True)
        if not packer.settle(item):
            raise _Fallback(f"{node.claim.name} has no option once shrunk", pool.name)
        out.bins.append(item)
        out.by_name[item.name] = item
        out.rooms.append(_room_left(item, pools, well_known))
    return out


def _configs(
    snapshot: Snapshot, moving: _Moving, rooms: list[bound.Room]
) -> tuple[bound.Problem, list[greedy.Config]]:
    """The LP over the moved pods (with the shrunk claims' room) and the configurations opened from it."""
    problem = bound.build_problem(snapshot, moving.moved, existing=False, pool_of=moving.pool_of, rooms=rooms)
    if problem.uncovered:
        raise _Fallback(
            "some pods fit no node kind of their NodePool", moving.pool_of[problem.uncovered[0].key]
        )
    solution = bound.solve_lp(problem)
    if solution.status != "optimal":
        raise _Fallback(f"LP: {solution.status}")
    configs = greedy.open_configs(problem, solution)
    if configs is None:
        raise _Fallback("re-packing got stuck")
    return problem, configs


def _fill(
    problem: bound.Problem,
    configs: list[greedy.Config],
    *,
    pools: pools_mod.Pools,
    shrunk: _Shrunk,
    number: int,
) -> None:
    """Put the pods of every opened configuration into a shrunk claim's room or a new bin
    (appended to ``shrunk.bins``, numbered from ``number``)."""
    queues = [list(g.pods) for g in problem.groups]
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
                item = shrunk.by_name[kind.node]
            else:
                template = bound.template_requirements(pools.by_name[kind.pool])
                item = Bin(f"{kind.pool}-{number:05d}", kind.pool, template, [], False)
                number += 1
                shrunk.bins.append(item)
            item.pods.extend(members)
            for g in used:
                item.reqs = item.reqs.union_with(bound.alternatives(problem.groups[g].pods[0])[0])
    if any(queues):
        raise _Fallback("re-packing left pods behind")


def _assemble(
    launched: Sequence[Launched], bins: Sequence[Bin], replaced: set[str]
) -> tuple[list[Launched], list[PlannedClaim]]:
    """The launched nodes and claims of the plan: untouched ones as planned, a re-packed claim
    in its faithful place, new ones after them."""
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
    return out_launched, claims


def _attempt(
    snapshot: Snapshot,
    results: Results,
    launched: Sequence[Launched],
    *,
    pools: pools_mod.Pools,
    excluded: set[str],
    catalog_order: Sequence[str],
    well_known: frozenset[str],
) -> Repacked:
    """One re-packing of every NodePool but the ``excluded`` ones (raises :class:`_Fallback`)."""
    faithful_cost = sum(node.price for node in launched)
    respect = snapshot.settings.scheduling.preference_policy != "Ignore"
    moving = _moving(snapshot, launched, pools, excluded)
    packer = Packer(pools, catalog_order, well_known, {n.claim.name: n.claim.labels for n in moving.touched})
    shrunk = _shrink(moving, packer=packer, respect=respect, well_known=well_known)
    problem, configs = _configs(snapshot, moving, shrunk.rooms)
    _fill(problem, configs, pools=pools, shrunk=shrunk, number=_next_number(results.new_claims))
    bins = shrunk.bins
    for item in bins:
        if not packer.settle(item):
            raise _Fallback(f"{item.name}: no instance-type option or offering", item.pool)
    packer.merge(bins)
    replaced = {node.claim.name for node in moving.touched}
    over = limits.exceeded_pool(
        snapshot=snapshot, by_name=pools.by_name, launched=launched, bins=bins, replaced=replaced
    )
    if over is not None:
        raise _Fallback(f"re-packing NodePool {over} would exceed its limits", over)
    out_launched, claims = _assemble(launched, bins, replaced)
    old = sum(node.price for node in moving.touched)
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
        claims_replaced=len(moving.touched),
        claims_created=len(bins),
        pods_moved=len(moving.moved),
    )
