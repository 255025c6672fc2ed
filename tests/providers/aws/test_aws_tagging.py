"""Tagging: a registered claim's instance gets Name and karpenter.sh/nodeclaim (moto server)."""

from __future__ import annotations

from typing import Any

import moto_world

from controllers.harness import World
from karpy.api import encode
from karpy.model.objects import Condition, NodeClaim, NodeClassRef
from karpy.providers.aws import instances, tagging


def _instance(world: moto_world.World) -> str:
    answer = world.clients.ec2.run_instances(
        ImageId=world.ami_x86,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=world.subnets["us-west-2a"],
    )
    return str(answer["Instances"][0]["InstanceId"])


def _claim(name: str, instance_id: str, *, registered: bool = True, **changes: Any) -> dict[str, Any]:
    conditions = [Condition("Launched", "True")] + ([Condition("Registered", "True")] if registered else [])
    return encode.node_claim(
        NodeClaim(
            name=name,
            provider_id=instances.provider_id("us-west-2a", instance_id),
            node_name=f"ip-10-0-0-{len(name)}.us-west-2.compute.internal" if registered else "",
            conditions=tuple(conditions),
            node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"),
            **changes,
        )
    )


def test_registered_claims_are_tagged_once(world: moto_world.World) -> None:
    kube_world = World.make(())
    done, waiting = _instance(world), _instance(world)
    kube_world.apply(_claim("default-a", done), _claim("default-b", waiting, registered=False))
    assert kube_world.problems == [] and len(kube_world.cluster.claims) == 2
    controller = tagging.Tagging(kube_world.ctx, world.clients.ec2, cluster=moto_world.CLUSTER)
    assert controller.reconcile().requeue_after is None
    (tagged,) = instances.describe(world.clients.ec2, [done])
    assert tagged.tags["karpenter.sh/nodeclaim"] == "default-a"
    assert tagged.tags["Name"] == kube_world.cluster.claims["default-a"].node_name
    assert tagged.tags["eks:eks-cluster-name"] == moto_world.CLUSTER
    assert kube_world.cluster.claims["default-a"].annotations[tagging.TAGGED_ANNOTATION] == "true"
    (untagged,) = instances.describe(world.clients.ec2, [waiting])
    assert "karpenter.sh/nodeclaim" not in untagged.tags  # not registered yet
    calls = len(kube_world.kube.calls)
    controller.reconcile()
    assert len(kube_world.kube.calls) == calls  # nothing left to do: no write


def test_many_claims_are_tagged_a_pass_at_a_time(world: moto_world.World) -> None:
    kube_world = World.make(())
    ids = [_instance(world) for _ in range(tagging.PER_PASS + 3)]
    kube_world.apply(*(_claim(f"default-{i:03d}", instance_id) for i, instance_id in enumerate(ids)))
    controller = tagging.Tagging(kube_world.ctx, world.clients.ec2, cluster=moto_world.CLUSTER)
    assert controller.reconcile().requeue_after == 1.0
    tagged = [c for c in kube_world.cluster.claims.values() if tagging.TAGGED_ANNOTATION in c.annotations]
    assert len(tagged) == tagging.PER_PASS
    assert controller.reconcile().requeue_after is None
    assert all(tagging.TAGGED_ANNOTATION in c.annotations for c in kube_world.cluster.claims.values())
