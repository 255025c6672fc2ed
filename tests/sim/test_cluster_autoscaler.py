"""The Cluster Autoscaler model on the in-memory API server, the binder and SimCloud, in virtual time."""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pytest

from karpy import catalog as catalog_mod
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import Catalog
from karpy.model.objects import Condition, Node
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim.binder import Binder
from karpy.sim.ca import (
    NODE_GROUP_LABEL,
    TO_BE_DELETED,
    CAConfig,
    ClusterAutoscaler,
    NodeGroupConfig,
    OverprovisioningConfig,
    parse_config,
)
from karpy.sim.cloud import Insufficient, LaunchLatency, SimCloud
from karpy.sim.workloads import Workloads
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

START = 1_767_225_600.0
NS = "shop"
M5_2XL = "m5.2xlarge"  # 7910m cpu allocatable


@functools.cache
def aws() -> Catalog:
    return catalog_mod.load("aws:us-east-1")


def group(name: str = "general", **overrides: Any) -> NodeGroupConfig:
    fields: dict[str, Any] = {
        "name": name,
        "instance_types": (M5_2XL, "m5a.2xlarge", "m6i.2xlarge"),
        "min": 0,
        "max": 10,
    }
    fields.update(overrides)
    return NodeGroupConfig(**fields)


@dataclass
class Env:
    loop: Loop
    kube: MemoryKube
    cluster: Cluster
    cloud: SimCloud
    ca: ClusterAutoscaler
    workloads: Workloads

    def run(self, seconds_after_start: float) -> None:
        self.loop.run(START + seconds_after_start)

    def launched(self) -> list[tuple[str, str, str]]:
        return [(r.instance_type, r.zone, r.capacity_type) for r in self.cloud.billing]

    def nodes(self) -> list[str]:
        return sorted(self.cluster.nodes)

    def node(self, name: str, *, zone: str = "us-east-1a", group_name: str = "general") -> None:
        """A node of the group's ASG that existed before CA started."""
        it = next(t for t in aws().instance_types if t.name == M5_2XL)
        labels = {
            NODE_GROUP_LABEL: group_name,
            wk.ZONE: zone,
            wk.INSTANCE_TYPE: M5_2XL,
            wk.HOSTNAME: name,
            wk.ARCH: "amd64",
            wk.OS: "linux",
        }
        model = Node(
            name,
            labels=labels,
            capacity=it.capacity,
            allocatable=it.allocatable,
            conditions=(Condition("Ready", "True"),),
        )
        self.kube.create(encode.node(model))

    def deploy(self, name: str, *, replicas: int, cpu: str, **spec: Any) -> None:
        self.workloads.set_deployment(name, NS, template=template(name, cpu=cpu, **spec), replicas=replicas)

    def bound(self, app: str) -> list[str]:
        return sorted(p.node_name for p in self.cluster.pods.values() if p.labels.get("app") == app)


def template(app: str, *, cpu: str, memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"metadata": {"labels": {"app": app}}, "spec": {"containers": [container], **spec}}


def make(
    *groups: NodeGroupConfig,
    latency: float = 40.0,
    insufficient: tuple[Insufficient, ...] = (),
    before: Any = None,
    **config: Any,
) -> Env:
    loop = Loop(start=START)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cluster = Cluster(lambda _pool, _nc: aws().instance_types)
    kube.watch(Feed(cluster))
    binder = Binder(kube, cluster, clock)
    loop.add(binder.name, lambda: binder.reconcile().requeue_after, at=START + 1.0)
    workloads = Workloads(kube, clock, loop=loop, ready_after=1.0)
    cloud = SimCloud(
        kube,
        clock,
        loop,
        types_for=lambda _pool, _nc: aws().instance_types,
        rng=random.Random(1),
        launch_latency=LaunchLatency.fixed(latency),
        insufficient=insufficient,
    )
    env = Env(loop, kube, cluster, cloud, None, workloads)  # type: ignore[arg-type]
    if before is not None:
        before(env)
    config.setdefault("asg_launch_overhead", 0.0)
    cfg = CAConfig(node_groups=groups or (group(),), **config)
    env.ca = ClusterAutoscaler(kube, cluster, clock, loop, cloud, cfg, aws(), rng=random.Random(7))
    return env


