"""AWS launch benchmark: one provisioning burst of NodeClaims against a moto server.

    python benchmarks/aws_launch.py [--claims 500] [--shapes 5] [--runs 3] [--json OUT]

A moto server (``moto.server.ThreadedMotoServer`` on 127.0.0.1) is seeded as an EKS account
(tests/providers/aws/moto_world.py); karpy's real controllers run on a virtual loop over the
in-memory API server, with the AWS provider against moto: the EC2NodeClass status controller
resolves the NodeClass, then ``--claims`` pending pods of ``--shapes`` deployments (each pod
anti-affine to the others by hostname, so one pod per node) make the provisioner open one
NodeClaim per pod in one batch window, and the lifecycle launches them all in one pass.

Reported, per mode (``batched``: the lifecycle hands the provider every claim of the pass and equal
CreateFleet requests share one call; ``one-by-one``: ``create`` per claim, as without batching):
CreateFleet calls, launch templates created, the provider's own CPU per launch (``time.thread_time``
of the calling thread around the launches: boto3's request building and parsing, karpy's
filtering and planning; moto's server threads are not counted), and wall time per launch
(includes moto). Medians over ``--runs`` fresh moto accounts. Never run by CI or ``make bench``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "providers" / "aws"))

import moto_world  # noqa: E402

from karpy.adapters.memory import MemoryKube  # noqa: E402
from karpy.catalog import aws as catalog_aws  # noqa: E402
from karpy.controllers.context import Context, RecordingEvents  # noqa: E402
from karpy.metrics import Metrics  # noqa: E402
from karpy.providers.aws import stack as stack_mod  # noqa: E402
from karpy.providers.aws.config import AWSSettings  # noqa: E402
from karpy.providers.aws.metrics import AWSMetrics  # noqa: E402
from karpy.runtime import wiring  # noqa: E402
from karpy.runtime.loop import Loop, LoopClock  # noqa: E402
from karpy.state.cluster import Cluster  # noqa: E402
from karpy.state.feed import Feed  # noqa: E402

SIZES = ("500m", "1", "2", "3", "6", "12", "24", "40")


def _pool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {
                            "key": "karpenter.k8s.aws/instance-category",
                            "operator": "In",
                            "values": ["c", "m", "r"],
                        },
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    ],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        },
    }


def _pod(index: int, shape: int) -> dict[str, Any]:
    app = f"app-{shape}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{app}-{index:04d}",
            "namespace": "default",
            "labels": {"app": app, "burst": "x"},
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": SIZES[shape % len(SIZES)]}}}
            ],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"burst": "x"}},
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }


def run_once(url: str, *, claims: int, shapes: int, batched: bool) -> dict[str, Any]:
    moto_world.reset(url)
    world = moto_world.seed(url, subnets=moto_world.LARGE_SUBNETS)  # room for 500 nodes' addresses
    loop = Loop(start=1_767_225_600.0)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    holder: list[stack_mod.AWSStack] = []
    cluster = Cluster(lambda pool, _nc: holder[0].provider.instance_types(pool))
    cluster.well_known = catalog_aws.well_known_labels()
    settings = AWSSettings(cluster_name=moto_world.CLUSTER, kubernetes_version="1.31")
    stack = stack_mod.build(
        world.clients, settings, cluster=cluster, clock=clock, metrics=AWSMetrics(), shipped=catalog_aws
    )
    holder.append(stack)
    provider = stack.provider
    feed = Feed(cluster)
    kube.watch(feed)
    ctx = Context(cluster, kube, provider, clock, RecordingEvents(), metrics=Metrics())
    stack.attach(ctx)
    stack.instance_types.refresh()
    kube.create(moto_world.node_class())
    kube.create(_pool())
    assert stack.nodeclass is not None
    stack.nodeclass.reconcile()
    nc = cluster.node_classes[("EC2NodeClass", "default")]
    assert nc.ready(), nc.status.conditions
    cpu = [0.0]
    launched = [0]
    create_batch, create = provider.create_batch, provider.create

    def timed_batch(batch: Any) -> Any:
        start = time.thread_time()
        out = create_batch(batch)
        cpu[0] += time.thread_time() - start
        launched[0] += len(batch)
        return out

    def timed_create(claim: Any) -> Any:
        start = time.thread_time()
        try:
            return create(claim)
        finally:
            cpu[0] += time.thread_time() - start
            launched[0] += 1

    provider.create = timed_create  # type: ignore[method-assign]
    provider.create_batch = timed_batch  # type: ignore[method-assign]
    controllers = wiring.build(ctx, loop, feed, disruption_enabled=False)
    if not batched:  # the lifecycle's pass launches claim by claim, as for a provider without batches
        controllers.lifecycle._prelaunch = lambda *_a, **_k: None  # type: ignore[method-assign]
    for i in range(claims):
        kube.create(_pod(i, i % shapes))
    start = time.perf_counter()
    loop.run(until=loop.now + 30.0)
    wall = time.perf_counter() - start
    with_instance = [c for c in cluster.claims.values() if c.provider_id.startswith("aws:///")]
    return {
        "mode": "batched" if batched else "one-by-one",
        "nodeclaims": len(cluster.claims),
        "launched": len(with_instance),
        "create_fleet_calls": provider.fleet.calls,
        "launch_templates": len(provider.launch_templates.created),
        "provider_cpu_ms_per_launch": 1000 * cpu[0] / max(launched[0], 1),
        "loop_wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--shapes", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    server, url = moto_world.start_server()
    rows: list[dict[str, Any]] = []
    try:
        for batched in (True, False):
            runs = [
                run_once(url, claims=args.claims, shapes=args.shapes, batched=batched)
                for _ in range(args.runs)
            ]
            row = dict(runs[0])
            for key in ("provider_cpu_ms_per_launch", "loop_wall_s"):
                row[key] = statistics.median(r[key] for r in runs)
            row["runs"] = args.runs
            rows.append(row)
    finally:
        server.stop()
    print(
        "| mode | NodeClaims | launched | CreateFleet calls | launch templates "
        "| provider CPU ms/launch (median) | loop wall s (median) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['nodeclaims']} | {r['launched']} | {r['create_fleet_calls']} | "
            f"{r['launch_templates']} | {r['provider_cpu_ms_per_launch']:.2f} | {r['loop_wall_s']:.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
