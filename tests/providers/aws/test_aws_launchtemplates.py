"""Launch templates against a moto server: content-addressed names, reuse, sweep, hydrate."""

from __future__ import annotations

import base64

import moto_world

from karpy.model.nodeclass import BlockDevice, MetadataOptions
from karpy.providers.aws import launchtemplates as lt
from karpy.providers.aws import sdk


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.t = now

    def now(self) -> float:
        return self.t


def _spec(**changes: object) -> lt.LaunchTemplateSpec:
    fields: dict[str, object] = {
        "image_id": "ami-0123",
        "user_data": "#!/bin/bash\necho hi\n",
        "security_group_ids": ("sg-1", "sg-2"),
        "instance_profile": "test-cluster_1",
        "block_devices": lt.default_block_devices("AL2023"),
        "tags": (("team", "payments"),),
        "node_class": "default",
    }
    fields.update(changes)
    return lt.LaunchTemplateSpec(**fields)  # type: ignore[arg-type]


def _templates(aws: sdk.Clients) -> dict[str, dict[str, object]]:
    found = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    return {t["LaunchTemplateName"]: t for t in found}


def test_name_is_a_hash_of_the_content() -> None:
    assert lt.name_of(_spec()) == lt.name_of(_spec())
    assert lt.name_of(_spec()).startswith(lt.NAME_PREFIX)
    for change in (
        {"image_id": "ami-9"},
        {"user_data": "other"},
        {"security_group_ids": ("sg-1",)},
        {"metadata_options": MetadataOptions(http_put_response_hop_limit=2)},
        {"detailed_monitoring": True},
        {"tags": (("team", "hospital"),)},
        {"block_devices": (BlockDevice("/dev/xvda", "100Gi", True),)},
    ):
        assert lt.name_of(_spec(**change)) != lt.name_of(_spec()), change


def test_template_data_defaults_imdsv2_hop_limit_1_and_encodes_user_data() -> None:
    data = lt.template_data(_spec())
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 1,
        "HttpTokens": "required",
        "InstanceMetadataTags": "disabled",
    }
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash\necho hi\n"
    assert data["SecurityGroupIds"] == ["sg-1", "sg-2"]
    assert data["BlockDeviceMappings"] == [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeType": "gp3", "VolumeSize": 20, "Encrypted": True}}
    ]
    assert data["IamInstanceProfile"] == {"Name": "test-cluster_1"}
    public = lt.template_data(_spec(associate_public_ip_address=False))
    assert "SecurityGroupIds" not in public
    assert public["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": ["sg-1", "sg-2"]}
    ]
    sized = lt.template_data(
        _spec(block_devices=(BlockDevice("/dev/xvdb", "1500Mi", volume_type="io2", iops=3000),))
    )
    assert sized["BlockDeviceMappings"][0]["Ebs"] == {"VolumeType": "io2", "VolumeSize": 2, "Iops": 3000}


def test_ensure_creates_once_reuses_and_tags(aws: sdk.Clients) -> None:
    clock = Clock()
    templates = lt.LaunchTemplates(aws.ec2, cluster=moto_world.CLUSTER, clock=clock)
    name = templates.ensure(_spec())
    assert templates.ensure(_spec()) == name
    assert templates.created == [name]
    found = _templates(aws)
    assert list(found) == [name]
    versions = aws.ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"]
    data = versions[0]["LaunchTemplateData"]
    assert data["ImageId"] == "ami-0123"
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    tags = {t["Key"]: t["Value"] for t in found[name]["Tags"]}
    assert tags["eks:eks-cluster-name"] == moto_world.CLUSTER
    assert tags["karpy.sh/managed-by"] == "karpy"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags["team"] == "payments"
    # a second process (a restart) finds it in EC2 instead of creating another
    again = lt.LaunchTemplates(aws.ec2, cluster=moto_world.CLUSTER, clock=clock)
    assert again.ensure(_spec()) == name and again.created == []


def test_sweep_deletes_templates_unused_for_a_minute(aws: sdk.Clients) -> None:
    clock = Clock()
    templates = lt.LaunchTemplates(aws.ec2, cluster=moto_world.CLUSTER, clock=clock)
    old = templates.ensure(_spec(image_id="ami-old"))
    clock.t += 30
    kept = templates.ensure(_spec(image_id="ami-new"))
    clock.t += 31
    assert templates.sweep() == 1
    assert list(_templates(aws)) == [kept]
    assert templates.names() == [kept]
    templates.ensure(_spec(image_id="ami-new"))  # used again: its minute starts over
    clock.t += 59
    assert templates.sweep() == 0
    assert old not in _templates(aws)


def test_hydrate_adopts_only_this_clusters_karpy_templates(aws: sdk.Clients) -> None:
    clock = Clock()
    lt.LaunchTemplates(aws.ec2, cluster=moto_world.CLUSTER, clock=clock).ensure(_spec())
    lt.LaunchTemplates(aws.ec2, cluster="other-cluster", clock=clock).ensure(_spec(image_id="ami-other"))
    aws.ec2.create_launch_template(LaunchTemplateName="users-own", LaunchTemplateData={"ImageId": "ami-x"})
    restarted = lt.LaunchTemplates(aws.ec2, cluster=moto_world.CLUSTER, clock=clock)
    assert restarted.hydrate() == 1
    clock.t += 61
    assert restarted.sweep() == 1
    assert sorted(_templates(aws)) == sorted([lt.name_of(_spec(image_id="ami-other")), "users-own"])


def test_delete_for_node_class(aws: sdk.Clients) -> None:
    clock = Clock()
    templates = lt.LaunchTemplates(aws.ec2, cluster=moto_world.CLUSTER, clock=clock)
    templates.ensure(_spec(node_class="a", image_id="ami-a"))
    keep = templates.ensure(_spec(node_class="b", image_id="ami-b"))
    assert templates.delete_for_node_class("a") == 1
    assert list(_templates(aws)) == [keep]
    assert templates.names() == [keep]
