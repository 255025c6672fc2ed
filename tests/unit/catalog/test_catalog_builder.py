"""The one instance-type builder of ``catalog.aws``: the live AWS provider and the shipped catalog agree.

The AWS provider (``providers/aws/instancetypes.py``) builds its types with
:func:`karpy.catalog.aws.build_instance_types` from discovered shapes, zones and prices. Fed the
shipped data (what it uses before its first discovery) with spot priced at the on-demand price
(what Karpenter does before its first spot refresh, i.e. ``spot_price_ratio=1``), it must give
exactly the types :func:`karpy.catalog.aws.instance_types` gives: the simulator's figures and the
operator's decisions come from the same code. Also the builder's own rules: unpriced and
unavailable offerings, exact overrides, zone restriction and extra (reserved) offerings.
"""

from __future__ import annotations

import logging

import pytest

from karpy.catalog import aws
from karpy.model import labels
from karpy.model.catalog import InstanceType, Offering
from karpy.model.nodeclass import (
    BlockDevice,
    EC2NodeClass,
    EC2NodeClassStatus,
    KubeletConfig,
    Subnet,
)
from karpy.providers.aws import sdk
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.instancetypes import InstanceTypeProvider
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.pricing import PricingProvider
from karpy.providers.aws.unavailable import UnavailableOfferings
from karpy.settings import PricingSettings

NODE_CLASSES = {
    "none": None,
    "bottlerocket": EC2NodeClass(name="br", ami_family="Bottlerocket"),
    "windows2022": EC2NodeClass(name="win", ami_family="Windows2022"),
    "max-pods": EC2NodeClass(
        name="mp",
        kubelet=KubeletConfig(max_pods=110, pods_per_core=4, kube_reserved={"cpu": "200m"}),
    ),
    "raid0": EC2NodeClass(
        name="raid",
        instance_store_policy="RAID0",
        block_device_mappings=(BlockDevice(device_name="/dev/xvda", volume_size="80Gi", root_volume=True),),
    ),
}


class FrozenClock:
    def now(self) -> float:
        return 1_700_000_000.0


def _unused_clients(region: str) -> sdk.Clients:
    """Clients that must never be called (the provider is read before any refresh)."""
    return sdk.Clients(region=region, ec2=None, ssm=None, iam=None, sqs=None, pricing=None, eks=None)


def _live(
    region: str, *, discount: float = 0.0, overhead: float = 0.075, enis: int = 0
) -> InstanceTypeProvider:
    clock = FrozenClock()
    metrics = AWSMetrics()
    clients = _unused_clients(region)
    pricing = PricingProvider(clients, region=region, clock=clock, metrics=metrics, shipped=aws)
    return InstanceTypeProvider(
        clients,
        region=region,
        pricing=pricing,
        unavailable=UnavailableOfferings(clock),
        settings=AWSSettings(cluster_name="c", vm_memory_overhead_percent=overhead, reserved_enis=enis),
        clock=clock,
        metrics=metrics,
        shipped=aws,
        pricing_settings=PricingSettings(on_demand_discount=discount),
        log=logging.getLogger("test"),
    )


def _assert_same(got: tuple[InstanceType, ...], want: tuple[InstanceType, ...]) -> None:
    assert [t.name for t in got] == [t.name for t in want]
    for a, b in zip(got, want, strict=True):
        assert a == b, a.name
        assert a.offerings == b.offerings, a.name  # order and exact float prices
        assert list(a.requirements.items()) == list(b.requirements.items()), a.name
        assert a.labels == b.labels and a.allocatable == b.allocatable, a.name


@pytest.mark.parametrize("region", aws.regions())
def test_provider_before_discovery_equals_shipped_catalog(region: str) -> None:
    want = aws.instance_types(region, pricing=PricingSettings(spot_price_ratio=1.0))
    got = _live(region).list(None)
    assert len(got) > 500
    _assert_same(got, want)


@pytest.mark.parametrize("name", [n for n in NODE_CLASSES if n != "none"])
def test_provider_equals_shipped_catalog_per_node_class(name: str) -> None:
    node_class = NODE_CLASSES[name]
    settings = PricingSettings(spot_price_ratio=1.0, on_demand_discount=0.28)
    want = aws.instance_types("us-east-1", node_class, pricing=settings)
    _assert_same(_live("us-east-1", discount=0.28).list(node_class), want)


def test_provider_passes_memory_overhead_and_reserved_enis_like_the_catalog() -> None:
    settings = PricingSettings(spot_price_ratio=1.0, vm_memory_overhead_percent=0.05, reserved_enis=1)
    want = aws.instance_types("us-west-2", NODE_CLASSES["bottlerocket"], pricing=settings)
    got = _live("us-west-2", overhead=0.05, enis=1).list(NODE_CLASSES["bottlerocket"])
    _assert_same(got, want)
    default = {t.name: t for t in aws.instance_types("us-west-2", NODE_CLASSES["bottlerocket"])}
    assert got[0].capacity != default[got[0].name].capacity  # the settings did change something


