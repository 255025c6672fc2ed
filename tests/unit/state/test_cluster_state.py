"""Cluster's indexes and caches: state_nodes/snapshot/pods_on/claim_for_node equal a from-scratch
recomputation after any sequence of changes, and unchanged StateNodes and tuples keep their identity."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders
from karpy.core.snapshot import StateNode
from karpy.model.objects import Node, NodeClaim, Pod
from karpy.state import cluster as cluster_mod
from karpy.state.cluster import Cluster, replaced
from karpy.state.events import ADDED, DELETED, MODIFIED, ObjectEvent

NODES = ["n0", "n1", "n2"]
CLAIMS = ["c0", "c1", "c2", "c3"]
PROVIDER_IDS = ["", "p0", "p1", "p2"]
PODS = ["a", "b", "c", "d", "e"]
TIMES = [-1.0, 0.0, 5.0, 10.0, 15.0]


# -- the straightforward algorithm the indexes replace (kept here as the reference) ---------------
def reference_state_nodes(cluster: Cluster, now: float) -> tuple[StateNode, ...]:
    by_provider = {c.provider_id: c for c in cluster.claims.values() if c.provider_id}
    by_node_name: dict[str, list[Pod]] = {}
    for pod in cluster.pods.values():
        if pod.node_name:
            by_node_name.setdefault(pod.node_name, []).append(pod)
    joined: set[str] = set()
    out: list[StateNode] = []
    for name in sorted(cluster.nodes):
        node = cluster.nodes[name]
        claim = by_provider.get(node.provider_id) if node.provider_id else None
        if claim is None:
            claim = next(
                (c for c in cluster.claims.values() if c.node_name == name and not c.provider_id), None
            )
        if claim is not None:
            joined.add(claim.name)
        pods = tuple(sorted(by_node_name.get(name, ()), key=lambda p: p.key))
        marked = name in cluster.marked_for_deletion or (
            claim is not None and claim.name in cluster.marked_for_deletion
        )
        nominated = cluster.nominations.get(name, 0.0) > now or (
            claim is not None and cluster.nominations.get(claim.name, 0.0) > now
        )
        out.append(StateNode(name, node, claim, pods, marked, nominated))
    for claim_name in sorted(cluster.claims):
        if claim_name in joined:
            continue
        claim = cluster.claims[claim_name]
        node_name = claim.node_name or claim.name
        pods = tuple(sorted(by_node_name.get(node_name, ()), key=lambda p: p.key))
        nominated = cluster.nominations.get(claim_name, 0.0) > now
        marked = claim_name in cluster.marked_for_deletion
        out.append(StateNode(node_name, None, claim, pods, marked, nominated))
    return tuple(out)


def reference_claim_for_node(cluster: Cluster, node: Node) -> NodeClaim | None:
    if node.provider_id:
        for claim in cluster.claims.values():
            if claim.provider_id == node.provider_id:
                return claim
    return None


def check_against_reference(cluster: Cluster, now: float) -> None:
    assert cluster.state_nodes(now) == reference_state_nodes(cluster, now)
    snap = cluster.snapshot(now)
    assert snap.nodes == reference_state_nodes(cluster, now)
    assert snap.pods == tuple(cluster.pods[k] for k in sorted(cluster.pods))
    assert all(a is cluster.pods[a.key] for a in snap.pods)  # the stored objects themselves
    assert snap.unbound == tuple(p for p in snap.pods if not p.node_name)
    assert sorted(p.key for p in cluster.unbound_pods()) == [p.key for p in snap.unbound]
    assert snap.node_pools == tuple(cluster.node_pools[k] for k in sorted(cluster.node_pools))
    assert snap.daemonsets == tuple(cluster.daemonsets[k] for k in sorted(cluster.daemonsets))
    assert snap.pdbs == tuple(cluster.pdbs[k] for k in sorted(cluster.pdbs))
    for name in [*NODES, *CLAIMS, "x", ""]:
        assert cluster.pods_on(name) == [p for p in cluster.pods.values() if p.node_name == name]
    for node in cluster.nodes.values():
        assert cluster.claim_for_node(node) is reference_claim_for_node(cluster, node)
    assert cluster.deleting_node_names() == tuple(sorted(n for n, v in cluster.nodes.items() if v.deleting))
    assert cluster.deleting_claim_names() == tuple(sorted(n for n, c in cluster.claims.items() if c.deleting))
    for provider_id in [*PROVIDER_IDS, "x"]:
        first = next(
            (cluster.nodes[n] for n in sorted(cluster.nodes) if cluster.nodes[n].provider_id == provider_id),
            None,
        )
        assert cluster.node_for_provider(provider_id) is (first if provider_id else None)
        in_order = [n for n in cluster.nodes.values() if provider_id and n.provider_id == provider_id]
        assert cluster.nodes_with_provider(provider_id) == in_order
    for node in cluster.nodes.values():
        last = [c for c in cluster.claims.values() if node.provider_id and c.provider_id == node.provider_id]
        assert cluster.claim_for_node(node, last=True) is (last[-1] if last else None)


# -- random sequences of changes ---------------------------------------------------------------
def _event(obj: Any, deleted: bool, exists: bool) -> ObjectEvent:
    return ObjectEvent(DELETED if deleted else (MODIFIED if exists else ADDED), obj)


deleted = st.sampled_from([False, False, False, True])
node_ops = st.tuples(
    st.just("node"), st.sampled_from(NODES), st.sampled_from(PROVIDER_IDS), deleted, st.booleans()
)
pod_ops = st.tuples(
    st.just("pod"),
    st.sampled_from(PODS),
    st.sampled_from(["", "", *NODES, *NODES, *CLAIMS, "x"]),
    deleted,
    st.booleans(),
)
ops = st.one_of(
    node_ops,
    node_ops,  # weights: nodes and pods are the common changes
    pod_ops,
    pod_ops,
    pod_ops,
    st.tuples(
        st.just("claim"),
        st.sampled_from(CLAIMS),
        st.sampled_from(PROVIDER_IDS),
        st.sampled_from(["", *NODES]),
        deleted,
        st.booleans(),
    ),
    st.tuples(
        st.just("other"), st.sampled_from(["pool", "ds", "pdb"]), st.sampled_from("xyz"), st.booleans()
    ),
    st.tuples(st.just("mark"), st.lists(st.sampled_from(NODES + CLAIMS), max_size=2), st.booleans()),
    st.tuples(st.just("nominate"), st.sampled_from(NODES + CLAIMS), st.sampled_from(TIMES)),
    st.tuples(st.just("query"), st.sampled_from(TIMES)),
)


def run_op(cluster: Cluster, op: tuple[Any, ...], generation: int) -> None:
    kind = op[0]
    if kind == "node":
        _, name, provider_id, deleted, deleting = op
        node = builders.node(
            name, provider_id=provider_id, labels={"gen": str(generation)}, deleting=deleting
        )
        cluster.apply(_event(node, deleted, name in cluster.nodes))
    elif kind == "claim":
        _, name, provider_id, node_name, deleted, deleting = op
        claim = builders.node_claim(
            name, provider_id=provider_id, node_name=node_name, created=generation, deleting=deleting
        )
        cluster.apply(_event(claim, deleted, name in cluster.claims))
    elif kind == "pod":
        _, name, node_name, deleted, terminating = op
        pod = builders.pod(name, node_name=node_name, deleting=terminating, created=float(generation))
        cluster.apply(_event(pod, deleted, pod.key in cluster.pods))
    elif kind == "other":
        _, what, name, deleted = op
        obj: Any
        if what == "pool":
            obj = builders.node_pool(name, labels={"gen": str(generation)})
        elif what == "ds":
            obj = builders.daemonset(name, created=float(generation))
        else:
            obj = builders.pdb(name, max_unavailable=generation)
        cluster.apply(_event(obj, deleted, False))
    elif kind == "mark":
        _, names, unmark = op
        if unmark:
            cluster.unmark_for_deletion(*names)
        else:
            cluster.mark_for_deletion(*names)
    elif kind == "nominate":
        _, name, until = op
        cluster.nominate(name, until)
    else:
        check_against_reference(cluster, op[1])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=10, max_size=60))
def test_state_matches_a_from_scratch_recomputation_after_any_changes(steps: list[tuple[Any, ...]]) -> None:
    cluster = Cluster(lambda _pool, _nc: ())
    seen: list[tuple[str, int, dict[str, Any]]] = []  # (store, its version, its objects then)
    for generation, op in enumerate(steps):
        for store, values in (("pods", cluster.pods), ("claims", cluster.claims)):
            seen.append((store, cluster.store_version(store), dict(values)))
        run_op(cluster, op, generation)
        assert cluster.state_nodes(5.0) == reference_state_nodes(cluster, 5.0)
    for store, version, then in seen:  # every key stored, replaced or deleted since is named
        now_values: dict[str, Any] = getattr(cluster, store)
        changed = cluster.changed_since(store, version)
        assert changed is not None and len(changed) == cluster.store_version(store) - version
        assert {k for k in then.keys() | now_values.keys() if then.get(k) is not now_values.get(k)} <= set(
            changed
        )
    for now in TIMES:
        check_against_reference(cluster, now)
    # a Cluster built from pre-filled dicts indexes them too
    copy = Cluster(
        lambda _pool, _nc: (),
        pods=dict(cluster.pods),
        nodes=dict(cluster.nodes),
        claims=dict(cluster.claims),
        marked_for_deletion=set(cluster.marked_for_deletion),
        nominations=dict(cluster.nominations),
    )
    for now in TIMES:
        assert copy.state_nodes(now) == reference_state_nodes(cluster, now)
        assert [copy.pods_on(n) for n in NODES] == [cluster.pods_on(n) for n in NODES]
    check_against_reference(copy, 5.0)


# -- identity ------------------------------------------------------------------------------------
def make_cluster() -> Cluster:
    cluster = Cluster(lambda _pool, _nc: ())
    for name in ("n1", "n2"):
        cluster.apply(ObjectEvent.added(builders.node(name, provider_id=f"p-{name}")))
        cluster.apply(ObjectEvent.added(builders.node_claim(f"{name}-claim", provider_id=f"p-{name}")))
    cluster.apply(ObjectEvent.added(builders.node_claim("inflight")))
    cluster.apply(ObjectEvent.added(builders.pod("a", node_name="n1")))
    return cluster


def by_name(nodes: tuple[StateNode, ...]) -> dict[str, StateNode]:
    return {n.name: n for n in nodes}


def test_unchanged_state_nodes_keep_their_identity() -> None:
    cluster = make_cluster()
    first = cluster.state_nodes(0.0)
    assert [n.name for n in first] == ["n1", "n2", "inflight"]
    assert cluster.state_nodes(0.0) is first
    cluster.apply(ObjectEvent.added(builders.pod("pending")))  # unbound: in no StateNode
    assert cluster.state_nodes(0.0) is first
    cluster.apply(ObjectEvent.added(builders.node_pool("default")))
    assert cluster.state_nodes(0.0) is first


def test_a_bind_or_unbind_replaces_only_that_nodes_state() -> None:
    cluster = make_cluster()
    before = by_name(cluster.state_nodes(0.0))
    cluster.apply(ObjectEvent(MODIFIED, builders.pod("pending", node_name="n2")))
    after = by_name(cluster.state_nodes(0.0))
    assert after["n2"] is not before["n2"]
    assert [p.name for p in after["n2"].pods] == ["pending"]
    assert after["n1"] is before["n1"]
    assert after["inflight"] is before["inflight"]
    cluster.apply(ObjectEvent(MODIFIED, builders.pod("a")))  # unbound from n1
    again = by_name(cluster.state_nodes(0.0))
    assert again["n1"] is not after["n1"] and again["n1"].pods == ()
    assert again["n2"] is after["n2"]
    cluster.apply(ObjectEvent(DELETED, builders.pod("pending", node_name="n2")))
    assert by_name(cluster.state_nodes(0.0))["n2"].pods == ()
    cluster.apply(ObjectEvent.added(builders.pod("b", node_name="n1")))
    cluster.apply(ObjectEvent.added(builders.pod("c", node_name="n1")))
    assert [p.name for p in by_name(cluster.state_nodes(0.0))["n1"].pods] == ["b", "c"]
    cluster.apply(ObjectEvent.added(builders.pod("a", node_name="n1")))  # joins a node whose pods are cached
    assert [p.name for p in by_name(cluster.state_nodes(0.0))["n1"].pods] == ["a", "b", "c"]


def test_a_node_update_keeping_its_provider_id_replaces_only_that_nodes_state() -> None:
    cluster = make_cluster()
    before = by_name(cluster.state_nodes(0.0))
    tainted = builders.node("n1", provider_id="p-n1", labels={"gen": "2"})
    cluster.apply(ObjectEvent(MODIFIED, tainted))
    cluster.apply(ObjectEvent.added(builders.pod("b", node_name="n1")))  # and a pod on it
    after = by_name(cluster.state_nodes(0.0))
    assert after["n1"].node is tainted and after["n1"].claim is before["n1"].claim
    assert [p.name for p in after["n1"].pods] == ["a", "b"]
    assert after["n2"] is before["n2"] and after["inflight"] is before["inflight"]
    assert cluster.state_nodes(0.0) == reference_state_nodes(cluster, 0.0)
    # a new providerID may change the join: the state is built anew, and still right
    cluster.apply(ObjectEvent(MODIFIED, builders.node("n2", provider_id="p-n1")))
    assert cluster.state_nodes(0.0) == reference_state_nodes(cluster, 0.0)


def test_node_claim_and_mark_changes_replace_the_state() -> None:
    cluster = make_cluster()
    before = by_name(cluster.state_nodes(0.0))
    cluster.apply(ObjectEvent(MODIFIED, builders.node_claim("n2-claim", provider_id="p-n2", created=1.0)))
    after = by_name(cluster.state_nodes(0.0))
    assert after["n2"] is not before["n2"] and after["n2"].claim is cluster.claims["n2-claim"]
    assert after["n1"] is before["n1"]
    cluster.mark_for_deletion("n1-claim")
    marked = by_name(cluster.state_nodes(0.0))
    assert marked["n1"].marked_for_deletion and marked["n1"] is not after["n1"]
    cluster.unmark_for_deletion("n1-claim")
    assert not by_name(cluster.state_nodes(0.0))["n1"].marked_for_deletion


def test_nominated_follows_now_in_both_directions() -> None:
    cluster = make_cluster()
    cluster.nominate("n1-claim", 100.0)
    cluster.nominate("inflight", 50.0)
    assert [n.nominated for n in cluster.state_nodes(10.0)] == [True, False, True]
    early = cluster.state_nodes(10.0)
    assert cluster.state_nodes(49.0) is early  # no deadline crossed
    assert [n.nominated for n in cluster.state_nodes(50.0)] == [True, False, False]
    later = cluster.state_nodes(100.0)
    assert [n.nominated for n in later] == [False, False, False]
    assert by_name(later)["n2"] is by_name(early)["n2"]  # never nominated: the same object throughout
    assert [n.nominated for n in cluster.state_nodes(10.0)] == [True, False, True]  # back in time
    cluster.nominate("n1-claim", 20.0)  # an earlier deadline never shortens a nomination
    assert [n.nominated for n in cluster.state_nodes(60.0)] == [True, False, False]


def test_default_nomination_time_counts_for_negative_now() -> None:
    cluster = make_cluster()
    assert not any(n.nominated for n in cluster.state_nodes(0.0))
    assert all(n.nominated for n in cluster.state_nodes(-1.0))  # 0.0 > -1: as before


def test_expired_nominations_of_names_gone_are_dropped_once_the_table_doubles() -> None:
    """Every launch nominates its claim: the table must not grow for as long as the process runs.
    Only what no StateNode can read goes (expired, of a name no Node or NodeClaim has)."""
    from karpy.state.statenodes import NOMINATIONS_KEPT as _NOMINATIONS_KEPT

    cluster = make_cluster()
    cluster.nominate("n2", 30.0)  # a Node's: kept although expired (a query back in time reads it)
    cluster.nominate("n1-claim", 20.0)  # a NodeClaim's: kept as well
    cluster.nominate("inflight", 500.0)  # not expired: kept
    gone = [f"gone-{i}" for i in range(2 * _NOMINATIONS_KEPT)]
    for i, name in enumerate(gone):
        cluster.nominate(name, 40.0 + i % 7)
    cluster.nominate(gone[0], 900.0)  # gone, but not expired: kept
    assert [n.nominated for n in cluster.state_nodes(100.0)] == [False, False, True]
    assert set(cluster.nominations) == {"n2", "n1-claim", "inflight", gone[0]}
    assert [n.nominated for n in cluster.state_nodes(10.0)] == [True, True, True]  # back in time
    cluster.nominate("gone-1", 200.0)  # a gone name nominated again counts from scratch
    assert cluster.nominations["gone-1"] == 200.0


def test_snapshot_reuses_its_sorted_tuples_while_unchanged() -> None:
    cluster = make_cluster()
    cluster.apply(ObjectEvent.added(builders.node_pool("default")))
    cluster.apply(ObjectEvent.added(builders.pdb("budget")))
    first, second = cluster.snapshot(0.0), cluster.snapshot(1.0)
    assert second.pods is first.pods
    assert second.node_pools is first.node_pools
    assert second.pdbs is first.pdbs
    assert second.daemonsets is first.daemonsets
    assert second.nodes is first.nodes
    cluster.apply(ObjectEvent.added(builders.pod("0-first")))
    third = cluster.snapshot(1.0)
    assert third.pods is not first.pods
    assert third.pods[0].name == "0-first"
    assert third.node_pools is first.node_pools
    assert third.nodes is first.nodes


def test_version_counts_changes() -> None:
    cluster = make_cluster()
    version, pods_version = cluster.version, cluster.pods_version
    cluster.apply(ObjectEvent(DELETED, builders.pod("missing")))  # nothing to delete
    assert (cluster.version, cluster.pods_version) == (version, pods_version)
    cluster.apply(ObjectEvent.added(builders.pod("b")))
    assert cluster.version == version + 1 and cluster.pods_version == pods_version + 1
    cluster.mark_for_deletion("n1")
    cluster.mark_for_deletion("n1")  # already marked
    cluster.nominate("n1", 5.0)
    cluster.apply(ObjectEvent.added(builders.node_pool("default")))
    assert cluster.version == version + 4 and cluster.pods_version == pods_version + 1
    stores = ("pods", "nodes", "claims", "node_pools", "nominations", "marked_for_deletion")
    before = {store: cluster.store_version(store) for store in stores}
    cluster.apply(ObjectEvent.added(builders.node("n2")))
    cluster.apply(ObjectEvent.added(builders.node("n2", labels={"a": "b"})))
    after = {store: cluster.store_version(store) for store in stores}
    assert after == {**before, "nodes": before["nodes"] + 2}


def test_sorted_names_are_one_tuple_until_a_node_or_claim_comes_or_goes() -> None:
    cluster = make_cluster()
    cluster.apply(ObjectEvent.added(builders.node("n2")))
    cluster.apply(ObjectEvent.added(builders.node("n1")))
    cluster.apply(ObjectEvent.added(builders.node_claim("c2")))
    nodes, claims = cluster.node_names(), cluster.claim_names()
    assert nodes == tuple(sorted(cluster.nodes)) and claims == tuple(sorted(cluster.claims))
    cluster.apply(ObjectEvent.added(builders.node("n1", labels={"a": "b"})))  # changed, not new
    cluster.apply(ObjectEvent.added(builders.node_claim("c2", provider_id="fake://c2")))
    assert cluster.node_names() is nodes and cluster.claim_names() is claims
    cluster.apply(ObjectEvent.added(builders.node("n0")))
    cluster.apply(ObjectEvent(DELETED, builders.node_claim("c2")))
    assert cluster.node_names() == ("n0", *nodes) and cluster.claim_names() == tuple(sorted(cluster.claims))
    assert "c2" not in cluster.claim_names()


def test_duplicate_provider_ids_join_as_before() -> None:
    """state_nodes joins the last claim (in ``claims`` order) with a providerID, claim_for_node the first."""
    cluster = Cluster(lambda _pool, _nc: ())
    cluster.apply(ObjectEvent.added(builders.node_claim("z-old", provider_id="p")))
    cluster.apply(ObjectEvent.added(builders.node_claim("a-new", provider_id="p")))
    cluster.apply(ObjectEvent.added(builders.node("n", provider_id="p")))
    assert cluster.state_nodes(0.0) == reference_state_nodes(cluster, 0.0)
    assert cluster.state_nodes(0.0)[0].claim is cluster.claims["a-new"]
    assert cluster.claim_for_node(cluster.nodes["n"]) is cluster.claims["z-old"]
    cluster.apply(ObjectEvent(MODIFIED, builders.node_claim("z-old", provider_id="p", created=1.0)))
    assert cluster.state_nodes(0.0)[0].claim is cluster.claims["a-new"]  # a modification keeps its place
    cluster.apply(ObjectEvent(DELETED, cluster.claims["z-old"]))
    cluster.apply(ObjectEvent.added(builders.node_claim("z-old", provider_id="p")))  # re-added: now last
    assert cluster.state_nodes(0.0) == reference_state_nodes(cluster, 0.0)
    assert cluster.state_nodes(0.0)[0].claim is cluster.claims["z-old"]
    assert cluster.claim_for_node(cluster.nodes["n"]) is cluster.claims["a-new"]


def test_pods_on_keeps_the_order_of_pods() -> None:
    cluster = Cluster(lambda _pool, _nc: ())
    cluster.apply(ObjectEvent.added(builders.pod("b")))  # created first, bound last
    cluster.apply(ObjectEvent.added(builders.pod("c", node_name="n")))
    cluster.apply(ObjectEvent.added(builders.pod("a", node_name="n")))
    cluster.apply(ObjectEvent(MODIFIED, builders.pod("b", node_name="n")))
    assert [p.name for p in cluster.pods_on("n")] == ["b", "c", "a"]
    assert [p.name for p in cluster.pods_on("n")] == [p.name for p in cluster.pods.values()]
    assert [p.name for p in cluster.pods_on("")] == []


def test_a_node_without_a_provider_claim_joins_the_first_unlaunched_claim_naming_it() -> None:
    cluster = Cluster(lambda _pool, _nc: ())
    cluster.apply(ObjectEvent.added(builders.node_claim("z", node_name="m")))
    cluster.apply(ObjectEvent.added(builders.node_claim("a", node_name="m")))
    cluster.apply(ObjectEvent.added(builders.node("m", provider_id="unknown")))
    assert cluster.state_nodes(0.0) == reference_state_nodes(cluster, 0.0)
    assert [(n.name, n.claim.name if n.claim else None) for n in cluster.state_nodes(0.0)] == [
        ("m", "z"),
        ("m", "a"),
    ]
    cluster.apply(ObjectEvent(MODIFIED, builders.node_claim("z", node_name="m", provider_id="p")))
    assert cluster.state_nodes(0.0) == reference_state_nodes(cluster, 0.0)
    assert cluster.state_nodes(0.0)[0].claim is cluster.claims["a"]


def test_claims_in_name_order_are_one_tuple_until_the_claims_change() -> None:
    cluster = make_cluster()
    claims = cluster.claims_in_order()
    assert [c.name for c in claims] == list(cluster.claim_names()) == ["inflight", "n1-claim", "n2-claim"]
    cluster.apply(ObjectEvent.added(builders.pod("b", node_name="n1")))
    cluster.apply(ObjectEvent(MODIFIED, builders.node("n1", provider_id="p-n1", labels={"x": "y"})))
    assert cluster.claims_in_order() is claims
    replaced = builders.node_claim("n1-claim", provider_id="p-n1", created=5.0)
    cluster.apply(ObjectEvent(MODIFIED, replaced))
    again = cluster.claims_in_order()
    assert again is not claims and again[1] is replaced and again[0] is claims[0]


def test_replaced_names_the_places_holding_other_objects() -> None:
    a, b, c = builders.pod("a"), builders.pod("b"), builders.pod("c")
    assert replaced((a, b, c), (a, b, c)) == []
    assert replaced((a, builders.pod("b"), c), (a, b, c)) == [1]  # equal, but another object
    assert replaced((c, b, a), (a, b, c)) == [0, 2]


def test_a_journal_forgets_its_older_half_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_mod, "_JOURNAL_MAX", 8)
    cluster = Cluster(lambda _pool, _nc: ())
    versions = []
    for i in range(20):
        versions.append(cluster.store_version("pods"))
        cluster.apply(ObjectEvent.added(builders.pod(f"p{i}")))
    assert cluster.changed_since("pods", versions[0]) is None  # forgotten
    assert cluster.changed_since("pods", versions[-1]) == ["default/p19"]
    assert cluster.changed_since("pods", versions[15]) == [f"default/p{i}" for i in range(15, 20)]
    assert cluster.changed_since("pods", cluster.store_version("pods")) == []
    assert cluster.changed_since("pods", cluster.store_version("pods") + 1) is None
    cluster.apply(ObjectEvent.added(builders.node_claim("c1")))
    assert cluster.changed_since("claims", 0) == ["c1"]
