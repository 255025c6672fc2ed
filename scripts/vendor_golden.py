#!/usr/bin/env python3
"""Vendor Karpenter's published allocatable figures into ``tests/data/aws-doc-allocatable.json``.

Usage: ``python scripts/vendor_golden.py [INSTANCE_TYPES_JSON]`` (default
``../shared/data/aws/instance-types.json`` relative to the repository root). Copies the
``doc_allocatable`` of every type that has one (amiFamily AL2023, default flags) so that
``tests/unit/catalog/test_aws_golden.py`` never reads ``../shared``. Deterministic output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "aws-doc-allocatable.json"


def main(argv: list[str]) -> int:
    default = REPO / ".." / "shared" / "data" / "aws" / "instance-types.json"
    src = (Path(argv[1]) if len(argv) > 1 else default).resolve()
    records = json.loads(src.read_text(encoding="utf-8"))
    golden = {r["name"]: r["doc_allocatable"] for r in records if r.get("doc_allocatable")}
    meta = {
        "source": "shared/data/aws/instance-types.json doc_allocatable (Karpenter v1.14.0 docs)",
        "conditions": "AL2023, no blockDeviceMappings, VM_MEMORY_OVERHEAD_PERCENT 0.075, RESERVED_ENIS 0",
        "generator": "scripts/vendor_golden.py",
    }
    lines = [f"{json.dumps(k)}:{json.dumps(v, sort_keys=True)}" for k, v in sorted(golden.items())]
    text = '{"_meta":' + json.dumps(meta, sort_keys=True) + ',\n"types":{\n' + ",\n".join(lines) + "\n}}\n"
    json.loads(text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT.relative_to(REPO)}: {len(golden)} types, {OUT.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
