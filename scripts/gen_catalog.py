#!/usr/bin/env python3
"""Generate karpy's committed AWS catalog data from the shared AWS data set.

Usage: ``python scripts/gen_catalog.py [DATA_DIR]`` (default ``../shared/data/aws`` relative to the
repository root). Reads ``instance-types.json``, ``prices-on-demand.csv`` and ``zones.json`` and writes,
deterministically, into ``src/karpy/catalog/data/``:

* ``aws-instance-types.json``: ``{"_meta", "fields", "rows"}``, one row (a list, in ``fields`` order) per
  instance type, keeping only the raw capacity, ENI and label fields that :mod:`karpy.catalog.aws` uses.
* ``aws-prices.json``: ``{"_meta", "regions": {region: {"basis", "table"}}, "tables": {name: {type: usd}}}``;
  regions whose rows are Karpenter's us-east-1 fallback point at the one ``us-east-1`` table.
* ``aws-zones.json``: ``{"_meta", "regions": {region: {"zones", "offerings"}}}``, ``zones`` a list of
  ``[name, zone_id]`` and ``offerings`` ``{type: [i, ...]}`` where ``i`` indexes ``zones``
  (DescribeInstanceTypeOfferings, LocationType=availability-zone).

Only regions present in ``zones.json`` are kept (GovCloud price tables are dropped: no zone data).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "src" / "karpy" / "catalog" / "data"

FIELDS = (
    "name",
    "family",
    "size",
    "category",
    "generation",
    "vcpu",
    "memory_mib",
    "kube_arch",
    "cpu_manufacturer",
    "cpu_clock_mhz",
    "gpu_count",
    "gpu_name",
    "gpu_manufacturer",
    "gpu_memory_mib",
    "accelerator_name",
    "accelerator_manufacturer",
    "accelerator_count",
    "neuron_cores",
    "max_enis",
    "ipv4_per_eni",
    "pod_eni",
    "efa_max",
    "network_bandwidth_mbps",
    "ebs_bandwidth_mbps",
    "local_nvme_gb",
    "instance_storage_gb",
    "hypervisor",
    "bare_metal",
    "capacity_types",
    "encryption_in_transit",
    "karpenter_eligible",
)


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _write_lines(path: Path, head: dict[str, Any], key: str, lines: list[str]) -> None:
    """A JSON object whose ``key`` holds one entry per line (diff-friendly), other keys compact."""
    parts = [f"{_dump(k)}:{_dump(v)}" for k, v in sorted(head.items())]
    body = ",\n".join(lines)
    text = "{" + ",\n".join(parts) + f",\n{_dump(key)}:" + ("{\n" if lines[0][0] == '"' else "[\n")
    text += body + ("\n}" if lines[0][0] == '"' else "\n]") + "}\n"
    json.loads(text)  # sanity: valid JSON
    path.write_text(text, encoding="utf-8")


def gen_instance_types(src: Path) -> int:
    records = json.loads((src / "instance-types.json").read_text(encoding="utf-8"))
    rows = []
    for record in sorted(records, key=lambda r: r["name"]):
        rows.append(_dump([record.get(f) for f in FIELDS]))
    meta = {
        "source": "shared/data/aws/instance-types.json (see its README for upstream sources)",
        "generator": "scripts/gen_catalog.py",
        "count": len(rows),
    }
    _write_lines(OUT / "aws-instance-types.json", {"_meta": meta, "fields": list(FIELDS)}, "rows", rows)
    return len(rows)


def gen_prices(src: Path, regions: list[str]) -> None:
    by_region: dict[str, dict[str, float]] = {}
    basis: dict[str, str] = {}
    with (src / "prices-on-demand.csv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            region = row["region"]
            if region not in regions:
                continue
            by_region.setdefault(region, {})[row["instance_type"]] = float(row["usd_per_hour"])
            previous = basis.setdefault(region, row["basis"])
            if previous != row["basis"]:
                raise SystemExit(f"{region}: mixed price bases {previous!r} and {row['basis']!r}")
    out_regions: dict[str, dict[str, str]] = {}
    tables: dict[str, dict[str, float]] = {}
    for region in sorted(by_region):
        fallback = basis[region].startswith("karpenter-static-fallback-")
        source = basis[region].removeprefix("karpenter-static-fallback-") if fallback else region
        if fallback and by_region[region] != by_region.get(source):
            raise SystemExit(f"{region}: fallback rows differ from the {source} table")
        tables.setdefault(source, by_region[source])
        out_regions[region] = {"basis": basis[region], "table": source}
    lines = [f"{_dump(name)}:{_dump(dict(sorted(table.items())))}" for name, table in sorted(tables.items())]
    meta = {
        "source": "shared/data/aws/prices-on-demand.csv (on-demand, Linux, USD/h)",
        "generator": "scripts/gen_catalog.py",
        "note": "regions with basis karpenter-static-fallback-* use the us-east-1 table, as Karpenter does",
    }
    _write_lines(OUT / "aws-prices.json", {"_meta": meta, "regions": out_regions}, "tables", lines)


def gen_zones(src: Path) -> list[str]:
    raw = json.loads((src / "zones.json").read_text(encoding="utf-8"))
    regions = sorted(k for k in raw if not k.startswith("_"))
    lines = []
    for region in regions:
        zones = sorted((z["name"], z["zone_id"]) for z in raw[region]["zones"])
        index = {name: i for i, (name, _) in enumerate(zones)}
        offerings: dict[str, list[int]] = {}
        for zone, types in raw[region]["offerings"].items():
            for name in types:
                offerings.setdefault(name, []).append(index[zone])
        entry = {
            "zones": [list(z) for z in zones],
            "offerings": {name: sorted(idx) for name, idx in sorted(offerings.items())},
        }
        lines.append(f"{_dump(region)}:{_dump(entry)}")
    meta = {
        "source": "shared/data/aws/zones.json (moto DescribeInstanceTypeOfferings, availability-zone)",
        "generator": "scripts/gen_catalog.py",
        "offerings": "instance type -> indexes into zones",
    }
    _write_lines(OUT / "aws-zones.json", {"_meta": meta}, "regions", lines)
    return regions


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else REPO / ".." / "shared" / "data" / "aws"
    src = src.resolve()
    OUT.mkdir(parents=True, exist_ok=True)
    count = gen_instance_types(src)
    regions = gen_zones(src)
    gen_prices(src, regions)
    for path in sorted(OUT.glob("aws-*.json")):
        print(f"{path.relative_to(REPO)}: {path.stat().st_size} bytes")
    print(f"{count} instance types, regions {', '.join(regions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
