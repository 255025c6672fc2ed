"""A moto server (real HTTP, stateful) seeded as an EKS account karpy would run in.

:func:`start_server` runs ``moto.server.ThreadedMotoServer`` on 127.0.0.1 at a free port;
:func:`reset` empties it (``POST /moto-api/reset``). :func:`seed` builds what a Karpenter user
has before installing: a VPC with three tagged subnets (one per zone, of different sizes), a
tagged cluster security group and a second one found by name, two "golden" AMIs (x86_64 and
arm64) tagged for discovery, the node IAM role, and the EKS cluster (version, endpoint,
service CIDR). Tests use the ids in the returned :class:`World`.

moto's gaps (see docs/aws.md): no EKS-optimized AMIs or ``/aws/service/...`` SSM parameters,
no Pricing API, no capacity reservations, CreateFleet always takes the first override and
never reports capacity errors; tests stub those calls with botocore's Stubber, by name.
"""

from __future__ import annotations

import logging
import socket
import urllib.request
from dataclasses import dataclass, field

import boto3
from moto.server import ThreadedMotoServer

from karpy.providers.aws import sdk

REGION = "us-west-2"
CLUSTER = "test-cluster"
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}
ACCOUNT = "123456789012"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[ThreadedMotoServer, str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10)


def session() -> boto3.session.Session:
    """A session with moto's fake keys, held in memory only (never in a file or the environment)."""
    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )


def clients(url: str) -> sdk.Clients:
    return sdk.connect(endpoint_url=url, session=session(), max_attempts=1)


@dataclass
class World:
    url: str
    clients: sdk.Clients
    vpc: str = ""
    subnets: dict[str, str] = field(default_factory=dict)  # zone -> subnet id
    security_group: str = ""
    named_security_group: str = ""
    ami_x86: str = ""
    ami_arm: str = ""
    role: str = f"KarpenterNodeRole-{CLUSTER}"
    endpoint: str = ""
    ca: str = ""


def _tags(resource: str, tags: dict[str, str]) -> list[dict[str, object]]:
    return [{"ResourceType": resource, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


SUBNETS = (("us-west-2a", "10.0.0.0/20"), ("us-west-2b", "10.0.16.0/24"), ("us-west-2c", "10.0.32.0/22"))
LARGE_SUBNETS = (
    ("us-west-2a", "10.0.0.0/18"),
    ("us-west-2b", "10.0.64.0/18"),
    ("us-west-2c", "10.0.128.0/18"),
)


_STOCK: dict[str, str] = {}  # arch -> one of moto's stock Amazon images (the same after every reset)


def _stock_image(ec2: object, arch: str) -> str:
    if arch not in _STOCK:
        found = ec2.describe_images(  # type: ignore[attr-defined]
            Owners=["amazon"], Filters=[{"Name": "architecture", "Values": [arch]}]
        )["Images"]
        _STOCK[arch] = str(sorted(i["ImageId"] for i in found)[0])
    return _STOCK[arch]


def seed(url: str, *, subnets: tuple[tuple[str, str], ...] = SUBNETS) -> World:
    c = clients(url)
    world = World(url=url, clients=c)
    ec2 = c.ec2
    world.vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    # sizes differ so "the subnet with the most free IPs" is observable
    for zone, cidr in subnets:
        subnet = ec2.create_subnet(
            VpcId=world.vpc,
            CidrBlock=cidr,
            AvailabilityZone=zone,
            TagSpecifications=_tags("subnet", {**DISCOVERY, "Name": f"private-{zone}"}),
        )["Subnet"]
        world.subnets[zone] = subnet["SubnetId"]
    world.security_group = ec2.create_security_group(
        GroupName=f"eks-cluster-sg-{CLUSTER}",
        Description="cluster",
        VpcId=world.vpc,
        TagSpecifications=_tags("security-group", DISCOVERY),
    )["GroupId"]
    world.named_security_group = ec2.create_security_group(
        GroupName="nodes-extra", Description="extra", VpcId=world.vpc
    )["GroupId"]
    for arch, attr in (("x86_64", "ami_x86"), ("arm64", "ami_arm")):
        # moto's RegisterImage drops the architecture: copy one of its stock Amazon images instead
        stock = _stock_image(ec2, arch)
        image = ec2.copy_image(Name=f"golden-al2023-{arch}-v1", SourceImageId=stock, SourceRegion=REGION)[
            "ImageId"
        ]
        ec2.create_tags(
            Resources=[image],
            Tags=[{"Key": k, "Value": v} for k, v in {**DISCOVERY, "golden": "true"}.items()],
        )
        setattr(world, attr, image)
    c.iam.create_role(RoleName=world.role, AssumeRolePolicyDocument="{}")
    cluster = c.eks.create_cluster(
        name=CLUSTER,
        version="1.31",
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
        resourcesVpcConfig={"subnetIds": list(world.subnets.values())},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"},
    )["cluster"]
    world.endpoint = cluster["endpoint"]
    world.ca = cluster["certificateAuthority"]["data"]
    return world


def node_class(name: str = "default", **spec: object) -> dict[str, object]:
    """A raw EC2NodeClass selecting the seeded subnets, security group and golden AMIs."""
    body: dict[str, object] = {
        "role": f"KarpenterNodeRole-{CLUSTER}",
        "subnetSelectorTerms": [{"tags": dict(DISCOVERY)}],
        "securityGroupSelectorTerms": [{"tags": dict(DISCOVERY)}],
        "amiFamily": "AL2023",
        "amiSelectorTerms": [{"tags": {"golden": "true"}}],
    }
    body.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": body,
    }
