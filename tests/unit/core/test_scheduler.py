"""Example tests of the basic provisioning algorithm (karpy.core.scheduling.solve / launch)."""

from __future__ import annotations

import pytest

import builders as b
from karpy.core.scheduling import launch, solve
from karpy.core.scheduling.scheduler import order_pools, queue_order
from karpy.model import labels as wk
from karpy.model.catalog import Offering
from karpy.model.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, Toleration

SMALL = b.instance_type("small", cpu="2", memory="2Gi")
LARGE = b.instance_type("large", cpu="8", memory="8Gi")
TYPES = [SMALL, LARGE]


def test_queue_order_cpu_then_memory_descending() -> None:
    pods = [
        b.pod("a", cpu="1", memory="1Gi"),
        b.pod("b", cpu="3"),
        b.pod("c", cpu="1", memory="2Gi"),
        b.pod("d", cpu="2"),
        b.pod("e", cpu="1", memory="2Gi", created=-5.0),
    ]
    assert [p.name for p in queue_order(pods)] == ["b", "d", "e", "c", "a"]


def test_pods_are_packed_largest_cpu_first() -> None:
    pods = [b.pod("small", cpu="500m"), b.pod("big", cpu="3"), b.pod("mid", cpu="1")]
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=pods))
    assert results.errors == ()
    [claim] = results.new_claims
    assert [p.name for p in claim.pods] == ["big", "mid", "small"]


def test_existing_node_used_before_new_claim() -> None:
    node = b.node("existing", labels={wk.ZONE: "test-zone-1"})
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=[node], pods=[b.pod("a", cpu="1")]))
    assert results.new_claims == ()
    assert results.existing == {"default/a": "existing"}
    assert results.placement() == {"default/a": "existing"}


def test_full_existing_node_falls_back_to_new_claim() -> None:
    node = b.node("existing", allocatable={"cpu": "1", "memory": "1Gi", "pods": "10"})
    bound = b.pod("bound", cpu="800m", node_name="existing")
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=[node], pods=[bound, b.pod("a", cpu="500m")])
    results = solve(snap)
    assert results.existing == {}
    assert [c.pods[0].name for c in results.new_claims] == ["a"]


def test_existing_nodes_tried_by_name() -> None:
    nodes = [b.node("n-b"), b.node("n-a")]
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=nodes, pods=[b.pod("a", cpu="1")]))
    assert results.existing == {"default/a": "n-a"}


def test_existing_node_with_untolerated_taint_is_skipped() -> None:
    node = b.node("tainted", taints=[Taint("dedicated", NO_SCHEDULE, "db")])
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=[node], pods=[b.pod("a", cpu="1")]))
    assert results.existing == {}
    assert len(results.new_claims) == 1


def test_claims_of_this_solve_are_tried_fewest_pods_first() -> None:
    pods = [b.pod("a", cpu="1500m"), b.pod("b", cpu="1500m"), b.pod("d", cpu="400m"), b.pod("c", cpu="100m")]
    results = solve(b.snapshot(pools=[b.node_pool()], types=[SMALL], pods=pods))
    assert sorted([p.name for p in c.pods] for c in results.new_claims) == [["a", "d"], ["b", "c"]]


def test_higher_weight_pool_wins() -> None:
    pools = [b.node_pool("zz", weight=1), b.node_pool("heavy", weight=10)]
    results = solve(b.snapshot(pools=pools, types=TYPES, pods=[b.pod("a", cpu="1")]))
    assert [c.node_pool for c in results.new_claims] == ["heavy"]


def test_equal_weight_ties_by_name_descending() -> None:
    pools = [b.node_pool("alpha"), b.node_pool("beta"), b.node_pool("gamma", weight=-1)]
    assert [p.name for p in order_pools(pools)] == ["beta", "alpha", "gamma"]
    results = solve(b.snapshot(pools=pools, types=TYPES, pods=[b.pod("a", cpu="1")]))
    assert [c.node_pool for c in results.new_claims] == ["beta"]


