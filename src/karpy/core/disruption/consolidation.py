"""Consolidation: remove or replace nodes when their pods fit elsewhere for less money.

Every decision re-runs :func:`karpy.core.scheduling.solve` on the snapshot minus the
candidates (never a second packing algorithm). ``compute`` returns a delete when no new
NodeClaim is needed, a replace when exactly one cheaper NodeClaim is (its options filtered
to those whose *worst* launch price undercuts the candidates), and nothing otherwise.
Spot-to-spot follows upstream (feature gate; single-node needs at least 15 cheaper spot
options and launches from the 15 cheapest). Multi-node binary-searches the largest prefix
of at most 100 candidates; single-node takes the first candidate that works. A solve whose
answer is already None stops early (``_stop_when``: a second new NodeClaim, or under the
spot-to-spot gate a first one certain to allow spot), or is not run at all when a moved pod
fits no other node and no NodePool could replace the node (:mod:`.room`); the reason then
says so.
``Balanced`` pools approve a move only when its savings fraction over its disruption
fraction reaches 1/2. The karpy churn guard (``karpy.sh/min-savings``) refuses smaller
savings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from karpy.core import scheduling
from karpy.core.disruption import candidates as cand_mod
from karpy.core.disruption import headroom_guard, room, verdicts
from karpy.core.disruption.types import MULTI_NODE, SINGLE_NODE, UNDERUTILIZED, Candidate, Command
from karpy.core.scheduling.cache import ObjectMemo, by_identity, domain_key_of
from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.scheduling.nodeclaim import min_values_shortfall, order_by_price
from karpy.core.scheduling.results import STOP_POOL, PlannedClaim, Results, StopWhen
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Pod
from karpy.model.requirements import Requirement, Requirements

__all__ = [
    "EARLY_STOP",
    "MIN_SAVINGS_ANNOTATION",
    "SPOT_TO_SPOT_MIN_TYPES",
    "Simulation",
    "compute",
    "multi_node",
    "simulate",
    "single_node",
    "worst_launch_price",
]

EARLY_STOP = True  # False: every solve runs to its end (the reference the property tests compare)
SPOT_TO_SPOT_MIN_TYPES = 15
MULTI_NODE_MAX = 100
BALANCED_K = 2.0
MIN_SAVINGS_ANNOTATION = "karpy.sh/min-savings"


@dataclass(frozen=True, slots=True)
class Simulation:
    results: Results
    stranded: tuple[str, ...]  # why some moved pods found no place (empty = all placed)
    nowhere: room.Nowhere | room.Crowded | None = None  # the solve was skipped: moved pods lack room


@dataclass(frozen=True, slots=True)
class _Shared:
    """What every solve of a pass over one snapshot starts from."""

    pending: tuple[Pod, ...]
    deleting: cand_mod.Leaving  # deleting nodes, with their currently reschedulable pods


# Per snapshot object: the solves of one pass differ only by their candidates.
_SHARED: ObjectMemo[_Shared] = ObjectMemo(4)
_VERDICTS = verdicts.Verdicts()  # verdicts of earlier passes over the same objects


def _shared(snapshot: Snapshot) -> _Shared:
    return _Shared(snapshot.pending_pods(), cand_mod.leaving_pods(snapshot))


def simulate(
    snapshot: Snapshot,
    chosen: Sequence[Candidate],
    *,
    consolidation: bool,
    stop: Callable[[Sequence[Sequence[Pod]]], StopWhen | None] | None = None,
    room_checked: bool = False,
    caches: SchedulingCaches | None = None,
) -> Simulation:
    """Solve the snapshot minus ``chosen``: pending pods + their pods + pods of deleting nodes.

    ``stop`` (given the pods to place, in the tuples they come in: the pending pods, each
    candidate's moved pods, each deleting node's pods) may end the solve early; see
    ``Results.stopped``. With a stop, a consolidation solve whose answer
    :func:`karpy.core.disruption.room.unplaceable` already knows is not run: ``nowhere`` says
    why, and the results are empty (``room_checked``: the caller asked it already, with the
    same stop, and it knew nothing). ``caches``: the caller's (default: a fresh one).
    """
    caches = caches if caches is not None else SchedulingCaches()
    names, groups = _parts(snapshot, chosen)
    when = stop(groups) if stop is not None else None
    if when is not None and consolidation and not room_checked:
        nowhere = room.unplaceable(snapshot, frozenset(names), [c.moved for c in chosen], when, caches)
        if nowhere is not None:
            return Simulation(Results((), {}, (), {}), (), nowhere)
    kept = headroom_guard.pods(snapshot) if consolidation else []  # an open karpy.sh/headroom's pieces
    pods = [p for group in groups for p in group] + kept
    results = scheduling.solve(
        snapshot, pods, consolidation=consolidation, stop=when, without=frozenset(names), caches=caches
    )
    if results.stopped:
        return Simulation(results, ())
    moved = [p for c in chosen for p in c.moved] + kept  # pieces too need initialized room
    errors = {e.pod.key: e for e in results.errors}
    stranded = [f"{p.key}: {errors[p.key].summary()}" for p in moved if p.key in errors]
    by_name = {n.name: n for n in snapshot.nodes if n.name not in names}
    moved_keys = {p.key for p in moved}
    for pod_key, node_name in sorted(results.existing.items()):
        node = by_name.get(node_name)
        if node is not None and not node.initialized and pod_key in moved_keys:
            stranded.append(f"{pod_key}: would land on uninitialized node {node_name}")
    return Simulation(results, tuple(stranded))


def _parts(snapshot: Snapshot, chosen: Sequence[Candidate]) -> tuple[set[str], tuple[Sequence[Pod], ...]]:
    """A solve's candidate names and its groups of pods to place."""
    names = {c.name for c in chosen}
    shared = _SHARED.of(snapshot, _shared)
    deleting = [pods for name, pods in shared.deleting if name not in names]
    groups = (shared.pending, *(c.moved for c in chosen), *deleting)
    return names, groups


