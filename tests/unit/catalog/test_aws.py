"""The AWS catalog built from package data: offerings, prices, labels, requirements, regions."""

from __future__ import annotations

from pathlib import Path

import pytest

import karpy.catalog as catalog_pkg
from karpy.catalog import aws
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.errors import InputError
from karpy.model.nodeclass import EC2NodeClass, KubeletConfig
from karpy.model.requirements import Requirement, Requirements
from karpy.settings import PricingSettings

MI = 2**20
M5_LARGE_OD = 0.096  # us-east-1 static table


def _by_name(types: tuple[InstanceType, ...]) -> dict[str, InstanceType]:
    return {t.name: t for t in types}


@pytest.fixture(scope="module")
def us_east_1() -> dict[str, InstanceType]:
    return _by_name(aws.instance_types("us-east-1"))


def test_regions_and_unknown_region() -> None:
    assert aws.regions() == ["ap-northeast-2", "eu-west-1", "us-east-1", "us-west-2"]
    with pytest.raises(InputError, match="unknown AWS region 'mars-1'"):
        aws.instance_types("mars-1")


def test_only_eligible_offered_types_sorted(us_east_1: dict[str, InstanceType]) -> None:
    names = list(us_east_1)
    assert names == sorted(names)
    assert "m5.large" in us_east_1
    assert "mac1.metal" not in us_east_1  # not Karpenter-eligible (mac arch)
    assert not any(n.startswith("a1.") for n in names)  # AL2023 does not support a1.*
    assert "g4ad.xlarge" not in us_east_1  # no zone offers it in the data
    assert len(aws.instance_types("ap-northeast-2")) < len(names)


def test_offerings_order_and_prices(us_east_1: dict[str, InstanceType]) -> None:
    m5 = us_east_1["m5.large"]
    zones = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"]
    expected = [(z, ct) for z in zones for ct in ("on-demand", "spot")]
    assert [(o.zone, o.capacity_type) for o in m5.offerings] == expected
    assert all(o.available for o in m5.offerings)
    on_demand = [o.price for o in m5.offerings if o.capacity_type == "on-demand"]
    spot = [o.price for o in m5.offerings if o.capacity_type == "spot"]
    assert on_demand == [pytest.approx(M5_LARGE_OD)] * 5
    assert spot == [pytest.approx(M5_LARGE_OD * 0.4)] * 5


def test_on_demand_only_type(us_east_1: dict[str, InstanceType]) -> None:
    t2 = us_east_1["t2.nano"]
    assert {o.capacity_type for o in t2.offerings} == {"on-demand"}
    assert t2.requirements[labels.CAPACITY_TYPE].values == {"on-demand"}


def test_discount_and_spot_ratio() -> None:
    pricing = PricingSettings(spot_price_ratio=0.5, on_demand_discount=0.25)
    m5 = _by_name(aws.instance_types("us-east-1", pricing=pricing))["m5.large"]
    assert m5.offerings[0].price == pytest.approx(M5_LARGE_OD * 0.75)
    # spot follows the undiscounted table price
    assert m5.offerings[1].price == pytest.approx(M5_LARGE_OD * 0.5)


def test_prices_override_replaces_exact_offering() -> None:
    override = {("us-east-1", "m5.large", "spot"): 0.01, ("us-west-2", "m5.large", "on-demand"): 9.0}
    m5 = _by_name(aws.instance_types("us-east-1", prices_override=override))["m5.large"]
    assert {o.price for o in m5.offerings if o.capacity_type == "spot"} == {0.01}
    assert [o.price for o in m5.offerings if o.capacity_type == "on-demand"] == [
        pytest.approx(M5_LARGE_OD)
    ] * 5


def test_unpriced_type_is_unavailable_unless_overridden(us_east_1: dict[str, InstanceType]) -> None:
    r9g = us_east_1["r9g.large"]
    assert r9g.offerings and not r9g.available_offerings()
    priced = _by_name(
        aws.instance_types("us-east-1", prices_override={("us-east-1", "r9g.large", "on-demand"): 0.2})
    )["r9g.large"]
    available = priced.available_offerings()
    assert available and {(o.capacity_type, o.price) for o in available} == {("on-demand", 0.2)}


