"""AWSCloudProvider against the moto server: launch, batching, subnets, tags, delete, list, drift.

The EC2NodeClass here carries a hand-written Ready status (the seeded subnets, security group
and AMIs), so these tests exercise the provider alone; tests/providers/aws/test_aws_nodeclass_status.py
covers resolving that status, and tests/adapters/test_operator_aws.py the whole operator.
CreateFleet errors are stubbed (moto never returns them) in test_aws_fleet.py; here one test
puts botocore's Stubber on CreateFleet to show a claim retried on the offerings left.
"""

from __future__ import annotations

import base64
import dataclasses
from email import message_from_string
from typing import Any

import moto_world
import pytest
import yaml
from botocore.stub import ANY, Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.catalog import aws as catalog_aws
from karpy.model import errors, labels
from karpy.model.nodeclass import (
    AMI,
    CapacityReservation,
    EC2NodeClass,
    EC2NodeClassStatus,
    SecurityGroup,
    Subnet,
)
from karpy.model.objects import Condition, NodeClaim, NodeClassRef, NodePool
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import NO_SCHEDULE, Taint
from karpy.providers.aws import drift, instances, stack
from karpy.providers.aws.cluster import ClusterInfo
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.metrics import AWSMetrics
from karpy.state.cluster import Cluster
from karpy.state.events import ObjectEvent

ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
REF = NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")


class Clock:
    def __init__(self) -> None:
        self.t = 1_760_000_000.0

    def now(self) -> float:
        return self.t


def _node_class(world: moto_world.World, **changes: Any) -> EC2NodeClass:
    status = EC2NodeClassStatus(
        subnets=tuple(Subnet(world.subnets[z], z, f"usw2-az{i}") for i, z in enumerate(ZONES, 1)),
        security_groups=(SecurityGroup(world.security_group, "cluster"),),
        amis=(
            AMI(world.ami_arm, "golden-arm64", False, (Requirement.in_(labels.ARCH, "arm64"),)),
            AMI(world.ami_x86, "golden-x86", False, (Requirement.in_(labels.ARCH, "amd64"),)),
        ),
        instance_profile="test-cluster_profile",
        conditions=(Condition("Ready", "True", observed_generation=1),),
    )
    fields: dict[str, Any] = {
        "name": "default",
        "role": world.role,
        "tags": {"team": "payments"},
        "generation": 1,
        "annotations": {drift.HASH_ANNOTATION: "123", drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION},
        "status": status,
    }
    fields.update(changes)
    return EC2NodeClass(**fields)


@dataclasses.dataclass
class Rig:
    world: moto_world.World
    cluster: Cluster
    stack: stack.AWSStack
    clock: Clock

    @property
    def provider(self) -> Any:
        return self.stack.provider

    def put(self, nc: EC2NodeClass) -> None:
        self.cluster.apply(ObjectEvent("MODIFIED", nc))


@pytest.fixture
def rig(world: moto_world.World) -> Rig:
    clock = Clock()
    cluster = Cluster(lambda pool, _nc: holder[0].provider.instance_types(pool))
    holder: list[stack.AWSStack] = []
    settings_ = AWSSettings(cluster_name=moto_world.CLUSTER)
    built = stack.build(
        world.clients,
        settings_,
        cluster=cluster,
        clock=clock,
        metrics=AWSMetrics(),
        shipped=catalog_aws,
        server_version="v1.31.4",
    )
    holder.append(built)
    built.instance_types.refresh()
    out = Rig(world, cluster, built, clock)
    out.put(_node_class(world))
    cluster.apply(ObjectEvent("ADDED", NodePool(name="default", node_class_ref=REF)))
    return out


def _claim(name: str = "default-abc12", *types: str, **changes: Any) -> NodeClaim:
    fields: dict[str, Any] = {
        "name": name,
        "node_pool": "default",
        "labels": {labels.NODEPOOL: "default", "team": "web"},
        "requirements": (
            Requirement.in_(labels.INSTANCE_TYPE, *(types or ("m5.large", "c5.large", "m6g.large"))),
            Requirement.in_(labels.CAPACITY_TYPE, "on-demand"),
            Requirement.in_(labels.ARCH, "amd64"),
        ),
        "taints": (Taint("dedicated", NO_SCHEDULE, "web"),),
        "node_class_ref": REF,
        "requests": Resources.parse({"cpu": "1", "memory": "1Gi"}),
    }
    fields.update(changes)
    return NodeClaim(**fields)


def _user_data(rig: Rig, template: str) -> str:
    versions = rig.world.clients.ec2.describe_launch_template_versions(LaunchTemplateName=template)
    encoded = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    return base64.b64decode(encoded).decode()