def test_lower_weight_pool_used_when_heavier_cannot() -> None:
    pools = [b.node_pool("heavy", weight=10, requirements=[(wk.ARCH, "In", ["arm64"])]), b.node_pool("light")]
    results = solve(b.snapshot(pools=pools, types=TYPES, pods=[b.pod("a", cpu="1")]))
    assert [c.node_pool for c in results.new_claims] == ["light"]


def test_untolerated_taint_reason_names_the_taint() -> None:
    pool = b.node_pool(taints=[Taint("dedicated", NO_SCHEDULE, "gpu")])
    results = solve(b.snapshot(pools=[pool], types=TYPES, pods=[b.pod("a", cpu="1")]))
    [error] = results.errors
    assert "dedicated=gpu:NoSchedule" in error.reasons["nodepool/default"]
    assert "taint" in error.summary()


def test_tolerated_taint_schedules() -> None:
    pool = b.node_pool(taints=[Taint("dedicated", NO_SCHEDULE, "gpu")])
    pod = b.pod("a", cpu="1", tolerations=[Toleration("dedicated", "Equal", "gpu")])
    results = solve(b.snapshot(pools=[pool], types=TYPES, pods=[pod]))
    assert results.errors == ()
    assert results.new_claims[0].taints == pool.taints


def test_too_big_pod_reason_mentions_fits_requests() -> None:
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[b.pod("huge", cpu="100")]))
    assert results.new_claims == ()
    [error] = results.errors
    assert "fits requests" in error.reasons["nodepool/default"]


def test_limits_reason() -> None:
    pool = b.node_pool(limits={"cpu": "4"})
    results = solve(b.snapshot(pools=[pool], types=TYPES, pods=[b.pod("a", cpu="3")]))
    assert results.new_claims == ()
    [error] = results.errors
    assert "would exceed NodePool limit cpu" in error.reasons["nodepool/default"]


def test_limits_keep_options_within_limit() -> None:
    pool = b.node_pool(limits={"cpu": "4"})
    results = solve(b.snapshot(pools=[pool], types=TYPES, pods=[b.pod("a", cpu="1")]))
    [claim] = results.new_claims
    assert [it.name for it in claim.instance_types] == ["small"]


def test_limits_count_existing_nodes_of_the_pool() -> None:
    pool = b.node_pool(limits={"cpu": "9"})
    node = b.node(
        "n1", labels={wk.NODEPOOL: "default"}, allocatable={"cpu": "8", "memory": "8Gi", "pods": "1"}
    )
    bound = b.pod("bound", node_name="n1")
    results = solve(b.snapshot(pools=[pool], types=TYPES, nodes=[node], pods=[bound, b.pod("a", cpu="1")]))
    assert results.new_claims == ()
    assert "would exceed NodePool limit cpu" in results.errors[0].reasons["nodepool/default"]


def test_limit_used_up_exactly_blocks_further_claims() -> None:
    pool = b.node_pool(limits={"cpu": "4"})
    pods = [b.pod(f"p{i}", cpu="1500m") for i in range(3)]
    results = solve(b.snapshot(pools=[pool], types=[SMALL], pods=pods))
    assert len(results.new_claims) == 2
    [error] = results.errors
    assert "would exceed NodePool limit cpu" in error.reasons["nodepool/default"]


def test_limit_used_up_by_existing_nodes_blocks_claims() -> None:
    pool = b.node_pool(limits={"cpu": "8"})
    node = b.node(
        "n1", labels={wk.NODEPOOL: "default"}, allocatable={"cpu": "8", "memory": "8Gi", "pods": "1"}
    )
    snap = b.snapshot(
        pools=[pool], types=TYPES, nodes=[node], pods=[b.pod("bound", node_name="n1"), b.pod("a", cpu="1")]
    )
    results = solve(snap)
    assert results.new_claims == ()
    assert "would exceed NodePool limit cpu" in results.errors[0].reasons["nodepool/default"]


