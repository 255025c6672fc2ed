"""What packing a NodeClaim remembers across solves gives exactly the fresh answers.

The solves of a disruption pass share each NodePool's ``TypeIndex`` (cache.py). ``narrow``
remembers the bitset of each (key, requirement) by value and by the requirement object's id, each
(zone, capacity type)'s offered types, and the options array of each bitset; ``zone_requirement``
remembers by (options, capacity type). All are checked against a fresh index and the reference
per-type filter on equal inputs built anew (and on the same objects again), also with a memo
bound small enough to be hit. A claim reuses the sum of requests of its last ``can_add`` only for
that pod's requests, and the bitset of its last narrowing only with those options.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scheduling_perf_equivalence import digest, scenarios

import builders as b
from karpy.core import scheduling
from karpy.core.scheduling import nodeclaim, reference, scheduler, typeindex
from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.limits import within_limits
from karpy.core.scheduling.nodeclaim import ClaimInProgress, Unfit
from karpy.core.scheduling.typeindex import Options, TypeIndex
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType, Offering
from karpy.model.objects import Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources

ZONES = b.ZONES
CAPACITY_TYPES = ("spot", "on-demand")
Catalog = tuple[list[InstanceType], dict[str, DaemonOverhead]]
Query = tuple[tuple[bool, ...], tuple[str, ...] | None, str | None, int, int, int]


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    types = []
    for i in range(draw(st.integers(1, 6))):
        zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))
        offerings = [
            Offering(zone, ct, draw(st.integers(1, 4)) / 10, available=draw(st.integers(0, 4)) > 0)
            for zone, ct in itertools.product(sorted(zones), CAPACITY_TYPES)
        ]
        types.append(
            b.instance_type(
                f"type-{i}",
                cpu=draw(st.sampled_from(["1", "2", "4"])),
                memory=draw(st.sampled_from(["2Gi", "4Gi"])),
                pods=draw(st.sampled_from(["3", "10"])),
                offerings=offerings,
            )
        )
    shared = [DaemonOverhead(Resources.parse({"cpu": cpu})) for cpu in ("100m", "1")]
    daemon = {}
    for it in types:
        choice = draw(st.integers(0, 2))
        if choice < 2:
            daemon[it.name] = shared[choice]  # overheads are shared objects, as in a template
    return types, daemon


PARTS = (
    st.lists(st.booleans(), min_size=6, max_size=6).map(tuple),
    st.none() | st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True).map(tuple),
    st.none() | st.sampled_from(CAPACITY_TYPES),
    st.sampled_from([0, 500, 1500, 3000]),
    st.sampled_from([0, 2**30, 3 * 2**30]),
    st.integers(0, 4),
)


@st.composite
def query_pools(draw: st.DrawFn) -> list[Query]:
    """A query and variants of it that differ in one part each (options, zones, capacity type,
    cpu, memory, pods): a memo key that left a part out would answer them alike."""
    base: Query = draw(st.tuples(*PARTS))
    pool = [base]
    for part in range(len(PARTS)):
        variant = list(base)
        variant[part] = draw(PARTS[part])
        pool.append(tuple(variant))  # type: ignore[arg-type]
    return pool


def build(query: Query, n: int) -> tuple[Options, Requirements, Resources]:
    """Fresh objects every time: a memo hit must come from equality, not identity."""
    chosen, zones, capacity_type, cpu, memory, pods = query
    options = np.array([i for i in range(n) if chosen[i]], dtype=np.intp)
    reqs = [Requirement.in_(wk.HOSTNAME, "claim-1"), Requirement.in_("team", "a")]
    if zones is not None:
        reqs.append(Requirement.in_(wk.ZONE, *zones))
    if capacity_type is not None:
        reqs.append(Requirement.in_(wk.CAPACITY_TYPE, capacity_type))
    return options, Requirements(reqs), Resources({"cpu": cpu, "memory": memory, "pods": pods})


def _capacity_types(types: list[InstanceType], options: Options, reqs: Requirements) -> list[str]:
    zone, ct = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    return sorted(
        {
            o.capacity_type
            for i in options.tolist()
            for o in types[i].offerings
            if o.available and (zone is None or zone.has(o.zone)) and (ct is None or ct.has(o.capacity_type))
        }
    )


def _overheads(index: TypeIndex, options: Options) -> list[int]:
    firsts: dict[int, None] = {}
    for i in options.tolist():
        overhead = index._overhead_of[index.overhead_class[i]] if index.overhead_class[i] >= 0 else None
        if overhead is not None:
            firsts.setdefault(id(overhead))
    return list(firsts)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(catalogs(), query_pools(), st.lists(st.integers(0, 6), max_size=24))
def test_index_memos_equal_fresh_answers(catalog: Catalog, pool: list[Query], picks: list[int]) -> None:
    types, daemon = catalog
    n = len(types)
    for bound in (2, 4096):  # 2: the memos are cleared again and again
        saved = typeindex._MEMO_MAX
        typeindex._MEMO_MAX = bound
        try:
            shared = TypeIndex(types, daemon)
            for pick in [*range(len(pool)), *picks]:
                query = pool[pick % len(pool)]
                options, reqs, requests = build(query, n)
                bits = shared.bits_of(options)
                got, _ = shared.narrow(options, bits, reqs, requests)
                again, _ = shared.narrow(options, bits, reqs, requests)  # the same objects: by id
                fresh = TypeIndex(types, daemon)
                expected = fresh.options_of(fresh.narrow_bits(fresh.bits_of(options), reqs, requests))
                reference = nodeclaim._reference_narrow(fresh, options, reqs, requests, daemon)
                assert got.tolist() == again.tolist() == expected.tolist() == reference.tolist()
                assert fresh.options_of(fresh.bits_of(options)).tolist() == options.tolist()
                if len(got) == len(options):
                    assert got is options  # all kept: the caller keeps what it derived from it
                else:
                    assert not got.flags.writeable  # shared between claims and solves

                capacity_type = reqs.get(wk.CAPACITY_TYPE)
                zones = shared.zone_requirement(options, capacity_type)
                assert zones == Requirement(wk.ZONE, False, fresh.zones_of(options, capacity_type))
                assert shared.zone_requirement(options.copy(), capacity_type) is zones

                assert shared.capacity_types_of(options, reqs) == _capacity_types(types, options, reqs)
                assert [id(o) for o in shared.overheads(options)] == _overheads(fresh, options)
        finally:
            typeindex._MEMO_MAX = saved


def test_narrow_memo_tells_requests_and_requirements_apart() -> None:
    small = b.instance_type("small", cpu="1", memory="2Gi", zones=["test-zone-1"])
    big = b.instance_type("big", cpu="4", memory="8Gi", zones=["test-zone-2"])
    index = TypeIndex([small, big], {})
    base = Requirements([Requirement.in_(wk.HOSTNAME, "h")])

    def narrow(reqs: Requirements, cpu: int) -> list[str]:
        given = index.all.copy()
        options, _ = index.narrow(given, index.bits_of(given), reqs, Resources({"cpu": cpu}))
        return [index.types[i].name for i in options.tolist()]

    assert narrow(base, 500) == ["small", "big"]
    assert narrow(base, 2000) == ["big"]
    assert narrow(base, 500) == ["small", "big"]
    assert narrow(base.add(Requirement.in_(wk.ZONE, "test-zone-1")), 500) == ["small"]
    assert narrow(base.add(Requirement.in_(wk.ZONE, "test-zone-2")), 500) == ["big"]


def _variants(snap: Snapshot) -> list[Snapshot]:
    """The snapshots of a disruption pass: each one without one of the nodes."""
    out = [snap]
    for node in snap.nodes:
        out.append(b.replace(snap, nodes=tuple(n for n in snap.nodes if n is not node)))
    return out


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_solves_sharing_templates_equal_one_by_one_solves(scenario: tuple[Snapshot, list[Pod]]) -> None:
    """A pass's solves in a row (the index remembers across them) against the reference path."""
    snap, pods = scenario
    caches = scheduling.SchedulingCaches()  # the solves of the pass share its templates
    warm = [digest(scheduler.solve(variant, pods, caches=caches)) for variant in _variants(snap)]
    slow = [digest(reference.solve(variant, pods)) for variant in _variants(snap)]
    assert warm == slow