def test_not_ready_node_classes_offer_no_types_and_refuse_launches(rig: Rig) -> None:
    pool = rig.cluster.node_pools["default"]
    assert rig.provider.instance_types(pool)  # Ready
    rig.put(_node_class(rig.world, generation=2))  # spec changed, status not yet reconciled
    assert rig.provider.instance_types(pool) == ()
    with pytest.raises(errors.NodeClassNotReady):
        rig.provider.create(_claim())
    other = dataclasses.replace(
        _claim(), node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "nope")
    )
    with pytest.raises(errors.InsufficientCapacity):
        rig.provider.create(other)


def test_create_launches_the_cheapest_fit_in_the_subnet_with_most_addresses(rig: Rig) -> None:
    claim = rig.provider.create(_claim())
    zone, instance_id = instances.parse(claim.provider_id) or ("", "")
    (instance,) = instances.describe(rig.world.clients.ec2, [instance_id])
    # moto takes the first override; karpy sorts them by template, type and zone, so the
    # cheapest type of the claim (c5.large) in the first zone is what it launches
    assert instance.instance_type == claim.labels[labels.INSTANCE_TYPE]
    assert instance.zone == zone == claim.labels[labels.ZONE]
    assert instance.subnet_id == rig.world.subnets[zone]
    assert instance.image_id == rig.world.ami_x86 == claim.image_id  # the amd64 AMI for an amd64 type
    assert claim.labels[labels.CAPACITY_TYPE] == "on-demand"
    assert claim.labels["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert claim.labels["topology.k8s.aws/zone-id"].startswith("usw2-az")
    assert labels.HOSTNAME not in claim.labels
    assert claim.capacity.get("pods") > 0 and claim.allocatable.get("memory") < claim.capacity.get("memory")
    assert claim.annotations[drift.HASH_ANNOTATION] == "123"
    assert claim.annotations["karpenter.k8s.aws/instance-profile-name"] == "test-cluster_profile"
    tags = instance.tags
    assert tags["eks:eks-cluster-name"] == moto_world.CLUSTER
    assert tags[f"kubernetes.io/cluster/{moto_world.CLUSTER}"] == "owned"
    assert tags["karpenter.sh/nodepool"] == "default" and tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags["team"] == "payments"


def test_user_data_carries_the_cluster_taints_labels_and_max_pods(rig: Rig) -> None:
    claim = rig.provider.create(_claim("default-x", "m5.large"))
    (template,) = rig.provider.launch_templates.names()
    text = _user_data(rig, template)
    parts = [
        p for p in message_from_string(text).walk() if p.get_content_type() == "application/node.eks.aws"
    ]
    config = yaml.safe_load(parts[-1].get_payload())
    assert config["spec"]["cluster"]["name"] == moto_world.CLUSTER
    assert config["spec"]["cluster"]["apiServerEndpoint"] == rig.world.endpoint
    assert config["spec"]["cluster"]["cidr"] == "172.20.0.0/16"
    kubelet = config["spec"]["kubelet"]["config"]
    assert kubelet["maxPods"] == claim.capacity.get("pods") == 29  # m5.large, ENI-limited
    assert kubelet["kubeReserved"]["memory"] == "574Mi"  # 11 x 29 + 255
    taints = {(t["key"], t["effect"]) for t in kubelet["registerWithTaints"]}
    assert ("karpenter.sh/unregistered", "NoExecute") in taints and ("dedicated", "NoSchedule") in taints
    flags = " ".join(config["spec"]["kubelet"]["flags"])
    assert "team=web" in flags and "karpenter.sh/capacity-type=on-demand" in flags


def test_identical_claims_share_one_create_fleet_call(rig: Rig) -> None:
    claims = [_claim(f"default-{i:05d}") for i in range(6)]
    claims.append(
        _claim(
            "default-arm",
            "m6g.large",
            requirements=(
                Requirement.in_(labels.INSTANCE_TYPE, "m6g.large"),
                Requirement.in_(labels.CAPACITY_TYPE, "on-demand"),
            ),
        )
    )
    results = rig.provider.create_batch(claims)
    assert all(isinstance(r, NodeClaim) for r in results)
    assert rig.provider.fleet.calls == 2
    ids = {r.provider_id for r in results if isinstance(r, NodeClaim)}
    assert len(ids) == 7
    arm = results[-1]
    assert isinstance(arm, NodeClaim) and arm.image_id == rig.world.ami_arm


def test_a_claim_is_retried_on_the_offerings_left_after_a_capacity_error(rig: Rig) -> None:
    claim = _claim("default-ice", "m5.large", "c5.large")
    first = rig.provider._plan(claim).request  # what the first CreateFleet asks for
    first_choice = first.overrides[0]
    ice = {
        "FleetId": "fleet-1",
        "Instances": [],
        "Errors": [
            {
                "LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": o.launch_template, "Version": "1"},
                    "Overrides": {"InstanceType": o.instance_type, "AvailabilityZone": o.zone},
                },
                "Lifecycle": "on-demand",
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "none left",
            }
            for o in first.overrides
            if o.instance_type == first_choice.instance_type
        ],
    }
    second = {
        "FleetId": "fleet-2",
        "Instances": [
            {
                "LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": first_choice.launch_template},
                    "Overrides": {
                        "InstanceType": "m5.large",
                        "AvailabilityZone": "us-west-2b",
                        "SubnetId": "subnet-x",
                    },
                },
                "Lifecycle": "on-demand",
                "InstanceIds": ["i-0feedfeedfeedfeed"],
                "InstanceType": "m5.large",
            }
        ],
        "Errors": [],
    }
    with Stubber(rig.world.clients.ec2) as stub:  # CreateFleet only: moto never reports capacity errors
        stub.add_response("describe_subnets", {"Subnets": []}, {"SubnetIds": ANY})
        stub.add_response("create_fleet", ice)
        stub.add_response("create_fleet", second)
        rig.clock.t += 61  # the subnet cache is stale: one DescribeSubnets first
        launched = rig.provider.create(claim)
    assert launched.labels[labels.INSTANCE_TYPE] == "m5.large"
    assert launched.provider_id == "aws:///us-west-2b/i-0feedfeedfeedfeed"
    assert rig.stack.unavailable.is_unavailable("on-demand", first_choice.instance_type, first_choice.zone)


