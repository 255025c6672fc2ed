"""Every AWS type's AL2023 default allocatable equals the figure Karpenter publishes.

Golden values: ``tests/data/aws-doc-allocatable.json`` (vendored by ``scripts/vendor_golden.py`` from
``shared/data/aws/instance-types.json`` ``doc_allocatable``: Karpenter v1.14.0 instance-types docs,
amiFamily AL2023, no blockDeviceMappings, VM_MEMORY_OVERHEAD_PERCENT 0.075, RESERVED_ENIS 0).
"""

from __future__ import annotations

import json
from pathlib import Path

from karpy.catalog import aws
from karpy.core import capacity as capacity_mod
from karpy.model.resources import Resources

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "aws-doc-allocatable.json"

# The data README lists these as inconsistent between the sources: moto says the default network card
# holds 8/12 ENIs, Karpenter's vpclimits table and docs say 15/24, so the docs' pods (and the memory
# derived from them) cannot be reproduced from the ENI fields we ship. Not a formula error.
EXEMPT = frozenset({"i7ie.48xlarge", "i7ie.metal-48xl", "i8ge.48xlarge", "i8ge.metal-48xl"})

# Types whose docs (generated 2026-07-11 for v1.14.0) carry no vpc.amazonaws.com/pod-eni while the vpclimits
# table we ship (last changed 2026-08-18) marks them trunking-compatible with branch ENIs: data drift in
# one resource, not a formula error. Every other resource of these types must still match exactly.
POD_ENI_DRIFT = frozenset(
    """
    c8gb.metal-24xl c8gb.metal-48xl c8gn.metal-24xl c8gn.metal-48xl c8ib.metal-48xl c8ib.metal-96xl
    c9g.12xlarge c9g.16xlarge c9g.24xlarge c9g.2xlarge c9g.48xlarge c9g.4xlarge c9g.8xlarge c9g.large
    c9g.medium c9g.metal-48xl c9g.xlarge c9gd.12xlarge c9gd.16xlarge c9gd.24xlarge c9gd.2xlarge
    c9gd.48xlarge c9gd.4xlarge c9gd.8xlarge c9gd.large c9gd.medium c9gd.metal-48xl c9gd.xlarge
    hpc7g.16xlarge hpc7g.4xlarge hpc7g.8xlarge i4i.large m8gb.metal-24xl m8gb.metal-48xl m8gn.metal-24xl
    m8gn.metal-48xl m8ib.metal-48xl m8ib.metal-96xl m8idb.metal-48xl m8idb.metal-96xl m8idn.metal-48xl
    m8idn.metal-96xl m8in.metal-48xl m8in.metal-96xl r8gb.metal-24xl r8gb.metal-48xl r8gn.metal-24xl
    r8gn.metal-48xl r8ib.metal-48xl r8ib.metal-96xl r8idb.metal-48xl r8idb.metal-96xl r8idn.metal-48xl
    r8idn.metal-96xl r8in.metal-48xl r8in.metal-96xl
    """.split()  # noqa: SIM905
)
POD_ENI = "vpc.amazonaws.com/pod-eni"


def _golden() -> dict[str, dict[str, str | int]]:
    types: dict[str, dict[str, str | int]] = json.loads(GOLDEN.read_text(encoding="utf-8"))["types"]
    return types


def test_golden_file_covers_the_documented_types() -> None:
    golden = _golden()
    assert len(golden) == 1363
    assert golden.keys() >= EXEMPT
    known = {s.name for s in aws.shapes()}
    assert golden.keys() <= known


def test_al2023_default_allocatable_matches_karpenter_docs() -> None:
    mismatches: list[str] = []
    pod_eni_drift: set[str] = set()
    checked = 0
    for name, doc in sorted(_golden().items()):
        if name in EXEMPT:
            continue
        expected = Resources.parse(doc)
        actual = capacity_mod.allocatable(aws.shape(name), None)
        checked += 1
        if POD_ENI not in expected and actual.get(POD_ENI) > 0:
            pod_eni_drift.add(name)
            expected = expected + {POD_ENI: actual[POD_ENI]}
        if actual != expected:
            mismatches.append(f"{name}: expected {expected.format()} got {actual.format()}")
    assert checked == 1359
    assert mismatches == []
    assert pod_eni_drift == POD_ENI_DRIFT


def test_exempt_types_differ_only_through_eni_data() -> None:
    for name in sorted(EXEMPT):
        doc = Resources.parse(_golden()[name])
        actual = capacity_mod.allocatable(aws.shape(name), None)
        assert actual["pods"] < doc["pods"], name
        assert actual["cpu"] == doc["cpu"], name
        assert actual["ephemeral-storage"] == doc["ephemeral-storage"], name