_SPOT_GATE = "SpotToSpotConsolidation is disabled: a spot node is not replaced by a spot node"
_SPOT_GATE_NEW_NODE = "would need a new node, and " + _SPOT_GATE

# Per snapshot object (the solves of one pass): the facts of ``SchedulingCaches.pool_facts`` and
# ``SchedulingCaches.bound_ct_anti``.
_STOP_FACTS: ObjectMemo[tuple[bool, frozenset[str], bool]] = ObjectMemo(4)
# Per pod object: whether it names the capacity-type key.
_MENTIONS_CT: ObjectMemo[bool] = ObjectMemo(16384)
# Per pod tuple (the pending pods of a pass, a candidate's moved pods, a deleting node's pods):
# whether one of them names it (asked for every solve; the tuples outlive a pass).
_GROUP_MENTIONS_CT: ObjectMemo[bool] = ObjectMemo(4096)


def _excluded(nowhere: room.Nowhere | room.Crowded) -> str:
    return (
        f"{nowhere.in_window} inside their consolidateAfter window, {nowhere.unready} not initialized, "
        "the rest too full or tainted"
    )


def _nowhere_reason(nowhere: room.Nowhere | room.Crowded) -> str:
    if isinstance(nowhere, room.Crowded):
        then = f"would need a new node, and {_SPOT_GATE}" if nowhere.new_node else "no NodePool can take them"
        return (
            f"pods would not all fit elsewhere: {nowhere.count} moved pods ask for at least "
            f"{nowhere.least.format()} each, and the {nowhere.others} other nodes ({_excluded(nowhere)}) "
            f"have room for {nowhere.slots}; the rest {then}"
        )
    then = f"would need a new node, and {_SPOT_GATE}" if nowhere.new_node else "no NodePool can take it"
    return (
        f"pods would not all fit elsewhere: {nowhere.pod} fits on none of the {nowhere.others} other "
        f"nodes ({_excluded(nowhere)}); it {then}"
    )