def test_delete_terminates_then_reports_the_instance_gone(rig: Rig) -> None:
    claim = rig.provider.create(_claim())
    assert [c.provider_id for c in rig.provider.list()] == [claim.provider_id]
    assert rig.provider.get(claim.provider_id).provider_id == claim.provider_id
    rig.provider.delete(claim)
    with pytest.raises(errors.NodeClaimNotFound):
        for _ in range(3):  # moto: shutting-down, then terminated
            rig.provider.delete(claim)
    assert rig.provider.list() == []
    with pytest.raises(errors.NodeClaimNotFound):
        rig.provider.get(claim.provider_id)
    with pytest.raises(errors.NodeClaimNotFound):
        rig.provider.delete(_claim("never-launched"))


def test_drift_order_hash_ami_security_groups_subnet(rig: Rig) -> None:
    claim = rig.provider.create(_claim())
    world = rig.world
    # moto does not apply the launch template's security groups to a fleet's instances; EC2 does
    _, instance_id = instances.parse(claim.provider_id) or ("", "")
    world.clients.ec2.modify_instance_attribute(InstanceId=instance_id, Groups=[world.security_group])
    rig.provider.list()  # the provider's description of the instance, as garbage collection refreshes it
    assert rig.provider.is_drifted(claim) == ""
    rig.put(
        _node_class(
            world,
            annotations={drift.HASH_ANNOTATION: "456", drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION},
        )
    )
    assert rig.provider.is_drifted(claim) == drift.NODECLASS_DRIFT
    base = _node_class(world)
    new_ami = dataclasses.replace(
        base.status, amis=(AMI("ami-0new", "golden-x86-v2", False, (Requirement.in_(labels.ARCH, "amd64"),)),)
    )
    rig.put(dataclasses.replace(base, status=new_ami))
    assert rig.provider.is_drifted(claim) == drift.AMI_DRIFT
    other_group = dataclasses.replace(
        base.status, security_groups=(SecurityGroup(world.named_security_group),)
    )
    rig.put(dataclasses.replace(base, status=other_group))
    assert rig.provider.is_drifted(claim) == drift.SECURITY_GROUP_DRIFT
    zone = claim.labels[labels.ZONE]
    fewer = dataclasses.replace(base.status, subnets=tuple(s for s in base.status.subnets if s.zone != zone))
    rig.put(dataclasses.replace(base, status=fewer))
    assert rig.provider.is_drifted(claim) == drift.SUBNET_DRIFT


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    types=st.lists(
        st.sampled_from(["m5.large", "c5.large", "m6g.large", "r5.xlarge", "t3.medium"]),
        min_size=1,
        unique=True,
    ),
    capacity=st.sampled_from([("on-demand",), ("spot",), ("spot", "on-demand")]),
    count=st.integers(min_value=1, max_value=4),
)
def test_every_instance_karpy_launches_carries_the_cluster_tag(
    rig: Rig, types: list[str], capacity: tuple[str, ...], count: int
) -> None:
    claims = [
        _claim(
            f"default-{i}",
            requirements=(
                Requirement.in_(labels.INSTANCE_TYPE, *types),
                Requirement.in_(labels.CAPACITY_TYPE, *capacity),
            ),
        )
        for i in range(count)
    ]
    rig.provider.create_batch(claims)
    for instance in instances.list_instances(rig.world.clients.ec2, cluster=moto_world.CLUSTER):
        assert instance.tags.get("eks:eks-cluster-name") == moto_world.CLUSTER
        assert instance.tags.get(f"kubernetes.io/cluster/{moto_world.CLUSTER}") == "owned"
    everything = rig.world.clients.ec2.describe_instances()["Reservations"]
    for reservation in everything:
        for raw in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in raw.get("Tags") or []}
            assert tags.get("eks:eks-cluster-name") == moto_world.CLUSTER, raw["InstanceId"]