def test_direct_builder_call_with_shipped_data_and_override() -> None:
    """The call the provider makes, spelled out, with a price override and a discount."""
    override = {("eu-west-1", "m5.large", "spot"): 0.01, ("eu-west-1", "mac1.metal", "on-demand"): 1.0}
    settings = PricingSettings(spot_price_ratio=0.35, on_demand_discount=0.2)
    got = aws.build_instance_types(
        aws.shapes_by_name().values(),
        region="eu-west-1",
        zones=aws.zones("eu-west-1"),
        offered=aws.zone_offerings("eu-west-1"),
        price_of=aws.shipped_price_of("eu-west-1", settings),
        nodeclass=NODE_CLASSES["windows2022"],
        pricing=settings,
        prices_override=override,
    )
    _assert_same(
        got,
        aws.instance_types(
            "eu-west-1", NODE_CLASSES["windows2022"], pricing=settings, prices_override=override
        ),
    )
    m5 = {t.name: t for t in got}["m5.large"]
    assert {o.price for o in m5.offerings if o.capacity_type == "spot"} == {0.01}


M5 = aws.shape("m5.large")
ZONES = (("z-a", "id-a"), ("z-b", "id-b"), ("z-c", "id-c"))


def _one(**kwargs: object) -> InstanceType:
    args: dict[str, object] = {
        "region": "r",
        "zones": ZONES,
        "offered": {"m5.large": ("z-c", "z-a")},
        "price_of": lambda name, zone, ct: 1.0 if ct == "on-demand" else 0.5,
    }
    args.update(kwargs)
    types = aws.build_instance_types([M5], **args)
    assert len(types) == 1
    return types[0]


def test_zones_follow_the_zones_argument_order_and_restrict_the_type() -> None:
    it = _one()
    assert [(o.zone, o.capacity_type) for o in it.offerings] == [
        ("z-a", "on-demand"),
        ("z-a", "spot"),
        ("z-c", "on-demand"),
        ("z-c", "spot"),
    ]
    assert it.requirements[labels.ZONE].values == {"z-a", "z-c"}
    assert it.requirements[aws.ZONE_ID].values == {"id-a", "id-c"}
    # zones outside the argument are dropped; a type left without zones is dropped entirely
    only_c = _one(zones=ZONES[2:])
    assert {o.zone for o in only_c.offerings} == {"z-c"}
    assert (
        aws.build_instance_types(
            [M5], region="r", zones=ZONES[1:2], offered={"m5.large": ("z-a",)}, price_of=lambda *a: 1.0
        )
        == ()
    )


def test_unpriced_unavailable_and_discounted_offerings() -> None:
    it = _one(
        price_of=lambda name, zone, ct: None if zone == "z-c" and ct == "spot" else 2.0,
        is_available=lambda name, zone, ct: not (zone == "z-a" and ct == "spot"),
        pricing=PricingSettings(on_demand_discount=0.25),
    )
    by_key = {(o.zone, o.capacity_type): o for o in it.offerings}
    assert by_key["z-c", "spot"] == Offering("z-c", "spot", 0.0, False)  # unpriced
    assert by_key["z-a", "spot"] == Offering("z-a", "spot", 2.0, False)  # unavailable keeps its price
    assert by_key["z-a", "on-demand"] == Offering("z-a", "on-demand", 1.5, True)  # discounted
    assert by_key["z-c", "on-demand"].available


def test_override_is_exact_and_not_discounted() -> None:
    it = _one(
        prices_override={("r", "m5.large", "on-demand"): 9.0}, pricing=PricingSettings(on_demand_discount=0.5)
    )
    assert {o.price for o in it.offerings if o.capacity_type == "on-demand"} == {9.0}


def test_extra_offerings_join_requirements_and_out_of_zone_ones_are_unavailable() -> None:
    extra = (
        Offering("z-a", labels.CAPACITY_TYPE_RESERVED, 1e-7, True, reservation_id="cr-1"),
        Offering("z-b", labels.CAPACITY_TYPE_RESERVED, 1e-7, True, reservation_id="cr-2"),
    )
    it = _one(extra_offerings={"m5.large": extra, "c5.large": extra})
    assert it.offerings[-2] == extra[0]
    assert it.offerings[-1] == Offering("z-b", "reserved", 1e-7, False, reservation_id="cr-2")
    assert it.requirements[labels.CAPACITY_TYPE].values == {"on-demand", "spot", "reserved"}
    assert it.requirements[labels.ZONE].values == {"z-a", "z-c"}  # reserved zones do not widen it
    assert not any("reservation" in key for key in it.labels)
    assert _one().requirements[labels.CAPACITY_TYPE].values == {"on-demand", "spot"}


def test_subnet_zones_restrict_the_live_provider() -> None:
    node_class = EC2NodeClass(
        name="two-zones",
        status=EC2NodeClassStatus(
            subnets=(Subnet("subnet-1", "us-west-2a"), Subnet("subnet-2", "us-west-2c"))
        ),
    )
    types = _live("us-west-2").list(node_class)
    assert types and all({o.zone for o in t.offerings} <= {"us-west-2a", "us-west-2c"} for t in types)
    assert {o.zone for t in types for o in t.offerings} == {"us-west-2a", "us-west-2c"}
