"""``explain_pod``: the status of one pod after the solve ``karpy plan`` runs, each NodePool's and
node's verdict, and the detail and suggestion behind each kind of rejection."""

from __future__ import annotations

import dataclasses

import pytest

import builders as b
from karpy.core.explain.families import group_families
from karpy.core.explain.pod import PodExplanation, PodNotFound, PoolVerdict, explain_pod
from karpy.core.scheduling import solve
from karpy.core.snapshot import StateNode
from karpy.model import labels as wk
from karpy.model.objects import HostPort, OwnerRef
from karpy.model.resources import Resources
from karpy.model.selectors import LabelSelector
from karpy.model.taints import NO_SCHEDULE, Taint, Toleration

SMALL = b.instance_type("small", cpu="2", memory="2Gi")
LARGE = b.instance_type("large", cpu="8", memory="8Gi")
TYPES = [SMALL, LARGE]
FULL = {"cpu": "1", "memory": "1Gi", "pods": "1"}  # a node one bound pod fills (pods: 1)
TAINT = Taint("test-key", NO_SCHEDULE, "test-value")


def _pool_verdicts(exp: PodExplanation) -> list[tuple[str, str, str]]:
    return [(v.name, v.verdict, v.reason) for v in exp.node_pools]


# --- status -----------------------------------------------------------------------------------


def test_new_nodeclaim_names_pool_options_by_family_and_the_launch() -> None:
    types = [
        b.instance_type("m5.large", cpu="2", memory="8Gi", price=0.096),
        b.instance_type("c5.large", cpu="2", memory="4Gi", price=0.085),
        b.instance_type("m5.xlarge", cpu="4", memory="16Gi", price=0.192),
        b.instance_type("m5.2xlarge", cpu="8", memory="32Gi", price=0.384),
    ]
    tainted = b.node_pool("tainted", weight=10, taints=[TAINT])
    pools = [tainted, b.node_pool("general", weight=5), b.node_pool("spare")]
    snap = b.snapshot(pools=pools, types=types, pods=[b.pod("app", cpu="1")])
    exp = explain_pod(snap, "default/app", catalog_order=[it.name for it in types])
    assert exp.status == "new-nodeclaim"
    assert exp.claim is not None
    assert exp.claim.node_pool == "general"
    assert exp.claim.instance_types == ("c5.large", "m5.large", "m5.xlarge", "m5.2xlarge")
    assert exp.claim.families == ("c5: large (1)", "m5: large..2xlarge (3)")
    assert (exp.claim.instance_type, exp.claim.zone, exp.claim.capacity_type) == (
        "c5.large",
        "test-zone-1",
        "spot",
    )
    assert exp.claim.price == pytest.approx(0.085)
    assert exp.node == exp.claim.name
    assert _pool_verdicts(exp) == [
        ("tainted", "rejected", "taint"),
        ("general", "would-launch", ""),
        ("spare", "not-tried", ""),
    ]
    assert "c5.large" in exp.summary


def test_without_catalog_order_the_claim_is_not_launched() -> None:
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[b.pod("app", cpu="1")])
    exp = explain_pod(snap, "app")
    assert exp.claim is not None and exp.claim.instance_type is None
    assert exp.claim.families == ("small", "large")


def test_placed_on_existing_node_leaves_pools_not_tried() -> None:
    nodes = [b.node("full", allocatable=FULL), b.node("roomy")]
    pods = [b.pod("busy", node_name="full"), b.pod("app", cpu="1")]
    exp = explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=nodes, pods=pods), "app")
    assert (exp.status, exp.node) == ("existing", "roomy")
    assert "existing node roomy" in exp.summary
    assert _pool_verdicts(exp) == [("default", "not-tried", "")]
    assert [(n.name, n.verdict, n.reason) for n in exp.nodes] == [
        ("full", "rejected", "resources"),
        ("roomy", "placed", ""),
    ]


def test_placed_on_in_flight_nodeclaim() -> None:
    room = Resources.parse({"cpu": "4", "memory": "4Gi", "pods": "10"})
    claim = b.node_claim("claim-1", labels={wk.ZONE: "test-zone-1"}, initialized=False, allocatable=room)
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[b.pod("app", cpu="1")])
    snap = dataclasses.replace(snap, nodes=(StateNode("claim-1", claim=claim),))
    exp = explain_pod(snap, "app")
    assert (exp.status, exp.node) == ("existing", "claim-1")
    assert "in-flight NodeClaim claim-1" in exp.summary
    assert [(n.name, n.kind, n.verdict) for n in exp.nodes] == [("claim-1", "nodeclaim", "placed")]