def bare_pod(
    name: str,
    node: str,
    *,
    cpu: str,
    app: str = "app",
    owner: bool = True,
    annotations: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod already running on ``node``."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "labels": {"app": app},
        "annotations": dict(annotations or {}),
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{app}-rs",
                "uid": f"uid-{app}",
                "controller": True,
            }
        ]
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [container], **spec},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


# -- scale-up ------------------------------------------------------------------------------


def test_scales_up_one_node_per_needed_node_only_after_a_scan() -> None:
    env = make(asg_launch_overhead=30.0)
    env.deploy("web", replicas=7, cpu="2")  # 3 fit per m5.2xlarge: 3 nodes
    env.run(9.9)
    assert env.ca.scale_ups == [] and env.launched() == []
    env.run(10.0)  # the first scan: the ASG's desired size goes up, the instances come 30 s later
    [scale_up] = env.ca.scale_ups
    assert (scale_up.group, scale_up.nodes, len(scale_up.pods)) == ("general", 3, 7)
    assert env.launched() == []
    env.run(40.0)
    assert sorted(env.launched()) == [
        (M5_2XL, "us-east-1a", "on-demand"),
        (M5_2XL, "us-east-1b", "on-demand"),
        (M5_2XL, "us-east-1c", "on-demand"),
    ]
    env.run(79.0)  # launch latency 40 s: no node yet, and no second scale-up for the same pods
    assert env.nodes() == [] and len(env.ca.scale_ups) == 1
    env.run(85.0)
    assert len(env.nodes()) == 3
    assert all(env.bound("web")) and len(set(env.bound("web"))) == 3
    env.run(300.0)
    assert len(env.ca.scale_ups) == 1 and len(env.cloud.billing) == 3


def test_pods_that_fit_existing_nodes_do_not_scale_up() -> None:
    env = make(before=lambda e: e.node("pre-1"))
    env.deploy("web", replicas=3, cpu="2")
    env.run(60.0)
    assert env.ca.scale_ups == [] and env.launched() == []
    assert env.bound("web") == ["pre-1"] * 3


def test_group_max_bounds_the_scale_up_and_unhelpable_pods_are_reported() -> None:
    env = make(group(max=2))
    env.deploy("web", replicas=4, cpu="5")
    env.deploy("huge", replicas=1, cpu="64")
    env.run(10.0)
    [scale_up] = env.ca.scale_ups
    assert scale_up.nodes == 2
    env.run(200.0)
    assert len(env.cloud.billing) == 2
    assert any(e.reason == "NotTriggerScaleUp" for e in env.ca.events)


def test_template_subtracts_daemonset_overhead() -> None:
    def daemonset(env: Env) -> None:
        ds = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": template("agent", cpu="1"),
            },
        }
        env.kube.create(ds)

    env = make(before=daemonset)
    env.deploy("web", replicas=2, cpu="3500m")  # 2 x 3.5 fits 7.91 but not 7.91 - 1
    env.run(10.0)
    assert env.ca.scale_ups[0].nodes == 2


def test_insufficient_capacity_falls_back_to_the_next_type_of_the_mixed_instances_policy() -> None:
    ice = (Insufficient(M5_2XL, "us-east-1a", START, START + 3600),)
    env = make(insufficient=ice)
    env.deploy("web", replicas=1, cpu="5")
    env.run(20.0)
    assert env.launched() == [("m5a.2xlarge", "us-east-1a", "on-demand")]


def expander_env(expander: str) -> Env:
    small = group("small", instance_types=("m5.xlarge",), priority=10)
    big = group("big", instance_types=("m5.4xlarge",), priority=20)
    env = make(small, big, expander=expander)
    env.deploy("web", replicas=1, cpu="3")
    env.run(20.0)
    return env


def test_least_waste_picks_the_group_wasting_least() -> None:
    env = expander_env("least-waste")
    assert [s.group for s in env.ca.scale_ups] == ["small"]
    assert env.launched()[0][0] == "m5.xlarge"


