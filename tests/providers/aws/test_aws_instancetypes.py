"""InstanceTypeProvider over the moto server: discovery, zones, prices, unavailable and reserved offerings.

moto 5.2.5 serves real DescribeInstanceTypes / DescribeInstanceTypeOfferings data (the shipped
catalog was generated from the same moto release), so the shapes derived from its live answers
must equal the shipped ones field for field. Two calls are stubbed with ``botocore.stub.Stubber``
on ``clients.ec2``, by name: ``DescribeInstanceTypes`` once to make a refresh fail after a good
one (moto never fails it), and nothing else; capacity reservations come from the NodeClass status
(moto has no DescribeCapacityReservations, and the provider does not call it).
"""

from __future__ import annotations

import dataclasses
import logging

import moto_world
import pytest
from botocore.stub import Stubber

from karpy.catalog import aws as catalog_aws
from karpy.core import capacity
from karpy.core.scheduling.launch import choose
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import CapacityReservation, EC2NodeClass, EC2NodeClassStatus, Subnet
from karpy.model.requirements import Requirement, Requirements
from karpy.providers.aws import instancetypes as instancetypes_mod
from karpy.providers.aws import sdk
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.instancetypes import InstanceTypeProvider
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.pricing import PricingProvider
from karpy.providers.aws.unavailable import UnavailableOfferings
from karpy.settings import PricingSettings

REGION = moto_world.REGION
T0 = 1_760_000_000.0
ZONE_IDS = {
    "us-west-2a": "usw2-az2",
    "us-west-2b": "usw2-az1",
    "us-west-2c": "usw2-az3",
    "us-west-2d": "usw2-az4",
}


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


@dataclasses.dataclass
class Parts:
    provider: InstanceTypeProvider
    pricing: PricingProvider
    unavailable: UnavailableOfferings
    clock: FakeClock
    metrics: AWSMetrics


def _parts(clients: sdk.Clients, **kwargs: object) -> Parts:
    clock = FakeClock()
    metrics = AWSMetrics()
    pricing = PricingProvider(clients, region=REGION, clock=clock, metrics=metrics, shipped=catalog_aws)
    unavailable = UnavailableOfferings(clock)
    provider = InstanceTypeProvider(
        clients,
        region=REGION,
        pricing=pricing,
        unavailable=unavailable,
        settings=AWSSettings(cluster_name=moto_world.CLUSTER),
        clock=clock,
        metrics=metrics,
        shipped=catalog_aws,
        **kwargs,
    )
    return Parts(provider, pricing, unavailable, clock, metrics)


