"""Hypothesis properties of ``solve(snapshot, pods)`` and ``launch(claim, catalog_order)``.

Random scenarios: a small catalog (cpu/memory/pods, arch, zones, capacity types, some
unavailable offerings), one to three NodePools (zone/arch/capacity-type requirements, an
optional NoSchedule taint, an optional cpu limit), optional existing nodes with bound
pods, and pending pods with requests, zone/arch selectors, required node-affinity terms,
tolerations, DoNotSchedule topology spread (zonal or per hostname), hostname
anti-affinity to a shared label and host ports. Every property is checked against the
*launched* nodes (``launch`` on each planned claim), i.e. what the cluster would get.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from karpy.core.scheduling import Launched, Results, launch, solve
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType, Offering
from karpy.model.objects import Node, NodePool, NodeSelectorTerm, Pod, TopologySpreadConstraint
from karpy.model.requirements import DOES_NOT_EXIST, NOT_IN, Requirement, Requirements
from karpy.model.resources import CPU, PODS, Resources, total
from karpy.model.taints import NO_SCHEDULE, Taint, Toleration, first_untolerated

ZONES = b.ZONES
ARCHES = ("amd64", "arm64")
CAPACITY_TYPES = ("spot", "on-demand")
SHARED = {"group": "shared"}
TEAM_TAINTS = (Taint("team", NO_SCHEDULE, "a"), Taint("team", NO_SCHEDULE, "b"))

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def subset(items: Sequence[str], *, min_size: int = 1) -> st.SearchStrategy[tuple[str, ...]]:
    """A non-empty ordered subset of ``items`` (keeps the given order)."""
    return st.lists(st.sampled_from(items), min_size=min_size, max_size=len(items), unique=True).map(
        lambda chosen: tuple(i for i in items if i in chosen)
    )


# -- scenario generation ------------------------------------------------------------------------


@st.composite
def catalogs(draw: st.DrawFn) -> list[InstanceType]:
    count = draw(st.integers(1, 4))
    types: list[InstanceType] = []
    for index in range(count):
        zones = draw(subset(ZONES))
        cts = draw(subset(CAPACITY_TYPES))
        offerings = []
        for zone, ct in itertools.product(zones, cts):
            price = draw(st.integers(1, 6)) / 10  # small integers so that price ties happen
            offerings.append(Offering(zone, ct, price, available=draw(st.integers(0, 5)) > 0))
        types.append(
            b.instance_type(
                f"type-{index}",
                cpu=draw(st.sampled_from(["1", "2", "4", "8"])),
                memory=draw(st.sampled_from(["1Gi", "2Gi", "4Gi", "8Gi", "16Gi"])),
                pods=draw(st.sampled_from(["2", "4", "10"])),
                arch=draw(st.sampled_from(ARCHES)),
                offerings=offerings,
            )
        )
    return types


@st.composite
def node_pools(draw: st.DrawFn) -> list[NodePool]:
    names = draw(st.lists(st.sampled_from(["alpha", "beta", "gamma"]), min_size=1, max_size=3, unique=True))
    pools = []
    for name in names:
        reqs: list[Requirement] = []
        zone_kind = draw(st.sampled_from(["none", "in", "notin"]))
        if zone_kind == "in":
            reqs.append(Requirement.of(wk.ZONE, "In", draw(subset(ZONES))))
        elif zone_kind == "notin":
            reqs.append(Requirement.of(wk.ZONE, "NotIn", [draw(st.sampled_from(ZONES))]))
        if draw(st.booleans()):
            reqs.append(Requirement.of(wk.ARCH, "In", [draw(st.sampled_from(ARCHES))]))
        if draw(st.booleans()):
            reqs.append(Requirement.of(wk.CAPACITY_TYPE, "In", [draw(st.sampled_from(CAPACITY_TYPES))]))
        taint = draw(st.none() | st.sampled_from(TEAM_TAINTS))
        limit = draw(st.none() | st.sampled_from(["4", "8", "16", "32"]))
        pools.append(
            b.node_pool(
                name,
                weight=draw(st.integers(0, 2)),
                requirements=reqs,
                taints=[taint] if taint else [],
                limits={"cpu": limit} if limit else None,
            )
        )
    return pools


@dataclass(frozen=True)
class SpreadGroup:
    """Pods of one spread group share the constraint and their node selection exactly.

    Sharing the node selection makes every member own the *same* topology group (same
    node filter), which is what makes the final-count check below exact.
    """

    name: str
    key: str
    max_skew: int
    node_selector: Mapping[str, str]
    required_terms: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]

    def constraint(self) -> TopologySpreadConstraint:
        return b.spread(self.key, max_skew=self.max_skew, match_labels={"sg": self.name})


@st.composite
def spread_groups(draw: st.DrawFn) -> list[SpreadGroup]:
    groups = []
    for name in ("s1", "s2"):
        key = draw(st.sampled_from([wk.ZONE, wk.HOSTNAME]))
        selector: dict[str, str] = {}
        terms: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] = ()
        choice = draw(st.sampled_from(["none", "selector", "term"]))
        if choice == "selector":
            selector = {wk.ZONE: draw(st.sampled_from(ZONES))}
        elif choice == "term":
            op = draw(st.sampled_from(["In", "NotIn"]))
            terms = (((wk.ZONE, op, draw(subset(ZONES))),),)
        groups.append(SpreadGroup(name, key, draw(st.integers(1, 2)), selector, terms))
    return groups


TOLERATIONS = (
    (),
    (Toleration("team", "Equal", "a"),),
    (Toleration("team", "Equal", "b"),),
    (Toleration("team", "Exists"),),
    (Toleration("", "Exists"),),
)


@st.composite
def pending_pods(draw: st.DrawFn, groups: Sequence[SpreadGroup]) -> list[Pod]:
    count = draw(st.integers(1, 10))
    pods = []
    for index in range(count):
        pod_labels: dict[str, str] = {}
        node_selector: dict[str, str] = {}
        required: list[list[tuple[str, str, tuple[str, ...]]]] = []
        spread: list[TopologySpreadConstraint] = []
        group = draw(st.none() | st.sampled_from(list(groups)))
        if group is not None:
            pod_labels["sg"] = group.name
            node_selector = dict(group.node_selector)
            required = [list(term) for term in group.required_terms]
            spread = [group.constraint()]
        else:
            if draw(st.booleans()):
                key = draw(st.sampled_from([wk.ZONE, wk.ARCH]))
                node_selector = {key: draw(st.sampled_from(ZONES if key == wk.ZONE else ARCHES))}
            for _ in range(draw(st.integers(0, 2))):
                required.append([(wk.ZONE, draw(st.sampled_from(["In", "NotIn"])), draw(subset(ZONES)))])
        anti = draw(st.booleans())
        if anti or draw(st.integers(0, 3)) == 0:
            pod_labels.update(SHARED)
        ports = draw(st.sampled_from([(), (), (8080,), (9090,), (8080, 9090)]))
        pods.append(
            b.pod(
                f"pod-{index}",
                cpu=draw(st.sampled_from(["0", "100m", "500m", "1", "1500m", "3"])),
                memory=draw(st.sampled_from(["0", "128Mi", "512Mi", "1Gi", "3Gi"])),
                labels=pod_labels,
                node_selector=node_selector,
                required_terms=required,
                tolerations=draw(st.sampled_from(TOLERATIONS)),
                spread=spread,
                anti_affinity=[b.anti_affinity_term(SHARED)] if anti else [],
                host_ports=list(ports),
            )
        )
    return pods


@st.composite
def existing(draw: st.DrawFn, pools: Sequence[NodePool]) -> tuple[list[Node], list[Pod]]:
    nodes: list[Node] = []
    bound: list[Pod] = []
    for index in range(draw(st.integers(0, 2))):
        name = f"node-{index}"
        node_labels = {wk.ZONE: draw(st.sampled_from(ZONES)), wk.ARCH: draw(st.sampled_from(ARCHES))}
        if draw(st.booleans()):
            node_labels[wk.NODEPOOL] = draw(st.sampled_from([p.name for p in pools]))
        taint = draw(st.none() | st.sampled_from(TEAM_TAINTS))
        nodes.append(
            b.node(
                name,
                labels=node_labels,
                allocatable={
                    "cpu": draw(st.sampled_from(["1", "2", "4"])),
                    "memory": draw(st.sampled_from(["1Gi", "4Gi"])),
                    "pods": "6",
                },
                taints=[taint] if taint else [],
            )
        )
        shared_used = port_used = False
        for j in range(draw(st.integers(0, 3))):
            pod_labels: dict[str, str] = {}
            if draw(st.booleans()):
                pod_labels["sg"] = draw(st.sampled_from(["s1", "s2"]))
            anti = False
            if not shared_used and draw(st.integers(0, 2)) == 0:
                # at most one "shared" pod per node, so the bound pods never break anti-affinity
                shared_used = True
                pod_labels.update(SHARED)
                anti = draw(st.booleans())
            bound.append(
                b.pod(
                    f"{name}-bound-{j}",
                    cpu=draw(st.sampled_from(["0", "100m", "250m"])),
                    memory=draw(st.sampled_from(["0", "64Mi"])),
                    labels=pod_labels,
                    node_name=name,
                    anti_affinity=[b.anti_affinity_term(SHARED)] if anti else [],
                    host_ports=[8080] if not port_used and draw(st.integers(0, 4)) == 0 else [],
                )
            )
            port_used = port_used or bool(bound[-1].host_ports)
    return nodes, bound


@dataclass
class Scenario:
    snapshot: Snapshot
    types: list[InstanceType]
    pending: list[Pod]
    groups: list[SpreadGroup]
    originals: dict[str, Pod] = field(default_factory=dict)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    types = draw(catalogs())
    pools = draw(node_pools())
    groups = draw(spread_groups())
    nodes, bound = draw(existing(pools))
    pending = draw(pending_pods(groups))
    snap = b.snapshot(pools=pools, types=types, nodes=nodes, pods=[*bound, *pending])
    return Scenario(snap, types, pending, groups, {p.key: p for p in [*bound, *pending]})


# -- helpers ----------------------------------------------------------------------------------


@dataclass
class Placed:
    """One node after the solve: existing (with its bound pods) or launched from a claim."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    bound: list[Pod]
    new: list[Pod]
    pool: str = ""
    launched: Launched | None = None

    @property
    def pods(self) -> list[Pod]:
        return self.bound + self.new


