"""Scheduling benchmark: time ``karpy.core.scheduling.solve()`` on the shapes of issue 4.

    python benchmarks/scheduling.py --shape SHAPE [--pods N] [--runs R] [--json OUT] [--profile]
    python benchmarks/scheduling.py --table [--runs R]   # the standard set as one Markdown table

Shapes (built exactly as issue 4 describes them; see ``benchmarks/README.md``):

- ``upstream-diverse``: upstream Karpenter's ``BenchmarkScheduling<N>`` restated: one NodePool,
  400 fake instance types ``fake-it-i``, 20% each of plain / zonal spread / hostname spread /
  zonal self-affinity / hostname anti-affinity pods (seed 42). Any pod error fails the run.
- ``upstream-preferences``: upstream's ``BenchmarkRespectPreferences`` (4,000 pods by default).
- ``existing-cluster``: 1,000 existing AWS nodes with 10 bound pods each, 2,000 pending pods
  from 40 deployments (seed 1).
- ``aws-deployments``: N pods from 50 deployments, two NodePools (``general``, tainted
  ``memory``), three DaemonSets, the full AWS us-east-1 catalog (seed 1).

As upstream does, the Snapshot and the pods are built first and only ``solve()`` is timed
(``time.perf_counter``), ``--runs`` times; the median is reported. Each ``build_*`` function
returns ``(Snapshot, pods)`` so tests can import them (``tests/unit/test_benchmark_shapes.py``).
Never run by CI; ``make bench`` runs the 1,000-pod ``upstream-diverse`` case.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import json
import os
import platform
import pstats
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from karpy.catalog import aws
from karpy.catalog import conformance as conformance_catalog
from karpy.core import scheduling
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels as wk
from karpy.model.catalog import Catalog, InstanceType
from karpy.model.objects import (
    Condition,
    DaemonSet,
    Node,
    NodeClaim,
    NodePool,
    NodeSelectorTerm,
    OwnerRef,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    WeightedTerm,
)
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.selectors import LabelSelector
from karpy.model.taints import Taint, Toleration

Shape = tuple[Snapshot, list[Pod]]

# -- upstream's fake cloud provider ------------------------------------------------------------

FAKE_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
# Offerings in upstream's order: spot in zones 1-2, then on-demand in zones 1-3.
FAKE_OFFERINGS = (
    ("test-zone-1", "spot"),
    ("test-zone-2", "spot"),
    ("test-zone-1", "on-demand"),
    ("test-zone-2", "on-demand"),
    ("test-zone-3", "on-demand"),
)
CPU_CHOICES_M = (100, 250, 500, 1000, 1500)
MEMORY_CHOICES_MI = (100, 256, 512, 1024, 2048, 4096)
LABEL_VALUES = ("a", "b", "c", "d", "e", "f", "g")


def fake_price(index: int) -> float:
    """Upstream ``PriceFromResources``: 0.1 x vCPU + 0.1 x memory in GB (1e9 bytes)."""
    cpu = index + 1
    memory_bytes = 2 * (index + 1) * 2**30
    return 0.1 * cpu + 0.1 * memory_bytes / 1e9


def fake_catalog_entries(count: int = 400) -> list[dict[str, Any]]:
    """Upstream ``fake.InstanceTypes(count)`` as conformance-format catalog entries: type i is
    ``fake-it-i`` with cpu i+1, memory 2(i+1)Gi, pods 10(i+1), overhead 100m/10Mi, amd64,
    linux/windows/darwin, five offerings at one price."""
    entries: list[dict[str, Any]] = []
    for i in range(count):
        cpu, mem_gi = i + 1, 2 * (i + 1)
        large = cpu > 4 and mem_gi > 8
        requirements: list[dict[str, Any]] = [
            {"key": wk.OS, "operator": "In", "values": ["darwin", "linux", "windows"]}
        ]
        if not large:
            requirements.append({"key": "special", "operator": "DoesNotExist"})
        type_labels = {wk.ARCH: "amd64", "size": "large" if large else "small", "integer": str(cpu)}
        if large:
            type_labels["special"] = "optional"
        price = fake_price(i)
        entries.append(
            {
                "name": f"fake-it-{i}",
                "capacity": {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": str(10 * cpu)},
                "overhead": {"cpu": "100m", "memory": "10Mi"},
                "labels": type_labels,
                "requirements": requirements,
                "offerings": [
                    {"zone": zone, "capacityType": ct, "price": price, "available": True}
                    for zone, ct in FAKE_OFFERINGS
                ],
            }
        )
    return entries


def fake_instance_types(count: int = 400) -> Catalog:
    """:func:`fake_catalog_entries` as a catalog, built through the conformance catalog reader, so
    the fake's extra labels (``size``, ``special``, ``integer``) are well-known exactly as in
    ``shared/conformance/catalogs``."""
    return conformance_catalog.from_entries(fake_catalog_entries(count), "karpenter-fake-benchmark")


def _random_requests(rng: random.Random) -> Resources:
    cpu = rng.choice(CPU_CHOICES_M)
    memory = rng.choice(MEMORY_CHOICES_MI)
    return Resources.parse({"cpu": f"{cpu}m", "memory": f"{memory}Mi"})


def _label_selector(match: dict[str, str]) -> LabelSelector:
    return LabelSelector.from_labels(match)


def _fake_snapshot(pods: Sequence[Pod], catalog: Catalog) -> Snapshot:
    pool = NodePool(name="default")  # no limits, no requirements (upstream test.NodePool)
    return Snapshot(
        pods=tuple(pods),
        node_pools=(pool,),
        instance_types={pool.name: catalog.instance_types},
        well_known=catalog.well_known,
    )


# Pod kinds of upstream-diverse, in upstream's order.
PLAIN = "plain"
ZONE_SPREAD = "zone-spread"
HOST_SPREAD = "hostname-spread"
ZONE_AFFINITY = "zone-affinity"
HOST_ANTI_AFFINITY = "hostname-anti-affinity"
DIVERSE_KINDS = (PLAIN, ZONE_SPREAD, HOST_SPREAD, ZONE_AFFINITY, HOST_ANTI_AFFINITY)


def _diverse_pod(kind: str, index: int, rng: random.Random) -> Pod:
    name = f"{kind}-{index:05d}"
    spread: tuple[TopologySpreadConstraint, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti: tuple[PodAffinityTerm, ...] = ()
    if kind in (PLAIN, ZONE_SPREAD, HOST_SPREAD):
        pod_labels = {"my-label": rng.choice(LABEL_VALUES)}
        if kind != PLAIN:
            key = wk.ZONE if kind == ZONE_SPREAD else wk.HOSTNAME
            selector = _label_selector({"my-label": rng.choice(LABEL_VALUES)})
            spread = (TopologySpreadConstraint(1, key, "DoNotSchedule", selector),)
    elif kind == ZONE_AFFINITY:
        # Self-affinity: the selector is the pod's own label (upstream's "my-affininity" key).
        pod_labels = {"my-affininity": rng.choice(LABEL_VALUES)}
        affinity = (PodAffinityTerm(wk.ZONE, _label_selector(pod_labels)),)
    else:
        pod_labels = {"app": "nginx"}
        anti = (PodAffinityTerm(wk.HOSTNAME, _label_selector(pod_labels)),)
    return Pod(
        namespace="default",
        name=name,
        uid=name,
        labels=pod_labels,
        requests=_random_requests(rng),
        spread=spread,
        affinity=affinity,
        anti_affinity=anti,
    )


def build_upstream_diverse(n: int, seed: int = 42, *, instance_types: int = 400) -> Shape:
    """``makeDiversePods(n)``: n//5 of each kind, the remainder plain, on 400 fake types."""
    rng = random.Random(seed)
    each = n // len(DIVERSE_KINDS)
    plan = [(kind, each) for kind in DIVERSE_KINDS] + [(PLAIN, n - each * len(DIVERSE_KINDS))]
    pods: list[Pod] = []
    for kind, count in plan:
        for _ in range(count):
            pods.append(_diverse_pod(kind, len(pods), rng))
    return _fake_snapshot(pods, fake_instance_types(instance_types)), pods


