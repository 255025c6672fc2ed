"""The simulated cloud: launch latency, ICE windows, spot interruptions and the billing log."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest

from builders import instance_type
from karpy.adapters.memory import MemoryKube
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import Offering
from karpy.model.objects import NodeClaim
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.ports import CloudProvider
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim.cloud import CAPACITY_LABEL, Insufficient, LaunchLatency, SimCloud

T0 = 1_772_409_600.0
ZONES = ("zone-a", "zone-b")
SMALL = instance_type(
    "small",
    cpu="2",
    memory="4Gi",
    offerings=[
        Offering("zone-a", "on-demand", 0.10),
        Offering("zone-b", "on-demand", 0.10),
        Offering("zone-a", "spot", 0.04),
        Offering("zone-b", "spot", 0.03),
    ],
)
LARGE = instance_type(
    "large",
    cpu="8",
    memory="16Gi",
    offerings=[
        Offering(z, ct, 0.4 if ct == "on-demand" else 0.16) for z in ZONES for ct in ("on-demand", "spot")
    ],
)


def make(seed: int = 7, **kwargs: Any) -> tuple[Loop, MemoryKube, SimCloud]:
    loop = Loop(start=T0)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    kwargs.setdefault("launch_latency", LaunchLatency.fixed(30.0))
    cloud = SimCloud(
        kube,
        clock,
        loop,
        types_for=lambda _pool, _nc: (SMALL, LARGE),
        node_class_for=lambda _pool: None,
        rng=random.Random(seed),
        **kwargs,
    )
    return loop, kube, cloud


def claim(
    name: str,
    *,
    capacity_types: tuple[str, ...] = ("on-demand",),
    types: tuple[str, ...] = ("small", "large"),
) -> NodeClaim:
    return NodeClaim(
        name=name,
        node_pool="",
        requirements=(
            Requirement.in_(wk.INSTANCE_TYPE, *types),
            Requirement.in_(wk.CAPACITY_TYPE, *capacity_types),
        ),
        requests=Resources.parse({"cpu": "1"}),
    )


def test_is_a_cloud_provider_and_writes_the_node_after_the_latency() -> None:
    loop, kube, cloud = make()
    provider: CloudProvider = cloud
    hydrated = provider.create(claim("a"))
    assert hydrated.labels[wk.INSTANCE_TYPE] == "small" and hydrated.labels[wk.CAPACITY_TYPE] == "on-demand"
    assert kube.objects("Node") == []
    loop.run(T0 + 29)
    assert kube.objects("Node") == []
    loop.run(T0 + 30)
    assert len(kube.objects("Node")) == 1
    assert cloud.billing[0].price_per_hour == 0.10 and cloud.billing[0].launched_at == T0


def test_lognormal_latency_matches_its_percentiles_and_is_seeded() -> None:
    latency = LaunchLatency(40.0, 75.0)
    samples = [latency.sample(random.Random(3)) for _ in range(3)]
    assert samples[0] == samples[1] == samples[2]
    rng = random.Random(11)
    many = sorted(latency.sample(rng) for _ in range(20_000))
    assert statistics.median(many) == pytest.approx(40.0, rel=0.03)
    assert many[int(0.95 * len(many))] == pytest.approx(75.0, rel=0.05)
    assert LaunchLatency.fixed(12.0).sample(rng) == 12.0
    with pytest.raises(ValueError):
        LaunchLatency(60.0, 30.0)


def test_insufficient_capacity_window_applies_to_create_and_launch_node() -> None:
    window = Insufficient("small", "zone-a", T0 + 100, T0 + 200)
    loop, kube, cloud = make(insufficient=[window])
    loop.run(T0 + 150)
    with pytest.raises(errors.InsufficientCapacity):
        cloud.create(claim("a", types=("small",)))  # the cheapest offering is small/zone-a/on-demand
    assert ("small", "zone-a", "on-demand") in cloud.unavailable()  # karpy's 3-minute cache
    retried = cloud.create(claim("b", types=("small",)))
    assert retried.labels[wk.ZONE] == "zone-b"
    with pytest.raises(errors.InsufficientCapacity):
        cloud.launch_node(
            instance_type="small", zone="zone-a", capacity_type="spot", labels={}, taints=[], name_prefix="ng"
        )
    loop.run(T0 + 200)
    name = cloud.launch_node(
        instance_type="small",
        zone="zone-a",
        capacity_type="spot",
        labels={"group": "ng"},
        taints=[],
        name_prefix="ng",
    )
    assert cloud.ice_errors == 2
    loop.run(T0 + 231)
    node = kube.get("Node", name)
    assert node["metadata"]["labels"]["group"] == "ng"
    assert node["metadata"]["labels"][CAPACITY_LABEL] == "SPOT"
    assert node["metadata"]["labels"][wk.ZONE] == "zone-a"


def _interruptions(seed: int) -> list[tuple[str, float]]:
    loop, kube, cloud = make(seed, spot_interruption_rate_per_node_hour=0.5)
    seen: list[str] = []
    cloud.on_interrupt = seen.append
    names = [
        cloud.launch_node(
            instance_type="small", zone="zone-b", capacity_type="spot", labels={}, taints=[], name_prefix="s"
        )
        for _ in range(10)
    ]
    cloud.launch_node(
        instance_type="small",
        zone="zone-b",
        capacity_type="on-demand",
        labels={},
        taints=[],
        name_prefix="od",
    )
    loop.run(T0 + 4 * 3600)
    gone = {i.node for i in cloud.interruptions}
    assert seen == [i.node for i in cloud.interruptions]
    assert {n["metadata"]["name"] for n in kube.objects("Node")} == (set(names) | {"od-00011"}) - gone
    assert all(r.terminated_at is not None for r in cloud.billing if r.node in gone)
    return [(i.node, i.at) for i in cloud.interruptions]


def test_spot_interruptions_are_a_seeded_poisson_process() -> None:
    first = _interruptions(5)
    assert first == _interruptions(5)
    assert first != _interruptions(6)
    assert 3 <= len(first) <= 10  # 10 nodes x 4 h x 0.5/h: ~8.6 expected
    assert all(not node.startswith("od") for node, _ in first)


def test_cost_is_the_sum_over_the_billing_log() -> None:
    loop, kube, cloud = make(launch_latency=LaunchLatency(40.0, 75.0))
    a = cloud.create(claim("a"))
    b = cloud.create(claim("b", capacity_types=("spot",), types=("large",)))
    loop.run(T0 + 1800)
    cloud.delete(a)
    c = cloud.launch_node(
        instance_type="large", zone="zone-a", capacity_type="on-demand", labels={}, taints=[], name_prefix="x"
    )
    loop.run(T0 + 3600)
    cloud.terminate_node(c)
    cloud.delete(b)
    loop.run(T0 + 7200)
    end = T0 + 7200
    expected = sum(
        r.price_per_hour * ((r.terminated_at if r.terminated_at is not None else end) - r.launched_at) / 3600
        for r in cloud.billing
    )
    assert cloud.cost(end) == pytest.approx(expected)
    assert cloud.cost(end) == pytest.approx(0.10 * 0.5 + 0.16 * 1.0 + 0.4 * 0.5)
    assert kube.objects("Node") == []
    with pytest.raises(errors.NodeClaimNotFound):
        cloud.delete(a)
