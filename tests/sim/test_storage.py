"""The simulator's storage: StatefulSet claims, the provisioner, and the volume filters of the
kube-scheduler stand-in and the Cluster Autoscaler model, in virtual time."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import builders
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.core.scheduling import volumes as volumes_mod
from karpy.model import labels as wk
from karpy.model.requirements import Requirement
from karpy.model.volumes import (
    BIND_COMPLETED,
    PersistentVolume,
    PersistentVolumeClaim,
    PodVolume,
    Storage,
    StorageClass,
)
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim import predicates
from karpy.sim.binder import Binder
from karpy.sim.ca import World, scaleup
from karpy.sim.ca.config import NodeGroupConfig
from karpy.sim.ca.groups import node_group
from karpy.sim.statefulsets import ClaimTemplates
from karpy.sim.storage import Provisioner
from karpy.sim.workloads import Workloads
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

START = 1_767_225_600.0
NS = "data"
EBS = "ebs.csi.aws.com"
ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass
class Env:
    loop: Loop
    kube: MemoryKube
    cluster: Cluster
    binder: Binder
    workloads: Workloads
    storage: Provisioner

    def node(self, name: str, zone: str, *, cpu: str = "4") -> None:
        labels = {wk.ZONE: zone, wk.INSTANCE_TYPE: "m.large"}
        model = builders.node(name, labels=labels, allocatable={"cpu": cpu, "memory": "64Gi", "pods": "50"})
        self.kube.create(encode.node(model))

    def run(self, seconds: float) -> None:
        self.loop.run(self.loop.now + seconds)

    def pod(self, name: str) -> dict[str, Any]:
        return self.kube.get("Pod", name, NS)

    def node_of(self, name: str) -> str:
        return str(self.pod(name)["spec"].get("nodeName", ""))

    def zone_of_claim(self, claim: str) -> str:
        """The zone of the volume bound to ``claim`` (its node affinity)."""
        volume = self.kube.get(
            "PersistentVolume", self.kube.get("PersistentVolumeClaim", claim, NS)["spec"]["volumeName"]
        )
        (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        (expression,) = term["matchExpressions"]
        assert expression["key"] == wk.ZONE
        return str(expression["values"][0])

    def zone_of_node(self, name: str) -> str:
        return self.cluster.nodes[name].labels[wk.ZONE]


def storage_class(mode: str = "WaitForFirstConsumer", zones: tuple[str, ...] = ()) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "ebs", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": EBS,
        "volumeBindingMode": mode,
    }
    if zones:
        raw["allowedTopologies"] = [{"matchLabelExpressions": [{"key": wk.ZONE, "values": list(zones)}]}]
    return raw


def make(*, limit: int = 25, seed: str = "1", sc: dict[str, Any] | None = None) -> Env:
    loop = Loop(start=START)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cluster = Cluster(lambda _pool, _nc: ())
    cluster.storage_complete = True
    kube.watch(Feed(cluster))
    storage = Provisioner(
        kube,
        cluster,
        loop,
        rng=random.Random(f"{seed}:volumes"),
        zones=ZONES,
        types={},
        limits_of=lambda _node: {EBS: limit},
    )
    kube.create(sc if sc is not None else storage_class())
    binder = Binder(kube, cluster, clock, volumes=storage)
    loop.add(binder.name, lambda: binder.reconcile().requeue_after, priority=20)
    workloads = Workloads(kube, clock, loop=loop, ready_after=1.0)
    return Env(loop, kube, cluster, binder, workloads, storage)


def claims(*names: str, delete_when_scaled: bool = False) -> ClaimTemplates:
    templates = tuple(
        {
            "metadata": {"name": n},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
        }
        for n in names
    )
    return ClaimTemplates(templates, labels={"app": "db"}, delete_when_scaled=delete_when_scaled)


def template(cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "db", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    }


def db(env: Env, replicas: int, *, cpu: str = "1", parallel: bool = True, **kw: Any) -> None:
    env.workloads.set_statefulset(
        "db", NS, template=template(cpu), replicas=replicas, parallel=parallel, claims=claims("data", **kw)
    )


# -- the StatefulSet's claims ----------------------------------------------------------------


def test_a_statefulset_creates_each_pods_claims_first_and_keeps_them_when_it_scales_down() -> None:
    env = make()
    env.node("a1", "zone-a")
    env.workloads.set_statefulset(
        "db", NS, template=template(), replicas=2, claims=claims("data", "wal")
    )  # OrderedReady: db-1 after db-0 is Ready
    env.run(10)
    names = sorted(c["metadata"]["name"] for c in env.kube.objects("PersistentVolumeClaim"))
    assert names == ["data-db-0", "data-db-1", "wal-db-0", "wal-db-1"]
    claim = env.kube.get("PersistentVolumeClaim", "data-db-1", NS)
    assert claim["metadata"]["labels"] == {"app": "db"}
    assert claim["spec"]["resources"] == {"requests": {"storage": "10Gi"}}
    assert env.pod("db-1")["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}},
        {"name": "wal", "persistentVolumeClaim": {"claimName": "wal-db-1"}},
    ]
    env.workloads.scale("db", NS, replicas=0, kind="StatefulSet")
    env.run(10)
    assert [p for p in env.kube.objects("Pod") if p["metadata"]["namespace"] == NS] == []
    assert len(env.kube.objects("PersistentVolumeClaim")) == 4  # Retain: the claims outlive the pods
    assert len(env.kube.objects("PersistentVolume")) == 4


def test_when_scaled_delete_drops_the_claims_and_volumes_of_the_ordinals_scaled_away() -> None:
    env = make()
    env.node("a1", "zone-a", cpu="8")
    db(env, 3, delete_when_scaled=True)
    env.run(10)
    assert len(env.kube.objects("PersistentVolume")) == 3
    env.workloads.scale("db", NS, replicas=1, kind="StatefulSet")
    env.run(10)
    assert [c["metadata"]["name"] for c in env.kube.objects("PersistentVolumeClaim")] == ["data-db-0"]
    (volume,) = env.kube.objects("PersistentVolume")
    assert volume["spec"]["claimRef"]["name"] == "data-db-0"
    assert env.storage.deleted == 2


# -- provisioning ------------------------------------------------------------------------------


def test_a_wait_for_first_consumer_volume_is_made_in_the_zone_of_the_node_its_pod_is_bound_to() -> None:
    env = make()
    env.node("b1", "zone-b")
    db(env, 1)
    env.run(5)
    assert env.node_of("db-0") == "b1"
    claim = env.kube.get("PersistentVolumeClaim", "data-db-0", NS)
    annotations = claim["metadata"]["annotations"]
    assert annotations[BIND_COMPLETED] == "yes"
    assert annotations["volume.kubernetes.io/selected-node"] == "b1"
    assert claim["status"]["phase"] == "Bound"
    volume = env.kube.get("PersistentVolume", claim["spec"]["volumeName"])
    assert volume["spec"]["csi"]["driver"] == EBS
    assert volume["spec"]["claimRef"]["name"] == "data-db-0"
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert env.zone_of_claim("data-db-0") == "zone-b"
    assert env.storage.provisioned == {"zone-b": 1}


def test_immediate_claims_get_a_zone_of_their_class_drawn_from_the_seeded_rng() -> None:
    def zones(seed: str) -> list[str]:
        env = make(seed=seed, sc=storage_class("Immediate", zones=("zone-b", "zone-c")))
        for zone in ZONES:
            env.node(f"n-{zone}", zone, cpu="16")
        db(env, 6)
        env.run(10)
        out = [env.zone_of_claim(f"data-db-{i}") for i in range(6)]
        assert [env.zone_of_node(env.node_of(f"db-{i}")) for i in range(6)] == out  # each pod with its volume
        return out

    first = zones("1")
    assert set(first) <= {"zone-b", "zone-c"} and len(set(first)) == 2
    assert zones("1") == first  # the same seed draws the same zones


def test_a_claim_naming_an_existing_volume_is_bound_to_it() -> None:
    env = make()
    env.node("a1", "zone-a")
    env.node("c1", "zone-c", cpu="16")
    affinity = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["zone-a"]}]}
            ]
        }
    }
    env.kube.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "restored"},
            "spec": {
                "csi": {"driver": EBS, "volumeHandle": "vol-1"},
                "nodeAffinity": affinity,
                "storageClassName": "ebs",
            },
        }
    )
    env.kube.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-0", "namespace": NS},
            "spec": {"storageClassName": "ebs", "volumeName": "restored"},
        }
    )
    db(env, 1)
    env.run(5)
    assert env.node_of("db-0") == "a1"  # its volume's zone, though c1 has more room
    assert env.kube.get("PersistentVolumeClaim", "data-db-0", NS)["metadata"]["annotations"][BIND_COMPLETED]
    assert env.storage.provisioned == {}


# -- the binder's volume filters -----------------------------------------------------------------


def test_a_pod_whose_volume_is_in_one_zone_waits_for_room_there_and_never_binds_elsewhere() -> None:
    env = make()
    env.node("a1", "zone-a", cpu="2")
    db(env, 1)
    env.run(5)
    assert env.node_of("db-0") == "a1" and env.zone_of_claim("data-db-0") == "zone-a"
    env.node("b1", "zone-b", cpu="16")  # emptier: LeastAllocated would prefer it
    env.kube.delete("Pod", "db-0", NS)  # evicted: recreated with its name and claim
    filler = {**template("2")["spec"], "priority": 100, "nodeSelector": {wk.HOSTNAME: "a1"}}
    env.workloads.run_pod("filler", NS, template={"spec": filler})  # (bound first: higher priority)
    env.run(5)
    assert env.node_of("filler") == "a1"
    assert env.node_of("db-0") == ""  # a1 is full now, b1 is in another zone
    waited = env.binder.volumes.waits[predicates.VOLUME_TOPOLOGY]
    assert [w.split("@")[0] for w in waited] == [f"{NS}/db-0"]
    env.workloads.delete_pod("filler", NS)
    env.run(5)
    assert env.node_of("db-0") == "a1"
    assert [b.pod for b in env.binder.volumes.pinned] == [f"{NS}/db-0"]
    assert (env.storage.bindings_checked, env.storage.cross_zone) == (2, 0)


def test_a_nodes_csinode_caps_the_volumes_it_attaches() -> None:
    env = make(limit=2)
    env.node("a1", "zone-a", cpu="16")
    db(env, 3)
    env.run(5)
    csi = env.kube.get("CSINode", "a1")
    assert csi["spec"]["drivers"] == [
        {"name": EBS, "nodeID": "a1", "topologyKeys": [wk.ZONE], "allocatable": {"count": 2}}
    ]
    bound = sorted(p["metadata"]["name"] for p in env.kube.objects("Pod") if p["spec"].get("nodeName"))
    assert bound == ["db-0", "db-1"]  # a third claim would be one over the node's limit
    assert [w.split("@")[0] for w in env.binder.volumes.waits[predicates.VOLUME_LIMIT]] == [f"{NS}/db-2"]
    env.node("a2", "zone-a", cpu="16")
    env.run(5)
    assert env.node_of("db-2") == "a2"
    env.kube.delete("Node", "a2")
    env.run(1)
    assert [c["metadata"]["name"] for c in env.kube.objects("CSINode")] == ["a1"]  # gone with its Node


def test_a_pod_waits_while_its_immediate_claim_has_no_volume() -> None:
    env = make(sc=storage_class("Immediate"))
    env.node("a1", "zone-a")
    env.kube.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared", "namespace": NS},
            "spec": {"storageClassName": "missing"},
        }
    )
    spec = {
        **template()["spec"],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "shared"}}],
    }
    env.workloads.run_pod("user", NS, template={"spec": spec})
    env.run(5)
    assert env.node_of("user") == ""
    assert [w.split("@")[0] for w in env.binder.volumes.waits[predicates.VOLUME]] == [f"{NS}/user"]


# -- the Cluster Autoscaler model ---------------------------------------------------------------


def _pinned(zone: str) -> volumes_mod.VolumeContext:
    """One claim, bound to a volume in ``zone``."""
    pv = PersistentVolume("pv-1", driver=EBS, node_affinity=((Requirement.in_(wk.ZONE, zone),),))
    claim = PersistentVolumeClaim(NS, "data-db-0", "ebs", "pv-1", bind_completed=True, phase="Bound")
    storage = Storage(
        claims={claim.key: claim},
        volumes={"pv-1": pv},
        classes={"ebs": StorageClass("ebs", EBS, "WaitForFirstConsumer", default=True)},
        complete=True,
    )
    return volumes_mod.VolumeContext(storage, {})


def test_the_cluster_autoscaler_model_grows_a_group_only_in_the_zone_of_the_pods_volume() -> None:
    it = builders.instance_type("m.large", cpu="4", memory="16Gi", zones=ZONES)
    pod = builders.pod(
        "db-0", namespace=NS, cpu="1", memory="1Gi", volumes=(PodVolume("data", claim="data-db-0"),)
    )
    every_zone = node_group(NodeGroupConfig("general", ("m.large",), zones=ZONES), {it.name: it})
    option = scaleup.estimate(World({}, volumes=_pinned("zone-b")), every_zone, [pod], 3, {})
    assert option.zones == ["zone-b"]  # not zone-a, the least-populated zone it would try first
    one_zone = node_group(NodeGroupConfig("a-only", ("m.large",), zones=("zone-a",)), {it.name: it})
    assert scaleup.estimate(World({}, volumes=_pinned("zone-b")), one_zone, [pod], 3, {}).zones == []
    assert scaleup.estimate(World({}), one_zone, [pod], 3, {}).zones == ["zone-a"]  # (without the rules)
