"""End-to-end ``karpy plan`` benchmark: YAML files in, JSON out, as a user runs it.

    python benchmarks/plan_e2e.py [--pods 5000 20000] [--runs 3] [--json OUT] [--keep DIR] [--daemon]

Writes upstream's ``BenchmarkScheduling`` diverse shape (``benchmarks/scheduling.py``,
``upstream-diverse``: the same pods, seed 42) as files: ``pods.yaml`` with one ``v1`` Pod document
per pod, ``nodepool.yaml`` (NodePool ``default`` and its KWOKNodeClass) and ``catalog.yaml`` (the
400 fake instance types in the conformance catalog format). Then it times the whole command,
``karpy plan -f DIR --catalog DIR/catalog.yaml -o json``, in a fresh process ``--runs`` times
(parse, validate, solve and JSON, interpreter start-up included) and prints the median wall time
and pods/s per size. One more in-process run splits the time into read (YAML), validate
(schemas), solve (cluster state, snapshot and solve) and JSON, and checks that every pod was
scheduled. ``--daemon`` also times the same command handed to a warm ``karpy daemon`` (started on
a socket of its own, stopped at the end) and checks that it prints the same plan. The issue's
goal: >= 2,700 pods/s at 5,000 pods and >= 2,000 at 20,000. The compiled core is used when it is
built and current (``make native``); ``KARPY_PURE=1`` measures pure Python.
Never run by CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scheduling as shapes
import startup

from karpy.model.objects import Pod

_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _selector(pod_term: Any) -> dict[str, Any]:
    return {"matchLabels": dict(pod_term.selector.match_labels)}


def pod_document(pod: Pod) -> dict[str, Any]:
    """The v1 Pod a user would write for one benchmark pod."""
    requests = {"cpu": f"{pod.requests.get('cpu')}m", "memory": str(pod.requests.get("memory"))}
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "nginx", "resources": {"requests": requests}}]
    }
    if pod.spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": c.max_skew,
                "topologyKey": c.topology_key,
                "whenUnsatisfiable": c.when_unsatisfiable,
                "labelSelector": _selector(c),
            }
            for c in pod.spread
        ]
    affinity: dict[str, Any] = {}
    if pod.affinity:
        terms = [{"topologyKey": t.topology_key, "labelSelector": _selector(t)} for t in pod.affinity]
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    if pod.anti_affinity:
        terms = [{"topologyKey": t.topology_key, "labelSelector": _selector(t)} for t in pod.anti_affinity]
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
        },
        "spec": spec,
    }


_POOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
"""


def write_inputs(folder: Path, pods: int) -> Path:
    """The three input files of a ``pods``-pod case under ``folder``; returns the catalog path."""
    _, built = shapes.build_upstream_diverse(pods)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nodepool.yaml").write_text(_POOL, encoding="utf-8")
    text = yaml.dump_all((pod_document(p) for p in built), Dumper=_DUMPER, sort_keys=False)
    (folder / "pods.yaml").write_text(text, encoding="utf-8")
    catalog = folder.parent / f"{folder.name}-catalog.yaml"
    entries = shapes.fake_catalog_entries(400)
    catalog.write_text(yaml.dump(entries, Dumper=_DUMPER, sort_keys=False), encoding="utf-8")
    return catalog


def _command(folder: Path, catalog: Path) -> list[str]:
    return [sys.executable, "-m", "karpy", "plan", "-f", str(folder), "--catalog", str(catalog), "-o", "json"]


def time_command(
    folder: Path, catalog: Path, runs: int, env: dict[str, str] | None = None
) -> tuple[list[float], dict[str, Any]]:
    """Wall seconds of each whole-command run, and the last run's JSON document; ``env``: the
    commands' environment (default: this one's, without a daemon)."""
    env = env if env is not None else {**os.environ, "KARPY_NO_DAEMON": "1"}
    walls: list[float] = []
    out = ""
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(_command(folder, catalog), env=env, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - began)
        if done.returncode != 0:
            raise SystemExit(f"karpy plan failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        out = done.stdout
    return walls, json.loads(out)


def phases(folder: Path, catalog: Path) -> dict[str, float]:
    """Seconds of read, validate, solve and JSON for one in-process run (after a warm-up import)."""
    from karpy import planning
    from karpy import settings as settings_mod
    from karpy.api import documents, load
    from karpy.cli import plan_cmd

    began = time.perf_counter()
    found = [doc for _, docs in documents.read_paths([folder]) for doc in docs]
    read = time.perf_counter()
    loaded = load.load_documents(found)
    validated = time.perf_counter()
    plan = planning.make_plan(loaded, catalog_spec=str(catalog), settings=settings_mod.Settings())
    solved = time.perf_counter()
    json.dumps(plan_cmd.plan_document(plan))
    dumped = time.perf_counter()
    return {
        "read_s": read - began,
        "validate_s": validated - read,
        "solve_s": solved - validated,
        "json_s": dumped - solved,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--keep", type=Path, default=None, help="write the inputs here and keep them")
    parser.add_argument("--no-phases", action="store_true", help="skip the in-process split")
    parser.add_argument(
        "--daemon", action="store_true", help="also time the command handed to a warm `karpy daemon`"
    )
    args = parser.parse_args(argv)
    from karpy import native

    core = native.status().build
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory())
        served = stack.enter_context(startup.daemon()) if args.daemon else None
        base = args.keep or Path(scratch)
        for n in args.pods:
            folder = base / f"diverse-{n}"
            catalog = write_inputs(folder, n)
            walls, doc = time_command(folder, catalog, args.runs)
            if served is not None:
                daemon_walls, daemon_doc = time_command(folder, catalog, args.runs, served)
                assert daemon_doc == doc, "the daemon's plan differs"
            median = statistics.median(walls)
            row: dict[str, Any] = {
                "pods": n,
                "runs": args.runs,
                "median_seconds": round(median, 3),
                "seconds": [round(w, 3) for w in walls],
                "pods_per_s": round(n / median, 1),
                "nodeclaims": doc["summary"]["newNodeClaims"],
                "unschedulable": doc["summary"]["unschedulablePods"],
                "core": core,
            }
            if served is not None:
                row["daemon_median_seconds"] = round(statistics.median(daemon_walls), 3)
                row["daemon_pods_per_s"] = round(n / statistics.median(daemon_walls), 1)
            if not args.no_phases:
                row.update({k: round(v, 3) for k, v in phases(folder, catalog).items()})
            rows.append(row)
            print(
                f"{n:>6} pods  median {median:6.2f} s  {n / median:7.0f} pods/s  "
                f"nodeclaims {row['nodeclaims']}  unschedulable {row['unschedulable']}  ({core})"
                + (
                    ""
                    if args.no_phases
                    else f"  read {row['read_s']:.2f} validate {row['validate_s']:.2f} "
                    f"solve {row['solve_s']:.2f} json {row['json_s']:.2f}"
                )
                + (
                    f"  through the daemon {row['daemon_median_seconds']:.2f} s "
                    f"{row['daemon_pods_per_s']:.0f} pods/s"
                    if served is not None
                    else ""
                ),
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps({"cases": rows}, indent=2) + "\n", encoding="utf-8")
    failed = [row["pods"] for row in rows if row["unschedulable"]]
    if failed:
        print(f"error: pods left unschedulable at sizes {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