def test_priority_expander_picks_the_highest_priority() -> None:
    env = expander_env("priority")
    assert [s.group for s in env.ca.scale_ups] == ["big"]
    assert env.launched()[0][0] == "m5.4xlarge"


def test_most_pods_and_chained_expanders() -> None:
    one = group("one", instance_types=("m5.xlarge",), priority=5)  # 3.92 cpu: one 3-cpu pod per node
    other = group("other", instance_types=("m5.2xlarge",), priority=5)
    env = make(one, replace(other, max=1), expander="most-pods")
    env.deploy("web", replicas=4, cpu="3")  # one: 4 nodes, 4 pods; other: 1 node, 2 pods
    env.run(10.0)
    assert [s.group for s in env.ca.scale_ups] == ["one"]
    env = make(one, other, expander="priority,least-waste")  # equal priority: least-waste decides
    env.deploy("web", replicas=2, cpu="3")
    env.run(10.0)
    assert [s.group for s in env.ca.scale_ups] == ["other"]


def test_random_expander_is_deterministic_with_the_injected_rng() -> None:
    picks = []
    for _ in range(2):
        env = make(group("a"), group("b"), group("c"), expander="random")
        env.deploy("web", replicas=1, cpu="1")
        env.run(10.0)
        picks.append(env.ca.scale_ups[0].group)
    assert picks[0] == picks[1]


def test_node_not_registered_in_time_is_deleted_and_the_group_backed_off() -> None:
    env = make(group("slow"), group("fast", priority=1), latency=2000.0, expander="priority")
    env.deploy("web", replicas=1, cpu="1")
    env.run(10.0 + 900.0)
    assert [e.reason for e in env.ca.events if e.reason == "FailedScaleUp"] == ["FailedScaleUp"]
    assert env.ca.groups["fast"].backoff_until > env.loop.now
    assert env.cloud.billing[0].terminated_at is not None
    env.run(930.0)  # the next scan tries the other group
    assert [s.group for s in env.ca.scale_ups] == ["fast", "slow"]


def test_asg_replaces_an_interrupted_spot_instance() -> None:
    env = make(group(capacity_type="spot", min=1))
    env.run(45.0)
    [node] = env.nodes()
    assert env.launched() == [(M5_2XL, "us-east-1a", "spot")]
    env.cloud.interrupt(node)  # wired through SimCloud.on_interrupt
    assert [e.reason for e in env.ca.events] == ["NodeReplaced"]
    env.run(90.0)
    assert len(env.nodes()) == 1 and env.nodes() != [node]
    assert env.ca.node_group_sizes() == {"general": 1} and env.ca.scale_ups == []


# -- scale-down ----------------------------------------------------------------------------


def two_nodes(env: Env) -> None:
    env.node("a-node", zone="us-east-1a")
    env.node("b-node", zone="us-east-1b")


def test_scale_down_waits_the_unneeded_time() -> None:
    env = make(before=two_nodes)
    env.kube.create(bare_pod("busy", "b-node", cpu="5"))  # 63 %: needed
    env.run(10.0)
    assert set(env.ca.scale_down.unneeded) == {"a-node"}
    env.run(609.0)
    assert env.nodes() == ["a-node", "b-node"]
    env.run(611.0)  # unneeded since +10: deleted at the +610 scan, tainted first
    taints = env.kube.get("Node", "a-node")["spec"]["taints"]
    assert [t["key"] for t in taints] == [TO_BE_DELETED]
    env.run(616.0)  # node-delete-delay-after-taint: 5 s
    assert env.nodes() == ["b-node"]
    assert [e.object for e in env.ca.events if e.reason == "ScaleDown"] == ["a-node", "a-node"]


def test_scale_down_respects_the_utilization_threshold() -> None:
    env = make(before=two_nodes, scale_down_utilization_threshold=0.3)
    env.kube.create(bare_pod("small", "a-node", cpu="1", app="small"))  # 13 %
    env.kube.create(bare_pod("medium", "b-node", cpu="3", app="medium"))  # 38 %
    env.run(10.0)
    assert set(env.ca.scale_down.unneeded) == {"a-node"}
    env.run(640.0)  # the drain evicts the pod, then the node goes
    assert env.nodes() == ["b-node"]
    assert f"{NS}/small" not in env.cluster.pods
    env.run(2000.0)
    assert env.nodes() == ["b-node"]


