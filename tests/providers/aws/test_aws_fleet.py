"""CreateFleet requests: shape, batching of identical launches, capacity errors.

The happy path runs against the moto server; moto never answers CreateFleet with ``Errors[]``
(it always launches the first override), so the capacity-error tests put botocore's Stubber on
the EC2 client for CreateFleet alone.
"""

from __future__ import annotations

from typing import Any

import moto_world
from botocore.stub import Stubber

from karpy.model import errors as model_errors
from karpy.providers.aws import errors, fleet, instances, launchtemplates, sdk
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.unavailable import UnavailableOfferings


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def now(self) -> float:
        return self.t


def _request(
    world: moto_world.World, template: str, *, capacity_type: str = "on-demand"
) -> fleet.FleetRequest:
    return fleet.FleetRequest(
        capacity_type=capacity_type,
        overrides=(
            fleet.Override(
                template, "m5.large", "us-west-2a", world.subnets["us-west-2a"], world.ami_x86, 0.096
            ),
            fleet.Override(
                template, "c5.large", "us-west-2b", world.subnets["us-west-2b"], world.ami_x86, 0.085
            ),
        ),
        tags=(
            ("eks:eks-cluster-name", moto_world.CLUSTER),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            (f"kubernetes.io/cluster/{moto_world.CLUSTER}", "owned"),
            ("karpenter.sh/nodepool", "default"),
        ),
    )


def _template(world: moto_world.World, clock: Clock) -> str:
    templates = launchtemplates.LaunchTemplates(world.clients.ec2, cluster=moto_world.CLUSTER, clock=clock)
    return templates.ensure(
        launchtemplates.LaunchTemplateSpec(
            image_id=world.ami_x86,
            user_data="x",
            security_group_ids=(world.security_group,),
            instance_profile="",
        )
    )


