"""A topology group counted from the caches the solves of a pass share (the matched pods per node of the
bound index, the per-StateNode domains of a node view) holds exactly what the plain count holds: the same
domains with the same counts and empty domains (the count over the whole snapshot of a pass, less what a
solve lacks, may learn the domains in another order: no reader depends on it, every one sorts)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from builders import anti_affinity_term, instance_type, node, node_claim, node_pool, pod, snapshot, spread
from karpy.core.scheduling import boundpods, topocounts, topology
from karpy.core.scheduling.boundpods import bound_index
from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.scheduling.topology import Topology, build_domain_groups
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels as wk
from karpy.model.objects import Pod
from karpy.model.taints import Taint, Toleration

ZONES = ("z1", "z2", "z3")
CACHES = SchedulingCaches()  # what the solves of a pass share
WEB = {"app": "web"}
TAINT = Taint("dedicated", "NoSchedule", "gpu")


def _plain(snap: Snapshot, pods: list[Pod]) -> Topology:
    """The reference: every group counted without the shared caches."""
    topology.PLAIN_COUNTS = True
    try:
        return _topology(snap, pods)
    finally:
        topology.PLAIN_COUNTS = False


def _web(name: str, node_name: str = "", **overrides: object) -> Pod:
    zone_spread = spread(match_labels=WEB)
    host_spread = spread(wk.HOSTNAME, match_labels=WEB, node_taints_policy="Honor")
    return pod(
        name,
        labels=WEB,
        spread=[zone_spread, host_spread],
        affinity=[anti_affinity_term(WEB)],  # pod affinity on hostname: a group without a node filter
        node_name=node_name,
        **overrides,  # type: ignore[arg-type]
    )


def _snapshot() -> Snapshot:
    nodes = []
    for i in range(8):
        extra = {wk.ZONE: ZONES[i % 3], "tier": "a" if i % 2 else "b"}
        taints = [TAINT] if i in (2, 5) else []
        nodes.append(node(f"n{i}", labels=extra, taints=taints))
    nodes[6] = dataclasses.replace(nodes[6], labels={wk.ZONE: "z1"})  # no hostname label: counted by name
    # bound pods interleaved over the nodes, so the order a node is first seen differs from node order
    # (n6 and claim-only get no domain registered for hostname: the order their pods are counted in
    # decides where their domains go in the group)
    where = ["n5", "n2", "n5", "n1", "n6", "n0", "n3", "n2", "n7", "claim-only", "n4", "n1", "gone", "n6"]
    where.append("n0")
    bound = [_web(f"w{i}", name) for i, name in enumerate(where)]
    bound += [
        pod("other", labels={"app": "other"}, node_name="n3"),
        pod(
            "lonely",
            labels={"app": "lonely"},
            anti_affinity=[anti_affinity_term({"app": "lonely"}, key=wk.ZONE)],
            node_name="n4",
        ),
    ]
    types = [instance_type("m", cpu="4", memory="8Gi", zones=ZONES)]
    snap = snapshot(pools=[node_pool("default")], types=types, nodes=nodes, pods=bound)
    claim = node_claim("claim-only", labels={wk.ZONE: "z2", "tier": "a"})
    on_claim = tuple(p for p in bound if p.node_name == "claim-only")
    claim_only = StateNode(name="claim-only", claim=claim, pods=on_claim)
    return dataclasses.replace(snap, nodes=(*snap.nodes, claim_only))


def _pending() -> list[Pod]:
    """Pods being scheduled: new ones with spreads and node filters, and moved bound pods."""
    tolerant = [Toleration("dedicated", "Equal", "gpu", "NoSchedule")]
    return [
        _web("new-a"),
        _web("new-b", node_selector={"tier": "a"}),
        _web("new-c", tolerations=tolerant),
        pod(
            "new-d",
            labels=WEB,
            spread=[spread(wk.HOSTNAME, match_labels=WEB, node_affinity_policy="Ignore")],
            required_terms=[[(wk.ZONE, "In", ["z1", "z2"])]],
        ),
    ]


def _state(topo: Topology) -> list[object]:
    out: list[object] = []
    for table in (topo.groups, topo.inverse):
        for key, group in table.items():
            out.append((key, list(group.domains.items()), sorted(group.empty), sorted(group.owners)))
    return out


def _topology(snap: Snapshot, pods: list[Pod]) -> Topology:
    active = [n for n in snap.nodes if not n.marked_for_deletion and not (n.node and n.node.deleting)]
    active.sort(key=lambda n: (not n.initialized, n.name))
    return Topology(
        snapshot=snap,
        nodes=active,
        domain_groups=build_domain_groups(snap.node_pools, snap.instance_types),
        pods=pods,
        respect_preferences=True,
        bound=bound_index(snap.pods, CACHES.bound_indexes),
    )


def _solves(snap: Snapshot) -> list[tuple[Snapshot, list[Pod]]]:
    """The solves of one disruption pass: each node removed in turn with its pods moved, one with a
    node marked for deletion whose pods move too, and one where only the first pods of nodes move."""
    out = [(snap, _pending())]
    for state in snap.nodes:
        reduced = dataclasses.replace(snap, nodes=tuple(n for n in snap.nodes if n is not state))
        out.append((reduced, [*_pending(), *state.pods]))
    marked = tuple(
        dataclasses.replace(n, marked_for_deletion=True) if n.name == "n1" else n for n in snap.nodes
    )
    n1_pods = [p for p in snap.pods if p.node_name == "n1"]
    out.append((dataclasses.replace(snap, nodes=marked), [*_pending(), *n1_pods]))
    firsts = [p for p in snap.pods if p.name in ("w0", "w1", "w3", "w4")]  # their nodes are first seen later
    out.append((snap, [*_pending(), *firsts]))
    return out


@pytest.mark.parametrize("warm", [False, True])
def test_cached_counts_equal_plain_counts_across_the_solves_of_a_pass(warm: bool) -> None:
    snap = _snapshot()
    compared = 0
    for reduced, pods in _solves(snap):
        if not warm:
            CACHES.clear()
            topocounts._VIEWS.clear()
        cached = _topology(reduced, pods)
        assert not cached._plain
        assert _state(cached) == _state(_plain(reduced, pods))
        compared += len(cached.groups)
    assert compared > 3 * len(_solves(snap))  # the spreads and affinities of the pending pods were counted


def _sorted_state(topo: Topology) -> list[object]:
    """:func:`_state` without the order domains were learnt in (no reader depends on it)."""
    return [(key, sorted(domains), empty, owners) for key, domains, empty, owners in _state(topo)]  # type: ignore[misc]


def _active(snap: Snapshot) -> tuple[StateNode, ...]:
    active = [n for n in snap.nodes if not n.marked_for_deletion and not (n.node and n.node.deleting)]
    active.sort(key=lambda n: (not n.initialized, n.name))
    return tuple(active)


@pytest.mark.parametrize("warm", [False, True])
def test_counts_from_the_whole_snapshot_equal_plain_counts_of_the_reduced_one(warm: bool) -> None:
    """A solve of the snapshot without some nodes starts from the whole snapshot's counts, less the
    nodes taken out and the pods being scheduled: the same groups as the plain count of the reduced
    snapshot, whichever nodes (one, several, none) are taken out and whichever pods move."""
    snap = _snapshot()
    active = _active(snap)
    removals = [frozenset({n.name}) for n in snap.nodes]
    removals += [frozenset({"n0", "n5", "claim-only"}), frozenset(), frozenset({"n6", "gone"})]
    compared = 0
    for names in removals:
        reduced = dataclasses.replace(snap, nodes=tuple(n for n in snap.nodes if n.name not in names))
        moved = [p for p in snap.pods if p.node_name in names]
        for pods in ([*_pending(), *moved], [*_pending(), *moved, *snap.pods[:5]]):
            if not warm:
                CACHES.clear()
                topocounts._VIEWS.clear()
            shared = Topology(
                snapshot=reduced,
                nodes=[n for n in active if n.name not in names],
                domain_groups=build_domain_groups(snap.node_pools, snap.instance_types),
                pods=pods,
                respect_preferences=True,
                bound=bound_index(reduced.pods, CACHES.bound_indexes),
                whole=topocounts.whole_of(CACHES.wholes, active, snap.nodes, reduced.pods),
                without=names,
            )
            assert shared._whole is not None
            assert _sorted_state(shared) == _sorted_state(_plain(reduced, pods)), sorted(names)
            compared += len(shared.groups)
    assert compared > 3 * len(removals)


def test_the_whole_snapshot_count_is_not_used_where_names_repeat() -> None:
    snap = _snapshot()
    twice = dataclasses.replace(snap, nodes=(*snap.nodes, snap.nodes[0]))
    topo = Topology(
        snapshot=twice,
        nodes=list(_active(twice)),
        domain_groups=build_domain_groups(snap.node_pools, snap.instance_types),
        pods=_pending(),
        respect_preferences=True,
        bound=bound_index(twice.pods, CACHES.bound_indexes),
        whole=topocounts.whole_of(CACHES.wholes, _active(twice), twice.nodes, twice.pods),
    )
    assert topo._whole is None
    assert _state(topo) == _state(_plain(twice, _pending()))


def test_the_counts_read_what_the_cache_is_for() -> None:
    """The fixture exercises hostname fallback, node filters and moved pods (else the test proves little)."""
    snap = _snapshot()
    topo = _topology(snap, _pending())
    hostname_spreads = [g for g in topo.groups.values() if g.kind == topology.SPREAD and g.key == wk.HOSTNAME]
    honored = [g for g in hostname_spreads if g.node_filter.honor_taints and not g.node_filter.tolerations]
    assert honored and all("n2" not in g.domains and "n5" not in g.domains for g in honored)
    assert all(g.domains.get("n6") for g in hostname_spreads if not g.node_filter.terms[0])  # by name
    moved = [p for p in snap.pods if p.name in ("w0", "w1", "w3", "w4")]
    before = next(iter(topo.groups.values())).domains
    after = next(iter(_topology(snap, [*_pending(), *moved]).groups.values())).domains
    assert sum(before.values()) - sum(after.values()) == 4


def test_repeated_node_names_take_the_plain_count() -> None:
    snap = _snapshot()
    twice = dataclasses.replace(snap, nodes=(*snap.nodes, snap.nodes[0]))
    topo = _topology(twice, _pending())
    assert topo._plain
    assert _state(topo) == _state(_plain(twice, _pending()))


def _reference(pods: tuple[tuple[str, str], ...], excluded: frozenset[str]) -> list[tuple[str, int]]:
    per_node: dict[str, int] = {}
    for uid, name in pods:
        if uid not in excluded:
            per_node[name] = per_node.get(name, 0) + 1
    return list(per_node.items())


def test_matched_bucket_without_excluded_pods_keeps_the_first_seen_order() -> None:
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 12)
        uids = [f"u{rng.randint(0, size)}" for _ in range(size)]  # repeats: pods sharing a uid
        pods = [pod(f"p{i}", uid=uid, node_name=f"n{rng.randint(0, 4)}") for i, uid in enumerate(uids)]
        matched = boundpods.Matched(pods)
        excluded = frozenset(f"u{i}" for i in range(size + 1) if rng.random() < 0.3)
        assert list(matched.without(excluded).items()) == _reference(matched.pods, excluded)
        assert list(matched.without(frozenset()).items()) == _reference(matched.pods, frozenset())
