"""The benchmark shapes of ``benchmarks/scheduling.py`` are built as documented there.

Builds each shape at a tiny size and checks its structure; solves ``upstream-diverse`` at 50
pods and expects every pod placed (upstream fails its benchmark on any pod error).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from karpy.catalog import aws
from karpy.core import scheduling
from karpy.model import labels as wk
from karpy.model.objects import Pod
from karpy.model.resources import Resources

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "scheduling.py"


def _load() -> ModuleType:
    name = "karpy_benchmarks_scheduling"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def _kind(pod: Pod) -> str:
    if pod.spread:
        return "zone-spread" if pod.spread[0].topology_key == wk.ZONE else "hostname-spread"
    if pod.affinity:
        return "zone-affinity"
    if pod.anti_affinity:
        return "hostname-anti-affinity"
    return "plain"


def test_shapes_registry() -> None:
    assert set(bench.SHAPES) == {
        "upstream-diverse",
        "upstream-preferences",
        "existing-cluster",
        "aws-deployments",
    }


def test_fake_instance_types_follow_upstream() -> None:
    catalog = bench.fake_instance_types()
    types = catalog.instance_types
    assert len(types) == 400
    for i, it in enumerate(types):
        assert it.name == f"fake-it-{i}"
        assert it.capacity == Resources.parse(
            {"cpu": str(i + 1), "memory": f"{2 * (i + 1)}Gi", "pods": str(10 * (i + 1))}
        )
        assert it.overhead == Resources.parse({"cpu": "100m", "memory": "10Mi"})
        assert it.requirements[wk.ARCH].values == frozenset({"amd64"})
        price = 0.1 * (i + 1) + 0.1 * (2 * (i + 1) * 2**30) / 1e9
        assert [(o.zone, o.capacity_type) for o in it.offerings] == [
            ("test-zone-1", "spot"),
            ("test-zone-2", "spot"),
            ("test-zone-1", "on-demand"),
            ("test-zone-2", "on-demand"),
            ("test-zone-3", "on-demand"),
        ]
        assert all(o.available and o.price == pytest.approx(price) for o in it.offerings)
    assert types[0].offerings[0].price == pytest.approx(0.1 + 0.1 * 2**31 / 1e9)


def test_upstream_diverse_structure_and_solve() -> None:
    snapshot, pods = bench.build_upstream_diverse(50)
    assert len(pods) == 50
    assert Counter(_kind(p) for p in pods) == {
        "plain": 10,
        "zone-spread": 10,
        "hostname-spread": 10,
        "zone-affinity": 10,
        "hostname-anti-affinity": 10,
    }
    assert len({p.uid for p in pods}) == 50
    assert [p.name for p in snapshot.node_pools] == ["default"]
    assert snapshot.node_pools[0].limits is None
    assert len(snapshot.instance_types["default"]) == 400
    for pod in pods:
        assert pod.requests.get("cpu") in {100, 250, 500, 1000, 1500}
        assert pod.requests.get("memory") in {m * 2**20 for m in (100, 256, 512, 1024, 2048, 4096)}
        if pod.spread:
            spread = pod.spread[0]
            assert (spread.max_skew, spread.when_unsatisfiable) == (1, "DoNotSchedule")
            assert dict(spread.selector.match_labels)["my-label"] in "abcdefg"
        if pod.affinity:  # self-affinity: the selector matches the pod itself
            assert pod.affinity[0].topology_key == wk.ZONE
            assert pod.affinity[0].selector.matches(pod.labels)
        if pod.anti_affinity:
            assert pod.anti_affinity[0].topology_key == wk.HOSTNAME
            assert pod.labels == {"app": "nginx"}
            assert pod.anti_affinity[0].selector.matches(pod.labels)
    # Same seed, same pods; the remainder of n/5 goes to plain pods.
    assert bench.build_upstream_diverse(50)[1] == pods
    assert Counter(_kind(p) for p in bench.build_upstream_diverse(53)[1])["plain"] == 13

    results = scheduling.solve(snapshot, pods)
    assert results.errors == ()
    assert len(results.placement()) == 50
    assert len(results.new_claims) >= 10  # every anti-affinity pod on its own NodeClaim


def test_upstream_preferences_structure() -> None:
    snapshot, pods = bench.build_upstream_preferences(50)
    assert len(pods) == 50
    assert len(snapshot.instance_types["default"]) == 400
    for pod in pods:
        assert pod.labels == {"app": "nginx"}
        (zone_pref,) = pod.preferred_terms
        (req,) = zone_pref.term.requirements
        assert (req.key, req.values) == (wk.ZONE, frozenset({"test-zone-1"}))
        assert {(w.weight, w.term.topology_key) for w in pod.anti_affinity_preferred} == {
            (10, wk.ZONE),
            (1, wk.HOSTNAME),
        }
        assert all(w.term.selector.matches(pod.labels) for w in pod.anti_affinity_preferred)
        assert not pod.anti_affinity and not pod.spread


def test_existing_cluster_structure() -> None:
    snapshot, pending = bench.build_existing_cluster(80, nodes=30)
    assert len(snapshot.nodes) == 30
    assert [p.name for p in snapshot.node_pools] == ["general"]
    allowed_types = {f"{f}.{s}" for f in ("m5", "c5", "r5") for s in ("xlarge", "2xlarge", "4xlarge")}
    bound_request = Resources.parse({"cpu": "250m", "memory": "512Mi"})
    for k, node in enumerate(snapshot.nodes):
        assert node.node is not None and node.claim is not None
        assert node.claim.node_pool == "general" and node.initialized
        assert node.labels[wk.INSTANCE_TYPE] in allowed_types
        assert node.labels[wk.ZONE] == ("us-east-1a", "us-east-1b", "us-east-1c")[k % 3]
        assert len(node.pods) == 10
        assert all(p.node_name == node.name and p.requests == bound_request for p in node.pods)
    assert sum(1 for p in snapshot.pods if p.node_name) == 300
    assert len(pending) == 80 and not any(p.node_name for p in pending)
    # 40 deployments of 2: every 4th spreads over zones, every 5th prefers hostname anti-affinity.
    apps = {p.labels["app"]: p for p in pending}
    assert len(apps) == 40
    assert sum(1 for p in apps.values() if p.spread) == 10
    assert sum(1 for p in apps.values() if p.anti_affinity_preferred) == 8
    assert {apps[f"deploy-{i:02d}"].requests.get("cpu") for i in range(4)} == {250, 500, 1000, 2000}
    # The default shape: 1,000 nodes and 2,000 pods from 40 deployments of 50.
    assert bench.SHAPES["existing-cluster"][1] == 2000
    assert bench._split(2000, 40) == [50] * 40


def test_aws_deployments_structure() -> None:
    snapshot, pods = bench.build_aws_deployments(100)
    assert len(pods) == 100
    pools = {p.name: p for p in snapshot.node_pools}
    assert set(pools) == {"general", "memory"}
    assert pools["general"].taints == ()
    assert [str(t) for t in pools["memory"].taints] == ["memory=true:NoSchedule"]
    general = pools["general"].requirement_set()
    assert general[aws.CATEGORY].values == frozenset({"c", "m", "r"})
    assert general[aws.GENERATION].gte == 6
    assert general[wk.CAPACITY_TYPE].values == frozenset({"spot", "on-demand"})
    assert pools["memory"].requirement_set()[aws.CATEGORY].values == frozenset({"r"})
    full = aws.catalog("us-east-1").instance_types
    assert all(len(snapshot.instance_types[name]) == len(full) for name in pools)
    assert sorted(ds.template.requests.get("cpu") for ds in snapshot.daemonsets) == [50, 100, 200]
    by_app = Counter(p.labels["app"] for p in pods)
    assert len(by_app) == 50 and set(by_app.values()) == {2}
    memory_pods = [p for p in pods if p.node_selector.get(wk.NODEPOOL) == "memory"]
    assert len(memory_pods) == 10 and all(p.tolerations for p in memory_pods)
    assert sum(1 for p in pods if p.spread) == 34  # deployments 0, 3, ..., 48


def test_main_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    code = bench.main(["--shape", "upstream-diverse", "--pods", "20", "--runs", "2", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    for key in ("shape", "pods", "runs", "pods_per_s", "seconds", "nodeclaims", "unschedulable"):
        assert key in report
    assert (report["shape"], report["pods"], report["runs"], report["unschedulable"]) == (
        "upstream-diverse",
        20,
        2,
        0,
    )
    assert len(report["seconds"]) == 2 and report["peak_rss_mb"] > 0
    assert report["python"] and report["machine"]
