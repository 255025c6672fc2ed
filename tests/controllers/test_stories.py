"""Whole stories through the wired controllers on a virtual loop.

Every story runs karpy's real controllers (``runtime.wiring.build``) against the in-memory
API server, the kwok provider (Node objects, no VM), the kube-scheduler stand-in and the
workload stand-ins, in virtual time only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness

from karpy.catalog import conformance as conformance_catalog
from karpy.model import errors
from karpy.providers.kwok import KwokCloudProvider
from karpy.runtime import wiring
from karpy.sim.binder import Binder
from karpy.sim.workloads import Workloads

CATALOG = conformance_catalog.load(Path(__file__).parents[1] / "conformance/catalogs/karpenter-fake.yaml")
T0 = 1_767_225_600.0


def node_pool(
    name: str = "default",
    *,
    consolidate_after: str = "30s",
    labels: dict[str, str] | None = None,
    budgets: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": labels or {}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
                "budgets": budgets or [{"nodes": "100%"}],
            },
        },
    }


NODE_CLASS = {
    "apiVersion": "karpenter.kwok.sh/v1alpha1",
    "kind": "KWOKNodeClass",
    "metadata": {"name": "default"},
}


def pod_template(app: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ]
        },
    }


class Story:
    """A wired world: karpy's controllers, kwok nodes, a binder and workloads."""

    def __init__(
        self, *, registration_delay: float = 10.0, pools: list[dict[str, Any]] | None = None
    ) -> None:
        def kwok(kube: Any, clock: Any, loop: Any) -> KwokCloudProvider:
            return KwokCloudProvider(
                kube,
                clock,
                types_for=lambda _pool, _nc: CATALOG.instance_types,
                node_class_for=lambda _pool: None,
                registration_delay=registration_delay,
                loop=loop,
            )

        self.world = harness.World.make(
            CATALOG.instance_types, cloud_factory=kwok, start=T0, well_known=CATALOG.well_known
        )
        self.cloud: KwokCloudProvider = self.world.cloud
        self.world.cluster.instance_types = lambda pool, _nc: self.cloud.instance_types(pool)
        self.world.apply(NODE_CLASS, *(pools or [node_pool()]))
        self.controllers = wiring.build(self.world.ctx, self.world.loop, self.world.feed)
        self.binder = Binder(self.world.kube, self.world.cluster, self.world.ctx.clock)
        self.world.loop.add(self.binder.name, lambda: self.binder.reconcile().requeue_after, priority=20)
        self.workloads = Workloads(
            self.world.kube, self.world.ctx.clock, loop=self.world.loop, ready_after=5.0
        )

    @property
    def loop(self) -> Any:
        return self.world.loop

    def run(self, seconds: float) -> None:
        self.loop.run(until=self.loop.now + seconds)

    def claims(self) -> list[dict[str, Any]]:
        return self.world.kube.objects("NodeClaim")

    def nodes(self) -> list[dict[str, Any]]:
        return self.world.kube.objects("Node")

    def pods(self) -> list[dict[str, Any]]:
        return self.world.kube.objects("Pod")

    def condition(self, claim: dict[str, Any], kind: str) -> str:
        for cond in (claim.get("status") or {}).get("conditions") or []:
            if cond["type"] == kind:
                return str(cond["status"])
        return ""

    def log(self) -> list[tuple[float, str, str, str]]:
        return [(e.time, e.kind, e.name, e.reason) for e in self.world.events.events]


def test_pending_pods_get_one_nodeclaim_after_the_idle_window_then_bind() -> None:
    story = Story()
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=3)
    story.run(0.5)
    assert story.claims() == []  # still inside the 1 s idle window
    story.run(1.0)
    claims = story.claims()
    assert len(claims) == 1
    story.run(60)
    claim = story.claims()[0]
    assert [story.condition(claim, c) for c in ("Launched", "Registered", "Initialized")] == ["True"] * 3
    node = story.nodes()[0]
    assert {p["spec"].get("nodeName") for p in story.pods()} == {node["metadata"]["name"]}
    assert all(p["status"]["phase"] == "Running" for p in story.pods())
    assert not any(t["key"] == "karpenter.sh/unregistered" for t in node["spec"].get("taints") or [])


def test_an_empty_node_is_removed_after_consolidate_after_and_validation() -> None:
    story = Story()
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=2)
    story.run(60)
    assert len(story.nodes()) == 1
    story.workloads.scale("web", "default", replicas=0)
    story.run(20)
    assert len(story.claims()) == 1  # consolidateAfter (30 s) not yet elapsed
    story.run(120)
    assert story.claims() == [] and story.nodes() == []
    assert "DisruptionTerminating" in story.world.events.reasons()


