"""Measured capacity in the simulator: the shipped misestimate scenario, with and without it."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from builders import instance_type
from karpy.adapters.memory import MemoryKube
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim
from karpy.model.requirements import Requirement
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim import runner, scenario
from karpy.sim.cloud import LaunchLatency, Offset, SimCloud, TrueAllocatable

EXAMPLES = Path(__file__).parents[2] / "examples" / "sim"
SCENARIO = EXAMPLES / "hospital-memory-misestimate.yaml"
GI = 2**30
SMALL = instance_type("small", cpu="2", memory="8Gi", price=0.2)
LARGE = instance_type("large", cpu="4", memory="16Gi", price=0.4)
MORNING = 9 * 3600.0  # 00:00 to 09:00: the night job, the 07:00 lab batch, the 07:30 step


def _run(on: bool, *, seed: int = 1) -> runner.RunResult:
    base = scenario.load(SCENARIO)
    return runner.run(dataclasses.replace(base, measured_capacity=on), seed=seed, until=MORNING)


def test_the_scenario_declares_the_true_allocatable_and_leaves_the_setting_off() -> None:
    sc = scenario.load(SCENARIO)
    assert sc.measured_capacity is False
    assert sc.cloud.true_allocatable == TrueAllocatable(
        {"memory": Offset(percent=-6.0)}, {"r6a.large": {"memory": Offset(percent=-9.0)}}
    )


def test_measured_capacity_avoids_the_pods_that_do_not_fit_and_their_second_launches() -> None:
    off, on = _run(False), _run(True)
    o, m = off.figures["measured_capacity"], on.figures["measured_capacity"]
    assert o["enabled"] is False and m["enabled"] is True
    # without: every Node registers below its claim's estimate; pods packed by it do not fit
    assert o["nodes_below_estimate"] == off.figures["nodes_created"]
    assert o["pods_not_fitting"] > 0 and o["relaunches"] > 0
    # with: only the first Node of each type (nothing measured yet) is below; nothing else misfits
    assert m["nodes_below_estimate"] == m["measured_types"] < o["nodes_below_estimate"]
    assert (m["pods_not_fitting"], m["relaunches"]) == (0, 0)
    assert m["claims_corrected"] > 0
    assert on.figures["nodes_created"] < off.figures["nodes_created"]
    assert on.figures["pending_seconds"]["p95"] < off.figures["pending_seconds"]["p95"]
    assert on.figures["pods_pending_at_end"] == off.figures["pods_pending_at_end"] == 0


def test_the_same_seed_gives_the_same_run() -> None:
    a, b = _run(True), _run(True)
    assert a.figures == b.figures and a.events == b.events


def test_a_run_without_either_field_has_no_measured_capacity_figures() -> None:
    sc = scenario.load(SCENARIO)
    plain = dataclasses.replace(sc, cloud=dataclasses.replace(sc.cloud, true_allocatable=None))
    result = runner.run(plain, seed=1, until=600.0)
    assert "measured_capacity" not in result.figures


def test_offsets_are_validated_with_their_path() -> None:
    raw = {
        "kind": "Simulation",
        "name": "x",
        "cloud": {"trueAllocatable": {"offset": {"memory": "-5 percent"}}},
    }
    with pytest.raises(scenario.ScenarioError) as err:
        scenario.parse(raw)
    assert "cloud.trueAllocatable.offset[memory]" in str(err.value)
    assert '"-5 percent" is neither a percentage ("-5%") nor a quantity ("-600Mi")' in str(err.value)
    ok = scenario.parse(
        {
            "kind": "Simulation",
            "name": "x",
            "settings": {"measuredCapacity": True},
            "cloud": {"trueAllocatable": {"offset": {"memory": "-600Mi", "cpu": "-100m", "pods": "-2"}}},
        }
    )
    assert ok.measured_capacity is True
    assert ok.cloud.true_allocatable is not None
    assert dict(ok.cloud.true_allocatable.offsets) == {
        "memory": Offset(amount=-600 * 2**20),
        "cpu": Offset(amount=-100),
        "pods": Offset(amount=-2),
    }


def test_compare_with_takes_the_other_files_setting() -> None:
    sc = scenario.load(SCENARIO)
    on = dataclasses.replace(sc, measured_capacity=True)
    assert sc.with_karpy_config(on).measured_capacity is True
    assert on.with_karpy_config(sc).measured_capacity is False


def _cloud(latency: float) -> tuple[Loop, SimCloud]:
    loop = Loop(start=0.0)
    kube = MemoryKube(LoopClock(loop))
    true = TrueAllocatable({"memory": Offset(amount=-GI)}, {"large": {"memory": Offset(percent=-10.0)}})
    cloud = SimCloud(
        kube,
        LoopClock(loop),
        loop,
        types_for=lambda _pool, _nc: (SMALL, LARGE),
        rng=random.Random(1),
        launch_latency=LaunchLatency.fixed(latency),
        true_allocatable=true,
    )
    return loop, cloud


def _claim(name: str, it: str) -> NodeClaim:
    return NodeClaim(name=name, requirements=(Requirement.in_(wk.INSTANCE_TYPE, it),))


def _memory(cloud: SimCloud, name: str) -> tuple[str, str]:
    raw = cloud._kube.get("Node", name)
    return raw["status"]["capacity"]["memory"], raw["status"]["allocatable"]["memory"]


@pytest.mark.parametrize("latency", [0.0, 20.0])
def test_the_cloud_writes_nodes_with_the_true_allocatable_and_hydrates_with_the_estimate(
    latency: float,
) -> None:
    loop, cloud = _cloud(latency)
    one = cloud.create(_claim("one", "small"))
    two, three = cloud.create_batch([_claim("two", "small"), _claim("three", "large")])
    assert isinstance(two, NodeClaim) and isinstance(three, NodeClaim)
    assert one.allocatable == two.allocatable == SMALL.allocatable  # the claim: the catalog's estimate
    assert three.allocatable == LARGE.allocatable
    loop.run(until=latency + 1)
    assert _memory(cloud, "one") == _memory(cloud, "two") == ("7Gi", "7Gi")
    # -10% of 16Gi is -1638.4Mi: the offset rounded down to whole MiB, -1639Mi
    assert _memory(cloud, "three") == ("14745Mi", "14745Mi")
    again = cloud.create(_claim("one", "small"))  # a relaunch adopts the Node: not lowered twice
    assert again.allocatable.get("memory") == 7 * GI and _memory(cloud, "one") == ("7Gi", "7Gi")