def solved(scenario: Scenario) -> tuple[Results, list[Placed]]:
    results = solve(scenario.snapshot, scenario.pending)
    order = [it.name for it in scenario.types]
    placed: list[Placed] = []
    by_node: dict[str, list[Pod]] = {}
    for key, node_name in results.existing.items():
        by_node.setdefault(node_name, []).append(scenario.originals[key])
    for state in scenario.snapshot.nodes:
        assert state.node is not None
        placed.append(
            Placed(
                state.name,
                dict(state.labels),
                state.node.taints,
                state.allocatable,
                [p for p in state.pods if not p.is_terminal()],
                by_node.get(state.name, []),
            )
        )
    for claim in results.new_claims:
        launched = launch(claim, order)
        assert launched is not None, f"claim {claim.name} has no launchable option"
        placed.append(
            Placed(
                claim.name,
                launched.labels,
                claim.taints,
                launched.instance_type.allocatable,
                [],
                [scenario.originals[p.key] for p in claim.pods],
                claim.node_pool,
                launched,
            )
        )
    return results, placed


def requests_of(pods: Sequence[Pod]) -> Resources:
    return total(p.requests + Resources({PODS: 1}) for p in pods)


def label_matches(req: Requirement, node_labels: Mapping[str, str]) -> bool:
    """A NodeSelectorRequirement against concrete node labels (Kubernetes semantics)."""
    value = node_labels.get(req.key)
    if value is None:
        return req.operator in (NOT_IN, DOES_NOT_EXIST) and req.gte is None and req.lte is None
    return req.has(value)


