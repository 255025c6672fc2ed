"""Cost quality: a plan's hourly cost over the LP lower bound, faithful vs optimized packing.

    python benchmarks/cost_quality.py --shape SHAPE [--pods N] [--json OUT]

Shapes come from ``benchmarks/scheduling.py``: ``aws-deployments`` (N pods, the full AWS
us-east-1 catalog) and ``upstream-diverse-plain`` (only the plain pods of
``build_upstream_diverse(N)``, i.e. N/5 of them, the others dropped from the snapshot) and,
for reference, ``upstream-diverse`` whole (the bound ignores its topology, so its ratio
says little). Each runs :func:`karpy.planning.plan_snapshot` twice (packing faithful and
optimized) with the bound, and prints cost, bound and ratio for both. The bound covers
the pods the faithful plan scheduled; pods it could not schedule are counted apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scheduling as shapes

from karpy import planning
from karpy.catalog import aws
from karpy.core.snapshot import Snapshot

DEFAULT_PODS = {"aws-deployments": 1000, "upstream-diverse-plain": 1000, "upstream-diverse": 1000}


def build(shape: str, n: int) -> tuple[Snapshot, list[str]]:
    """The snapshot and the catalog order the launch rule breaks ties with."""
    if shape == "aws-deployments":
        snapshot, _ = shapes.build_aws_deployments(n)
        return snapshot, [it.name for it in aws.catalog(shapes.AWS_REGION).instance_types]
    snapshot, pods = shapes.build_upstream_diverse(n)
    if shape == "upstream-diverse-plain":
        plain = tuple(p for p in pods if p.name.startswith(shapes.PLAIN + "-"))
        snapshot = dataclasses.replace(snapshot, pods=plain)
    return snapshot, [it.name for it in shapes.fake_instance_types().instance_types]


def run(shape: str, n: int) -> dict[str, Any]:
    snapshot, order = build(shape, n)
    report: dict[str, Any] = {"shape": shape, "pods": n, "pending": len(snapshot.pending_pods())}
    for packing in planning.PACKINGS:
        start = time.perf_counter()
        plan = planning.plan_snapshot(
            snapshot,
            catalog=shape,
            catalog_order=order,
            well_known=snapshot.well_known,
            bound=True,
            packing=packing,
        )
        seconds = time.perf_counter() - start
        found = plan.bound
        assert found is not None
        report[packing] = {
            "hourly_cost": plan.hourly_cost,
            "node_claims": len(plan.launched),
            "ratio": plan.cost_ratio,
            "seconds": seconds,
        }
        report["bound"] = {
            "lower_bound": found.lower_bound,
            "lp": found.lp,
            "floor": found.floor,
            "pods": found.pods,
            "unschedulable": len(plan.results.errors),
            "mix": found.mix[:5],
        }
        if plan.repacked is not None:
            report[packing]["note"] = plan.repacked.note
            report[packing]["pods_moved"] = plan.repacked.pods_moved
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", required=True, choices=sorted(DEFAULT_PODS))
    parser.add_argument("--pods", type=int)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    n = args.pods if args.pods is not None else DEFAULT_PODS[args.shape]
    report = run(args.shape, n)
    b = report["bound"]
    print(f"shape {report['shape']}: {report['pending']} pending pods (built with --pods {n})")
    print(
        f"  bound      ${b['lower_bound']:.4f}/h  (LP ${b['lp']:.4f}, per-pod floor ${b['floor']:.4f})"
        f" over {b['pods']} scheduled pods; {b['unschedulable']} unschedulable"
    )
    for packing in planning.PACKINGS:
        r = report[packing]
        note = f"  [{r['note']}]" if r.get("note") else ""
        print(
            f"  {packing:<10} ${r['hourly_cost']:.4f}/h  {r['node_claims']} NodeClaims"
            f"  cost/bound {r['ratio']:.4f}  ({r['seconds']:.1f} s){note}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
