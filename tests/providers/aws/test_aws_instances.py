"""Instances against a moto server: describe, list for the cluster, terminate idempotently, providerIDs."""

from __future__ import annotations

import moto_world

from karpy.providers.aws import instances


def _run(world: moto_world.World, tags: dict[str, str], zone: str = "us-west-2a") -> str:
    answer = world.clients.ec2.run_instances(
        ImageId=world.ami_x86,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=world.subnets[zone],
        SecurityGroupIds=[world.security_group],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    return str(answer["Instances"][0]["InstanceId"])


OURS = {
    "karpenter.sh/nodepool": "default",
    "karpenter.k8s.aws/ec2nodeclass": "default",
    "eks:eks-cluster-name": moto_world.CLUSTER,
}


def test_provider_id_round_trip() -> None:
    pid = instances.provider_id("us-west-2a", "i-0abc123")
    assert pid == "aws:///us-west-2a/i-0abc123"
    assert instances.parse(pid) == ("us-west-2a", "i-0abc123")
    assert instances.parse("kwok://node-1") is None
    assert instances.parse("aws:///us-west-2a/not-an-instance") is None


def test_describe_skips_unknown_ids_and_reads_the_fields(world: moto_world.World) -> None:
    ours = _run(world, OURS, zone="us-west-2b")
    found = instances.describe(world.clients.ec2, [ours, "i-0000000000000dead"])
    assert [i.id for i in found] == [ours]
    one = found[0]
    assert (one.instance_type, one.zone, one.state) == ("m5.large", "us-west-2b", "running")
    assert one.subnet_id == world.subnets["us-west-2b"] and one.image_id == world.ami_x86
    assert one.security_groups == (world.security_group,)
    assert one.capacity_type == "on-demand" and one.launch_time > 0
    assert one.provider_id == f"aws:///us-west-2b/{ours}"


def test_list_keeps_only_this_clusters_karpy_instances(world: moto_world.World) -> None:
    ours = _run(world, OURS)
    _run(world, {**OURS, "eks:eks-cluster-name": "another"})
    _run(world, {"eks:eks-cluster-name": moto_world.CLUSTER})  # not launched by karpy: no nodepool tag
    gone = _run(world, OURS)
    instances.terminate(world.clients.ec2, [gone])
    listed = instances.list_instances(world.clients.ec2, cluster=moto_world.CLUSTER)
    assert [i.id for i in listed] == [ours]


def test_terminate_is_idempotent(world: moto_world.World) -> None:
    ours = _run(world, OURS)
    assert instances.terminate(world.clients.ec2, [ours]) == [ours]
    assert instances.describe(world.clients.ec2, [ours])[0].state in ("shutting-down", "terminated")
    instances.terminate(world.clients.ec2, [ours])  # already terminating: no error
    assert instances.terminate(world.clients.ec2, ["i-0000000000000dead"]) == []  # unknown: done


def test_tag(world: moto_world.World) -> None:
    ours = _run(world, OURS)
    instances.tag(world.clients.ec2, [ours], {"Name": "ip-10-0-0-1", "karpenter.sh/nodeclaim": "default-x"})
    found = instances.describe(world.clients.ec2, [ours])[0]
    assert found.tags["Name"] == "ip-10-0-0-1" and found.tags["karpenter.sh/nodeclaim"] == "default-x"