def _stop_when(
    snapshot: Snapshot,
    groups: Sequence[Sequence[Pod]],
    spot_gate: bool,
    caches: SchedulingCaches | None = None,
) -> StopWhen | None:
    """When a consolidation solve of the pods in ``groups`` can stop because ``compute``'s answer
    is already None.

    ``compute`` refuses two or more new NodeClaims, so the solve may stop at the second,
    unless finalizing could drop a claim (only minValues can): no stop then. Under the
    spot-to-spot gate (``spot_gate``: all candidates spot, the feature off) one new NodeClaim
    is refused too when it will certainly allow spot: its NodePool allows spot, each of its
    available offerings has an available spot sibling in the same zone, and nothing can narrow
    its capacity type (no pod of the solve, nor a bound pod's anti-affinity, names that key).
    """
    no_min_values, spot_pools, bound_ct_anti = _STOP_FACTS.get(
        snapshot, lambda: _stop_facts(snapshot, caches if caches is not None else SchedulingCaches())
    )
    if not no_min_values or not EARLY_STOP:
        return None
    if (
        not spot_gate
        or not spot_pools
        or bound_ct_anti
        or any(_GROUP_MENTIONS_CT.of(g, _any_mentions_capacity_type) for g in groups)
    ):
        spot_pools = frozenset()
    return StopWhen(1, spot_pools)


def _stop_facts(snapshot: Snapshot, caches: SchedulingCaches) -> tuple[bool, frozenset[str], bool]:
    """(no NodePool has minValues, the NodePools whose claims allow spot, a bound pod's required
    anti-affinity is keyed on capacity type): what every solve's stop of a pass reads."""
    no_min_values, spot_pools = caches.pool_facts.get(
        domain_key_of(snapshot.node_pools, snapshot.instance_types), lambda: _pool_facts(snapshot)
    )
    bound_ct_anti = caches.bound_ct_anti.get(
        (by_identity(snapshot.pods),),
        lambda: any(t.topology_key == labels.CAPACITY_TYPE for p in snapshot.pods for t in p.anti_affinity),
    )
    return no_min_values, spot_pools, bound_ct_anti


def _pool_facts(snapshot: Snapshot) -> tuple[bool, frozenset[str]]:
    no_min_values = True
    spot_pools = set()
    for pool in snapshot.node_pools:
        reqs = pool.requirement_set()
        if reqs.has_min_values():
            no_min_values = False
        ct = reqs.get(labels.CAPACITY_TYPE)
        if ct is not None and not ct.has(labels.CAPACITY_TYPE_SPOT):
            continue
        siblings = True
        for it in snapshot.instance_types.get(pool.name, ()):
            available = [o for o in it.offerings if o.available]
            spot = {o.zone for o in available if o.capacity_type == labels.CAPACITY_TYPE_SPOT}
            if any(o.zone not in spot for o in available):
                siblings = False
                break
        if siblings:
            spot_pools.add(pool.name)
    return no_min_values, frozenset(spot_pools)


def _any_mentions_capacity_type(pods: Sequence[Pod]) -> bool:
    return any(_MENTIONS_CT.of(p, _mentions_capacity_type) for p in pods)


def _mentions_capacity_type(pod: Pod) -> bool:
    """Whether the pod's node requirements or topology terms could narrow a claim's capacity type."""
    ct = labels.CAPACITY_TYPE
    if ct in pod.node_selector:
        return True
    terms = [*pod.required_terms, *(w.term for w in pod.preferred_terms)]
    if any(r.key == ct for term in terms for r in term.requirements):
        return True
    keys = [c.topology_key for c in pod.spread]
    keys += [t.topology_key for t in (*pod.affinity, *pod.anti_affinity)]
    keys += [w.term.topology_key for w in (*pod.affinity_preferred, *pod.anti_affinity_preferred)]
    return ct in keys


def worst_launch_price(it: InstanceType, reqs: Requirements) -> float:
    prices = [o.price for o in it.offerings if o.available and o.compatible(reqs)]
    return max(prices) if prices else math.inf