def test_a_drifted_node_is_replaced_before_it_is_drained() -> None:
    story = Story()
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=2)
    story.run(60)
    old = story.claims()[0]["metadata"]["name"]
    story.world.kube.patch(
        "NodePool", "default", {"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}}
    )
    seen_old_deleting_before_new_ready = False
    for _ in range(300):
        story.run(1)
        claims = {c["metadata"]["name"]: c for c in story.claims()}
        new = [c for n, c in claims.items() if n != old]
        old_deleting = old in claims and claims[old]["metadata"].get("deletionTimestamp")
        if old_deleting and (not new or story.condition(new[0], "Initialized") != "True"):
            seen_old_deleting_before_new_ready = True
        if old not in claims:
            break
    assert not seen_old_deleting_before_new_ready
    claims = story.claims()
    assert len(claims) == 1 and claims[0]["metadata"]["name"] != old
    assert claims[0]["metadata"]["labels"]["team"] == "a"
    story.run(60)
    assert all(p["spec"].get("nodeName") for p in story.pods())


def test_a_pdb_with_max_unavailable_zero_holds_the_drain_until_it_allows() -> None:
    story = Story(pools=[node_pool(consolidate_after="Never")])
    story.workloads.set_deployment("db", "default", template=pod_template("db"), replicas=1)
    story.world.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}},
        }
    )
    story.run(60)
    claim = story.claims()[0]["metadata"]["name"]
    story.world.kube.delete("NodeClaim", claim)
    story.run(300)
    held = {c["metadata"]["name"]: c for c in story.claims()}
    assert claim in held and held[claim]["metadata"].get("deletionTimestamp")  # held: the PDB allows nothing
    node = held[claim]["status"]["nodeName"]
    db = [p for p in story.pods() if p["metadata"]["labels"]["app"] == "db"]
    assert [p["spec"]["nodeName"] for p in db] == [node]  # not evicted
    assert (
        "FailedDraining" in story.world.events.reasons()
        or story.world.ctx.metrics.value("karpy_pods_eviction_requests_total", {"code": "429"}) > 0
    )
    story.world.kube.patch("PodDisruptionBudget", "db", {"spec": {"maxUnavailable": 1}}, namespace="default")
    story.run(120)
    assert claim not in [c["metadata"]["name"] for c in story.claims()]


def test_insufficient_capacity_deletes_the_claim_and_the_next_launch_uses_another_offering() -> None:
    story = Story()
    cheapest = CATALOG.instance_types[1]  # small-instance-type is the cheapest that fits a 1-cpu pod
    story.cloud.ice = {(cheapest.name, "test-zone-1", "on-demand")}
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=1)
    story.run(120)
    assert "InsufficientCapacityError" in story.world.events.reasons()
    nodes = story.nodes()
    assert len(nodes) == 1
    labels = nodes[0]["metadata"]["labels"]
    assert (labels["node.kubernetes.io/instance-type"], labels["topology.kubernetes.io/zone"]) != (
        cheapest.name,
        "test-zone-1",
    )
    assert all(p["spec"].get("nodeName") for p in story.pods())


def test_a_claim_whose_node_never_registers_is_removed_after_15_minutes() -> None:
    story = Story(registration_delay=86_400)
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=1)
    story.run(5)
    first = story.claims()[0]["metadata"]["name"]
    story.run(14 * 60)
    assert first in [c["metadata"]["name"] for c in story.claims()]
    story.run(2 * 60)
    assert first not in [c["metadata"]["name"] for c in story.claims()]
    assert "RegistrationTimeout" in story.world.events.reasons()


def _replay() -> list[tuple[float, str, str, str]]:
    story = Story()
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=3)
    story.run(60)
    story.workloads.scale("web", "default", replicas=1)
    story.run(300)
    story.world.kube.patch(
        "NodePool", "default", {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}}
    )
    story.run(300)
    return story.log()


def test_the_same_story_twice_gives_identical_event_logs() -> None:
    first, second = _replay(), _replay()
    assert first == second
    assert len(first) > 5


def test_errors_reach_no_controller_uncaught() -> None:
    story = Story()
    story.world.kube.fail_next("create", "NodeClaim", errors.Conflict("injected"))
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=1)
    story.run(120)
    assert all(p["spec"].get("nodeName") for p in story.pods())


def test_cluster_gauges_follow_the_story() -> None:
    story = Story()
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=2)
    story.run(90)
    metrics = story.world.ctx.metrics
    assert metrics.value("karpy_cluster_state_node_count") == 1
    node = story.nodes()[0]["metadata"]["labels"]
    it = next(t for t in CATALOG.instance_types if t.name == node["node.kubernetes.io/instance-type"])
    price = min(
        o.price
        for o in it.offerings
        if o.zone == node["topology.kubernetes.io/zone"]
        and o.capacity_type == node["karpenter.sh/capacity-type"]
    )
    assert metrics.value("karpy_cluster_cost_per_hour", {"nodepool": "default"}) == price
    assert metrics.value("karpy_pods_startup_duration_seconds_count") == 2


def test_nodepool_status_counts_its_nodes_and_gauges_by_type() -> None:
    story = Story()
    story.workloads.set_deployment("web", "default", template=pod_template("web"), replicas=2)
    story.run(90)
    pool = story.world.kube.get("NodePool", "default")
    node = story.nodes()[0]
    assert pool["status"]["nodes"] == 1
    assert pool["status"]["resources"]["cpu"] == node["status"]["capacity"]["cpu"]
    labels = node["metadata"]["labels"]
    assert (
        story.world.ctx.metrics.value(
            "karpy_nodes",
            {
                "nodepool": "default",
                "instance_type": labels["node.kubernetes.io/instance-type"],
                "capacity_type": labels["karpenter.sh/capacity-type"],
            },
        )
        == 1
    )
    assert story.world.ctx.metrics.value("karpy_pods_pending") == 0