def _by_name(types: tuple[InstanceType, ...]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


def _node_class(world: moto_world.World, zones: tuple[str, ...], **status: object) -> EC2NodeClass:
    subnets = tuple(Subnet(world.subnets[z], z, ZONE_IDS[z]) for z in zones)
    return EC2NodeClass(name="default", status=EC2NodeClassStatus(subnets=subnets, **status))


def _metric(parts: Parts, name: str) -> float | None:
    return parts.metrics.registry.get_sample_value(name, {"kind": "instance_types"})


# Differences that come from moto's own data and change with its release, not from karpy: moto
# 5.2.6 offers spot for trn2u.48xlarge, which the shipped EC2 data (and moto 5.2.5) do not.
MOTO_DRIFT = {"trn2u.48xlarge.capacity_types: live ('on-demand', 'spot') != shipped ('on-demand',)"}


def test_live_shapes_equal_the_shipped_shapes(aws: sdk.Clients) -> None:
    """Every type moto's DescribeInstanceTypes returns in us-west-2: same fields, same allocatable.

    moto's multi-value ``processor-info.supported-architecture`` filter wrongly drops the 9 types
    that also list i386 (t2.nano, m1.small...); real EC2 returns them. Those and the 5 ``g4ad.*``
    types (in the shipped data from Karpenter's docs only, unknown to moto) are the only
    shipped-and-eligible types absent here.
    """
    parts = _parts(aws)
    assert parts.provider.refresh() is True
    shipped = catalog_aws.shapes_by_name()
    live = [parts.provider.shape(n) for n in shipped]
    pairs = [(s, shipped[s.name]) for s in live if s is not None]
    assert len(pairs) > 1300
    diffs = [
        f"{got.name}.{f.name}: live {getattr(got, f.name)!r} != shipped {getattr(want, f.name)!r}"
        for got, want in pairs
        for f in dataclasses.fields(got)
        if getattr(got, f.name) != getattr(want, f.name)
    ]
    assert set(diffs) <= MOTO_DRIFT
    assert all(capacity.allocatable(got) == capacity.allocatable(want) for got, want in pairs)
    missing = {n for n, s in shipped.items() if s.karpenter_eligible and parts.provider.shape(n) is None}
    assert missing == {"c1.medium", "c3.large", "m1.medium", "m1.small", "t1.micro"} | {
        "t2.medium",
        "t2.micro",
        "t2.nano",
        "t2.small",
    } | {f"g4ad.{size}" for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")}


def test_discovery_zones_generation_and_identity(aws: sdk.Clients) -> None:
    parts = _parts(aws)
    provider = parts.provider
    assert not provider.discovered and provider.generation == 0
    shipped_list = provider.list(None)
    assert provider.list(None) is shipped_list  # cached: same object
    assert parts.provider.reconcile().requeue_after == instancetypes_mod.REFRESH_SECONDS
    assert provider.discovered and provider.generation == 1
    assert _metric(parts, "karpy_aws_refresh_last_success_timestamp_seconds") == T0
    types = provider.list(None)
    assert types is not shipped_list and types is provider.list(None)
    m5 = _by_name(types)["m5.large"]
    assert m5.requirements[labels.ZONE].values == set(ZONE_IDS)
    assert m5.requirements[catalog_aws.ZONE_ID].values == set(ZONE_IDS.values())
    assert [t.name for t in types] == sorted(t.name for t in types)
    assert provider.shape("m5.large") is not None and provider.shape("nope.large") is None
    # an unchanged answer does not move the generation: the list stays the same object
    assert provider.refresh() is True
    assert provider.generation == 1 and provider.list(None) is types


def test_zones_are_those_of_the_node_class_subnets(world: moto_world.World) -> None:
    parts = _parts(world.clients)
    parts.provider.refresh()
    types = parts.provider.list(_node_class(world, ("us-west-2a", "us-west-2b")))
    assert len(types) > 1000
    assert {o.zone for t in types for o in t.offerings} == {"us-west-2a", "us-west-2b"}
    for it in types:
        assert it.requirements[labels.ZONE].values <= {"us-west-2a", "us-west-2b"}
        assert it.requirements[catalog_aws.ZONE_ID].values <= {"usw2-az2", "usw2-az1"}
    everywhere = parts.provider.list(None)
    assert "us-west-2d" in {o.zone for t in everywhere for o in t.offerings}


def test_prices_come_from_the_pricing_provider(world: moto_world.World) -> None:
    parts = _parts(world.clients, pricing_settings=PricingSettings(on_demand_discount=0.25))
    parts.provider.refresh()
    static = catalog_aws.on_demand_table(REGION)["m5.large"]
    before = _by_name(parts.provider.list(None))["m5.large"]
    spot = [o for o in before.offerings if o.capacity_type == "spot"]
    assert {o.price for o in spot} == {static}  # spot = on-demand until the first spot refresh
    assert {o.price for o in before.offerings if o.capacity_type == "on-demand"} == {static * 0.75}
    assert parts.pricing.refresh_spot() is True  # moto: 0.00001 everywhere
    after = _by_name(parts.provider.list(None))["m5.large"]
    assert [o.price for o in after.offerings if o.capacity_type == "spot"] == [pytest.approx(0.00001)] * 4
    assert all(o.available for o in after.offerings)


def test_prices_override_applies(aws: sdk.Clients) -> None:
    parts = _parts(aws, prices_override={(REGION, "m5.large", "on-demand"): 7.0})
    m5 = _by_name(parts.provider.list(None))["m5.large"]
    assert {o.price for o in m5.offerings if o.capacity_type == "on-demand"} == {7.0}


def test_unavailable_offerings_and_their_expiry(world: moto_world.World) -> None:
    parts = _parts(world.clients)
    parts.provider.refresh()
    node_class = _node_class(world, ("us-west-2a", "us-west-2b", "us-west-2c"))
    first = parts.provider.list(node_class)
    parts.unavailable.mark("spot", "m5.large", "us-west-2a", reason="InsufficientInstanceCapacity")
    marked = parts.provider.list(node_class)
    assert marked is not first
    offerings = {(o.zone, o.capacity_type): o for o in _by_name(marked)["m5.large"].offerings}
    assert not offerings["us-west-2a", "spot"].available
    assert offerings["us-west-2a", "spot"].price > 0  # the price stays, only availability changes
    assert all(o.available for key, o in offerings.items() if key != ("us-west-2a", "spot"))
    assert all(o.available for o in _by_name(marked)["m5.xlarge"].offerings)
    parts.clock.t += 179
    assert parts.provider.list(node_class) is marked
    parts.clock.t += 1  # 180 s: the entry expires
    again = parts.provider.list(node_class)
    assert again is not marked and all(o.available for o in _by_name(again)["m5.large"].offerings)


def test_reserved_offerings_from_the_status(world: moto_world.World) -> None:
    parts = _parts(world.clients)
    parts.provider.refresh()
    reservations = (
        CapacityReservation(id="cr-active", instance_type="m5.large", availability_zone="us-west-2a"),
        CapacityReservation(
            id="cr-ending", instance_type="m5.large", availability_zone="us-west-2b", state="expiring"
        ),
        CapacityReservation(id="cr-elsewhere", instance_type="c5.large", availability_zone="us-west-2d"),
        CapacityReservation(
            id="cr-gone", instance_type="r5.large", availability_zone="us-west-2a", state="expired"
        ),
    )
    node_class = _node_class(world, ("us-west-2a", "us-west-2b"), capacity_reservations=reservations)
    types = _by_name(parts.provider.list(node_class))
    m5 = types["m5.large"]
    reserved = [o for o in m5.offerings if o.capacity_type == "reserved"]
    od = catalog_aws.on_demand_table(REGION)["m5.large"]
    assert [(o.zone, o.reservation_id, o.available) for o in reserved] == [
        ("us-west-2a", "cr-active", True),
        ("us-west-2b", "cr-ending", False),  # expiring: not launchable, as upstream
    ]
    assert reserved[0].price == pytest.approx(od / 10_000_000)
    assert m5.requirements[labels.CAPACITY_TYPE].values == {"on-demand", "spot", "reserved"}
    assert not any("capacity-reservation" in key for key in m5.labels)
    # a reservation in a zone the NodeClass has no subnet in is unusable; expired ones are ignored
    assert [o.available for o in types["c5.large"].offerings if o.capacity_type == "reserved"] == [False]
    assert "reserved" not in types["r5.large"].requirements[labels.CAPACITY_TYPE].values
    # the core's launch rule (cheapest compatible available offering) takes the reservation first
    any_ct = Requirements([Requirement.in_(labels.INSTANCE_TYPE, "m5.large")])
    chosen = choose(any_ct, list(types.values()))
    assert chosen is not None and chosen[1].reservation_id == "cr-active"
    no_reserved = any_ct.add(Requirement.in_(labels.CAPACITY_TYPE, "on-demand", "spot"))
    chosen = choose(no_reserved, list(types.values()))
    assert chosen is not None and chosen[1].capacity_type != "reserved"
    # once marked unavailable (e.g. ReservationCapacityExceeded) the reservation is skipped
    parts.unavailable.mark("reserved", "m5.large", "us-west-2a")
    m5 = _by_name(parts.provider.list(node_class))["m5.large"]
    assert not any(o.available for o in m5.offerings if o.capacity_type == "reserved")


def test_before_discovery_and_when_it_fails_the_shipped_catalog_stands_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Clients pointed at a port nobody listens on: every call fails to connect."""
    closed = moto_world.clients(f"http://127.0.0.1:{moto_world._free_port()}")
    parts = _parts(closed)
    with caplog.at_level(logging.WARNING, logger="karpy.aws.instancetypes"):
        result = parts.provider.reconcile()
    assert result.requeue_after == instancetypes_mod.RETRY_SECONDS
    assert _metric(parts, "karpy_aws_refresh_failures_total") == 1.0
    assert len([r for r in caplog.records if "keeping the shipped catalog" in r.getMessage()]) == 1
    assert not parts.provider.discovered
    want = catalog_aws.instance_types(REGION, pricing=PricingSettings(spot_price_ratio=1.0))
    assert parts.provider.list(None) == want


def test_a_failed_refresh_keeps_the_last_good_list(aws: sdk.Clients) -> None:
    """Stubbed DescribeInstanceTypes error on ec2 after a good refresh against moto."""
    parts = _parts(aws)
    assert parts.provider.refresh() is True
    good = parts.provider.list(None)
    parts.clock.t += instancetypes_mod.REFRESH_SECONDS
    with Stubber(aws.ec2) as stub:
        stub.add_client_error(
            "describe_instance_types", "RequestLimitExceeded", "Request limit exceeded.", 503
        )
        assert parts.provider.reconcile().requeue_after == instancetypes_mod.RETRY_SECONDS
        stub.assert_no_pending_responses()
    assert parts.provider.discovered and parts.provider.generation == 1
    assert parts.provider.list(None) is good
    assert _metric(parts, "karpy_aws_refresh_failures_total") == 1.0
    assert _metric(parts, "karpy_aws_refresh_last_success_timestamp_seconds") == T0
