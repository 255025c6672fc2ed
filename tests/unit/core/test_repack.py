"""``packing: optimized`` (``karpy.core.optimize.repack``).

Never dearer, every pod kept, constrained pods stay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from karpy.core.optimize import bound, repack
from karpy.core.scheduling import Launched, launch, solve
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.objects import Pod

TYPES = [
    b.instance_type("small", cpu="2", memory="4Gi", pods="10", price=0.2),
    b.instance_type("medium", cpu="4", memory="8Gi", pods="20", price=0.38),
    b.instance_type("large", cpu="16", memory="32Gi", pods="60", price=1.4),
    b.instance_type("huge", cpu="64", memory="256Gi", pods="110", price=9.0),
]


def _faithful(snap: Snapshot) -> tuple[list[Launched], repack.Repacked]:
    results = solve(snap)
    launched = [node for node in (launch(c) for c in results.new_claims) if node is not None]
    return launched, repack.repack(snap, results, launched)


def _placements(nodes: Sequence[Launched]) -> Counter[str]:
    return Counter(p.key for node in nodes for p in node.claim.pods)


def test_free_pods_exclude_constrained_and_selected_ones() -> None:
    spread = b.spread(wk.ZONE, match_labels={"app": "web"})
    pods = [
        b.pod("plain", labels={"app": "batch"}),
        b.pod("spread", labels={"app": "web"}, spread=[spread]),
        b.pod("selected", labels={"app": "web"}),  # counted by the spread above
        b.pod("anti", anti_affinity=[b.anti_affinity_term({"app": "x"})]),
        b.pod("ports", host_ports=[8080]),
        b.pod("preferring", preferred_terms=[(1, [(wk.ZONE, "In", [b.ZONES[0]])])]),
    ]
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=pods)
    assert repack.free_pods(snap, pods) == {"default/plain"}


def test_a_mixed_batch_gets_cheaper_and_keeps_every_pod() -> None:
    pods = [b.pod(f"big{i}", cpu="3", memory="6Gi") for i in range(5)]
    pods += [b.pod(f"small{i}", cpu="250m", memory="256Mi") for i in range(30)]
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=pods)
    launched, done = _faithful(snap)
    assert done.cost <= done.faithful_cost + 1e-9
    assert done.faithful_cost == sum(n.price for n in launched)
    assert done.cost == sum(n.price for n in done.launched)
    assert _placements(done.launched) == Counter(p.key for p in pods)
    assert set(done.results.placement()) == {p.key for p in pods}
    lower = bound.lower_bound(snap, pods).lower_bound
    assert done.cost >= lower - 1e-9
    for node in done.launched:  # each claim is launchable as planned and fits its pods
        assert node.instance_type in node.claim.instance_types
        assert node.claim.requests.fits(node.instance_type.allocatable)


def test_constrained_pods_stay_on_their_claims() -> None:
    spread = b.spread(wk.HOSTNAME, match_labels={"app": "web"})
    web = [b.pod(f"web{i}", cpu="1", labels={"app": "web"}, spread=[spread]) for i in range(3)]
    batch = [b.pod(f"batch{i}", cpu="500m", labels={"app": "batch"}) for i in range(12)]
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=web + batch)
    launched, done = _faithful(snap)
    before = {p.key: node.claim.name for node in launched for p in node.claim.pods}
    after = {p.key: node.claim.name for node in done.launched for p in node.claim.pods}
    for pod in web:
        assert after[pod.key] == before[pod.key]
    assert len({after[p.key] for p in web}) == 3  # still one per host
    assert done.cost <= done.faithful_cost + 1e-9


def test_nothing_free_leaves_the_plan_as_it_was() -> None:
    anti = b.anti_affinity_term({"app": "solo"})
    pods = [b.pod(f"solo{i}", cpu="1", labels={"app": "solo"}, anti_affinity=[anti]) for i in range(3)]
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=pods)
    launched, done = _faithful(snap)
    assert done.launched == tuple(launched)
    assert done.cost == done.faithful_cost
    assert done.note


def test_pods_stay_in_their_nodepool() -> None:
    heavy = b.node_pool("heavy", weight=10, requirements=[(wk.INSTANCE_TYPE, "In", ["huge"])])
    rest = b.node_pool("rest")
    pods = [b.pod(f"p{i}", cpu="1", memory="1Gi") for i in range(8)]
    snap = b.snapshot(pools=[heavy, rest], types=TYPES, pods=pods)
    _, done = _faithful(snap)
    assert {node.claim.node_pool for node in done.launched} == {"heavy"}


def test_limits_are_respected() -> None:
    pool = b.node_pool(limits={"cpu": "20"})
    pods = [b.pod(f"p{i}", cpu="1500m", memory="1Gi") for i in range(9)]
    snap = b.snapshot(pools=[pool], types=TYPES, pods=pods)
    _, done = _faithful(snap)
    spent = 0
    for node in done.launched:
        spent += max(it.capacity.get("cpu", 0) for it in node.claim.instance_types)
    assert spent <= 20_000


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(
        st.tuples(st.sampled_from(("100m", "500m", "1", "3", "7")), st.sampled_from(("128Mi", "1Gi", "6Gi"))),
        min_size=1,
        max_size=30,
    ),
    spread_every=st.integers(min_value=0, max_value=4),
)
def test_optimized_is_never_dearer_and_places_the_same_pods(
    requests: list[tuple[str, str]], spread_every: int
) -> None:
    constraint = b.spread(wk.ZONE, match_labels={"app": "spread"})
    pods: list[Pod] = []
    for i, (cpu, memory) in enumerate(requests):
        spread = spread_every and i % spread_every == 0
        pods.append(
            b.pod(
                f"p{i}",
                cpu=cpu,
                memory=memory,
                labels={"app": "spread" if spread else "free"},
                spread=[constraint] if spread else None,
            )
        )
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, pods=pods)
    launched, done = _faithful(snap)
    assert done.cost <= done.faithful_cost + 1e-9
    assert _placements(done.launched) == _placements(launched)
    for node in done.launched:
        assert node.claim.requests.fits(node.instance_type.allocatable)
    placed = [p for p in pods if p.key in _placements(launched)]
    assert done.cost >= bound.lower_bound(snap, placed).lower_bound - 1e-9