def test_claim_reuses_the_sum_of_its_last_check_only_for_that_pod() -> None:
    snap = b.snapshot(pools=[b.node_pool()], types=[b.instance_type("m", cpu="8", memory="16Gi")])
    small, big = b.pod("small", cpu="1"), b.pod("big", cpu="2")
    solver = scheduler.Solver(snap, [small, big])
    template = solver.templates[0]
    assert template.index is not None
    claim = ClaimInProgress.open(template, "h", template.index.all, solver.topology, solver.well_known)
    d_small, d_big = solver.pod_data(small), solver.pod_data(big)
    reqs, options = claim.can_add(small, d_small)  # remembers claim + small
    claim.add(big, d_big, reqs, options)  # but big joins
    assert claim.requests == d_big.requests
    claim.add(small, d_small, *claim.can_add(small, d_small))
    assert claim.requests == d_big.requests + d_small.requests


def test_claim_bits_follow_its_options() -> None:
    types = [
        b.instance_type(name, cpu=cpu, memory="16Gi") for name, cpu in (("s", "2"), ("m", "4"), ("l", "8"))
    ]
    snap = b.snapshot(pools=[b.node_pool()], types=types)
    small, big = b.pod("small", cpu="1500m"), b.pod("big", cpu="3")
    solver = scheduler.Solver(snap, [small, big])
    template = solver.templates[0]
    index = template.index
    assert index is not None
    claim = ClaimInProgress.open(template, "h", index.all, solver.topology, solver.well_known)
    assert claim.bits == index.all_bits
    reqs, options = claim.can_add(small, solver.pod_data(small))
    claim.add(small, solver.pod_data(small), reqs, options)
    assert [index.types[i].name for i in claim.options.tolist()] == ["s", "m", "l"]
    reqs, options = claim.can_add(big, solver.pod_data(big))  # 4.5 CPUs: only l
    claim.add(big, solver.pod_data(big), reqs, options)
    assert claim.options.tolist() == [2] and claim.bits == 0b100
    # options not from the last narrowing: the bits are worked out from them
    other = np.array([1, 2], dtype=np.intp)
    claim.add(small, solver.pod_data(small), claim.requirements, other)
    assert claim.bits == 0b110
    with_none = ClaimInProgress.open(template, "g", index.all, solver.topology, solver.well_known)
    too_big = b.pod("too-big", cpu="9")
    try:
        with_none.can_add(too_big, solver.pod_data(too_big))
    except Unfit as exc:
        assert exc.monotone and exc.resources  # no option fits it at all
    else:
        raise AssertionError("a 9-CPU pod fits no type")


