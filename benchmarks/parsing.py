"""Watch-event parsing benchmark: microseconds per event of ``karpy.api.load.parse_object``.

    python benchmarks/parsing.py [--until 7h] [--events 400] [--rounds 5]

Runs ``scale-7d`` (``benchmarks/simulation.py``) for ``--until`` virtual hours and keeps the first
``--events`` objects of each kind that the in-memory API server emits in the last half hour
(Pods, Nodes, NodeClaims, NodePools: what the cluster state's watch parses most). Then it parses
each kind's objects ``--rounds`` times over and prints the median microseconds per event. The
caches of the parse path (pod specs, quantities, times) stay warm across rounds, as they do
across the events of a run. Never run by CI or ``make bench``; compare two commits one after
the other on a quiet machine (``docs/performance.md`` says how to compare).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import simulation as bench

from karpy import native
from karpy.adapters import memory
from karpy.api import load
from karpy.sim import runner

KINDS = ("Pod", "Node", "NodeClaim", "NodePool")


def capture(until: float, events: int) -> dict[str, list[dict[str, Any]]]:
    """The first ``events`` objects of each kind emitted in the last 30 virtual minutes of the run."""
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    emit = memory.MemoryKube._emit

    def keep(self: memory.MemoryKube, type_: str, kind: str, obj: dict[str, Any]) -> None:
        held = found.get(kind)
        if held is not None and len(held) < events and self._clock.now() >= until - 1800:
            held.append(memory._copy(obj))
        emit(self, type_, kind, obj)

    memory.MemoryKube._emit = keep  # type: ignore[method-assign]
    try:
        runner.run(bench._load("scale-7d"), seed=1, until=until, mode="karpy")
    finally:
        memory.MemoryKube._emit = emit  # type: ignore[method-assign]
    return found


def per_event(objects: list[dict[str, Any]], rounds: int) -> float:
    """Median over ``rounds`` of the microseconds per object of parsing them all."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for obj in objects:
            load.parse_object(obj, file="bench", index=0)
        times.append((time.perf_counter() - start) / len(objects) * 1e6)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--until", default="7h", help="virtual time to run scale-7d for (default 7h)")
    parser.add_argument("--events", type=int, default=400, help="objects kept per kind (default 400)")
    parser.add_argument("--rounds", type=int, default=5, help="parses of each kind's objects (default 5)")
    args = parser.parse_args(argv)
    until = bench._duration(args.until)
    found = capture(until, args.events)
    print(f"core {native.status().describe()}; scale-7d to {args.until}, events from its last 30 minutes")
    for kind in KINDS:
        objects = found[kind]
        if objects:
            print(f"{kind:<10} {len(objects):>4} events  {per_event(objects, args.rounds):7.1f} us/event")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
