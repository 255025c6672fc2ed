"""The type index's fit test equals the rule it stands for, on any types, overheads and requests.

The rule (per instance type, every resource): ``need == 0 or need <= allocatable``, where ``need``
is the pod's request plus the DaemonSet overhead on that type and a resource the type does not
list has allocatable 0. The index answers it from a precomputed room per type and resource, as a
mask (``fits_mask``) and as a bitset from the types sorted by room (``fits_bits``); the property
test compares the three, allocatable below zero (a type's overhead above its capacity), equal
rooms, zero requests and resources no type offers included.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import builders as b
from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.typeindex import TypeIndex
from karpy.model.catalog import InstanceType
from karpy.model.resources import Resources

_RESOURCES = ("cpu", "memory", "pods", "example.com/gpu")


def _fits(it: InstanceType, daemon: Resources | None, requests: Resources) -> bool:
    keys = set(requests) | set(daemon or {}) | set(it.allocatable)
    for key in keys:
        need = requests.get(key, 0) + (daemon.get(key, 0) if daemon else 0)
        if need != 0 and need > it.allocatable.get(key, 0):
            return False
    return True


_AMOUNTS = st.integers(min_value=0, max_value=12)


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[InstanceType], dict[str, DaemonOverhead], Resources]:
    types = []
    for i in range(draw(st.integers(min_value=1, max_value=6))):
        overhead = {k: str(draw(_AMOUNTS)) for k in ("cpu", "pods") if draw(st.booleans())}
        types.append(
            b.instance_type(
                f"t{i}",
                cpu=str(draw(_AMOUNTS)),
                memory=f"{draw(_AMOUNTS)}Gi",
                pods=str(draw(_AMOUNTS)),
                overhead=overhead or None,
            )
        )
    daemon: dict[str, DaemonOverhead] = {}
    shared = {k: str(draw(_AMOUNTS)) for k in _RESOURCES[:3] if draw(st.booleans())}
    for it in types:
        if draw(st.booleans()):
            daemon[it.name] = DaemonOverhead(Resources.parse(shared))
    wanted: Mapping[str, str] = {
        k: (f"{draw(_AMOUNTS)}Gi" if k == "memory" else str(draw(_AMOUNTS)))
        for k in _RESOURCES
        if draw(st.booleans())
    }
    return types, daemon, Resources.parse(dict(wanted))


@settings(max_examples=300, deadline=None)
@given(case=_case())
def test_the_index_fit_is_the_rule(
    case: tuple[list[InstanceType], dict[str, DaemonOverhead], Resources],
) -> None:
    types, daemon, requests = case
    index = TypeIndex(types, daemon)
    options = index.all
    got = index.fits_mask(options, requests).tolist()
    want = [_fits(it, daemon[it.name].requests if it.name in daemon else None, requests) for it in types]
    assert got == want
    bits = index.fits_bits(requests)
    assert [bool(bits >> i & 1) for i in range(len(types))] == want
    if index.columns:  # the rule as written, over the index's own columns, agrees too
        vector = np.array([requests.get(name, 0) for name in index.columns], dtype=np.int64)
        if all(requests.get(k, 0) == 0 or k in index.columns for k in requests):
            assert index.fits_by_need(options, vector).tolist() == want


def test_a_type_whose_overhead_exceeds_its_capacity_takes_only_an_empty_request() -> None:
    tight = b.instance_type("tight", cpu="1", memory="1Gi", pods="4", overhead={"cpu": "2"})
    roomy = b.instance_type("roomy", cpu="4", memory="4Gi", pods="4")
    index = TypeIndex([tight, roomy], {})
    assert tight.allocatable.get("cpu", 0) < 0
    assert index.fits_mask(index.all, Resources.parse({})).tolist() == [True, True]
    assert index.fits_mask(index.all, Resources.parse({"memory": "1Mi"})).tolist() == [True, True]
    assert index.fits_mask(index.all, Resources.parse({"cpu": "1m"})).tolist() == [False, True]
    assert index.fits_bits(Resources.parse({})) == 0b11
    assert index.fits_bits(Resources.parse({"memory": "1Mi"})) == 0b11
    assert index.fits_bits(Resources.parse({"cpu": "1m"})) == 0b10