def test_unfit_defaults() -> None:
    plain = Unfit("why")
    assert (str(plain), plain.monotone, plain.resources, plain.domains) == ("why", False, False, None)
    zone = Requirement.in_(wk.ZONE, "z")
    full = Unfit(lambda: "lazy", monotone=True, resources=True, domains=(wk.ZONE, zone))
    assert (str(full), full.monotone, full.resources, full.domains) == ("lazy", True, True, (wk.ZONE, zone))
    assert not Unfit("again").monotone  # defaults live on the class and were not changed


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    catalogs(),
    st.lists(st.tuples(st.sampled_from(["cpu", "memory", "pods", "nodes"]), st.integers(-1, 8)), max_size=4),
)
def test_within_limits_memo_equals_the_per_type_check(
    catalog: Catalog, limits: list[tuple[str, int]]
) -> None:
    types, daemon = catalog
    index = TypeIndex(types, daemon)
    scale = {"cpu": 1000, "memory": 1 << 30, "pods": 1, "nodes": 1}
    remaining = {name: left * scale[name] for name, left in limits}
    for _ in range(2):  # the second answer comes from the memo
        found = index.within(dict(remaining))
        want = [i for i, it in enumerate(types) if within_limits(it, remaining)]
        assert found.tolist() == want
        assert not found.flags.writeable  # shared by the claims of every solve