def test_bound_pod_names_its_node_and_stops() -> None:
    pods = [b.pod("web", node_name="n1")]
    exp = explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=[b.node("n1")], pods=pods), "web")
    assert (exp.status, exp.node) == ("bound", "n1")
    assert exp.summary == "bound to node n1"
    assert exp.node_pools == () and exp.nodes == ()


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"phase": "Succeeded"}, "terminal (phase Succeeded)"),
        ({"deleting": True}, "being deleted"),
        ({"scheduling_gated": True}, "scheduling gates"),
        ({"owners": (OwnerRef("DaemonSet", "ds", controller=True),)}, "DaemonSet pod"),
    ],
)
def test_not_pending_pods_say_why(overrides: dict[str, object], says: str) -> None:
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[b.pod("p", **overrides)])
    exp = explain_pod(snap, "p")
    assert exp.status == "not-pending"
    assert says in exp.summary


def test_pod_not_found_names_nearby_pods() -> None:
    pods = [b.pod(f"web-{i}") for i in range(8)] + [b.pod("db", namespace="data")]
    with pytest.raises(PodNotFound) as caught:
        explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=pods), "default/web-9")
    assert caught.value.key == "default/web-9"
    assert len(caught.value.nearby) == 5
    assert all(name.startswith("default/web-") for name in caught.value.nearby)
    assert "pod default/web-9 not found" in str(caught.value)


def test_invalid_pod_is_not_provisioned_for() -> None:
    pod = b.pod("p", node_selector={wk.HOSTNAME: "n1"})
    exp = explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]), "p")
    assert (exp.status, exp.reason) == ("invalid", "validation")
    assert exp.message.startswith('label "kubernetes.io/hostname" is restricted')
    assert "remove kubernetes.io/hostname" in exp.suggestion
    assert _pool_verdicts(exp) == [("default", "not-tried", "")]


def test_no_nodepool_at_all() -> None:
    exp = explain_pod(b.snapshot(pools=[], types=[], pods=[b.pod("p")]), "p")
    assert (exp.status, exp.reason) == ("unschedulable", "no-nodepool")
    assert exp.suggestion.startswith("create a NodePool")


# --- relaxations ------------------------------------------------------------------------------


def test_relaxations_of_a_placed_pod() -> None:
    pod = b.pod("p", required_terms=[[(wk.ZONE, "In", ["nowhere"])], [(wk.ZONE, "In", ["test-zone-2"])]])
    exp = explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]), "p")
    assert exp.status == "new-nodeclaim"
    assert exp.relaxations == ("dropped required node affinity term",)


def test_relaxations_of_an_unschedulable_pod_and_its_last_attempt() -> None:
    pod = b.pod("p", cpu="64", preferred_terms=[(10, [(wk.ZONE, "In", ["nowhere"])])])
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod])
    exp = explain_pod(snap, "p")
    assert exp.status == "unschedulable"
    assert exp.relaxations == ("dropped preferred node affinity",)
    [error] = solve(snap).errors
    assert exp.relaxations == error.relaxations
    assert dict(exp.reasons) == error.reasons  # the relaxed attempt's reasons, as karpy plan prints
    assert exp.reason == "resources"


# --- NodePool rejections ----------------------------------------------------------------------


def _only_pool(exp: PodExplanation) -> PoolVerdict:
    [verdict] = exp.node_pools
    assert verdict.verdict == "rejected"
    return verdict


def test_taint_detail_and_toleration_to_add() -> None:
    wrong = Toleration(key="test-key", operator="Equal", value="other", effect=NO_SCHEDULE)
    pod = b.pod("p", tolerations=[wrong])
    snap = b.snapshot(pools=[b.node_pool(taints=[TAINT])], types=TYPES, pods=[pod])
    verdict = _only_pool(explain_pod(snap, "p"))
    assert verdict.reason == "taint"
    assert verdict.message == "did not tolerate taint test-key=test-value:NoSchedule"
    assert verdict.detail == {"key": "test-key", "value": "test-value", "effect": "NoSchedule"}
    assert verdict.suggestion == "add toleration test-key=test-value:NoSchedule"


def test_requirement_conflict_names_key_and_both_sides() -> None:
    pool = b.node_pool("general", requirements=[(wk.ZONE, "In", ["test-zone-1", "test-zone-2"])])
    pod = b.pod("p", node_selector={wk.ZONE: "test-zone-3"})
    exp = explain_pod(b.snapshot(pools=[pool], types=TYPES, pods=[pod]), "p")
    verdict = _only_pool(exp)
    assert verdict.reason == "requirements"
    assert verdict.detail == {
        "key": wk.ZONE,
        "pod": f"{wk.ZONE} In [test-zone-3]",
        "nodePool": f"{wk.ZONE} In [test-zone-1, test-zone-2]",
    }
    assert verdict.suggestion.startswith(
        f"NodePool general allows {wk.ZONE} in [test-zone-1, test-zone-2] only"
    )
    assert exp.reason == "requirements" and exp.message == verdict.message