def term_matches(term: NodeSelectorTerm, node_labels: Mapping[str, str]) -> bool:
    return all(label_matches(r, node_labels) for r in term.requirements)


def selection_matches(pod: Pod, node_labels: Mapping[str, str]) -> bool:
    """nodeSelector AND (at least one required term, when there are any)."""
    if any(node_labels.get(wk.normalize(k)) != v for k, v in pod.node_selector.items()):
        return False
    return not pod.required_terms or any(term_matches(t, node_labels) for t in pod.required_terms)


def repels(a: Pod, b_: Pod) -> bool:
    """``a``'s required hostname anti-affinity selects ``b_``."""
    return any(
        t.topology_key == wk.HOSTNAME
        and t.selector is not None
        and a.namespace == b_.namespace
        and t.selector.matches(b_.labels)
        for t in a.anti_affinity
    )


def signature(results: Results) -> tuple[object, ...]:
    return (
        results.placement(),
        [(c.name, c.node_pool, [it.name for it in c.instance_types]) for c in results.new_claims],
        sorted(e.pod.key for e in results.errors),
    )


# -- properties -------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(scenarios())
def test_no_node_or_claim_is_overcommitted(scenario: Scenario) -> None:
    results, placed = solved(scenario)
    for claim in results.new_claims:
        needed = requests_of(claim.pods)
        for option in claim.instance_types:
            assert needed.fits(option.allocatable), (claim.name, option.name, needed, option.allocatable)
    for node in placed:
        if node.new:
            used = requests_of(node.pods)
            assert used.fits(node.allocatable), (node.name, used, node.allocatable)


