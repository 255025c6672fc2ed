"""Sweep benchmark: N hospital days serial (in-process, one after another) vs the sweep on local Ray.

    python benchmarks/sweep.py [--seeds 8] [--workers 2] [--until 24h] [--json OUT]

Runs ``examples/sim/hospital-booking-spikes.yaml`` for 24 virtual hours from its start (its file
says 30m; ``--until`` as in ``benchmarks/simulation.py --case hospital-24h``), seeds 1..N, karpy:

- **serial**: ``karpy.sim.runner.run`` in this process, one seed after another (the scenario
  parsed once; the catalog is loaded by the first run and shared by the others, as in a worker);
- **ray**: the same runs as a ``karpy sweep`` (:mod:`karpy.sweep`: expand, ``RayPool`` on a local
  ``ray.init(num_cpus=workers)``, execute, merge), timed with and without Ray's start, in a fresh
  interpreter as ``karpy sweep`` runs (a child of this script, ``--ray-part``): started from the
  process that has just run the serial days, with their gigabyte of heap, ``ray.init`` takes
  about twice as long as from a new one (6.8 s against 2.8-3.7 s here), which no user sees.

Prints the walls, the speed-up (serial / ray, goal >= 1.8x with 2 workers on 2 cores), the
per-run overhead of Ray, ``(wall(ray) - wall(serial) / workers) / N`` (what a run costs beyond
its share of the serial work: worker start, imports, catalog load per worker, transfers,
stragglers), and the round trip of a no-op task carrying a run's payload. Checks that each seed's
figures are the same in both (determinism). ``--json OUT`` writes every figure. Never run by CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray

from karpy.sim import runner
from karpy.sim import scenario as scenario_mod
from karpy.sweep import execute, expand, merge, task
from karpy.sweep.ray_backend import RayPool

ROOT = Path(__file__).resolve().parent.parent
HOSPITAL = ROOT / "examples" / "sim" / "hospital-booking-spikes.yaml"
GOAL = 1.8


def serial(seeds: Sequence[int], until: float | None) -> tuple[float, list[float], dict[int, float]]:
    """Wall of the runs one after another, each run's wall and each seed's cost."""
    loaded = scenario_mod.load(HOSPITAL)
    walls: list[float] = []
    costs: dict[int, float] = {}
    began = time.perf_counter()
    for seed in seeds:
        start = time.perf_counter()
        result = runner.run(loaded, seed=seed, until=until)
        walls.append(time.perf_counter() - start)
        costs[seed] = result.figures["cost_usd"]
        print(f"  serial seed {seed}: {walls[-1]:.1f} s", file=sys.stderr, flush=True)
    return time.perf_counter() - began, walls, costs


def _sweep_file(folder: Path, seeds: Sequence[int], until: str | None) -> Path:
    path = folder / "bench-sweep.yaml"
    relative = os.path.relpath(HOSPITAL, folder)
    lines = ["kind: Sweep", "name: bench", f"scenarios: [{json.dumps(relative)}]", f"seeds: {list(seeds)}"]
    if until:
        lines.append(f"until: {until}")
    path.write_text("\n".join(lines) + "\n")
    return path


def on_ray(seeds: Sequence[int], workers: int, until: str | None) -> dict[str, Any]:
    """The sweep on a local Ray: walls (with and without Ray's start), costs, a no-op round trip."""
    with tempfile.TemporaryDirectory() as folder:
        plan = expand.expand(_sweep_file(Path(folder), seeds, until))
        began = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        started = time.perf_counter()
        outcomes, _ = execute.execute(
            plan,
            RayPool(workers=workers, root=plan.root),
            progress=lambda ok, failed: print(
                f"  ray: {ok} done, {failed} failed", file=sys.stderr, flush=True
            ),
        )
        finished = time.perf_counter()
        doc = merge.document(plan, outcomes)
        payload = plan.runs[0].payload(str(plan.root))
        probe = ray.remote(num_cpus=1)(task.noop)
        ray.get(probe.remote(payload))  # (a warm worker)
        trips = []
        for _ in range(20):
            t0 = time.perf_counter()
            ray.get(probe.remote(payload))
            trips.append(time.perf_counter() - t0)
        ray.shutdown()
    return {
        "wall_s": finished - began,
        "wall_without_start_s": finished - started,
        "start_s": started - began,
        "costs": {o.run.seed: (o.figures or {}).get("cost_usd") for o in outcomes},
        "failed": doc["runs"]["failed"],
        "noop_round_trip_ms": statistics.median(trips) * 1000.0,
        "payload_bytes": len(json.dumps(payload)),
    }


def _ray_in_a_fresh_process(seeds: int, workers: int, until: str) -> dict[str, Any]:
    """:func:`on_ray` in a new interpreter (``--ray-part``), as ``karpy sweep`` would run."""
    command = [sys.executable, __file__, "--ray-part", "--seeds", str(seeds), "--workers", str(workers)]
    done = subprocess.run([*command, "--until", until], stdout=subprocess.PIPE, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["costs"] = {int(seed): cost for seed, cost in figures["costs"].items()}
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=8, help="runs: seeds 1..N (default 8)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--until", default="24h", help="simulate this long from 07:15 (default 24h: a whole day)"
    )
    parser.add_argument("--json", type=Path, default=None, metavar="OUT")
    parser.add_argument("--ray-part", action="store_true", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args(argv)
    if args.ray_part:
        figures = on_ray(list(range(1, args.seeds + 1)), args.workers, args.until)
        print(json.dumps(figures))
        return 0
    seeds = list(range(1, args.seeds + 1))
    until = None
    if args.until:
        from karpy.api import common

        until = common.parse_duration(args.until)
    serial_wall, walls, serial_costs = serial(seeds, until)
    ray_figures = _ray_in_a_fresh_process(args.seeds, args.workers, args.until)
    n = len(seeds)
    speedup = serial_wall / ray_figures["wall_s"]
    overhead = (ray_figures["wall_s"] - serial_wall / args.workers) / n
    same = all(ray_figures["costs"].get(s) == serial_costs[s] for s in seeds)
    figures = {
        "runs": n,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "ray": ray.__version__,
        "until": args.until,
        "serial_wall_s": round(serial_wall, 2),
        "serial_run_wall_s": {"mean": round(statistics.mean(walls), 2), "max": round(max(walls), 2)},
        "ray_wall_s": round(ray_figures["wall_s"], 2),
        "ray_start_s": round(ray_figures["start_s"], 2),
        "ray_wall_without_start_s": round(ray_figures["wall_without_start_s"], 2),
        "speedup": round(speedup, 3),
        "speedup_without_start": round(serial_wall / ray_figures["wall_without_start_s"], 3),
        "goal_speedup": GOAL,
        "ray_overhead_per_run_s": round(overhead, 3),
        "noop_round_trip_ms": round(ray_figures["noop_round_trip_ms"], 2),
        "payload_bytes": ray_figures["payload_bytes"],
        "same_figures": same,
        "failed": ray_figures["failed"],
    }
    rows = [
        ("runs x workers", f"{n} x {args.workers} (cpus {os.cpu_count()})"),
        ("serial wall", f"{serial_wall:.1f} s ({statistics.mean(walls):.1f} s a run)"),
        ("ray wall", f"{ray_figures['wall_s']:.1f} s (Ray start {ray_figures['start_s']:.1f} s)"),
        (
            "speed-up",
            f"{speedup:.2f}x (goal {GOAL}x; without Ray's start {figures['speedup_without_start']:.2f}x)",
        ),
        ("ray overhead a run", f"{overhead:.2f} s"),
        ("no-op task round trip", f"{ray_figures['noop_round_trip_ms']:.1f} ms"),
        ("same figures", "yes" if same else "NO"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if same and not ray_figures["failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
