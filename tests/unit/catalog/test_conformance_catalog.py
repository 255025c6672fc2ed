"""Conformance-format catalogs (FORMAT.md "Catalogs"), from the vendored copies in tests/conformance."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import karpy.catalog as catalog_pkg
from karpy.catalog import conformance
from karpy.model import labels
from karpy.model.errors import InputError
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources

CATALOGS = Path(__file__).resolve().parents[2] / "conformance" / "catalogs"
FAKE = CATALOGS / "karpenter-fake.yaml"
ASSORTED = CATALOGS / "karpenter-fake-assorted.yaml"


def entry(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "t",
        "capacity": {"cpu": "4", "memory": "4Gi", "pods": "5"},
        "offerings": [{"zone": "z1", "capacityType": "spot", "price": 1.0}],
    }
    base.update(overrides)
    return base


def test_karpenter_fake_catalog() -> None:
    cat = conformance.load(FAKE)
    assert cat.name == "karpenter-fake"
    assert [t.name for t in cat.instance_types] == [
        "default-instance-type",
        "small-instance-type",
        "gpu-vendor-instance-type",
        "gpu-vendor-b-instance-type",
        "arm-instance-type",
        "single-pod-instance-type",
    ]
    default = cat.instance_types[0]
    assert default.capacity == Resources.parse({"cpu": "4", "memory": "4Gi", "pods": "5"})
    assert default.overhead == Resources.parse({"cpu": "100m", "memory": "10Mi"})
    assert default.allocatable == Resources({"cpu": 3900, "memory": 4 * 2**30 - 10 * 2**20, "pods": 5})
    assert default.labels == {"kubernetes.io/arch": "amd64", "size": "small", "integer": "4"}
    reqs = default.requirements
    assert reqs[labels.INSTANCE_TYPE].values == {"default-instance-type"}
    assert reqs[labels.OS].values == {"darwin", "linux", "windows"}
    assert reqs["special"].operator == "DoesNotExist"
    assert reqs[labels.ZONE].values == {"test-zone-1", "test-zone-2", "test-zone-3"}
    assert reqs[labels.CAPACITY_TYPE].values == {"spot", "on-demand"}
    assert [(o.zone, o.capacity_type) for o in default.offerings] == [
        ("test-zone-1", "spot"),
        ("test-zone-2", "spot"),
        ("test-zone-1", "on-demand"),
        ("test-zone-2", "on-demand"),
        ("test-zone-3", "on-demand"),
    ]
    assert all(o.price == 0.8294967296 and o.available for o in default.offerings)
    assert cat.instance_types[2].capacity["fake.com/vendor-a"] == 2
    assert cat.well_known == labels.CORE_WELL_KNOWN | {"size", "special", "integer"}


def test_fake_catalog_requirements_select_like_labels() -> None:
    cat = conformance.load(FAKE)
    optional = Requirements([Requirement.of("special", "In", ["optional"])])
    chosen = [t.name for t in cat.instance_types if t.requirements.is_compatible(optional, cat.well_known)]
    assert chosen == ["arm-instance-type"]
    ios = Requirements([Requirement.of(labels.OS, "In", ["ios"])])
    assert [t.name for t in cat.instance_types if t.requirements.is_compatible(ios, cat.well_known)] == [
        "arm-instance-type"
    ]
    big = Requirements([Requirement.of("integer", "Gt", ["4"])])
    assert [t.name for t in cat.instance_types if t.requirements.is_compatible(big, cat.well_known)] == [
        "arm-instance-type"
    ]


def test_assorted_catalog_loads_fast() -> None:
    start = time.perf_counter()
    cat = catalog_pkg.load(str(ASSORTED))
    elapsed = time.perf_counter() - start
    assert len(cat.instance_types) == 1344
    assert all(len(t.offerings) == 1 for t in cat.instance_types)
    first = cat.instance_types[0]
    assert first.name == "1-cpu-1-mem-amd64-linux-test-zone-1-spot"
    assert first.labels[labels.OS] == "linux"
    assert first.offerings[0].price == 0.2073741824
    assert elapsed < 10.0


def test_load_is_cached_per_file_version(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "- {name: a, capacity: {cpu: '1'}, offerings: [{zone: z, capacityType: spot, price: 1}]}\n"
    )
    first = conformance.load(path)
    assert conformance.load(path) is first
    path.write_text(
        "- {name: b, capacity: {cpu: '2'}, offerings: [{zone: z, capacityType: spot, price: 1}]}\n# changed\n"
    )
    assert conformance.load(path).instance_types[0].name == "b"


def test_from_entries_defaults_and_extension_fields() -> None:
    cat = conformance.from_entries(
        [
            entry(
                labels={"team": "a", "zone-count": 3},
                requirements=[{"key": "gen", "operator": "Gt", "values": ["2"], "minValues": 1}],
                offerings=[
                    {"zone": "z1", "capacityType": "on-demand", "price": 2, "available": False},
                    {"zone": "z2", "capacityType": "spot", "price": 0.5},
                ],
            )
        ],
        "inline",
    )
    t = cat.instance_types[0]
    assert t.overhead == Resources()
    assert t.labels == {"team": "a", "zone-count": "3"}
    assert [o.available for o in t.offerings] == [False, True]
    assert t.requirements["gen"].gte == 3 and t.requirements["gen"].min_values == 1
    assert {"team", "zone-count", "gen"} <= cat.well_known


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"capacity": None}, r"entry 1 \(t\): field capacity: required"),
        ({"capacity": {"cpu": "lots"}}, r"field capacity: 'lots' is not a quantity"),
        ({"overhead": ["cpu"]}, r"field overhead: expected a mapping"),
        ({"labels": {"a": None}}, r"field labels.a"),
        ({"requirements": [{"key": "k", "operator": "Near"}]}, r"field requirements\[0\].operator"),
        (
            {"requirements": [{"key": "k", "operator": "Gt", "values": ["x"]}]},
            r"field requirements\[0\]: operator Gt",
        ),
        ({"offerings": []}, r"field offerings: required"),
        ({"offerings": [{"zone": "z", "capacityType": "spot", "price": -1}]}, r"field offerings\[0\].price"),
        ({"offerings": [{"zone": "z", "capacityType": "spot", "price": 1, "available": "y"}]}, "available"),
        ({"offerings": [{"zone": "z", "price": 1}]}, r"offerings\[0\].capacityType"),
        ({"name": ""}, "field name: required"),
        ({"flavour": "x"}, "field flavour: unknown field"),
    ],
)
def test_bad_entries_name_source_index_and_field(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        conformance.from_entries([entry(name="ok"), entry(**bad)], "x", source="cat.yaml")
    assert str(info.value).startswith("cat.yaml: entry 1")


def test_duplicate_names_and_non_mapping_entries() -> None:
    with pytest.raises(
        InputError, match=r"entry 1 \(t\): field name: duplicate instance type \(also entry 0\)"
    ):
        conformance.from_entries([entry(), entry()], "x")
    with pytest.raises(InputError, match=r"entry 0: field \(entry\): expected a mapping"):
        conformance.from_entries(["nope"], "x")  # type: ignore[list-item]


def test_bad_files(tmp_path: Path) -> None:
    not_list = tmp_path / "map.yaml"
    not_list.write_text("name: x\n")
    with pytest.raises(InputError, match=r"map\.yaml: a catalog must be a YAML list"):
        conformance.load(not_list)
    broken = tmp_path / "broken.yaml"
    broken.write_text("- {name: x\n")
    with pytest.raises(InputError, match=r"broken\.yaml: invalid YAML"):
        catalog_pkg.load(str(broken))
    with pytest.raises(InputError, match="cannot read catalog"):
        conformance.load(tmp_path / "missing.yaml")