def test_nodes_limit() -> None:
    pool = b.node_pool(limits={"nodes": "1"})
    pods = [b.pod(f"p{i}", cpu="1500m") for i in range(2)]
    results = solve(b.snapshot(pools=[pool], types=[SMALL], pods=pods))
    assert len(results.new_claims) == 1
    assert "would exceed NodePool limit nodes" in results.errors[0].reasons["nodepool/default"]


@pytest.mark.parametrize(
    "pod",
    [
        b.pod("a", node_selector={wk.HOSTNAME: "n1"}),
        b.pod("a", required_terms=[[(wk.HOSTNAME, "In", ["n1"])]]),
        b.pod("a", preferred_terms=[(1, [(wk.HOSTNAME, "In", ["n1"])])]),
        b.pod("a", node_selector={"karpenter.sh/unknown": "x"}),
    ],
)
def test_restricted_selector_is_a_validation_error(pod: object) -> None:
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]))  # type: ignore[list-item]
    assert results.new_claims == ()
    [error] = results.errors
    assert set(error.reasons) == {"validation"}
    assert "restricted" in error.reasons["validation"]


def test_well_known_karpenter_label_is_not_restricted() -> None:
    pod = b.pod("a", node_selector={wk.CAPACITY_TYPE: "on-demand"})
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]))
    assert results.errors == ()
    launched = launch(results.new_claims[0])
    assert launched is not None
    assert launched.offering.capacity_type == "on-demand"


def test_preferred_node_affinity_is_honoured() -> None:
    pod = b.pod("a", cpu="1", preferred_terms=[(10, [(wk.ZONE, "In", ["test-zone-2"])])])
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]))
    assert results.relaxations == {}
    [claim] = results.new_claims
    assert claim.requirements[wk.ZONE].values == {"test-zone-2"}
    launched = launch(claim)
    assert launched is not None
    assert launched.labels[wk.ZONE] == "test-zone-2"


def test_heaviest_preferred_term_wins() -> None:
    terms = [(1, [(wk.ZONE, "In", ["test-zone-1"])]), (50, [(wk.ZONE, "In", ["test-zone-3"])])]
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[b.pod("a", preferred_terms=terms)]))
    assert results.new_claims[0].requirements[wk.ZONE].values == {"test-zone-3"}


def test_unsatisfiable_preferred_node_affinity_is_relaxed() -> None:
    pod = b.pod("a", cpu="1", preferred_terms=[(10, [(wk.ZONE, "In", ["nowhere"])])])
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]))
    assert results.errors == ()
    assert results.relaxations == {"default/a": ("dropped preferred node affinity",)}
    assert wk.ZONE not in results.new_claims[0].requirements


def test_relaxations_record_every_step_in_order() -> None:
    pod = b.pod(
        "a",
        required_terms=[[(wk.ZONE, "In", ["nowhere"])], [(wk.ZONE, "In", ["test-zone-1"])]],
        preferred_terms=[(10, [(wk.ARCH, "In", ["arm64"])])],
    )
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]))
    assert results.errors == ()
    assert results.relaxations == {
        "default/a": ("dropped required node affinity term", "dropped preferred node affinity")
    }
    assert results.new_claims[0].requirements[wk.ZONE].values == {"test-zone-1"}


def test_prefer_no_schedule_taint_tolerated_as_last_step() -> None:
    pool = b.node_pool(taints=[Taint("soft", PREFER_NO_SCHEDULE)])
    results = solve(b.snapshot(pools=[pool], types=TYPES, pods=[b.pod("a")]))
    assert results.errors == ()
    assert results.relaxations == {"default/a": ("tolerated PreferNoSchedule taints",)}


