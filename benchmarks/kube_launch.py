"""Kube launch benchmark: NodeClaims launched per second by the real operator over HTTP (issue 34).

    python benchmarks/kube_launch.py [--claims 500] [--serial-claims 100] [--latency 0.02]
                                     [--runs 3] [--modes serial,concurrent] [--qps 200] [--burst 300]
                                     [--in-flight 16] [--json OUT]

Each run starts the project's emulator (tests/adapters/emulator.py ``EmulatorThread``, real HTTP on
127.0.0.1) with a KWOKNodeClass, a NodePool and ``--claims`` NodeClaims written as the provisioner
writes them (finalizer, NodePool hash, karpy's managed-by annotation), not launched yet; then a
real :class:`karpy.operator.Operator` (kwok provider, in this process) talks to the emulator through
a :class:`proxy.FaultProxy` that holds every request ``--latency`` seconds. Its first lifecycle
pass launches every claim (kwok: a Node per claim), registers and initializes them.

Timed: from the moment the operator is ready (its caches listed) until its cluster state has every
claim ``Launched`` (and, second figure, ``Initialized``). Reported per mode, medians over ``--runs``
fresh emulators: claims launched per second, seconds, the API requests the operator made per claim
(counted at the emulator) and the most requests it had in flight at once.

Modes: ``serial`` is the operator with ``kube_client_max_in_flight=1`` (every API call waits for the
one before: the path before the batch API) and runs ``--serial-claims`` claims (the rate is per
claim, and a serial run of 500 takes minutes); ``concurrent`` the defaults (``--in-flight`` 16 at a
time, the ``--qps``/``--burst`` rate limit). With code from before the batch API on ``PYTHONPATH``
(no ``kube_client_max_in_flight`` setting) only ``serial`` runs, as ``before``. Never run by CI.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "adapters"))

from emulator import EmulatorThread  # noqa: E402
from fault_harness import launched_claims  # noqa: E402
from operator_harness import CATALOG, NODE_CLASS, node_pool  # noqa: E402
from proxy import FaultProxy  # noqa: E402

from karpy import operator as operator_mod  # noqa: E402
from karpy.adapters.kube.client import KubeClient  # noqa: E402
from karpy.api import load as api_load  # noqa: E402
from karpy.core.disruption import drift  # noqa: E402

HAS_BATCH = "kube_client_max_in_flight" in operator_mod.OperatorConfig.__dataclass_fields__


def claims(count: int, pool: dict[str, Any]) -> list[dict[str, Any]]:
    """``count`` NodeClaims of ``pool`` as the provisioner creates them (not launched), with the
    NodePool hash stamped (so the lifecycle's first step is the finalizer read alone)."""
    name = pool["metadata"]["name"]
    hashed = drift.pool_hash(api_load.convert_node_pool(pool))
    out = launched_claims(count, pool=name, prefix=name)
    for claim in out:
        claim["metadata"]["labels"]["karpenter.kwok.sh/kwoknodeclass"] = "default"
        claim["metadata"]["annotations"] |= {
            drift.HASH_ANNOTATION: hashed,
            drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION,
        }
    return out


class Tally:
    """The operator's requests, counted at the emulator. kmock keeps every request it served and
    scans that log for every new one (its reactions' filters): O(requests so far) per request, which
    would make the emulator, not the operator, the bound. A thread moves the log out every 0.2 s."""

    def __init__(self, emu: EmulatorThread, agent: str) -> None:
        self.emu = emu
        self.agent = agent
        self.requests = 0
        self.writes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tally", daemon=True)

    def drain(self) -> None:
        def take() -> list[Any]:
            log: list[Any] = self.emu.server._requests
            taken = list(log)
            log.clear()
            return taken

        for request in self.emu.run(take):
            if str(request.headers.get("User-Agent", "")) != self.agent:
                continue
            self.requests += 1
            if request.method.value != "GET" and "/leases" not in str(request.url.path):
                self.writes += 1

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.drain()

    def __enter__(self) -> Tally:
        self.drain()
        self.requests = self.writes = 0
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.drain()


def _count(op: Any, condition: str) -> int:
    """Claims with ``condition`` True in the operator's own state (read from another thread)."""
    for _ in range(20):
        try:
            return sum(1 for c in list(op.cluster.claims.values()) if c.is_true(condition))
        except RuntimeError:  # changed while copied
            continue
    return 0


def run_once(*, count: int, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    emu = EmulatorThread()
    proxy: FaultProxy | None = None
    op: Any = None
    try:
        kubectl = KubeClient(host=emu.url, identity="kubectl", timeout=10.0).start()
        pool = node_pool()
        kubectl.create(NODE_CLASS)
        kubectl.create(pool)
        if HAS_BATCH:
            from karpy.ports import KubeOp

            kubectl.batch([KubeOp("create", "NodeClaim", body=c) for c in claims(count, pool)])
        else:
            for claim in claims(count, pool):
                kubectl.create(claim)
        kubectl.close()
        tally = Tally(emu, "karpy/bench").__enter__()
        proxy = FaultProxy(emu.url, latency=args.latency)
        overrides: dict[str, Any] = {}
        if HAS_BATCH:
            overrides = {
                "kube_client_qps": args.qps,
                "kube_client_burst": args.burst,
                "kube_client_max_in_flight": 1 if mode == "serial" else args.in_flight,
            }
        config = operator_mod.OperatorConfig(
            host=proxy.url,
            catalog=CATALOG,
            metrics_port=None,
            health_port=None,
            bind_address="127.0.0.1",
            identity="bench",
            disruption=False,
            **overrides,
        )
        op = operator_mod.Operator(config)
        op.start()
        thread = threading.Thread(target=op.run, name="operator-bench", daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not op.ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the operator did not get ready")
            time.sleep(0.005)
        began = time.monotonic()
        launched_at = initialized_at = None
        deadline = began + args.timeout
        while initialized_at is None:
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(
                    f"{mode}: {_count(op, 'Launched')} of {count} launched after {args.timeout} s"
                )
            if launched_at is None and _count(op, "Launched") >= count:
                launched_at = now
            if launched_at is not None and _count(op, "Initialized") >= count:
                initialized_at = now
            time.sleep(0.02)
        assert launched_at is not None
        tally.__exit__()
        return {
            "mode": mode if HAS_BATCH else "before",
            "claims": count,
            "launch_seconds": launched_at - began,
            "launched_per_s": count / (launched_at - began),
            "initialize_seconds": initialized_at - began,
            "initialized_per_s": count / (initialized_at - began),
            "requests_per_claim": tally.requests / count,
            "writes_per_claim": tally.writes / count,
            "peak_in_flight": getattr(op.kube, "peak_in_flight", 1),
            "limiter_waited_s": getattr(getattr(op.kube, "limiter", None), "waited", 0.0),
        }
    finally:
        if op is not None:
            op.stop()
            time.sleep(0.2)
        if proxy is not None:
            proxy.stop()
        emu.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--serial-claims", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds each request is held")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="serial,concurrent")
    parser.add_argument("--qps", type=float, default=200.0)
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    modes = [m for m in args.modes.split(",") if m] if HAS_BATCH else ["serial"]
    table: list[dict[str, Any]] = []
    for mode in modes:
        count = args.serial_claims if mode == "serial" else args.claims
        runs = [run_once(count=count, mode=mode, args=args) for _ in range(args.runs)]
        for one in runs:
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in one.items()}))
        summary = dict(runs[0])
        for key in ("launch_seconds", "launched_per_s", "initialize_seconds", "initialized_per_s"):
            summary[key] = statistics.median(r[key] for r in runs)
        summary["runs"] = len(runs)
        table.append(summary)
    print(f"\nlatency {args.latency * 1000:.0f} ms per request; qps {args.qps:g}, burst {args.burst}")
    print(
        "| mode | claims | launched/s | s to all Launched | initialized/s | requests/claim | peak in flight |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in table:
        print(
            f"| {row['mode']} | {row['claims']} | {row['launched_per_s']:.1f} | {row['launch_seconds']:.2f} "
            f"| {row['initialized_per_s']:.1f} | {row['requests_per_claim']:.1f} | {row['peak_in_flight']} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"latency": args.latency, "qps": args.qps, "rows": table}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