def test_labels_and_requirements(us_east_1: dict[str, InstanceType]) -> None:
    m5 = us_east_1["m5.large"]
    assert m5.labels["karpenter.k8s.aws/instance-family"] == "m5"
    assert m5.labels["karpenter.k8s.aws/instance-size"] == "large"
    assert m5.labels["karpenter.k8s.aws/instance-category"] == "m"
    assert m5.labels["karpenter.k8s.aws/instance-generation"] == "5"
    assert m5.labels["karpenter.k8s.aws/instance-cpu"] == "2"
    assert m5.labels["karpenter.k8s.aws/instance-memory"] == "8192"
    assert m5.labels["karpenter.k8s.aws/instance-hypervisor"] == "nitro"
    assert m5.labels["karpenter.k8s.aws/instance-capability-flex"] == "false"
    assert m5.labels[labels.ARCH] == "amd64"
    assert m5.labels[labels.OS] == "linux"
    assert m5.labels[labels.REGION] == "us-east-1"
    assert m5.labels[labels.INSTANCE_TYPE] == "m5.large"
    # offering-dependent and multi-valued keys are not labels of the type
    assert labels.ZONE not in m5.labels and labels.CAPACITY_TYPE not in m5.labels
    assert "karpenter.k8s.aws/instance-tenancy" not in m5.labels
    reqs = m5.requirements
    assert reqs["karpenter.k8s.aws/instance-gpu-name"].operator == "DoesNotExist"
    assert reqs["karpenter.k8s.aws/instance-local-nvme"].operator == "DoesNotExist"
    assert reqs[labels.WINDOWS_BUILD].operator == "DoesNotExist"
    assert reqs[aws.ZONE_ID].values == {"use1-az1", "use1-az2", "use1-az4", "use1-az5", "use1-az6"}
    assert reqs["karpenter.k8s.aws/instance-tenancy"].values == {"default", "dedicated"}
    assert m5.allocatable["memory"] == 6903 * MI
    p4d = us_east_1["p4d.24xlarge"]
    assert p4d.labels["karpenter.k8s.aws/instance-gpu-name"] == "a100"
    assert p4d.labels["karpenter.k8s.aws/instance-gpu-count"] == "8"
    assert p4d.labels["karpenter.k8s.aws/instance-local-nvme"] == "8000"
    assert p4d.capacity["nvidia.com/gpu"] == 8
    flex = us_east_1["c7i-flex.large"]
    assert flex.labels["karpenter.k8s.aws/instance-capability-flex"] == "true"


def test_selectors_gt_exists_and_does_not_exist(us_east_1: dict[str, InstanceType]) -> None:
    well_known = aws.well_known_labels()

    def matches(name: str, *reqs: Requirement) -> bool:
        return us_east_1[name].requirements.is_compatible(Requirements(reqs), allow_undefined=well_known)

    cpu_gt_8 = Requirement.of("karpenter.k8s.aws/instance-cpu", "Gt", ["8"])
    assert matches("m5.4xlarge", cpu_gt_8) and not matches("m5.large", cpu_gt_8)
    gpu_exists = Requirement.of("karpenter.k8s.aws/instance-gpu-count", "Exists")
    assert matches("p4d.24xlarge", gpu_exists) and not matches("m5.large", gpu_exists)
    nvme_gt = Requirement.of("karpenter.k8s.aws/instance-local-nvme", "Gt", ["100"])
    assert not matches("m5.large", nvme_gt)
    no_gpu = Requirement.of("karpenter.k8s.aws/instance-gpu-count", "DoesNotExist")
    assert matches("m5.large", no_gpu) and not matches("p4d.24xlarge", no_gpu)
    zone = Requirement.of(labels.ZONE, "In", ["us-east-1e"])
    assert not matches("m5.large", zone)


def test_well_known_labels() -> None:
    known = aws.well_known_labels()
    assert known >= labels.CORE_WELL_KNOWN
    assert known >= {aws.ZONE_ID, "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-gpu-count"}


def test_nodeclass_changes_capacity_os_and_types() -> None:
    nc = EC2NodeClass(name="al2", ami_family="AL2", kubelet=KubeletConfig(max_pods=110))
    al2 = _by_name(aws.instance_types("us-east-1", nc))
    assert al2["m5.large"].capacity["pods"] == 110
    assert al2["a1.medium"].labels[labels.ARCH] == "arm64"  # a1 is offered outside AL2023
    win = _by_name(aws.instance_types("us-east-1", EC2NodeClass(name="w", ami_family="Windows2022")))
    assert all(t.labels[labels.ARCH] == "amd64" for t in win.values())
    m5 = win["m5.large"]
    assert m5.labels[labels.OS] == "windows"
    assert m5.labels[labels.WINDOWS_BUILD] == "10.0.20348"
    assert m5.capacity["pods"] == 110
    with pytest.raises(InputError, match="unknown amiFamily"):
        aws.instance_types("us-east-1", EC2NodeClass(name="bad", ami_family="Ubuntu"))


def test_pricing_settings_feed_capacity() -> None:
    pricing = PricingSettings(vm_memory_overhead_percent=0.0, reserved_enis=1)
    m5 = _by_name(aws.instance_types("us-east-1", pricing=pricing))["m5.large"]
    assert m5.capacity["memory"] == 8192 * MI
    assert m5.capacity["pods"] == 20


def test_catalog_price_basis_and_fallback_region() -> None:
    west = aws.catalog("us-west-2")
    assert west.name == "aws:us-west-2" and west.region == "us-west-2"
    assert west.well_known == aws.well_known_labels()
    assert aws.price_basis("us-east-1") == "karpenter-static-table"
    assert aws.price_basis("us-west-2") == "karpenter-static-fallback-us-east-1"
    assert aws.price_is_fallback("eu-west-1") and not aws.price_is_fallback("us-east-1")
    m5 = _by_name(west.instance_types)["m5.large"]
    assert m5.offerings[0].zone == "us-west-2a"
    assert m5.offerings[0].price == pytest.approx(M5_LARGE_OD)


def test_deterministic() -> None:
    assert aws.instance_types("eu-west-1") == aws.instance_types("eu-west-1")


def test_load_specs(tmp_path: Path) -> None:
    assert catalog_pkg.load("aws:eu-west-1").name == "aws:eu-west-1"
    with pytest.raises(InputError, match="missing region"):
        catalog_pkg.load("aws:")
    with pytest.raises(InputError, match="unknown AWS region"):
        catalog_pkg.load("aws:xx-1")
    with pytest.raises(InputError, match="no such file"):
        catalog_pkg.load(str(tmp_path / "nope.yaml"))