def test_failed_pod_keeps_its_relaxation_steps() -> None:
    pod = b.pod("a", cpu="100", preferred_terms=[(10, [(wk.ZONE, "In", ["test-zone-2"])])])
    results = solve(b.snapshot(pools=[b.node_pool()], types=TYPES, pods=[pod]))
    [error] = results.errors
    assert error.relaxations == ("dropped preferred node affinity",)
    assert results.relaxations == {}


def test_no_pools_reason() -> None:
    results = solve(b.snapshot(pools=[], types=TYPES, pods=[b.pod("a")]))
    assert results.errors[0].reasons == {"nodepools": "no NodePool can launch nodes"}


def test_launch_picks_cheapest_offering_across_types() -> None:
    cheap_in_z3 = b.instance_type(
        "b-type",
        offerings=[Offering("test-zone-1", "on-demand", 0.5), Offering("test-zone-3", "spot", 0.2)],
    )
    pricier = b.instance_type("a-type", offerings=[Offering("test-zone-1", "spot", 0.3)])
    results = solve(b.snapshot(pools=[b.node_pool()], types=[pricier, cheap_in_z3], pods=[b.pod("p")]))
    [claim] = results.new_claims
    launched = launch(claim, ["a-type", "b-type"])
    assert launched is not None
    assert (launched.instance_type.name, launched.offering) == (
        "b-type",
        Offering("test-zone-3", "spot", 0.2),
    )
    assert launched.price == 0.2
    assert launched.labels[wk.ZONE] == "test-zone-3"
    assert launched.labels[wk.CAPACITY_TYPE] == "spot"
    assert launched.labels[wk.INSTANCE_TYPE] == "b-type"
    assert launched.labels[wk.NODEPOOL] == "default"
    assert launched.labels[wk.HOSTNAME] == claim.name
    assert launched.labels[wk.ARCH] == "amd64"
    assert launched.labels[wk.OS] == "linux"


def test_launch_skips_unavailable_offerings() -> None:
    it = b.instance_type(
        "t",
        offerings=[
            Offering("test-zone-1", "spot", 0.1, available=False),
            Offering("test-zone-2", "spot", 0.4),
        ],
    )
    results = solve(b.snapshot(pools=[b.node_pool()], types=[it], pods=[b.pod("p")]))
    launched = launch(results.new_claims[0])
    assert launched is not None
    assert launched.offering.zone == "test-zone-2"


@pytest.mark.parametrize(
    ("catalog_order", "expected"),
    [(["x-type", "y-type"], "x-type"), (["y-type", "x-type"], "y-type")],
)
def test_launch_price_ties_follow_catalog_order(catalog_order: list[str], expected: str) -> None:
    types = [b.instance_type(name, cpu="2", memory="2Gi", price=0.3) for name in ("x-type", "y-type")]
    results = solve(b.snapshot(pools=[b.node_pool()], types=types, pods=[b.pod("p")]))
    [claim] = results.new_claims
    assert {it.name for it in claim.instance_types} == {"x-type", "y-type"}
    launched = launch(claim, catalog_order)
    assert launched is not None
    assert launched.instance_type.name == expected


def test_launch_offering_ties_keep_catalog_order_within_type() -> None:
    it = b.instance_type("t", zones=("test-zone-3", "test-zone-1"), capacity_types=("on-demand", "spot"))
    results = solve(b.snapshot(pools=[b.node_pool()], types=[it], pods=[b.pod("p")]))
    launched = launch(results.new_claims[0])
    assert launched is not None
    assert (launched.offering.zone, launched.offering.capacity_type) == ("test-zone-3", "on-demand")


def test_claim_options_are_cheapest_first() -> None:
    results = solve(b.snapshot(pools=[b.node_pool()], types=[LARGE, SMALL], pods=[b.pod("p", cpu="1")]))
    assert [it.name for it in results.new_claims[0].instance_types] == ["small", "large"]
