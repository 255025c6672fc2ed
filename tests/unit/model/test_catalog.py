"""Instance types and offerings (karpy.model.catalog)."""

from __future__ import annotations

import pytest

import builders as b
from karpy.model import labels as wk
from karpy.model.catalog import Catalog, Offering
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources

ANY = Requirements()


def offerings(*specs: tuple[str, str, float, bool]) -> list[Offering]:
    return [Offering(zone, ct, price, available) for zone, ct, price, available in specs]


def test_cheapest_offering_picks_lowest_price() -> None:
    it = b.instance_type(
        "t",
        offerings=offerings(
            ("z1", "on-demand", 1.0, True), ("z2", "spot", 0.3, True), ("z3", "spot", 0.5, True)
        ),
    )
    assert it.cheapest_offering(ANY) == Offering("z2", "spot", 0.3)


def test_cheapest_offering_skips_unavailable() -> None:
    it = b.instance_type("t", offerings=offerings(("z1", "spot", 0.1, False), ("z2", "spot", 0.2, True)))
    assert it.cheapest_offering(ANY) == Offering("z2", "spot", 0.2)


def test_cheapest_offering_none_when_nothing_available() -> None:
    it = b.instance_type("t", offerings=offerings(("z1", "spot", 0.1, False)))
    assert it.cheapest_offering(ANY) is None
    assert it.available_offerings() == ()


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        ([Requirement.in_(wk.ZONE, "z2")], Offering("z2", "on-demand", 0.4)),
        ([Requirement.in_(wk.CAPACITY_TYPE, "on-demand")], Offering("z2", "on-demand", 0.4)),
        ([Requirement.of(wk.ZONE, "NotIn", ["z1"])], Offering("z2", "on-demand", 0.4)),
        (
            [Requirement.in_(wk.ZONE, "z1"), Requirement.in_(wk.CAPACITY_TYPE, "spot")],
            Offering("z1", "spot", 0.1),
        ),
        ([Requirement.in_(wk.ZONE, "z3")], None),
        ([Requirement.in_(wk.ZONE, "z2"), Requirement.in_(wk.CAPACITY_TYPE, "spot")], None),
        ([Requirement.in_("example.com/other", "x")], Offering("z1", "spot", 0.1)),  # other keys ignored
    ],
)
def test_cheapest_offering_skips_incompatible(
    requirements: list[Requirement], expected: Offering | None
) -> None:
    it = b.instance_type("t", offerings=offerings(("z1", "spot", 0.1, True), ("z2", "on-demand", 0.4, True)))
    assert it.cheapest_offering(Requirements(requirements)) == expected


def test_cheapest_offering_ties_keep_catalog_order() -> None:
    it = b.instance_type(
        "t",
        offerings=offerings(("z3", "spot", 0.2, True), ("z1", "spot", 0.2, True), ("z2", "spot", 0.2, True)),
    )
    assert it.cheapest_offering(ANY) == Offering("z3", "spot", 0.2)


def test_offering_requirements_and_compatible() -> None:
    offering = Offering("z1", "spot", 0.1)
    assert offering.requirements() == Requirements(
        [Requirement.in_(wk.ZONE, "z1"), Requirement.in_(wk.CAPACITY_TYPE, "spot")]
    )
    assert offering.compatible(ANY)
    assert offering.compatible(Requirements([Requirement.exists(wk.ZONE)]))
    assert not offering.compatible(Requirements([Requirement.does_not_exist(wk.ZONE)]))


def test_allocatable_is_capacity_minus_overhead() -> None:
    it = b.instance_type("t", cpu="4", memory="8Gi", pods="20", overhead={"cpu": "100m", "memory": "1Gi"})
    assert it.capacity == Resources.parse({"cpu": "4", "memory": "8Gi", "pods": "20"})
    assert it.allocatable == Resources.parse({"cpu": "3900m", "memory": "7Gi", "pods": "20"})


def test_allocatable_without_overhead() -> None:
    it = b.instance_type("t", cpu="2", memory="2Gi")
    assert it.allocatable == it.capacity


def test_available_offerings() -> None:
    it = b.instance_type("t", zones=("z1", "z2"), capacity_types=("spot",), unavailable=[("z1", "spot")])
    assert [o.zone for o in it.available_offerings()] == ["z2"]


def test_builder_requirements_and_default_price() -> None:
    it = b.instance_type("m.large", cpu="2", memory="8Gi", arch="arm64", labels={"example.com/family": "m"})
    assert it.requirements[wk.INSTANCE_TYPE] == Requirement.in_(wk.INSTANCE_TYPE, "m.large")
    assert it.requirements[wk.ARCH] == Requirement.in_(wk.ARCH, "arm64")
    assert it.requirements[wk.OS] == Requirement.in_(wk.OS, "linux")
    assert it.requirements[wk.ZONE] == Requirement.in_(wk.ZONE, *b.ZONES)
    assert it.requirements[wk.CAPACITY_TYPE] == Requirement.in_(wk.CAPACITY_TYPE, "spot", "on-demand")
    assert it.requirements["example.com/family"] == Requirement.in_("example.com/family", "m")
    assert [o.price for o in it.offerings] == [pytest.approx(1.0)] * 6


def test_catalog_defaults() -> None:
    catalog = Catalog("test", (b.instance_type("a"),))
    assert catalog.well_known == wk.CORE_WELL_KNOWN
    assert catalog.region == ""