def _with_options(
    claim: PlannedClaim, its: Sequence[InstanceType], reqs: Requirements | None = None
) -> PlannedClaim:
    requirements = reqs if reqs is not None else claim.requirements
    type_req = requirements.get(labels.INSTANCE_TYPE)
    min_values = type_req.min_values if type_req is not None else None
    requirements = requirements.without(labels.INSTANCE_TYPE).add(
        Requirement(labels.INSTANCE_TYPE, False, frozenset(it.name for it in its), min_values=min_values)
    )
    return dataclasses.replace(claim, requirements=requirements, instance_types=tuple(its))


def _min_savings(candidates: Sequence[Candidate]) -> float | None:
    texts = {c.pool.meta_annotations.get(MIN_SAVINGS_ANNOTATION) for c in candidates} - {None}
    fractions = []
    for text in texts:
        assert text is not None
        try:
            fractions.append(float(text.rstrip("%")) / 100 if text.endswith("%") else float(text))
        except ValueError:
            continue
    return max(fractions) if fractions else None


def _balanced_ok(
    snapshot: Snapshot, chosen: Sequence[Candidate], savings: float, all_candidates: Sequence[Candidate]
) -> tuple[bool, str]:
    pools = {c.pool.name for c in chosen}
    if not any(c.pool.disruption.consolidation_policy == "Balanced" for c in chosen):
        return True, ""
    pool_cost = sum(c.price or 0.0 for c in all_candidates if c.pool.name in pools)
    pool_disruption = sum(c.reschedule_cost for c in all_candidates if c.pool.name in pools)
    disruption = sum(c.reschedule_cost for c in chosen)
    if pool_cost <= 0 or pool_disruption <= 0 or disruption <= 0:
        return True, ""
    score = (savings / pool_cost) / (disruption / pool_disruption)
    ok = score >= 1 / BALANCED_K
    return ok, f"Balanced score {score:.2f} {'>=' if ok else '<'} {1 / BALANCED_K:.2f}"


def compute(
    snapshot: Snapshot,
    chosen: Sequence[Candidate],
    *,
    all_candidates: Sequence[Candidate] = (),
    method: str,
    caches: SchedulingCaches | None = None,
) -> tuple[Command | None, str]:
    """One consolidation option for ``chosen``, or None with the reason (the same as an earlier
    pass's when everything it reads is the same: :mod:`.verdicts`). ``caches``: the caller's
    (default: a fresh one)."""
    shared = caches if caches is not None else SchedulingCaches()
    nowhere = _no_room(snapshot, chosen, shared)
    if nowhere is not None:  # what ``_compute`` answers first, without a solve: no need to file it
        return None, _nowhere_reason(nowhere)
    return _VERDICTS.get(
        snapshot,
        chosen,
        all_candidates,
        method + headroom_guard.key(snapshot),
        EARLY_STOP,
        lambda: headroom_guard.explain(
            snapshot,
            chosen,
            _compute(snapshot, chosen, all_candidates=all_candidates, method=method, caches=shared),
        ),
        shared,
    )


def _spot_gate(snapshot: Snapshot, chosen: Sequence[Candidate]) -> bool:
    """All candidates spot and the spot-to-spot feature off."""
    return not snapshot.settings.features.spot_to_spot_consolidation and all(
        c.capacity_type == labels.CAPACITY_TYPE_SPOT for c in chosen
    )


def _no_room(
    snapshot: Snapshot, chosen: Sequence[Candidate], caches: SchedulingCaches
) -> room.Nowhere | room.Crowded | None:
    """The room check ``_compute``'s simulation starts with (the same stop, the same pods)."""
    names, groups = _parts(snapshot, chosen)
    when = _stop_when(snapshot, groups, _spot_gate(snapshot, chosen), caches)
    if when is None:
        return None
    # the candidates' own tuples of pods, which the room check recognises again
    return room.unplaceable(snapshot, frozenset(names), [c.moved for c in chosen], when, caches)