def test_undefined_key_says_the_pool_does_not_define_it() -> None:
    pod = b.pod("p", node_selector={"team": "blue"})
    verdict = _only_pool(explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]), "p"))
    assert verdict.detail == {"key": "team", "pod": "team In [blue]", "nodePool": None}
    assert verdict.suggestion.startswith("NodePool default does not define team")


def test_no_type_meets_requirements_counts_types_ruled_out() -> None:
    arm = b.instance_type("arm", arch="arm64")
    pool = b.node_pool(requirements=[(wk.ARCH, "In", ["amd64"])])
    pod = b.pod("p", node_selector={wk.OS: "windows"})
    verdict = _only_pool(explain_pod(b.snapshot(pools=[pool], types=[*TYPES, arm], pods=[pod]), "p"))
    assert verdict.message == "no instance type met the requirements"
    assert verdict.detail["ruledOutBy"] == {wk.OS: 2}
    assert f"{wk.OS} In [windows] rules out 2" in verdict.suggestion


def test_resources_compare_request_with_the_largest_type() -> None:
    pool = b.node_pool("big")
    pod = b.pod("p", cpu="512")
    verdict = _only_pool(explain_pod(b.snapshot(pools=[pool], types=TYPES, pods=[pod]), "p"))
    assert verdict.reason == "resources"
    assert verdict.detail["requested"]["cpu"] == "512"
    assert verdict.detail["largestAllocatable"]["cpu"] == "8"
    assert verdict.detail["shortfall"] == {"cpu": "504"}
    assert (
        verdict.suggestion
        == "largest instance type of NodePool big allocates 8 cpu; the pod requests 512 cpu"
    )


def test_resources_counts_daemonset_overhead() -> None:
    ds = b.daemonset("agent", cpu="1")
    pod = b.pod("p", cpu="7500m")
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod], daemonsets=[ds])
    verdict = _only_pool(explain_pod(snap, "p"))
    assert verdict.detail["largestAllocatable"]["cpu"] == "7"


def test_limit_names_used_and_limit() -> None:
    pool = b.node_pool(limits={"cpu": "4"})
    node = b.node("n1", labels={wk.NODEPOOL: "default"}, allocatable=FULL, capacity={"cpu": "4"})
    pods = [b.pod("busy", node_name="n1"), b.pod("p", cpu="1")]
    exp = explain_pod(b.snapshot(pools=[pool], types=TYPES, nodes=[node], pods=pods), "p")
    verdict = _only_pool(exp)
    assert verdict.message == "would exceed NodePool limit cpu"
    assert verdict.detail == {"resource": "cpu", "limit": "4", "used": "4", "smallestFit": "2"}
    assert verdict.suggestion.startswith("raise NodePool default spec.limits.cpu (4 used of 4")


def test_host_port_names_the_daemonset() -> None:
    ds = b.daemonset("proxy", host_ports=[8080])
    pod = b.pod("p", host_ports=[HostPort(8080)])
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod], daemonsets=[ds])
    verdict = _only_pool(explain_pod(snap, "p"))
    assert verdict.reason == "host-port"
    assert verdict.detail == {"ports": ["8080/TCP"], "daemonSets": ["kube-system/proxy"]}
    assert "DaemonSet kube-system/proxy uses host port 8080/TCP" in verdict.suggestion


def test_min_values_key_needed_and_has() -> None:
    pool = b.node_pool(requirements=[b.requirement((wk.INSTANCE_TYPE, "Exists")).with_min_values(3)])
    verdict = _only_pool(explain_pod(b.snapshot(pools=[pool], types=TYPES, pods=[b.pod("p")]), "p"))
    assert verdict.reason == "min-values"
    assert verdict.detail == {"key": wk.INSTANCE_TYPE, "needed": 3, "has": 2}
    assert "needs 3 distinct" in verdict.suggestion


def test_topology_spread_key_max_skew_and_counts() -> None:
    nodes = [
        b.node("n1", labels={wk.ZONE: "test-zone-1"}, allocatable=FULL),
        b.node("n2", labels={wk.ZONE: "test-zone-2"}, allocatable=FULL),
    ]
    pods = [
        b.pod("web-0", labels={"app": "web"}, node_name="n1"),
        b.pod("other", node_name="n2"),
        b.pod("web-1", labels={"app": "web"}, spread=[b.spread(match_labels={"app": "web"})]),
    ]
    pool = b.node_pool(requirements=[(wk.ZONE, "In", ["test-zone-1"])])
    verdict = _only_pool(explain_pod(b.snapshot(pools=[pool], types=TYPES, nodes=nodes, pods=pods), "web-1"))
    assert verdict.reason == "topology-spread"
    assert verdict.detail == {
        "key": wk.ZONE,
        "maxSkew": 1,
        "domains": ["test-zone-1"],
        "counts": {"test-zone-1": 1, "test-zone-2": 0},
    }
    assert "maxSkew 1" in verdict.suggestion