def test_scale_down_moves_pods_with_a_controller_and_the_workload_recreates_them() -> None:
    env = make(before=two_nodes)
    env.deploy("web", replicas=2, cpu="1")  # LeastAllocated spreads: one per node
    env.run(5.0)
    assert env.bound("web") == ["a-node", "b-node"]
    env.run(700.0)  # both under 50 %; the first drained node's pod moves to the other
    assert len(env.nodes()) == 1
    assert env.bound("web") == [env.nodes()[0]] * 2


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (bare_pod("p", "a-node", cpu="1", owner=False), "NotReplicated"),
        (
            bare_pod(
                "p",
                "a-node",
                cpu="1",
                annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
            ),
            "NotSafeToEvictAnnotation",
        ),
        (
            bare_pod("p", "a-node", cpu="1", volumes=[{"name": "scratch", "emptyDir": {}}]),
            "LocalStorageRequested",
        ),
        (bare_pod("p", "a-node", cpu="7"), ""),  # 88 %: not underutilized
        (bare_pod("p", "a-node", cpu="3500m"), "NoPlaceToMovePods"),  # b-node has 2.91 cpu free
        (bare_pod("p", "a-node", cpu="1", app="guarded"), "NotEnoughPdb"),
    ],
)
def test_nodes_whose_pods_cannot_move_are_kept(pod: dict[str, Any], reason: str) -> None:
    env = make(before=two_nodes)
    env.kube.create(bare_pod("busy", "b-node", cpu="5", app="busy"))
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    env.kube.create(pdb)
    env.kube.create(pod)
    env.run(10.0)
    assert env.ca.scale_down.unneeded == {}
    if reason:
        assert env.ca.scale_down.unremovable["a-node"][1] == reason
    env.run(1500.0)
    assert env.nodes() == ["a-node", "b-node"]


