"""The EC2NodeClass status controller over the moto server and the in-memory API server.

A small world as in ``tests/controllers/harness.py``: a virtual :class:`~karpy.runtime.loop.Loop`,
:class:`~karpy.adapters.memory.MemoryKube` watched by a :class:`~karpy.state.cluster.Cluster`
through a :class:`~karpy.state.feed.Feed`, and the controller registered on the loop and woken
by its ``on_event``. AWS is the moto server seeded by the ``world`` fixture.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import moto_world

from karpy.adapters.memory import MemoryKube
from karpy.api import load
from karpy.controllers.context import Context, RecordingEvents
from karpy.metrics import Metrics
from karpy.model import labels
from karpy.model.errors import CloudError
from karpy.model.nodeclass import EC2NodeClass
from karpy.providers.aws import drift, instanceprofile, sdk
from karpy.providers.aws.cluster import ClusterInfo
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.nodeclass_status import FINALIZER, NodeClassStatusController
from karpy.providers.fake import FakeCloudProvider
from karpy.runtime.loop import Loop, LoopClock
from karpy.settings import Settings
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
KIND = "EC2NodeClass"


@dataclass
class Env:
    world: moto_world.World
    loop: Loop
    kube: MemoryKube
    cluster: Cluster
    events: RecordingEvents
    metrics: AWSMetrics
    controller: NodeClassStatusController
    deleted: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def raw(self, name: str = "default") -> dict[str, Any]:
        return next(o for o in self.kube.objects(KIND) if o["metadata"]["name"] == name)

    def model(self, name: str = "default") -> EC2NodeClass:
        obj, problems = load.parse_object(self.raw(name), file="api", index=0)
        assert not [p for p in problems if p.severity == load.ERROR], problems
        assert isinstance(obj, EC2NodeClass)
        return obj

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        return next(c for c in self.raw(name)["status"]["conditions"] if c["type"] == kind)

    def patches(self) -> int:
        return sum(1 for verb, kind, _ in self.kube.calls if verb == "patch" and kind == KIND)

    def warnings(self, name: str) -> list[tuple[str, str]]:
        return [(e.reason, e.message) for e in self.events.events if e.name == name and e.type == "Warning"]

    def ready_metric(self, name: str) -> float | None:
        return self.metrics.registry.get_sample_value("karpy_ec2nodeclass_ready", {"nodeclass": name})

    def run(self, seconds: float) -> None:
        self.loop.run(self.loop.now + seconds)


def _env(world: moto_world.World, *objects: dict[str, Any], kubernetes_version: str = "1.31") -> Env:
    loop = Loop(start=START)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cluster = Cluster(lambda _pool, _nc: (), settings=Settings())
    problems: list[str] = []
    feed = Feed(cluster, on_problem=lambda text, _event: problems.append(text))
    kube.watch(feed)
    events = RecordingEvents()
    ctx = Context(cluster, kube, FakeCloudProvider([]), clock, events, Settings(), Metrics())
    metrics = AWSMetrics()
    info = ClusterInfo(name=moto_world.CLUSTER, kubernetes_version=kubernetes_version)
    deleted: list[str] = []
    controller = NodeClassStatusController(
        ctx,
        world.clients,
        cluster=lambda: info,
        metrics=metrics,
        on_deleted=lambda nc: deleted.append(nc.name),
    )
    loop.add(controller.name, lambda: controller.reconcile().requeue_after)

    def wake(event: Any) -> None:
        if controller.on_event(event):
            loop.wake(controller.name)

    feed.listeners.append(wake)
    for obj in objects:
        kube.create(copy.deepcopy(obj))
    env = Env(world, loop, kube, cluster, events, metrics, controller, deleted, problems)
    env.run(0)
    return env


def _claim(name: str, node_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": KIND, "name": node_class},
            "requirements": [],
        },
    }


def test_resolves_tagged_resources_and_round_trips(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default"))
    nc = env.model()
    assert nc.ready()
    status = nc.status
    assert [s.id for s in status.subnets] == [
        world.subnets[z] for z in ("us-west-2a", "us-west-2c", "us-west-2b")
    ]
    assert all(s.zone and s.zone_id for s in status.subnets)
    assert [g.id for g in status.security_groups] == [world.security_group]
    by_id = {a.id: a for a in status.amis}
    assert set(by_id) == {world.ami_x86, world.ami_arm}
    assert by_id[world.ami_arm].requirements[0].key == labels.ARCH
    assert status.instance_profile == instanceprofile.profile_name(
        cluster=moto_world.CLUSTER, region=moto_world.REGION, uid="uid-default"
    )
    kinds = {c.type: c for c in status.conditions}
    assert set(kinds) == {"SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady", "Ready"}
    assert all(c.status == "True" and c.observed_generation == 1 for c in kinds.values())
    assert all(c.last_transition == START for c in kinds.values())
    raw = env.raw()
    assert FINALIZER in raw["metadata"]["finalizers"]
    assert raw["metadata"]["annotations"] == {
        drift.HASH_ANNOTATION: drift.static_hash(nc),
        drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION,
    }
    profile = world.clients.iam.get_instance_profile(InstanceProfileName=status.instance_profile)[
        "InstanceProfile"
    ]
    assert [r["RoleName"] for r in profile["Roles"]] == [world.role]
    assert {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "default"} in profile["Tags"]
    assert env.ready_metric("default") == 1.0
    assert env.patches() == 1  # finalizer, annotations and status in one write
    assert env.warnings("default") == []


def test_no_write_when_nothing_changed(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default"))
    assert env.patches() == 1
    runs = env.loop.tasks[env.controller.name].runs
    env.run(30 * 60)
    assert env.loop.tasks[env.controller.name].runs >= runs + 6  # every 5 min
    assert env.patches() == 1


def test_ssm_parameter_change_is_seen_once_the_cache_expires(world: moto_world.World) -> None:
    ssm = world.clients.ssm
    ssm.put_parameter(Name="/golden/ami", Value=world.ami_x86, Type="String")
    env = _env(world, moto_world.node_class("default", amiSelectorTerms=[{"ssmParameter": "/golden/ami"}]))
    assert [a.id for a in env.model().status.amis] == [world.ami_x86]
    ssm.put_parameter(Name="/golden/ami", Value=world.ami_arm, Type="String", Overwrite=True)
    # a spec change at +200 s: that pass still reads the cached value (and requeues for its expiry)
    env.loop.call_at(START + 200, lambda: env.kube.patch(KIND, "default", {"spec": {"userData": "echo"}}))
    env.loop.run(START + 299)
    assert env.raw()["spec"]["userData"] == "echo"
    assert env.raw()["metadata"]["annotations"][drift.HASH_ANNOTATION] == drift.static_hash(env.model())
    assert [a.id for a in env.model().status.amis] == [world.ami_x86]
    env.loop.run(START + 300)
    assert [a.id for a in env.model().status.amis] == [world.ami_arm]
    assert env.model().ready()


def test_failures_are_reported_per_nodeclass(world: moto_world.World) -> None:
    env = _env(
        world,
        moto_world.node_class("good"),
        moto_world.node_class("no-profile", role=None, instanceProfile="missing-profile"),
        moto_world.node_class("no-subnets", subnetSelectorTerms=[{"tags": {"team": "nobody"}}]),
        moto_world.node_class("no-param", amiSelectorTerms=[{"ssmParameter": "/golden/ami"}]),
    )
    assert env.model("good").ready()
    assert env.ready_metric("good") == 1.0
    expected = {
        "no-profile": (
            "InstanceProfileReady",
            "InstanceProfileNotFound",
            "spec.instanceProfile: instance profile missing-profile not found",
        ),
        "no-subnets": (
            "SubnetsReady",
            "SubnetsNotFound",
            "spec.subnetSelectorTerms: no subnet matches the terms",
        ),
        "no-param": (
            "AMIsReady",
            "SSMParameterNotFound",
            "spec.amiSelectorTerms[0].ssmParameter: parameter /golden/ami not found",
        ),
    }
    for name, (kind, reason, message) in expected.items():
        assert not env.model(name).ready(), name
        assert env.condition(name, kind) | {"lastTransitionTime": ""} == {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": "",
            "observedGeneration": 1,
        }
        ready = env.condition(name, "Ready")
        assert (ready["status"], ready["reason"], ready["message"]) == ("False", "NotReady", f"{kind}=False")
        assert env.warnings(name) == [(reason, message)]
        assert env.ready_metric(name) == 0.0
    # the other parts of a failing class still resolved
    assert len(env.model("no-param").status.subnets) == 3
    assert env.model("no-subnets").status.amis
    # still failing 20 min later (retried every minute): no second event, no second write
    patches = env.patches()
    env.run(20 * 60)
    assert all(len(env.warnings(name)) == 1 for name in expected)
    assert env.patches() == patches


def test_recovery_flips_ready_and_keeps_other_transition_times(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default", amiSelectorTerms=[{"ssmParameter": "/golden/ami"}]))
    assert env.condition("default", "Ready")["status"] == "False"
    env.run(90)
    world.clients.ssm.put_parameter(Name="/golden/ami", Value=world.ami_x86, Type="String")
    env.run(120)  # failing classes are retried every minute
    nc = env.model()
    assert nc.ready()
    amis_ready = nc.status.condition("AMIsReady")
    subnets_ready = nc.status.condition("SubnetsReady")
    assert amis_ready is not None and subnets_ready is not None
    assert amis_ready.last_transition is not None and amis_ready.last_transition > START
    assert subnets_ready.last_transition == START
    assert env.ready_metric("default") == 1.0


def test_spec_change_is_resolved_at_once(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default"))
    before = env.raw()["metadata"]["annotations"][drift.HASH_ANNOTATION]
    only = world.subnets["us-west-2b"]
    env.kube.patch(
        KIND,
        "default",
        {
            "metadata": {"generation": 2},
            "spec": {"subnetSelectorTerms": [{"id": only}], "userData": "echo hi"},
        },
    )
    env.run(0)  # the watch event woke the controller; no time passes
    nc = env.model()
    assert [s.id for s in nc.status.subnets] == [only]
    assert all(c.observed_generation == 2 for c in nc.status.conditions)
    assert nc.ready()
    after = env.raw()["metadata"]["annotations"][drift.HASH_ANNOTATION]
    assert after != before  # userData is hashed
    assert after == drift.static_hash(nc)


def test_capacity_reservation_terms_need_the_call(world: moto_world.World) -> None:
    """moto does not implement DescribeCapacityReservations: with terms that is a failing part."""
    calls: list[str] = []
    world.clients.ec2.meta.events.register(
        "before-parameter-build.ec2.DescribeCapacityReservations", lambda **_: calls.append("call")
    )
    env = _env(
        world,
        moto_world.node_class("plain"),
        moto_world.node_class("reserved", capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}]),
    )
    assert calls == ["call"]  # only for the class with terms
    plain = env.model("plain")
    assert plain.ready()
    assert plain.status.condition("CapacityReservationsReady") is None
    cond = env.condition("reserved", "CapacityReservationsReady")
    assert (cond["status"], cond["reason"]) == ("False", "CapacityReservationDiscoveryFailed")
    assert cond["message"].startswith("spec.capacityReservationSelectorTerms: DescribeCapacityReservations")
    assert not env.model("reserved").ready()


def test_kubernetes_version_unknown_fails_aliases_only(world: moto_world.World) -> None:
    env = _env(
        world,
        moto_world.node_class("alias", amiFamily=None, amiSelectorTerms=[{"alias": "al2023@latest"}]),
        moto_world.node_class("golden"),
        kubernetes_version="",
    )
    assert env.model("golden").ready()
    cond = env.condition("alias", "AMIsReady")
    assert (cond["status"], cond["reason"]) == ("False", "KubernetesVersionUnknown")
    assert cond["message"].startswith("spec.amiSelectorTerms[0].alias:")


def test_deletion_waits_for_nodeclaims_then_cleans_up(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default"))
    profile = env.model().status.instance_profile
    env.kube.create(_claim("c1", "default"))
    env.kube.create(_claim("other", "elsewhere"))
    env.kube.delete(KIND, "default")
    env.run(0)
    assert env.kube.exists(KIND, "default")
    waiting = [e for e in env.events.events if e.reason == "WaitingOnNodeClaimTermination"]
    assert [e.message for e in waiting] == ["waiting on NodeClaims c1"]
    env.run(5 * 60)
    assert len([e for e in env.events.events if e.reason == "WaitingOnNodeClaimTermination"]) == 1
    env.run(5 * 60)
    assert len([e for e in env.events.events if e.reason == "WaitingOnNodeClaimTermination"]) == 2
    world.clients.iam.get_instance_profile(InstanceProfileName=profile)  # still there
    assert env.deleted == []
    env.kube.delete("NodeClaim", "c1")
    env.run(0)  # the claim's deletion woke the controller
    assert not env.kube.exists(KIND, "default")
    assert env.deleted == ["default"]
    found = world.clients.iam.list_instance_profiles()["InstanceProfiles"]
    assert profile not in [p["InstanceProfileName"] for p in found]
    assert env.ready_metric("default") is None


def test_deletion_of_a_user_managed_profile_class_keeps_the_profile(world: moto_world.World) -> None:
    world.clients.iam.create_instance_profile(InstanceProfileName="mine")
    env = _env(world, moto_world.node_class("default", role=None, instanceProfile="mine"))
    assert env.model().ready()
    env.kube.delete(KIND, "default")
    env.run(0)
    assert not env.kube.exists(KIND, "default")
    world.clients.iam.get_instance_profile(InstanceProfileName="mine")
    assert env.deleted == ["default"]


def test_cleanup_failure_keeps_the_finalizer(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default"))
    failures: list[int] = []

    def failing(_nc: EC2NodeClass) -> None:
        failures.append(1)
        if len(failures) == 1:
            raise CloudError("DeleteLaunchTemplate: Throttling")

    env.controller.on_deleted = failing
    env.kube.delete(KIND, "default")
    env.run(0)
    assert env.kube.exists(KIND, "default")
    assert ("TerminationFailed", "cleaning up: DeleteLaunchTemplate: Throttling") in env.warnings("default")
    env.run(60)
    assert not env.kube.exists(KIND, "default")
    assert len(failures) == 2


def test_each_class_keeps_its_own_pace(world: moto_world.World) -> None:
    """A failing class is retried every minute; a Ready one is looked at every 5 min only."""
    seen: list[str] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        seen.append("bad" if params["Filters"][0]["Name"] == "subnet-id" else "good")

    world.clients.ec2.meta.events.register("before-parameter-build.ec2.DescribeSubnets", hook)
    env = _env(
        world,
        moto_world.node_class("good"),
        moto_world.node_class(
            "bad",
            subnetSelectorTerms=[{"id": world.subnets["us-west-2a"]}],
            amiSelectorTerms=[{"ssmParameter": "/golden/ami"}],
        ),
    )
    seen.clear()
    env.run(10 * 60)
    assert seen.count("good") == 2
    assert seen.count("bad") == 10
    # a spec change of one class is looked at at once, and alone
    seen.clear()
    env.kube.patch(KIND, "bad", {"spec": {"userData": "echo hi"}})
    env.run(0)
    assert seen == ["bad"]


def test_an_aws_outage_keeps_the_last_resolution(world: moto_world.World) -> None:
    env = _env(world, moto_world.node_class("default"))
    good = env.model().status
    dead = sdk.connect(endpoint_url="http://127.0.0.1:9", session=moto_world.session(), max_attempts=1)
    env.controller.clients = dataclasses.replace(world.clients, ec2=dead.ec2)
    env.run(5 * 60)
    nc = env.model()
    assert not nc.ready()
    reasons = {c.type: c.reason for c in nc.status.conditions if c.status == "False"}
    assert reasons == {
        "SubnetsReady": "SubnetDiscoveryFailed",
        "SecurityGroupsReady": "SecurityGroupDiscoveryFailed",
        "AMIsReady": "AMIDiscoveryFailed",
        "Ready": "NotReady",
    }
    assert (nc.status.subnets, nc.status.security_groups, nc.status.amis) == (
        good.subnets,
        good.security_groups,
        good.amis,
    )
    assert ("SubnetDiscoveryFailed", nc.status.condition("SubnetsReady").message) in env.warnings("default")  # type: ignore[union-attr]
    env.controller.clients = world.clients
    env.run(60)
    assert env.model().ready()
