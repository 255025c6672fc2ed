"""The launch filters (pure): fit, exotic types, dear spot, the 60 cheapest, the capacity type."""

from __future__ import annotations

from builders import instance_type
from karpy.model import labels
from karpy.model.catalog import Offering
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources
from karpy.providers.aws import candidates

REQUESTS = Resources.parse({"cpu": "1"})


def _reqs(*capacity: str, types: tuple[str, ...] = ()) -> Requirements:
    out = [Requirement.in_(labels.CAPACITY_TYPE, *capacity)]
    if types:
        out.append(Requirement.in_(labels.INSTANCE_TYPE, *types))
    return Requirements(out)


def test_only_types_that_fit_and_are_offered() -> None:
    small = instance_type("small", cpu="1", price=0.01)  # a 2-cpu claim does not fit
    big = instance_type("big", cpu="4", price=0.2)
    gone = instance_type(
        "gone",
        cpu="4",
        price=0.1,
        unavailable=[
            (z, c) for z in ("test-zone-1", "test-zone-2", "test-zone-3") for c in ("spot", "on-demand")
        ],
    )
    picked = candidates.candidates(_reqs("on-demand"), Resources.parse({"cpu": "2"}), [small, big, gone])
    assert [it.name for it in picked] == ["big"]


def test_exotic_types_only_when_nothing_else_fits() -> None:
    gpu = instance_type(
        "g5.xlarge", cpu="4", price=0.05, labels={"karpenter.k8s.aws/instance-gpu-count": "1"}
    )
    metal = instance_type("m5.metal", cpu="96", price=0.06)
    plain = instance_type("m5.xlarge", cpu="4", price=0.2)
    assert [it.name for it in candidates.candidates(_reqs("on-demand"), REQUESTS, [gpu, metal, plain])] == [
        "m5.xlarge"
    ]
    assert [it.name for it in candidates.candidates(_reqs("on-demand"), REQUESTS, [gpu, metal])] == [
        "g5.xlarge",
        "m5.metal",
    ]
    assert candidates.exotic(metal) and candidates.exotic(gpu) and not candidates.exotic(plain)


def test_spot_dearer_than_the_cheapest_on_demand_is_dropped_when_both_are_allowed() -> None:
    od = instance_type("od-cheap", cpu="4", offerings=[Offering("test-zone-1", "on-demand", 0.10)])
    pricey = instance_type(
        "spot-pricey",
        cpu="4",
        offerings=[Offering("test-zone-1", "spot", 0.15), Offering("test-zone-1", "on-demand", 0.30)],
    )
    both = candidates.candidates(_reqs("spot", "on-demand"), REQUESTS, [od, pricey])
    kept = {it.name: {o.capacity_type for o in it.offerings} for it in both}
    assert kept == {"od-cheap": {"on-demand"}, "spot-pricey": {"on-demand"}}
    only_spot = candidates.candidates(_reqs("spot"), REQUESTS, [od, pricey])
    assert [it.name for it in only_spot] == ["spot-pricey"]
    assert {o.capacity_type for o in only_spot[0].offerings} == {"spot", "on-demand"}  # untouched


def test_the_sixty_cheapest_in_price_order_and_the_claims_own_options() -> None:
    many = [instance_type(f"t{i:03d}", cpu="4", price=1.0 + i / 100) for i in range(80)]
    picked = candidates.candidates(_reqs("on-demand"), REQUESTS, list(reversed(many)))
    assert [it.name for it in picked] == [f"t{i:03d}" for i in range(candidates.MAX_INSTANCE_TYPES)]
    by_name = {it.name: it for it in many}
    listed = candidates.candidates(
        _reqs("on-demand", types=("t079", "t003", "nope")), REQUESTS, many, by_name=by_name
    )
    assert [it.name for it in listed] == ["t003", "t079"]


def test_capacity_type_reserved_then_spot_then_on_demand() -> None:
    reserved = instance_type(
        "r", cpu="4", offerings=[Offering("test-zone-1", "reserved", 0.0001, reservation_id="cr-1")]
    )
    spot = instance_type("s", cpu="4", capacity_types=("spot",))
    od = instance_type("o", cpu="4", capacity_types=("on-demand",))
    assert (
        candidates.capacity_type(_reqs("reserved", "spot", "on-demand"), [od, spot, reserved]) == "reserved"
    )
    assert candidates.capacity_type(_reqs("spot", "on-demand"), [od, spot, reserved]) == "spot"
    assert candidates.capacity_type(_reqs("on-demand"), [od, spot]) == "on-demand"