@PROPERTY_SETTINGS
@given(scenarios())
def test_placed_pods_tolerate_taints_and_match_node_selection(scenario: Scenario) -> None:
    _, placed = solved(scenario)
    pools = {p.name: p for p in scenario.snapshot.node_pools}
    for node in placed:
        for pod in node.new:
            assert first_untolerated(pod.tolerations, node.taints) is None, (pod.key, node.name, node.taints)
            assert selection_matches(pod, node.labels), (pod.key, node.name, node.labels)
        if node.launched is not None:
            # the launched node also honours its NodePool's requirements
            pool_reqs = Requirements(pools[node.pool].requirements)
            for req in pool_reqs.values():
                assert label_matches(req, node.labels), (node.name, str(req), node.labels)
            assert node.taints == pools[node.pool].taints


@PROPERTY_SETTINGS
@given(scenarios())
def test_hostname_anti_affinity_and_host_ports_hold(scenario: Scenario) -> None:
    _, placed = solved(scenario)
    for node in placed:
        if not node.new:
            continue
        for a, other in itertools.permutations(node.pods, 2):
            assert not repels(a, other), (node.name, a.key, other.key)
        ports = [(port.port, port.protocol) for pod in node.pods for port in pod.host_ports]
        assert len(ports) == len(set(ports)), (node.name, ports)


def _zone_universe(snapshot: Snapshot) -> set[str]:
    """Zones the scheduler's domain groups know: every NodePool × compatible type, and pool In values.

    karpy skips types whose requirements do not overlap the pool's (upstream adds their
    zones anyway); offering availability does not matter, as upstream.
    """
    zones: set[str] = set()
    for pool in snapshot.node_pools:
        base = pool.requirement_set()
        for it in snapshot.instance_types.get(pool.name, ()):
            if not base.overlaps(it.requirements):
                continue
            req = base.union_with(it.requirements).get(wk.ZONE)
            if req is not None and not req.complement:
                zones |= req.values
        req = base.get(wk.ZONE)
        if req is not None and req.operator == "In":
            zones |= req.values
    return zones


