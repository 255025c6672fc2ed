"""The managed instance profile of ``spec.role`` and the check of ``spec.instanceProfile``, over moto."""

from __future__ import annotations

import dataclasses

import moto_world
import pytest

from karpy.model.nodeclass import EC2NodeClass
from karpy.providers.aws import instanceprofile

CLUSTER, REGION = moto_world.CLUSTER, moto_world.REGION


def _nc(world: moto_world.World, **fields: object) -> EC2NodeClass:
    base = EC2NodeClass(name="default", role=world.role, uid="uid-default", tags={"team": "payments"})
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def _profiles(world: moto_world.World) -> list[dict[str, object]]:
    """The profiles under karpy's path (filtered here: moto ignores ``PathPrefix``)."""
    found = world.clients.iam.list_instance_profiles()["InstanceProfiles"]
    return [p for p in found if str(p["Path"]).startswith("/karpenter/")]


def test_role_creates_a_tagged_profile_holding_the_role(world: moto_world.World) -> None:
    nc = _nc(world)
    name = instanceprofile.ensure_instance_profile(world.clients.iam, nc, cluster=CLUSTER, region=REGION)
    assert name.startswith(f"{CLUSTER}_")
    assert name[len(CLUSTER) + 1 :].isdigit()
    profile = world.clients.iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    assert profile["Path"] == f"/karpenter/{REGION}/{CLUSTER}/uid-default/"
    assert [r["RoleName"] for r in profile["Roles"]] == [world.role]
    assert {t["Key"]: t["Value"] for t in profile["Tags"]} == {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "eks:eks-cluster-name": CLUSTER,
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "topology.kubernetes.io/region": REGION,
        "team": "payments",
    }


def test_existing_profile_is_reused(world: moto_world.World) -> None:
    nc = _nc(world)
    first = instanceprofile.ensure_instance_profile(world.clients.iam, nc, cluster=CLUSTER, region=REGION)
    second = instanceprofile.ensure_instance_profile(world.clients.iam, nc, cluster=CLUSTER, region=REGION)
    assert first == second
    assert [p["InstanceProfileName"] for p in _profiles(world)] == [first]


def test_name_is_stable_per_region_and_uid_and_fits_iam() -> None:
    name = instanceprofile.profile_name(cluster=CLUSTER, region=REGION, uid="u1")
    assert name == instanceprofile.profile_name(cluster=CLUSTER, region=REGION, uid="u1")
    assert name != instanceprofile.profile_name(cluster=CLUSTER, region=REGION, uid="u2")
    assert name != instanceprofile.profile_name(cluster=CLUSTER, region="eu-west-1", uid="u1")
    long = instanceprofile.profile_name(cluster="c" * 200, region=REGION, uid="u1")
    assert len(long) <= instanceprofile.MAX_NAME
    assert long.split("_")[1] == name.split("_")[1]


def test_role_change_swaps_the_role(world: moto_world.World) -> None:
    iam = world.clients.iam
    iam.create_role(RoleName="KarpenterNodeRole-v2", AssumeRolePolicyDocument="{}")
    name = instanceprofile.ensure_instance_profile(iam, _nc(world), cluster=CLUSTER, region=REGION)
    again = instanceprofile.ensure_instance_profile(
        iam,
        _nc(world, role=f"arn:aws:iam::{moto_world.ACCOUNT}:role/KarpenterNodeRole-v2"),
        cluster=CLUSTER,
        region=REGION,
    )
    assert again == name
    profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["KarpenterNodeRole-v2"]


def test_new_nodeclass_tags_reach_an_existing_profile(world: moto_world.World) -> None:
    iam = world.clients.iam
    name = instanceprofile.ensure_instance_profile(iam, _nc(world), cluster=CLUSTER, region=REGION)
    instanceprofile.ensure_instance_profile(
        iam, _nc(world, tags={"team": "payments", "cost-center": "42"}), cluster=CLUSTER, region=REGION
    )
    tags = {
        t["Key"]: t["Value"]
        for t in iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Tags"]
    }
    assert tags["cost-center"] == "42"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"


def test_missing_role_names_the_field(world: moto_world.World) -> None:
    with pytest.raises(instanceprofile.InstanceProfileError) as caught:
        instanceprofile.ensure_instance_profile(
            world.clients.iam, _nc(world, role="NoSuchRole"), cluster=CLUSTER, region=REGION
        )
    assert caught.value.field == "spec.role"
    assert caught.value.reason == "RoleNotFound"


def test_user_managed_profile_is_checked(world: moto_world.World) -> None:
    iam = world.clients.iam
    iam.create_instance_profile(InstanceProfileName="my-profile")
    nc = _nc(world, role="", instance_profile="my-profile")
    assert instanceprofile.ensure_instance_profile(iam, nc, cluster=CLUSTER, region=REGION) == "my-profile"
    assert _profiles(world) == []  # nothing created
    with pytest.raises(instanceprofile.InstanceProfileError) as caught:
        instanceprofile.ensure_instance_profile(
            iam, _nc(world, role="", instance_profile="not-there"), cluster=CLUSTER, region=REGION
        )
    assert caught.value.field == "spec.instanceProfile"
    assert caught.value.reason == "InstanceProfileNotFound"
    assert str(caught.value) == "spec.instanceProfile: instance profile not-there not found"


def test_delete_removes_the_role_and_the_profile(world: moto_world.World) -> None:
    iam = world.clients.iam
    nc = _nc(world)
    instanceprofile.ensure_instance_profile(iam, nc, cluster=CLUSTER, region=REGION)
    instanceprofile.delete_instance_profile(iam, nc, cluster=CLUSTER, region=REGION)
    assert _profiles(world) == []
    iam.get_role(RoleName=world.role)  # the role itself stays
    instanceprofile.delete_instance_profile(iam, nc, cluster=CLUSTER, region=REGION)  # gone: fine


def test_delete_leaves_a_profile_outside_karpys_path(world: moto_world.World) -> None:
    iam = world.clients.iam
    nc = _nc(world)
    name = instanceprofile.profile_name(cluster=CLUSTER, region=REGION, uid=nc.uid)
    iam.create_instance_profile(InstanceProfileName=name, Path="/someone-else/")
    instanceprofile.delete_instance_profile(iam, nc, cluster=CLUSTER, region=REGION)
    iam.get_instance_profile(InstanceProfileName=name)
