"""Simulator benchmark: wall and CPU time of ``karpy.sim.runner.run`` on issue 6's two cases.

    python benchmarks/simulation.py --case hospital-24h [--mode karpy|cluster-autoscaler|both]
    python benchmarks/simulation.py --case scale-7d [--until 24h] [--write-scenario OUT.yaml]
    python benchmarks/simulation.py --table          # both cases, one Markdown table

Cases:

- ``hospital-24h``: ``examples/sim/hospital-booking-spikes.yaml`` for 24 virtual hours from its
  start (07:15 UTC), so one whole daily cycle: the morning rush (~1,500 pods), lunch, evening,
  the night batch Jobs. Target (issue 6): under 60 s wall for karpy and for the Cluster
  Autoscaler model, each.
- ``scale-7d``: a generated cluster (:func:`scale_scenario`, deterministic) of 60 Deployments whose
  replicas follow a daily curve, peaking at ~20,000 pods every day, plus a nightly batch Job, on
  16-vCPU nodes (1,087 nodes at the first day's peak: the issue's "~1,000 nodes / 20k pods");
  7 virtual days. Target: under 5 minutes wall for karpy.

Each run builds a fresh world (``runner.run``), so the scenario parsing and catalog load are
outside the timer but the whole virtual-time run is inside. ``--json OUT`` writes every figure
(wall, CPU, the CPU of each virtual day, the run's summary figures without the time series).
Never run by CI: ``make bench`` runs it after the scheduling benchmark.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from karpy import native
from karpy.sim import runner
from karpy.sim import scenario as scenario_mod

ROOT = Path(__file__).resolve().parent.parent
HOSPITAL = ROOT / "examples" / "sim" / "hospital-booking-spikes.yaml"
HOUR = 3600.0
DAY = 24 * HOUR
TARGETS = {"hospital-24h": 60.0, "scale-7d": 300.0}

# (cpu, memory) requests of the generated services, cycled by index
_SIZES = (("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("500m", "2Gi"), ("750m", "1536Mi"))


NIGHT_FLOOR_PERCENT = 30  # the night floor of scale-7d's services, in percent of their peak


def _curve(index: int, peak: int, floor_percent: int = NIGHT_FLOOR_PERCENT) -> list[list[Any]]:
    """A weekday curve: night floor, a ramp starting between 06:00 and 08:45, a plateau, an evening fall."""
    floor = max(2, peak * floor_percent // 100)
    ramp = 6 * 60 + (index * 15) % 180  # minutes after midnight
    top = ramp + 120
    fall = 17 * 60 + (index * 20) % 120
    low = fall + 180

    def hhmm(minutes: int) -> str:
        return f"{minutes // 60:02d}:{minutes % 60:02d}"

    return [["00:00", floor], [hhmm(ramp), floor], [hhmm(top), peak], [hhmm(fall), peak], [hhmm(low), floor]]


def scale_scenario(
    *, services: int = 60, peak_pods: int = 20000, night_floor_percent: int = NIGHT_FLOOR_PERCENT
) -> dict[str, Any]:
    """The generated ``scale-7d`` scenario as a raw ``kind: Simulation`` document. A higher
    ``night_floor_percent`` keeps more pods overnight: the same peak with less daily churn."""
    weights = [1 + (i * 7) % 5 for i in range(services)]
    peaks = [max(4, round(peak_pods * w / sum(weights))) for w in weights]
    workloads: list[dict[str, Any]] = []
    objects: list[dict[str, Any]] = []
    for i, peak in enumerate(peaks):
        name = f"svc-{i:02d}"
        namespace = f"team-{i % 8}"
        cpu, memory = _SIZES[i % len(_SIZES)]
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "app",
                    "image": f"{name}:1",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ]
        }
        if i % 3 == 0:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": name}},
                }
            ]
        workloads.append(
            {
                "deployment": {
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {
                        "selector": {"matchLabels": {"app": name}},
                        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                        "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
                    },
                },
                "replicas": {"interpolate": "linear", "points": _curve(i, peak, night_floor_percent)},
            }
        )
        if i % 4 == 0:
            objects.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": {"app": name}}},
                }
            )
    workloads.append(
        {
            "job": {
                "metadata": {"name": "nightly-etl", "namespace": "batch"},
                "spec": {
                    "completions": 100,
                    "parallelism": 100,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "etl",
                                    "image": "etl:3",
                                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                                }
                            ]
                        }
                    },
                },
            },
            "schedule": "0 2 * * *",
            "runFor": "50m",
        }
    )
    return {
        "kind": "Simulation",
        "name": "scale-7d",
        "start": "2026-03-02T00:00:00Z",
        "duration": "168h",
        "catalog": "aws:us-east-1",
        "nodePools": [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "general"},
                "spec": {
                    "template": {
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": "default",
                            },
                            "expireAfter": "720h",
                            "requirements": [
                                {
                                    "key": "karpenter.sh/capacity-type",
                                    "operator": "In",
                                    "values": ["spot", "on-demand"],
                                },
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                {
                                    "key": "karpenter.k8s.aws/instance-family",
                                    "operator": "In",
                                    "values": ["c6i", "c6a", "m6i", "m6a", "r6i", "r6a"],
                                },
                                {
                                    "key": "karpenter.k8s.aws/instance-cpu",
                                    "operator": "In",
                                    "values": ["16"],
                                },
                            ],
                        }
                    },
                    "limits": {"cpu": "40000"},
                    "disruption": {
                        "consolidationPolicy": "WhenEmptyOrUnderutilized",
                        "consolidateAfter": "5m",
                        "budgets": [{"nodes": "10%"}],
                    },
                },
            }
        ],
        "nodeClasses": [
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": "default"},
                "spec": {
                    "role": "KarpenterNodeRole-scale",
                    "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "scale"}}],
                    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "scale"}}],
                },
            }
        ],
        "daemonSets": [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "node-agent", "namespace": "kube-system"},
                "spec": {
                    "selector": {"matchLabels": {"app": "node-agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "node-agent"}},
                        "spec": {
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [
                                {
                                    "name": "agent",
                                    "image": "agent:1",
                                    "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}},
                                }
                            ],
                        },
                    },
                },
            }
        ],
        "objects": objects,
        "workloads": workloads,
        "cloud": {
            "launchLatency": {"distribution": "lognormal", "p50": "40s", "p95": "75s"},
            "podStartup": {"imagePullCold": "25s", "imagePullWarm": "1s", "ready": "5s"},
            "spotInterruptions": {"ratePerNodeHour": 0.002},
        },
    }


def _load(case: str, night_floor_percent: int = NIGHT_FLOOR_PERCENT) -> scenario_mod.Scenario:
    if case == "hospital-24h":
        return scenario_mod.load(HOSPITAL)
    raw = scale_scenario(night_floor_percent=night_floor_percent)
    return scenario_mod.parse(raw, file="<generated scale-7d>", base_dir=ROOT)


def _until(case: str, override: float | None) -> float:
    if override is not None:
        return override
    return DAY if case == "hospital-24h" else 7 * DAY


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


class DaySplit:
    """CPU seconds spent on each virtual day of a run, from the runner's progress reports.

    The runner reports every 10 virtual minutes (and at the end), so a day's figure runs from the
    first report at or past its start to the first report at or past its end: the split is as fine
    as those reports, and the figures add up to the run's CPU time."""

    def __init__(self, cpu: Callable[[], float] = time.process_time) -> None:
        self._cpu = cpu
        self._start = cpu()
        self._marks: list[float] = []  # CPU time at the first report at or past the end of day 1, 2, ...

    def __call__(self, done: float) -> None:
        crossed = int(done // DAY) - len(self._marks)  # day ends reached since the last report
        if crossed > 0:
            self._marks.extend([self._cpu()] * crossed)

    def days(self, total: float, end: float | None = None) -> list[float]:
        """The figure of each of the ``ceil(total / DAY)`` days of a run of ``total`` virtual seconds
        (a last partial day included), the last one ending at ``end`` (default: now)."""
        count = max(1, math.ceil(total / DAY))
        stop = self._cpu() if end is None else end
        edges = [self._start, *self._marks[: count - 1], stop]
        return [round(b - a, 2) for a, b in itertools.pairwise(edges)]


def run(
    case: str,
    mode: str,
    *,
    until: float | None = None,
    progress: bool = False,
    night_floor_percent: int = NIGHT_FLOOR_PERCENT,
) -> dict[str, Any]:
    scenario = _load(case, night_floor_percent)
    seconds = _until(case, until)
    last = [time.perf_counter()]

    def report(done: float, total: float) -> None:
        split(done)
        now = time.perf_counter()
        if progress and now - last[0] > 10:
            last[0] = now
            print(f"  {case} {mode}: {done / HOUR:.1f} h of {total / HOUR:.1f} h", file=sys.stderr)

    began, cpu = time.perf_counter(), time.process_time()
    split = DaySplit()  # (read by ``report``)
    result = runner.run(scenario, seed=1, until=seconds, mode=mode, progress=report)
    ended = time.process_time()
    wall, cpu = time.perf_counter() - began, ended - cpu
    figures = {k: v for k, v in result.figures.items() if k != "series"}
    return {
        "case": case,
        "night_floor_percent": night_floor_percent if case == "scale-7d" else None,
        "mode": mode,
        "virtual_hours": seconds / HOUR,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "cpu_seconds_by_day": split.days(seconds, ended),
        "virtual_seconds_per_wall_second": round(seconds / wall, 1),
        "target_seconds": TARGETS[case] * seconds / _until(case, None),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "figures": figures,
        "python": platform.python_version(),
        "core": native.status().describe(),
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }


def _row(report: dict[str, Any]) -> str:
    f = report["figures"]
    pending = f.get("pending_seconds", {})
    target = report["target_seconds"]
    met = "**met**" if report["wall_seconds"] < target else "**not met**"
    case = report["case"]
    floor = report.get("night_floor_percent")
    if floor is not None and floor != NIGHT_FLOOR_PERCENT:  # not the cluster the target is for
        case, met = f"{case} (night floor {floor}%)", "n/a"
    return (
        f"| {case} | {report['mode']} | {report['virtual_hours']:g} h "
        f"| {report['wall_seconds']:.1f} s "
        f"| {report['cpu_seconds']:.1f} s | {f.get('peak_nodes')} | {f.get('pods_created')} "
        f"| {pending.get('p50')}/{pending.get('p95')} s | {f.get('cost_usd', 0):.2f} "
        f"| {report['peak_rss_mb']:.0f} MB | < {target:.0f} s | {met} |"
    )


HEADER = (
    "| Case | Run | Virtual time | Wall | CPU | Peak nodes | Pods created | Pending p50/p95 | Cost (USD) "
    "| Peak RSS | Target | Status |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _duration(text: str) -> float:
    units = {"s": 1.0, "m": 60.0, "h": HOUR, "d": DAY}
    return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=sorted(TARGETS))
    parser.add_argument("--mode", choices=[*runner.MODES, "both"], default=None)
    parser.add_argument("--table", action="store_true", help="both cases (karpy and the baseline where set)")
    parser.add_argument("--until", help="virtual time to simulate instead of the case's, e.g. 24h or 2d")
    parser.add_argument("--json", metavar="OUT", help="write the reports as JSON")
    parser.add_argument(
        "--write-scenario", metavar="OUT", help="write the generated scale-7d scenario as YAML"
    )
    parser.add_argument("--progress", action="store_true", help="print the virtual time reached every 10 s")
    parser.add_argument(
        "--night-floor",
        type=int,
        default=NIGHT_FLOOR_PERCENT,
        metavar="PERCENT",
        help=f"scale-7d's night floor in percent of the peak (default {NIGHT_FLOOR_PERCENT}; the target "
        "is for the default: a higher floor measures how the time depends on the daily churn)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.night_floor <= 100:
        parser.error("--night-floor must be a percentage from 0 to 100")
    if args.write_scenario:
        raw = scale_scenario(night_floor_percent=args.night_floor)
        Path(args.write_scenario).write_text(yaml.safe_dump(raw, sort_keys=False))
        print(f"wrote {args.write_scenario}")
        if not args.case and not args.table:
            return 0
    if args.table:
        plan = [
            ("hospital-24h", runner.KARPY),
            ("hospital-24h", runner.CLUSTER_AUTOSCALER),
            ("scale-7d", runner.KARPY),
        ]
    elif args.case:
        mode = args.mode or runner.KARPY
        modes = list(runner.MODES) if mode == "both" else [mode]
        if args.case == "scale-7d" and runner.CLUSTER_AUTOSCALER in modes:
            parser.error("scale-7d has no Cluster Autoscaler baseline")
        plan = [(args.case, m) for m in modes]
    else:
        parser.error("give --case or --table")
    until = _duration(args.until) if args.until else None
    reports = []
    print(HEADER)
    for case, mode in plan:
        floor = args.night_floor if case == "scale-7d" else NIGHT_FLOOR_PERCENT
        report = run(case, mode, until=until, progress=args.progress, night_floor_percent=floor)
        reports.append(report)
        print(_row(report), flush=True)
    print(
        f"\n{machine()}, Python {platform.python_version()}, core {native.status().describe()}, "
        f"{datetime.date.today().isoformat()}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