def test_cluster_info_is_discovered(rig: Rig) -> None:
    info: ClusterInfo = rig.stack.info
    assert info.endpoint == rig.world.endpoint and info.ca_bundle == rig.world.ca
    assert info.service_cidr == "172.20.0.0/16" and info.kubernetes_version == "1.31"
    assert not info.problems


def test_in_flight_addresses_order_the_subnets_and_full_ones_are_skipped(rig: Rig) -> None:
    """A zone's subnet is the one with the most free addresses, EC2's count (DescribeSubnets, every
    minute) minus what launches since then were charged (the fewest pods of their candidate types,
    as upstream predicts); the prediction only orders subnets. A subnet EC2 reports full
    (InsufficientFreeAddressesInSubnet) is skipped for 3 minutes."""
    world = rig.world
    second = world.clients.ec2.create_subnet(
        VpcId=world.vpc, CidrBlock="10.0.48.0/21", AvailabilityZone="us-west-2a"
    )["Subnet"]["SubnetId"]  # 2,043 free addresses beside the seeded /20's 4,091
    base = _node_class(world)
    more = (*base.status.subnets, Subnet(second, "us-west-2a", "usw2-az1"))
    rig.put(dataclasses.replace(base, status=dataclasses.replace(base.status, subnets=more)))
    only_a = (
        Requirement.in_(labels.INSTANCE_TYPE, "m5.large"),
        Requirement.in_(labels.CAPACITY_TYPE, "on-demand"),
        Requirement.in_(labels.ZONE, "us-west-2a"),
    )
    first = rig.provider.create(_claim("default-a1", requirements=only_a))
    (instance,) = instances.describe(world.clients.ec2, [(instances.parse(first.provider_id) or ("", ""))[1]])
    assert instance.subnet_id == world.subnets["us-west-2a"]  # the /20: most free addresses
    rig.provider.subnets.charge(world.subnets["us-west-2a"], 3000)  # launches in flight predicted there
    plan = rig.provider._plan(_claim("default-a2", requirements=only_a))
    assert {o.subnet_id for o in plan.request.overrides} == {second}
    rig.provider.subnets.charge(world.subnets["us-west-2a"], -3000)
    rig.provider.subnets.full(world.subnets["us-west-2b"])  # what the fleet reports on that error
    only_b = (*only_a[:2], Requirement.in_(labels.ZONE, "us-west-2b"))
    with pytest.raises(errors.InsufficientCapacity, match="free addresses"):
        rig.provider.create(_claim("default-b1", requirements=only_b))
    rig.clock.t += 181
    assert isinstance(rig.provider.create(_claim("default-b2", requirements=only_b)), NodeClaim)


def test_a_claim_allowing_reserved_launches_into_the_capacity_reservation(rig: Rig) -> None:
    base = _node_class(rig.world)
    reservation = CapacityReservation(
        id="cr-0123456789abcdef0",
        instance_type="m5.large",
        availability_zone="us-west-2c",
        owner_id="123456789012",
    )
    rig.put(
        dataclasses.replace(
            base, status=dataclasses.replace(base.status, capacity_reservations=(reservation,))
        )
    )
    claim = _claim(
        "default-cr",
        requirements=(
            Requirement.in_(labels.INSTANCE_TYPE, "m5.large", "c5.large"),
            Requirement.in_(labels.CAPACITY_TYPE, "reserved", "on-demand"),
        ),
    )
    plan = rig.provider._plan(claim)
    assert plan.request.capacity_type == "reserved"
    assert {(o.instance_type, o.zone) for o in plan.request.overrides} == {("m5.large", "us-west-2c")}
    assert plan.request.api(1)["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    (template,) = {o.launch_template for o in plan.request.overrides}
    data = rig.world.clients.ec2.describe_launch_template_versions(LaunchTemplateName=template)[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": "cr-0123456789abcdef0"
    }
    launched = rig.provider.create(claim)
    assert launched.labels[labels.CAPACITY_TYPE] == "reserved"
    assert launched.labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0123456789abcdef0"
    assert launched.labels[labels.ZONE] == "us-west-2c"