@PROPERTY_SETTINGS
@given(scenarios())
def test_do_not_schedule_spread_final_counts(scenario: Scenario) -> None:
    """DoNotSchedule spread, checked on final counts rather than per placement.

    ``Results`` does not say in which order pods were placed across nodes, so an exact
    per-placement replay is impractical. Instead: all members of a spread group share
    the constraint and the node selection (hence one topology group), counts only grow,
    and the last member placed in a domain saw ``count + 1 - min <= maxSkew``. So at the
    end every domain that received a member has ``count <= maxSkew + min`` over the
    group's eligible domains (zones from every NodePool × type and from matching
    existing nodes, narrowed by the pod's nodeSelector and first required term; domains
    no pool can actually reach stay at 0 and hold ``min`` down, as upstream). For a
    hostname spread ``min`` is 0, so each node holds at most ``maxSkew`` members.
    """
    _, placed = solved(scenario)
    universe = _zone_universe(scenario.snapshot)
    for group in scenario.groups:
        members = [p for node in placed for p in node.new if p.labels.get("sg") == group.name]
        if not members:
            continue
        sample = members[0]
        filtered = [n for n in placed if selection_matches(sample, n.labels)]

        def count(nodes: Sequence[Placed], group: SpreadGroup = group) -> int:
            return sum(1 for n in nodes for p in n.pods if p.labels.get("sg") == group.name)

        if group.key == wk.HOSTNAME:
            for node in placed:
                if any(p.labels.get("sg") == group.name for p in node.new):
                    assert count([node]) <= group.max_skew, (group, node.name)
            continue
        allowed = Requirements.from_labels(sample.node_selector)
        if sample.required_terms:
            allowed = allowed.add(*sample.required_terms[0].requirements)
        zone_req = allowed.get_or_exists(wk.ZONE)
        existing_zones = {n.labels[wk.ZONE] for n in filtered if n.launched is None and wk.ZONE in n.labels}
        eligible = sorted(z for z in universe | existing_zones if zone_req.has(z))
        counts = {z: count([n for n in filtered if n.labels.get(wk.ZONE) == z]) for z in eligible}
        low = min(counts.values())
        for node in placed:
            if any(p.labels.get("sg") == group.name for p in node.new):
                zone = node.labels[wk.ZONE]
                assert zone in counts, (group, zone, eligible)
                assert counts[zone] <= group.max_skew + low, (group, counts)


@PROPERTY_SETTINGS
@given(scenarios())
def test_solve_is_deterministic(scenario: Scenario) -> None:
    first = solve(scenario.snapshot, scenario.pending)
    second = solve(scenario.snapshot, scenario.pending)
    assert signature(first) == signature(second)
    assert [e.summary() for e in first.errors] == [e.summary() for e in second.errors]
    assert first.relaxations == second.relaxations


@PROPERTY_SETTINGS
@given(scenarios())
def test_solve_does_not_depend_on_input_pod_order(scenario: Scenario) -> None:
    forward = solve(scenario.snapshot, scenario.pending)
    backward = solve(scenario.snapshot, list(reversed(scenario.pending)))
    assert signature(forward) == signature(backward)


@PROPERTY_SETTINGS
@given(scenarios())
def test_node_pool_cpu_limit_is_respected(scenario: Scenario) -> None:
    results, placed = solved(scenario)
    for pool in scenario.snapshot.node_pools:
        if pool.limits is None or CPU not in pool.limits:
            continue
        launched = [n.launched for n in placed if n.launched is not None and n.pool == pool.name]
        if not launched:
            continue
        existing_cpu = sum(
            s.node.capacity.get(CPU)
            for s in scenario.snapshot.nodes
            if s.node is not None and s.node_pool == pool.name
        )
        new_cpu = sum(x.instance_type.capacity.get(CPU) for x in launched if x is not None)
        assert existing_cpu + new_cpu <= pool.limits[CPU], (pool.name, existing_cpu, new_cpu, pool.limits)
        # pessimistic accounting: even the largest option of every claim fits the limit
        largest = sum(
            max(it.capacity.get(CPU) for it in c.instance_types)
            for c in results.new_claims
            if c.node_pool == pool.name
        )
        assert existing_cpu + largest <= pool.limits[CPU]


@PROPERTY_SETTINGS
@given(scenarios())
def test_every_pending_pod_is_placed_or_explained(scenario: Scenario) -> None:
    results = solve(scenario.snapshot, scenario.pending)
    placed = set(results.placement())
    failed = {e.pod.key for e in results.errors}
    assert placed.isdisjoint(failed)
    assert placed | failed == {p.key for p in scenario.pending}
    assert all(e.reasons for e in results.errors)