def build_upstream_preferences(n: int = 4000, seed: int = 42, *, instance_types: int = 400) -> Shape:
    """``makePreferencePods(n)``: app=nginx pods, each preferring test-zone-1 (satisfiable),
    zonal anti-affinity to app=nginx (weight 10, unsatisfiable beyond three pods) and hostname
    anti-affinity to app=nginx (weight 1, satisfiable); requests drawn per pod."""
    rng = random.Random(seed)
    app = {"app": "nginx"}
    zone_pref = WeightedTerm(1, NodeSelectorTerm((Requirement.in_(wk.ZONE, "test-zone-1"),)))
    anti_pref = (
        WeightedPodAffinityTerm(10, PodAffinityTerm(wk.ZONE, _label_selector(app))),
        WeightedPodAffinityTerm(1, PodAffinityTerm(wk.HOSTNAME, _label_selector(app))),
    )
    pods = [
        Pod(
            namespace="default",
            name=f"pref-{i:05d}",
            uid=f"pref-{i:05d}",
            labels=dict(app),
            requests=_random_requests(rng),
            preferred_terms=(zone_pref,),
            anti_affinity_preferred=anti_pref,
        )
        for i in range(n)
    ]
    return _fake_snapshot(pods, fake_instance_types(instance_types)), pods