def _compute(
    snapshot: Snapshot,
    chosen: Sequence[Candidate],
    *,
    all_candidates: Sequence[Candidate],
    method: str,
    caches: SchedulingCaches,
) -> tuple[Command | None, str]:
    spot_gate = _spot_gate(snapshot, chosen)
    sim = simulate(
        snapshot,
        chosen,
        consolidation=True,
        stop=lambda groups: _stop_when(snapshot, groups, spot_gate, caches),
        room_checked=True,  # by ``compute``, before it came here
        caches=caches,
    )
    refused = _refused(sim, chosen)
    if refused:
        return None, refused
    price = sum(c.price for c in chosen if c.price is not None)
    names = tuple(c.name for c in chosen)
    new_claims = sim.results.new_claims
    if not new_claims:
        ok, why = _balanced_ok(snapshot, chosen, price, all_candidates)
        if not ok:
            return None, why
        return Command(UNDERUTILIZED, method, names, (), price, "pods fit on other nodes"), ""
    if len(new_claims) > 1:
        return None, f"would need {len(new_claims)} new nodes"
    options = _cheaper_options(snapshot, chosen, new_claims[0], price)
    if isinstance(options, str):
        return None, options
    return _replace(snapshot, chosen, options, price, all_candidates=all_candidates, method=method)


def _refused(sim: Simulation, chosen: Sequence[Candidate]) -> str:
    """Why the simulation already rules the move out (stopped, stranded pods, no price), or ""."""
    if sim.results.stopped == STOP_POOL:
        return _SPOT_GATE_NEW_NODE
    if sim.results.stopped:
        return "would need more than one new node"
    if sim.stranded:
        return "pods would not all fit elsewhere: " + sim.stranded[0]
    if any(c.price is None for c in chosen):
        return "no price known for the node's offering"
    return ""


@dataclass(frozen=True, slots=True)
class _Options:
    """A replacement's claim with the options cheaper than the candidates, and its requirements."""

    claim: PlannedClaim
    cheaper: list[InstanceType]
    requirements: Requirements


def _cheaper_options(
    snapshot: Snapshot, chosen: Sequence[Candidate], claim: PlannedClaim, price: float
) -> _Options | str:
    """The options of the one new claim whose worst launch price undercuts ``price``, under the
    spot-to-spot rules, or why there are none."""
    its = order_by_price(claim.instance_types, claim.requirements)
    ct = claim.requirements.get(labels.CAPACITY_TYPE)
    all_spot = all(c.capacity_type == labels.CAPACITY_TYPE_SPOT for c in chosen)
    reqs = claim.requirements
    spot_to_spot = all_spot and (ct is None or ct.has(labels.CAPACITY_TYPE_SPOT))
    if spot_to_spot:
        if not snapshot.settings.features.spot_to_spot_consolidation:
            return _SPOT_GATE
        reqs = reqs.add(Requirement.in_(labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_SPOT))
    cheaper = [it for it in its if worst_launch_price(it, reqs) < price]
    if reqs.has_min_values() and min_values_shortfall(cheaper, reqs) is not None:
        return "cheaper options do not meet minValues"
    if not cheaper:
        return f"no replacement is cheaper than ${price:.4f}/h"
    if spot_to_spot and len(chosen) == 1:  # spot to on-demand has no such rule (upstream)
        if len(cheaper) < SPOT_TO_SPOT_MIN_TYPES:
            return f"spot-to-spot needs {SPOT_TO_SPOT_MIN_TYPES} cheaper spot options, found {len(cheaper)}"
        cheaper = cheaper[:SPOT_TO_SPOT_MIN_TYPES]
    elif ct is not None and ct.has(labels.CAPACITY_TYPE_SPOT) and ct.has(labels.CAPACITY_TYPE_ON_DEMAND):
        # priced assuming spot: never fall back to a pricier on-demand replacement
        reqs = reqs.add(Requirement.in_(labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_SPOT))
    return _Options(claim, cheaper, reqs)


