"""The AWS catalog is built once per capacity view: NodeClasses that differ only in fields capacity
never reads share one build; any field capacity reads gives its own types."""

from __future__ import annotations

import dataclasses

from karpy.catalog import aws
from karpy.core import capacity
from karpy.model.nodeclass import (
    BlockDevice,
    EC2NodeClass,
    KubeletConfig,
    MetadataOptions,
    SelectorTerm,
)
from karpy.settings import PricingSettings

_FULL = EC2NodeClass(
    name="busy",
    ami_family="Bottlerocket",
    ami_aliases=("bottlerocket@latest",),
    kubelet=KubeletConfig(max_pods=58, kube_reserved={"cpu": "200m"}),
    block_device_mappings=(BlockDevice("/dev/xvdb", volume_size="120Gi", root_volume=True),),
    instance_store_policy="RAID0",
    subnet_selector_terms=(SelectorTerm(tags={"team": "payments"}),),
    role="NodeRole",
    tags={"cost-centre": "42"},
    user_data="echo hi",
    metadata_options=MetadataOptions(),
    uid="u-1",
    generation=3,
)


def _fresh(nodeclass: EC2NodeClass | None) -> tuple[object, ...]:
    """The types built directly from the whole NodeClass, bypassing every cache."""
    return aws.build_instance_types(
        aws._shapes().values(),
        region="us-east-1",
        zones=aws.zones("us-east-1"),
        offered=aws.zone_offerings("us-east-1"),
        price_of=aws.shipped_price_of("us-east-1", PricingSettings()),
        nodeclass=nodeclass,
    )


def test_view_builds_the_same_types_as_the_whole_nodeclass() -> None:
    assert aws.instance_types("us-east-1", _FULL) == _fresh(_FULL)
    assert capacity.capacity_view(_FULL) == EC2NodeClass(
        name="",
        ami_family="Bottlerocket",
        kubelet=_FULL.kubelet,
        block_device_mappings=_FULL.block_device_mappings,
        instance_store_policy="RAID0",
    )


def test_nodeclasses_differing_in_other_fields_share_one_build() -> None:
    other = dataclasses.replace(_FULL, name="other", role="Else", tags={}, subnet_selector_terms=())
    assert aws.instance_types("us-east-1", other) is aws.instance_types("us-east-1", _FULL)


def test_a_field_capacity_reads_gets_its_own_types() -> None:
    base = aws.instance_types("us-east-1", _FULL)
    more_pods = dataclasses.replace(_FULL, kubelet=KubeletConfig(max_pods=110, kube_reserved={"cpu": "200m"}))
    bigger_disk = dataclasses.replace(
        _FULL, block_device_mappings=(BlockDevice("/dev/xvdb", volume_size="500Gi", root_volume=True),)
    )
    al2023 = dataclasses.replace(_FULL, ami_family="AL2023")
    for changed in (more_pods, bigger_disk, al2023):
        got = aws.instance_types("us-east-1", changed)
        assert got is not base
        assert got == _fresh(changed)
        assert [t.capacity for t in got] != [t.capacity for t in base]


def test_other_prices_get_their_own_build() -> None:
    base = {t.name: t for t in aws.instance_types("us-east-1", _FULL)}
    half = {
        t.name: t
        for t in aws.instance_types("us-east-1", _FULL, pricing=PricingSettings(spot_price_ratio=0.5))
    }
    spot = [o.price for o in half["m5.large"].offerings if o.capacity_type == "spot"]
    assert spot and all(abs(p - 0.048) < 1e-9 for p in spot)
    assert half["m5.large"].offerings != base["m5.large"].offerings
    assert half["m5.large"].requirements == base["m5.large"].requirements


def test_capacity_views_share_offerings_priced_once_and_prices_do_not() -> None:
    base = {t.name: t for t in aws.instance_types("us-east-1", _FULL)}
    more_pods = dataclasses.replace(_FULL, kubelet=KubeletConfig(max_pods=20, kube_reserved={"cpu": "200m"}))
    other_view = {t.name: t for t in aws.instance_types("us-east-1", more_pods)}
    half = {
        t.name: t
        for t in aws.instance_types("us-east-1", _FULL, pricing=PricingSettings(spot_price_ratio=0.25))
    }
    assert other_view["m5.large"].capacity != base["m5.large"].capacity
    assert all(
        a is b for a, b in zip(other_view["m5.large"].offerings, base["m5.large"].offerings, strict=True)
    )
    assert not any(
        a is b for a, b in zip(half["m5.large"].offerings, base["m5.large"].offerings, strict=True)
    )