# -- AWS shapes --------------------------------------------------------------------------------

AWS_REGION = "us-east-1"
EXISTING_TYPES = tuple(f"{f}.{s}" for f in ("m5", "c5", "r5") for s in ("xlarge", "2xlarge", "4xlarge"))
EXISTING_ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
EXISTING_REQUESTS = (("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"))
DEPLOYMENT_REQUESTS = (
    ("100m", "128Mi"),
    ("250m", "512Mi"),
    ("500m", "1Gi"),
    ("1", "2Gi"),
    ("2", "8Gi"),
    ("4", "16Gi"),
)
DAEMONSET_REQUESTS = (
    ("aws-node", "100m", "128Mi"),
    ("kube-proxy", "200m", "256Mi"),
    ("node-exporter", "50m", "64Mi"),
)
MEMORY_TAINT = Taint("memory", "NoSchedule", "true")
_TRUE = ("Launched", "Registered", "Initialized", "Ready")


def _split(total: int, parts: int) -> list[int]:
    """``total`` replicas over ``parts`` deployments; the first ones take the remainder."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _deployment_pods(
    name: str,
    replicas: int,
    *,
    cpu: str,
    memory: str,
    zonal_spread: bool = False,
    hostname_anti_preferred: bool = False,
    node_selector: dict[str, str] | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> list[Pod]:
    app = {"app": name}
    selector = _label_selector(app)
    spread = (TopologySpreadConstraint(1, wk.ZONE, "DoNotSchedule", selector),) if zonal_spread else ()
    anti = (
        (WeightedPodAffinityTerm(100, PodAffinityTerm(wk.HOSTNAME, selector)),)
        if hostname_anti_preferred
        else ()
    )
    owner = (OwnerRef("ReplicaSet", f"{name}-rs", "apps/v1", True, f"{name}-rs"),)
    requests = Resources.parse({"cpu": cpu, "memory": memory})
    return [
        Pod(
            namespace="default",
            name=f"{name}-{r:05d}",
            uid=f"{name}-{r:05d}",
            labels=dict(app),
            owners=owner,
            requests=requests,
            spread=spread,
            anti_affinity_preferred=anti,
            node_selector=dict(node_selector or {}),
            tolerations=tolerations,
        )
        for r in range(replicas)
    ]


def _category(*values: str) -> Requirement:
    return Requirement.in_(aws.CATEGORY, *values)


def _spot_and_on_demand() -> Requirement:
    return Requirement.in_(wk.CAPACITY_TYPE, "spot", "on-demand")


def general_pool(*, generation_gt: int | None = None) -> NodePool:
    reqs = [_category("c", "m", "r"), _spot_and_on_demand()]
    if generation_gt is not None:
        reqs.insert(1, Requirement.of(aws.GENERATION, "Gt", (str(generation_gt),)))
    return NodePool(name="general", requirements=tuple(reqs))


def _existing_node(
    index: int, it: InstanceType, zone: str, capacity_type: str, pods: tuple[Pod, ...]
) -> StateNode:
    name = f"existing-{index:05d}"
    provider_id = f"aws:///{zone}/i-{index:017x}"
    node_labels = {
        **it.labels,
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
        wk.NODEPOOL: "general",
        wk.HOSTNAME: name,
        wk.REGISTERED: "true",
        wk.INITIALIZED: "true",
    }
    conditions = tuple(Condition(kind, "True") for kind in _TRUE)
    node = Node(
        name=name,
        labels=node_labels,
        capacity=it.capacity,
        allocatable=it.allocatable,
        provider_id=provider_id,
    )
    claim = NodeClaim(
        name=f"general-{index:05d}",
        node_pool="general",
        labels=node_labels,
        requirements=(Requirement.in_(wk.INSTANCE_TYPE, it.name),),
        provider_id=provider_id,
        node_name=name,
        capacity=it.capacity,
        allocatable=it.allocatable,
        conditions=conditions,
    )
    return StateNode(name, node, claim, pods)


def build_existing_cluster(
    n: int = 2000, seed: int = 1, *, nodes: int = 1000, deployments: int = 40
) -> Shape:
    """``nodes`` existing nodes (m5/c5/r5 x xlarge/2xlarge/4xlarge drawn uniformly, zones a/b/c
    round-robin, on-demand, NodePool ``general``) each holding 10 bound 250m/512Mi pods, plus
    ``n`` pending pods from ``deployments`` deployments (50 replicas each at the defaults).

    Deployment i (0-based) requests ``EXISTING_REQUESTS[i % 4]``; i % 4 == 0 has a zonal spread
    (maxSkew 1), i % 5 == 0 a preferred hostname anti-affinity to itself.
    """
    rng = random.Random(seed)
    types = aws.catalog(AWS_REGION)
    by_name = {it.name: it for it in types.instance_types}
    pool = general_pool()
    bound_requests = Resources.parse({"cpu": "250m", "memory": "512Mi"})
    state_nodes: list[StateNode] = []
    all_pods: list[Pod] = []
    for k in range(nodes):
        it = by_name[rng.choice(EXISTING_TYPES)]
        zone = EXISTING_ZONES[k % len(EXISTING_ZONES)]
        name = f"existing-{k:05d}"
        bound = tuple(
            Pod(
                namespace="default",
                name=f"running-{k:05d}-{j}",
                uid=f"running-{k:05d}-{j}",
                labels={"app": f"running-{k % 20}"},
                requests=bound_requests,
                node_name=name,
                phase="Running",
            )
            for j in range(10)
        )
        state_nodes.append(_existing_node(k, it, zone, "on-demand", bound))
        all_pods.extend(bound)
    pending: list[Pod] = []
    for i, replicas in enumerate(_split(n, deployments)):
        cpu, memory = EXISTING_REQUESTS[i % len(EXISTING_REQUESTS)]
        pending += _deployment_pods(
            f"deploy-{i:02d}",
            replicas,
            cpu=cpu,
            memory=memory,
            zonal_spread=i % 4 == 0,
            hostname_anti_preferred=i % 5 == 0,
        )
    snapshot = Snapshot(
        nodes=tuple(state_nodes),
        pods=tuple(all_pods + pending),
        node_pools=(pool,),
        instance_types={pool.name: types.instance_types},
        well_known=types.well_known,
    )
    return snapshot, pending


def _daemonsets() -> tuple[DaemonSet, ...]:
    """Node agents tolerating every taint (operator Exists), as aws-node and kube-proxy do."""
    out = []
    for name, cpu, memory in DAEMONSET_REQUESTS:
        template = Pod(
            namespace="kube-system",
            name=name,
            uid=name,
            labels={"app": name},
            owners=(OwnerRef("DaemonSet", name, "apps/v1", True, name),),
            requests=Resources.parse({"cpu": cpu, "memory": memory}),
            tolerations=(Toleration(operator="Exists"),),
        )
        out.append(DaemonSet("kube-system", name, template))
    return tuple(out)


def build_aws_deployments(n: int = 10000, seed: int = 1, *, deployments: int = 50) -> Shape:
    """``n`` pending pods from ``deployments`` deployments on the full AWS us-east-1 catalog.

    Deployment i (0-based) requests ``DEPLOYMENT_REQUESTS[i % 6]``; i % 3 == 0 has a zonal spread
    (maxSkew 1, DoNotSchedule); i % 10 == 0 tolerates ``memory=true:NoSchedule`` and selects
    NodePool ``memory``. NodePools: ``general`` (c/m/r, generation > 5, spot and on-demand) and
    ``memory`` (r, tainted). ``seed`` shuffles the input order (solve() sorts it anyway).
    """
    rng = random.Random(seed)
    types = aws.catalog(AWS_REGION)
    general = general_pool(generation_gt=5)
    memory = NodePool(name="memory", requirements=(_category("r"),), taints=(MEMORY_TAINT,))
    toleration = (Toleration(key="memory", operator="Equal", value="true", effect="NoSchedule"),)
    pods: list[Pod] = []
    for i, replicas in enumerate(_split(n, deployments)):
        cpu, mem = DEPLOYMENT_REQUESTS[i % len(DEPLOYMENT_REQUESTS)]
        memory_bound = i % 10 == 0
        pods += _deployment_pods(
            f"deploy-{i:02d}",
            replicas,
            cpu=cpu,
            memory=mem,
            zonal_spread=i % 3 == 0,
            node_selector={wk.NODEPOOL: "memory"} if memory_bound else None,
            tolerations=toleration if memory_bound else (),
        )
    rng.shuffle(pods)
    snapshot = Snapshot(
        pods=tuple(pods),
        node_pools=(general, memory),
        instance_types={general.name: types.instance_types, memory.name: types.instance_types},
        daemonsets=_daemonsets(),
        well_known=types.well_known,
    )
    return snapshot, pods


# -- running -----------------------------------------------------------------------------------

SHAPES: dict[str, tuple[Callable[[int], Shape], int]] = {
    "upstream-diverse": (build_upstream_diverse, 1000),
    "upstream-preferences": (build_upstream_preferences, 4000),
    "existing-cluster": (build_existing_cluster, 2000),
    "aws-deployments": (build_aws_deployments, 10000),
}
FAIL_ON_POD_ERROR = frozenset({"upstream-diverse"})  # as upstream: any pod error fails the run


def peak_rss_mb() -> float:
    """Peak resident set size of this process (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()} {platform.machine()}"