def _replace(
    snapshot: Snapshot,
    chosen: Sequence[Candidate],
    options: _Options,
    price: float,
    *,
    all_candidates: Sequence[Candidate],
    method: str,
) -> tuple[Command | None, str]:
    """The replace command with ``options``, unless its savings are too small."""
    cheaper = options.cheaper
    replacement = _with_options(options.claim, cheaper, options.requirements)
    launch_price = min(
        (
            o.price
            for it in cheaper
            for o in it.offerings
            if o.available and o.compatible(replacement.requirements)
        ),
        default=price,
    )
    savings = price - launch_price
    floor = _min_savings(chosen)
    if floor is not None and savings < floor * price:
        return None, f"saves {savings / price:.0%}, below karpy.sh/min-savings {floor:.0%}"
    ok, why = _balanced_ok(snapshot, chosen, savings, all_candidates)
    if not ok:
        return None, why
    names = tuple(c.name for c in chosen)
    return Command(UNDERUTILIZED, method, names, (replacement,), savings, "replace with a cheaper node"), ""


def _filter_same_type(command: Command, chosen: Sequence[Candidate]) -> Command | None:
    """Multi-node: a replacement of a type being removed must undercut that node's price."""
    if not command.replacements:
        return command
    replacement = command.replacements[0]
    existing: dict[str, float] = {}
    for c in chosen:
        if c.instance_type is None or c.price is None:
            continue
        existing[c.instance_type.name] = min(existing.get(c.instance_type.name, math.inf), c.price)
    ceiling = min(
        (existing[it.name] for it in replacement.instance_types if it.name in existing), default=math.inf
    )
    kept = [
        it for it in replacement.instance_types if worst_launch_price(it, replacement.requirements) < ceiling
    ]
    if not kept:
        return None
    return dataclasses.replace(command, replacements=(_with_options(replacement, kept),))


def multi_node(
    snapshot: Snapshot,
    ordered: Sequence[Candidate],
    all_candidates: Sequence[Candidate],
    caches: SchedulingCaches | None = None,
) -> tuple[Command | None, str]:
    """The largest prefix (2..100) of ``ordered`` that one delete or one replace can remove."""
    batch = list(ordered[:MULTI_NODE_MAX])
    if len(batch) < 2:
        return None, "fewer than two candidates"
    low, high = 1, len(batch) - 1
    best: Command | None = None
    last_reason = ""
    while low <= high:
        mid = (low + high) // 2
        prefix = batch[: mid + 1]
        command, reason = compute(
            snapshot, prefix, all_candidates=all_candidates, method=MULTI_NODE, caches=caches
        )
        if command is not None:
            command = _filter_same_type(command, prefix)
            if command is None:
                reason = "the replacement is not cheaper than keeping one of the nodes"
        if command is not None:
            best = command
            low = mid + 1
        else:
            last_reason = reason
            high = mid - 1
    return best, last_reason


def single_node(
    snapshot: Snapshot,
    ordered: Sequence[Candidate],
    all_candidates: Sequence[Candidate],
    skip: set[str],
    caches: SchedulingCaches | None = None,
) -> tuple[Command | None, dict[str, str]]:
    """The first candidate (pools interleaved round-robin) that consolidation can remove."""
    by_pool: dict[str, list[Candidate]] = {}
    for c in ordered:
        by_pool.setdefault(c.pool.name, []).append(c)
    interleaved: list[Candidate] = []
    queues = [by_pool[name] for name in sorted(by_pool)]
    while any(queues):
        for queue in queues:
            if queue:
                interleaved.append(queue.pop(0))
    reasons: dict[str, str] = {}
    for candidate in interleaved:
        if candidate.name in skip:
            continue
        command, reason = compute(
            snapshot, [candidate], all_candidates=all_candidates, method=SINGLE_NODE, caches=caches
        )
        if command is not None:
            return command, reasons
        reasons[candidate.name] = reason
    return None, reasons
