"""The launch rule's choice: the pruning by a type's floor price picks exactly what trying every
type in catalog order picks (the cheapest compatible available offering, ties to the first)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.core.scheduling.launch import Launcher, catalog_rank, choose, launch
from karpy.core.scheduling.results import PlannedClaim
from karpy.model import labels
from karpy.model.catalog import InstanceType, Offering
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources

ZONES = ("z1", "z2", "z3")
CAPACITY = (labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND)
PRICES = (0.1, 0.2, 0.25, 0.5, 1.0)  # few values, so ties are common


def _plain_choice(reqs: Requirements, types: list[InstanceType]) -> tuple[InstanceType, Offering] | None:
    best: tuple[float, InstanceType, Offering] | None = None
    for it in types:
        if not it.requirements.overlaps(reqs):
            continue
        for o in it.offerings:
            if o.available and o.compatible(reqs) and (best is None or o.price < best[0]):
                best = (o.price, it, o)
    return None if best is None else (best[1], best[2])


offerings = st.lists(
    st.builds(
        Offering, st.sampled_from(ZONES), st.sampled_from(CAPACITY), st.sampled_from(PRICES), st.booleans()
    ),
    max_size=4,
)


@st.composite
def instance_types(draw: st.DrawFn) -> list[InstanceType]:
    out: list[InstanceType] = []
    for i in range(draw(st.integers(0, 8))):
        arch = draw(st.sampled_from(("amd64", "arm64")))
        reqs = Requirements(
            [Requirement.in_(labels.INSTANCE_TYPE, f"t{i}"), Requirement.in_(labels.ARCH, arch)]
        )
        out.append(InstanceType(f"t{i}", reqs, tuple(draw(offerings)), Resources.parse({"cpu": "2"})))
    return out


claim_requirements = st.builds(
    lambda zones, cts, arch: Requirements(
        [
            *([Requirement.in_(labels.ZONE, *zones)] if zones else []),
            *([Requirement.in_(labels.CAPACITY_TYPE, *cts)] if cts else []),
            *([Requirement.in_(labels.ARCH, arch)] if arch else []),
        ]
    ),
    st.sets(st.sampled_from(ZONES)),
    st.sets(st.sampled_from(CAPACITY)),
    st.none() | st.sampled_from(("amd64", "arm64")),
)


@settings(max_examples=400, deadline=None)
@given(instance_types(), claim_requirements)
def test_choice_equals_trying_every_type(types: list[InstanceType], reqs: Requirements) -> None:
    assert choose(reqs, types) == _plain_choice(reqs, types)


def test_floor_price_is_the_cheapest_available_offering() -> None:
    reqs = Requirements([Requirement.in_(labels.INSTANCE_TYPE, "a")])
    it = InstanceType(
        "a", reqs, (Offering("z1", "spot", 0.3), Offering("z2", "spot", 0.1, available=False)), Resources()
    )
    assert it.floor_price == 0.3
    assert InstanceType(
        "b", reqs, (Offering("z1", "spot", 0.1, available=False),), Resources()
    ).floor_price == (math.inf)


def test_a_precomputed_rank_launches_as_the_order_does() -> None:
    reqs = Requirements([Requirement.in_(labels.ZONE, "z1")])
    types = [
        InstanceType(
            n,
            Requirements([Requirement.in_(labels.INSTANCE_TYPE, n)]),
            (Offering("z1", "spot", 0.2),),
            Resources(),
        )
        for n in ("b", "a")
    ]
    claim = PlannedClaim("c", "p", reqs, tuple(types), pods=(), requests=Resources())
    order = ["a", "b"]
    by_order = launch(claim, order)
    by_rank = launch(claim, catalog_rank(order))
    assert by_order is not None and by_rank is not None
    assert by_order.instance_type.name == by_rank.instance_type.name == "a"


@settings(max_examples=200, deadline=None)
@given(
    instance_types(),
    st.lists(st.tuples(st.integers(0, 2), claim_requirements), min_size=1, max_size=8),
    st.permutations(range(8)),
)
def test_one_launcher_launches_each_claim_as_launch_does(
    types: list[InstanceType], picks: list[tuple[int, Requirements]], shuffle: list[int]
) -> None:
    # claims share option tuples (as a solve's do) and requirements in any mix; the catalog order
    # is not the options' order
    shared = [tuple(types), tuple(reversed(types)), tuple(types[: len(types) // 2])]
    order = [types[i].name for i in shuffle if i < len(types)]
    claims = [
        PlannedClaim(f"c{i}", "p", reqs, shared[which], pods=(), requests=Resources())
        for i, (which, reqs) in enumerate(picks)
    ]
    launcher = Launcher(order)
    assert [launcher.launch(c) for c in claims] == [launch(c, order) for c in claims]


def test_a_launcher_chooses_for_each_option_list_and_names_each_node() -> None:
    # a second list of options gets its own choice; a repeated one its first choice, with its own name
    cheap = InstanceType(
        "cheap",
        Requirements([Requirement.in_(labels.INSTANCE_TYPE, "cheap")]),
        (Offering("z1", "spot", 0.1),),
        Resources(),
    )
    dear = InstanceType(
        "dear",
        Requirements([Requirement.in_(labels.INSTANCE_TYPE, "dear")]),
        (Offering("z1", "spot", 0.9),),
        Resources(),
    )
    reqs = Requirements([Requirement.in_(labels.ZONE, "z1")])
    launcher = Launcher(["cheap", "dear"])
    first = launcher.launch(PlannedClaim("a", "p", reqs, (cheap, dear), pods=(), requests=Resources()))
    second = launcher.launch(PlannedClaim("b", "p", reqs, (dear,), pods=(), requests=Resources()))
    again = launcher.launch(PlannedClaim("c", "p", reqs, (cheap, dear), pods=(), requests=Resources()))
    assert first is not None and second is not None and again is not None
    assert (first.instance_type.name, second.instance_type.name, again.instance_type.name) == (
        "cheap",
        "dear",
        "cheap",
    )
    assert (first.labels[labels.HOSTNAME], again.labels[labels.HOSTNAME]) == ("a", "c")