def test_safe_to_evict_local_volumes_and_memory_empty_dirs_do_not_block() -> None:
    env = make(before=two_nodes)
    env.kube.create(bare_pod("busy", "b-node", cpu="5", app="busy"))
    volumes = [{"name": "tmp", "emptyDir": {"medium": "Memory"}}, {"name": "cache", "emptyDir": {}}]
    annotations = {"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "cache"}
    env.kube.create(bare_pod("p", "a-node", cpu="1", volumes=volumes, annotations=annotations))
    env.run(10.0)
    assert set(env.ca.scale_down.unneeded) == {"a-node"}


def test_group_min_is_respected() -> None:
    env = make(group(min=1), before=two_nodes)  # the ASG already has 2 nodes, so min launches nothing
    env.run(1500.0)
    assert len(env.nodes()) == 1 and env.cloud.billing == []


def test_scale_down_delay_after_add() -> None:
    env = make(before=lambda e: e.node("a-node"), scale_down_unneeded_time=60.0)
    env.deploy("zonal", replicas=1, cpu="1", nodeSelector={wk.ZONE: "us-east-1b"})  # a-node is in 1a
    env.run(10.0)
    assert [s.nodes for s in env.ca.scale_ups] == [1]
    env.run(605.0)  # a-node unneeded since +20, but the cooldown after the scale-up runs to +610
    assert "a-node" in env.nodes()
    env.run(620.0)
    assert "a-node" not in env.nodes()


def test_failed_drain_is_untainted_and_scale_down_waits_the_delay_after_failure() -> None:
    env = make(before=two_nodes, scale_down_unneeded_time=60.0)
    env.kube.create(bare_pod("busy", "b-node", cpu="5", app="busy"))
    env.kube.create(bare_pod("p", "a-node", cpu="1", app="x"))
    for _ in range(13):  # every eviction for max-pod-eviction-time (2 m, retried every 10 s) fails
        env.kube.fail_next("evict", "Pod", errors.TooManyRequests("budget"))
    env.run(70.0)
    assert "a-node" in env.ca.scale_down.deleting
    env.run(200.0)
    [failed] = [e for e in env.ca.events if e.reason == "ScaleDownFailed"]
    assert failed.at == START + 190.0
    assert not env.kube.get("Node", "a-node")["spec"].get("taints")
    assert env.nodes() == ["a-node", "b-node"]
    env.run(600.0)
    assert env.nodes() == ["b-node"]
    retried = [e for e in env.ca.events if e.reason == "ScaleDown" and e.at > failed.at]
    assert retried[0].at >= failed.at + 180.0


# -- overprovisioning ----------------------------------------------------------------------


def test_overprovisioning_pause_pods_are_preempted_and_ca_scales_up_for_them() -> None:
    headroom = OverprovisioningConfig(pods=2, requests={"cpu": "3", "memory": "1Gi"}, priority=-10)
    env = make(group(min=1), overprovisioning=headroom)
    env.run(45.0)  # the ASG's minimum node came up at +40; the pause pods hold 6 of 7.91 cpu
    pause = [p for p in env.cluster.pods.values() if p.labels.get("app") == "overprovisioning"]
    assert len(pause) == 2 and all(p.node_name for p in pause) and all(p.phase == "Running" for p in pause)
    assert env.ca.scale_ups == []
    env.deploy("web", replicas=1, cpu="4")  # preempts one pause pod; no new node needed
    env.run(48.0)
    [node] = env.nodes()
    assert env.bound("web") == [node]
    env.run(50.0)  # the scan at +50 scales up for the displaced pause pod
    [scale_up] = env.ca.scale_ups
    assert scale_up.nodes == 1 and all("overprovisioning" in p for p in scale_up.pods)
    env.run(100.0)
    pause = [p for p in env.cluster.pods.values() if p.labels.get("app") == "overprovisioning"]
    assert len(pause) == 2 and len({p.node_name for p in pause}) == 2


# -- the scenario block --------------------------------------------------------------------


def test_parse_config_reads_the_scenario_block_and_names_bad_fields() -> None:
    raw = {
        "nodeGroups": [
            {
                "name": "general",
                "instanceTypes": [M5_2XL, "m5a.2xlarge"],
                "capacityType": "spot",
                "min": 2,
                "max": 200,
                "priority": 10,
                "labels": {"team": "a"},
                "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
            }
        ],
        "overprovisioning": {"pods": 4, "requests": {"cpu": "1", "memory": "2Gi"}, "priority": -10},
        "scanInterval": "10s",
        "asgLaunchOverhead": "30s",
        "scaleDownUnneededTime": "10m",
        "scaleDownUtilizationThreshold": 0.5,
        "scaleDownDelayAfterAdd": "10m",
        "expander": "least-waste",
    }
    cfg = parse_config(raw)
    assert cfg.asg_launch_overhead == 30.0 and cfg.scale_down_unneeded_time == 600.0
    assert cfg.node_groups[0].capacity_type == "spot" and cfg.node_groups[0].taints[0].key == "dedicated"
    assert cfg.overprovisioning is not None and cfg.overprovisioning.pods == 4
    with pytest.raises(errors.InputError, match=r"nodeGroups\[0\]\.max"):
        parse_config({"nodeGroups": [{"name": "g", "instanceTypes": [M5_2XL], "max": "lots"}]})
    with pytest.raises(errors.InputError, match="scanIntervall"):
        parse_config({"scanIntervall": "10s"})
    with pytest.raises(errors.InputError, match="scaleDownUnneededTime"):
        parse_config({"scaleDownUnneededTime": "ten minutes"})


def test_bad_node_groups_are_input_errors() -> None:
    with pytest.raises(errors.InputError, match="differs in cpu or memory"):
        make(group(instance_types=(M5_2XL, "m5.xlarge")))
    with pytest.raises(errors.InputError, match="not in the catalog"):
        make(group(instance_types=("x9.huge",)))
    with pytest.raises(errors.InputError, match="expander"):
        make(expander="cheapest")
