"""Garbage collection with the AWS provider (moto server): an instance tagged for the cluster with no
NodeClaim for more than 30 s is terminated; a registered NodeClaim whose instance is gone is deleted."""

from __future__ import annotations

import time

import moto_world

from controllers.harness import World
from karpy.api import encode
from karpy.catalog import aws as catalog_aws
from karpy.controllers.lifecycle import GC_INTERVAL, NodeClaimLifecycle
from karpy.model.objects import Condition, NodeClaim, NodeClassRef
from karpy.providers.aws import instances, stack
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.metrics import AWSMetrics

TAGS = {
    "karpenter.sh/nodepool": "default",
    "karpenter.k8s.aws/ec2nodeclass": "default",
    "eks:eks-cluster-name": moto_world.CLUSTER,
    f"kubernetes.io/cluster/{moto_world.CLUSTER}": "owned",
}


def _run(world: moto_world.World) -> str:
    answer = world.clients.ec2.run_instances(
        ImageId=world.ami_x86,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=world.subnets["us-west-2a"],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in TAGS.items()]}
        ],
    )
    return str(answer["Instances"][0]["InstanceId"])


def test_orphaned_instances_are_terminated_and_claims_without_instances_deleted(
    world: moto_world.World,
) -> None:
    kube_world = World.make((), start=time.time())  # EC2's launch times are wall-clock times
    built = stack.build(
        world.clients,
        AWSSettings(cluster_name=moto_world.CLUSTER),
        cluster=kube_world.cluster,
        clock=kube_world.ctx.clock,
        metrics=AWSMetrics(),
        shipped=catalog_aws,
    )
    kube_world.ctx.cloud = built.provider
    orphan, owned, gone = _run(world), _run(world), _run(world)
    ref = NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")
    registered = (
        Condition("Launched", "True"),
        Condition("Registered", "True"),
        Condition("Initialized", "True"),
    )
    for name, instance_id in (("default-owned", owned), ("default-gone", gone)):
        kube_world.apply(
            encode.node_claim(
                NodeClaim(
                    name=name,
                    node_pool="default",
                    node_class_ref=ref,
                    provider_id=instances.provider_id("us-west-2a", instance_id),
                    conditions=registered,
                )
            )
        )
    instances.terminate(world.clients.ec2, [gone])  # the spot reclaimed it, say
    lifecycle = NodeClaimLifecycle(kube_world.ctx)
    lifecycle.reconcile()  # the first pass schedules the first collection
    kube_world.loop.run(until=kube_world.loop.now + 15)
    lifecycle._garbage_collect(kube_world.loop.now)  # too young (< 30 s): kept
    assert instances.describe(world.clients.ec2, [orphan])[0].state == "running"
    later = kube_world.loop.now + GC_INTERVAL
    lifecycle._garbage_collect(later)
    states = {i.id: i.state for i in instances.describe(world.clients.ec2, [orphan, owned])}
    assert states[orphan] in ("shutting-down", "terminated")
    assert states[owned] == "running"
    assert kube_world.cluster.claims["default-gone"].deleting
    assert not kube_world.cluster.claims["default-owned"].deleting