def _timed_solve(
    snapshot: Snapshot, pods: Sequence[Pod], caches: scheduling.SchedulingCaches
) -> tuple[float, float, scheduling.Results]:
    """(wall seconds, CPU seconds of this process, results) of one solve."""
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    results = scheduling.solve(snapshot, pods, caches=caches)
    return time.perf_counter() - start, time.process_time() - cpu, results


def _profile(snapshot: Snapshot, pods: Sequence[Pod], top: int = 30) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    scheduling.solve(snapshot, pods)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def run(shape: str, n: int, runs: int, *, profile: bool = False) -> tuple[dict[str, Any], int]:
    """Build ``shape`` at ``n`` pods, time ``runs`` solves; the report and an exit code."""
    builder, _ = SHAPES[shape]
    start = time.perf_counter()
    snapshot, pods = builder(n)
    build_seconds = time.perf_counter() - start
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    results: scheduling.Results | None = None
    caches = scheduling.SchedulingCaches()  # shared by the runs, as a controller's solves share it
    for _ in range(runs):
        elapsed, cpu, results = _timed_solve(snapshot, pods, caches)
        seconds.append(elapsed)
        cpu_seconds.append(cpu)
    assert results is not None
    median = statistics.median(seconds)
    placed = results.placement()
    report: dict[str, Any] = {
        "shape": shape,
        "pods": len(pods),
        "runs": runs,
        "pods_per_s": len(pods) / median if median > 0 else float("inf"),
        "median_seconds": median,
        "seconds": seconds,
        "median_cpu_seconds": statistics.median(cpu_seconds),
        "cpu_seconds": cpu_seconds,
        "nodeclaims": len(results.new_claims),
        "scheduled": len(placed),
        "scheduled_on_existing": len(results.existing),
        "unschedulable": len(results.errors),
        "relaxed": len(results.relaxations),
        "build_seconds": build_seconds,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if results.errors:
        first = results.errors[0]
        report["first_error"] = f"{first.pod.key}: {first.summary()}"
    if profile:
        _profile(snapshot, pods)
    code = 1 if results.errors and shape in FAIL_ON_POD_ERROR else 0
    return report, code


def _print(report: dict[str, Any]) -> None:
    runs = ", ".join(f"{s:.3f}" for s in report["seconds"])
    print(f"shape {report['shape']}: {report['pods']} pods, {report['runs']} run(s)")
    print(f"  solve       {report['median_seconds']:.3f} s median  (runs: {runs})")
    print(f"  throughput  {report['pods_per_s']:.0f} pods/s")
    print(f"  CPU         {report['median_cpu_seconds']:.3f} s median (process time; other load excluded)")
    print(f"  NodeClaims  {report['nodeclaims']}")
    print(
        f"  pods        {report['scheduled']} scheduled"
        f" ({report['scheduled_on_existing']} on existing nodes),"
        f" {report['unschedulable']} unschedulable, {report['relaxed']} needed relaxing"
    )
    print(f"  build       {report['build_seconds']:.2f} s (not timed)")
    print(f"  peak RSS    {report['peak_rss_mb']:.0f} MB")
    print(f"  machine     {report['machine']}; Python {report['python']}")
    if "first_error" in report:
        print(f"  first pod error: {report['first_error']}")


# The standard set of ``--table``: (shape, pods, issue-4 target in pods/s or seconds).
TABLE: tuple[tuple[str, int, str], ...] = (
    ("upstream-diverse", 1000, "-"),
    ("upstream-diverse", 5000, ">= 2,700 pods/s"),
    ("upstream-diverse", 20000, ">= 2,000 pods/s"),
    ("upstream-preferences", 4000, ">= 700 pods/s"),
    ("existing-cluster", 2000, "< 2 s"),
    ("aws-deployments", 10000, ">= 5,000 pods/s"),
)


def table(runs: int, cases: Sequence[tuple[str, int, str]] = TABLE) -> int:
    """Run each case in its own process (so peak RSS is per case) and print one Markdown table."""
    import subprocess
    import tempfile

    rows = []
    for shape, n, target in cases:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = [sys.executable, __file__, "--shape", shape, "--pods", str(n), "--runs", str(runs)]
            subprocess.run([*cmd, "--json", out.name], check=False, capture_output=True)
            with open(out.name, encoding="utf-8") as handle:
                r = json.load(handle)
        rows.append(
            f"| {shape} | {n} | {r['median_seconds']:.2f} | {r['pods_per_s']:.0f} | "
            f"{r['median_cpu_seconds']:.2f} | {n / r['median_cpu_seconds']:.0f} | {r['nodeclaims']} | "
            f"{r['unschedulable']} | {r['peak_rss_mb']:.0f} | {target} |"
        )
        print(f"done: {shape} {n}", file=sys.stderr, flush=True)
    print(f"median of {runs} run(s); {machine()}; Python {platform.python_version()}")
    print(
        "| shape | pods | wall s | pods/s | CPU s | pods/CPU-s | claims | unschedulable | RSS MB | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=sorted(SHAPES))
    parser.add_argument("--table", action="store_true", help="run the standard set, print one table")
    parser.add_argument("--pods", type=int, help="pods to schedule (default: the shape's issue-4 size)")
    parser.add_argument("--runs", type=int, default=1, help="timed solves; the median is reported")
    parser.add_argument("--json", metavar="OUT", help="write the report as JSON to OUT")
    parser.add_argument("--profile", action="store_true", help="after timing, cProfile one solve (top 30)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.table:
        return table(args.runs)
    if args.shape is None:
        parser.error("--shape is required (or --table)")
    n = args.pods if args.pods is not None else SHAPES[args.shape][1]
    report, code = run(args.shape, n, args.runs, profile=args.profile)
    _print(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    if code:
        print(f"FAIL: {report['unschedulable']} pod(s) not scheduled; first: {report['first_error']}")
    return code


if __name__ == "__main__":
    sys.exit(main())