def test_pod_affinity_without_matching_pods() -> None:
    pod = b.pod("api", affinity=[b.anti_affinity_term({"app": "db"}, key=wk.ZONE)])
    verdict = _only_pool(explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]), "api"))
    assert verdict.reason == "pod-affinity"
    assert verdict.detail["counts"] == {z: 0 for z in b.ZONES}
    assert verdict.suggestion.startswith("no pod matches the affinity term's selector app=db")


def test_pod_anti_affinity_names_the_selector() -> None:
    node = b.node("n1", labels={wk.ZONE: "test-zone-1"}, allocatable=FULL)
    pods = [
        b.pod("web", labels={"app": "web"}, node_name="n1"),
        b.pod("api", anti_affinity=[b.anti_affinity_term({"app": "web"}, key=wk.ZONE)]),
    ]
    pool = b.node_pool(requirements=[(wk.ZONE, "In", ["test-zone-1"])])
    verdict = _only_pool(explain_pod(b.snapshot(pools=[pool], types=TYPES, nodes=[node], pods=pods), "api"))
    assert verdict.reason == "pod-anti-affinity"
    assert verdict.detail == {"key": wk.ZONE, "domains": ["test-zone-1"], "counts": {"test-zone-1": 1}}
    assert "anti-affinity selector app=web" in verdict.suggestion


@pytest.mark.parametrize(
    ("overrides", "where"),
    [
        ({}, "(namespace default)"),
        ({"namespaces": ("team-a", "team-b")}, "(namespace team-a, team-b)"),
        ({"namespace_selector": LabelSelector()}, "(every namespace)"),
        (
            {"namespaces": ("team-a",), "namespace_selector": LabelSelector.from_labels({"tier": "db"})},
            "(namespace team-a and namespaces selected by tier=db)",
        ),
    ],
)
def test_an_affinity_suggestion_names_the_namespaces_the_term_looks_in(
    overrides: dict[str, object], where: str
) -> None:
    pod = b.pod("api", affinity=[b.anti_affinity_term({"app": "db"}, key=wk.ZONE, **overrides)])
    verdict = _only_pool(explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]), "api"))
    assert verdict.reason == "pod-affinity"
    assert f"selector app=db {where} in any" in verdict.suggestion


# --- nodes ------------------------------------------------------------------------------------


def test_every_node_says_its_first_rejecting_check() -> None:
    nodes = [
        b.node("a-tainted", taints=[TAINT]),
        b.node("b-full", allocatable={"cpu": "500m", "memory": "4Gi", "pods": "10"}),
        b.node("c-zone", labels={wk.ZONE: "test-zone-1"}),
        b.node("d-fits", labels={wk.ZONE: "test-zone-2"}),
    ]
    pool = b.node_pool(taints=[TAINT])
    pod = b.pod("p", cpu="1", required_terms=[[(wk.ZONE, "NotIn", ["test-zone-1"])]])
    snap = b.snapshot(pools=[pool], types=TYPES, nodes=nodes, pods=[pod])
    exp = explain_pod(snap, "p")
    assert exp.status == "existing" and exp.node == "d-fits"
    by_name = {n.name: n for n in exp.nodes}
    assert by_name["a-tainted"].reason == "taint"
    assert by_name["a-tainted"].suggestion == "add toleration test-key=test-value:NoSchedule"
    assert by_name["b-full"].message == "not enough cpu"
    assert by_name["b-full"].suggestion == "node b-full has 500m cpu free; the pod requests 1 cpu"
    assert by_name["c-zone"].reason == "requirements"
    assert by_name["c-zone"].suggestion.startswith(f"node c-zone has {wk.ZONE}=test-zone-1")
    assert by_name["d-fits"].verdict == "placed"


def test_nodes_that_would_fit_say_so_after_the_solve() -> None:
    nodes = [b.node("n1"), b.node("n2")]
    pods = [b.pod("p", cpu="1")]
    exp = explain_pod(b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=nodes, pods=pods), "p")
    assert [(n.name, n.verdict) for n in exp.nodes] == [("n1", "placed"), ("n2", "fits")]


# --- families ---------------------------------------------------------------------------------


def test_group_families_keeps_the_cheapest_first() -> None:
    names = ["m5.large", "c5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.xlarge", "odd"]
    assert group_families(names) == ("m5: large..4xlarge (4)", "c5: large..xlarge (2)", "odd")
    assert group_families([]) == ()