def test_request_shape_per_capacity_type() -> None:
    req = fleet.FleetRequest(
        capacity_type="spot",
        overrides=(fleet.Override("lt-a", "m5.large", "z1", "subnet-1", "ami-1", 0.04),),
        tags=(("k", "v"),),
        context="ctx-1",
    )
    body = req.api(3)
    assert body["Type"] == "instant"
    assert body["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 3,
        "DefaultTargetCapacityType": "spot",
    }
    assert body["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert "OnDemandOptions" not in body
    assert body["Context"] == "ctx-1"
    assert body["LaunchTemplateConfigs"] == [
        {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-a", "Version": "$Latest"},
            "Overrides": [
                {
                    "InstanceType": "m5.large",
                    "SubnetId": "subnet-1",
                    "ImageId": "ami-1",
                    "AvailabilityZone": "z1",
                    "Priority": 0.04,
                }
            ],
        }
    ]
    assert {t["ResourceType"] for t in body["TagSpecifications"]} == {"instance", "volume", "fleet"}
    on_demand = fleet.FleetRequest("on-demand", req.overrides, req.tags).api(1)
    assert on_demand["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert on_demand["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    block = fleet.FleetRequest("reserved", req.overrides, req.tags, capacity_block=True).api(1)
    assert block["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"


def test_identical_launches_share_one_create_fleet_call(world: moto_world.World) -> None:
    clock = Clock()
    metrics = AWSMetrics()
    f = fleet.Fleet(world.clients.ec2, unavailable=UnavailableOfferings(clock), metrics=metrics)
    template = _template(world, clock)
    same = _request(world, template)
    spot = _request(world, template, capacity_type="spot")
    results = f.launch([same, same, spot, same])
    assert f.calls == 2  # three identical on-demand launches in one call, the spot one alone
    assert all(isinstance(r, fleet.LaunchedInstance) for r in results)
    ids = [r.instance_id for r in results if isinstance(r, fleet.LaunchedInstance)]
    assert len(set(ids)) == 4
    described = {i.id: i for i in instances.describe(world.clients.ec2, ids)}
    for result in results:
        assert isinstance(result, fleet.LaunchedInstance)
        instance = described[result.instance_id]
        assert instance.tags["eks:eks-cluster-name"] == moto_world.CLUSTER  # every instance: the cluster tag
        assert instance.tags["karpenter.sh/nodepool"] == "default"
        assert (instance.instance_type, instance.zone, instance.subnet_id) == (
            result.instance_type,
            result.zone,
            result.subnet_id,
        )
    assert metrics.create_fleet_calls.labels(capacity_type="on-demand")._value.get() == 1


def _answer(instances_: list[dict[str, Any]], errors_: list[dict[str, Any]]) -> dict[str, Any]:
    return {"FleetId": "fleet-1", "Instances": instances_, "Errors": errors_}


def _error(code: str, instance_type: str, zone: str) -> dict[str, Any]:
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-a", "Version": "1"},
            "Overrides": {"InstanceType": instance_type, "AvailabilityZone": zone, "SubnetId": "subnet-1"},
        },
        "Lifecycle": "spot",
        "ErrorCode": code,
        "ErrorMessage": "no capacity",
    }


def _stub_request() -> fleet.FleetRequest:
    return fleet.FleetRequest(
        capacity_type="spot",
        overrides=(
            fleet.Override("lt-a", "m5.large", "us-west-2a", "subnet-1", "ami-1", 0.04),
            fleet.Override("lt-a", "c5.large", "us-west-2a", "subnet-1", "ami-1", 0.03),
        ),
        tags=(("k", "v"),),
    )


def test_capacity_errors_mark_offerings_unavailable_and_fail_as_insufficient_capacity(
    aws: sdk.Clients,
) -> None:
    clock = Clock()
    unavailable = UnavailableOfferings(clock)
    f = fleet.Fleet(aws.ec2, unavailable=unavailable, metrics=AWSMetrics())
    request = _stub_request()
    with Stubber(aws.ec2) as stub:  # CreateFleet: moto never reports capacity errors
        stub.add_response(
            "create_fleet",
            _answer(
                [],
                [
                    _error("InsufficientInstanceCapacity", "m5.large", "us-west-2a"),
                    _error("InsufficientInstanceCapacity", "c5.large", "us-west-2a"),
                ],
            ),
            request.api(2),
        )
        results = f.launch([request, request])
    assert all(isinstance(r, model_errors.InsufficientCapacity) for r in results)
    assert unavailable.is_unavailable("spot", "m5.large", "us-west-2a")
    assert unavailable.is_unavailable("spot", "c5.large", "us-west-2a")
    assert not unavailable.is_unavailable("on-demand", "m5.large", "us-west-2a")
    clock.t += 181
    assert not unavailable.is_unavailable("spot", "m5.large", "us-west-2a")


def test_partial_batch_and_other_errors(aws: sdk.Clients) -> None:
    clock = Clock()
    unavailable = UnavailableOfferings(clock)
    full: list[str] = []
    f = fleet.Fleet(aws.ec2, unavailable=unavailable, metrics=AWSMetrics(), on_subnet_full=full.append)
    request = _stub_request()
    launched = {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-a", "Version": "1"},
            "Overrides": {
                "InstanceType": "c5.large",
                "AvailabilityZone": "us-west-2a",
                "SubnetId": "subnet-1",
            },
        },
        "Lifecycle": "spot",
        "InstanceIds": ["i-0aaa"],
        "InstanceType": "c5.large",
    }
    with Stubber(aws.ec2) as stub:
        stub.add_response(
            "create_fleet",
            _answer([launched], [_error("InsufficientFreeAddressesInSubnet", "m5.large", "us-west-2a")]),
            request.api(2),
        )
        stub.add_response(
            "create_fleet", _answer([], [_error("InvalidParameterValue", "m5.large", "us-west-2a")])
        )
        stub.add_client_error("create_fleet", "UnauthorizedOperation", "not allowed")
        first = f.launch([request, request])
        other = f.launch([request])
        denied = f.launch([request])
    assert isinstance(first[0], fleet.LaunchedInstance) and first[0].instance_id == "i-0aaa"
    assert first[0].capacity_type == "spot" and first[0].subnet_id == "subnet-1"
    assert isinstance(first[1], model_errors.InsufficientCapacity)
    assert full == ["subnet-1"]
    assert isinstance(other[0], errors.AWSError) and not isinstance(
        other[0], model_errors.InsufficientCapacity
    )
    assert "InvalidParameterValue" in str(other[0])
    assert isinstance(denied[0], errors.AWSError) and denied[0].code == "UnauthorizedOperation"


def test_spot_service_linked_role_failure_marks_spot_unavailable(aws: sdk.Clients) -> None:
    clock = Clock()
    unavailable = UnavailableOfferings(clock)
    f = fleet.Fleet(aws.ec2, unavailable=unavailable, metrics=AWSMetrics())
    with Stubber(aws.ec2) as stub:
        stub.add_response(
            "create_fleet",
            _answer(
                [], [_error("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "m5.large", "us-west-2a")]
            ),
        )
        f.launch([_stub_request()])
    assert unavailable.is_unavailable("spot", "r5.large", "us-west-2c")  # the whole capacity type


def test_a_vanished_launch_template_is_forgotten(aws: sdk.Clients) -> None:
    forgotten: list[str] = []
    f = fleet.Fleet(
        aws.ec2,
        unavailable=UnavailableOfferings(Clock()),
        metrics=AWSMetrics(),
        on_template_gone=forgotten.append,
    )
    with Stubber(aws.ec2) as stub:
        stub.add_client_error("create_fleet", "InvalidLaunchTemplateName.NotFoundException", "gone")
        result = f.launch([_stub_request()])
    assert isinstance(result[0], errors.AWSError)
    assert forgotten == ["lt-a"]
