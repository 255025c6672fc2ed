"""karpy.core.measured: keys, which Nodes count, the conservative minimum, the override, the document."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from builders import instance_type, managed_node, node_claim
from karpy.core import measured
from karpy.model import labels as wk
from karpy.model.nodeclass import AMI, EC2NodeClass, EC2NodeClassStatus, KubeletConfig, KWOKNodeClass
from karpy.model.resources import Resources

GI = 2**30


def res(**amounts: int) -> Resources:
    return Resources({k.replace("_", "-"): v for k, v in amounts.items()})


def nodeclass(**changes: object) -> EC2NodeClass:
    return dataclasses.replace(EC2NodeClass(name="default"), **changes)  # type: ignore[arg-type]


# -- identity ---------------------------------------------------------------------------------


def test_the_identity_changes_with_the_amis_and_allocatable_settings_only() -> None:
    base = nodeclass(status=EC2NodeClassStatus(amis=(AMI("ami-1"), AMI("ami-2"))))
    same = nodeclass(
        status=EC2NodeClassStatus(amis=(AMI("ami-2"), AMI("ami-1"))),  # another order
        tags={"team": "records"},  # not what a node registers with
        role="OtherRole",
        uid="uid-2",
        generation=7,
    )
    assert measured.identity(base) == measured.identity(same)
    assert measured.identity(base).startswith("EC2NodeClass:")
    new_ami = nodeclass(status=EC2NodeClassStatus(amis=(AMI("ami-3"),)))
    kubelet = dataclasses.replace(base, kubelet=KubeletConfig(max_pods=20))
    family = dataclasses.replace(base, ami_family="Bottlerocket")
    user_data = dataclasses.replace(base, user_data="--kube-reserved=memory=2Gi")
    found = {measured.identity(nc) for nc in (base, new_ami, kubelet, family, user_data)}
    assert len(found) == 5


def test_kwok_and_no_nodeclass_have_fixed_identities() -> None:
    assert measured.identity(KWOKNodeClass("a")) == measured.identity(KWOKNodeClass("b")) == "KWOKNodeClass"
    assert measured.identity(None) == "none"


# -- which Nodes count ------------------------------------------------------------------------


def test_only_ready_initialized_nodes_of_a_known_type_are_measurable() -> None:
    node, claim = managed_node("n1", instance_type="r6a.large")
    assert measured.measurable(node, claim)
    not_ready = dataclasses.replace(node, ready=False)
    leaving = dataclasses.replace(node, deleting=True)
    no_type = dataclasses.replace(
        node, labels={k: v for k, v in node.labels.items() if k != wk.INSTANCE_TYPE}
    )
    no_alloc = dataclasses.replace(node, allocatable=Resources())
    for bad in (not_ready, leaving, no_type, no_alloc):
        assert not measured.measurable(bad, claim)
    uninitialized_node, uninitialized = managed_node("n2", instance_type="r6a.large", initialized=False)
    assert not measured.measurable(uninitialized_node, uninitialized)
    assert not measured.measurable(node, dataclasses.replace(claim, deleting=True))
    # the Initialized condition alone (a Node not labelled yet) is enough
    unlabelled = dataclasses.replace(
        node, labels={k: v for k, v in node.labels.items() if k != wk.INITIALIZED}
    )
    assert measured.measurable(unlabelled, claim)


def test_a_node_launched_from_another_hash_or_ami_does_not_count() -> None:
    nc = nodeclass(
        annotations={measured.HASH_ANNOTATION: "111"},
        status=EC2NodeClassStatus(amis=(AMI("ami-new"),)),
    )
    current = node_claim("c", annotations={measured.HASH_ANNOTATION: "111"}, image_id="ami-new")
    assert measured.launched_from(current, nc)
    assert not measured.launched_from(dataclasses.replace(current, image_id="ami-old"), nc)
    old_hash = dataclasses.replace(current, annotations={measured.HASH_ANNOTATION: "000"})
    assert not measured.launched_from(old_hash, nc)
    # what a side does not say is not held against the claim
    assert measured.launched_from(node_claim("bare"), nc)
    assert measured.launched_from(old_hash, KWOKNodeClass("k"))
    assert measured.launched_from(old_hash, None)


# -- the conservative minimum -----------------------------------------------------------------


def test_fold_keeps_the_minimum_per_resource_over_the_nodes_seen() -> None:
    first = measured.fold(
        None, "r6a.large", "id", res(cpu=2000, memory=16 * GI), res(cpu=1930, memory=13 * GI)
    )
    assert first.allocatable == res(cpu=1930, memory=13 * GI)
    second = measured.fold(
        first,
        "r6a.large",
        "id",
        res(cpu=2000, memory=15 * GI),
        res(cpu=1940, memory=12 * GI),
        node="n2",
        now=5.0,
    )
    assert second.allocatable == res(cpu=1930, memory=12 * GI)
    assert second.capacity == res(cpu=2000, memory=15 * GI)
    assert (second.node, second.updated) == ("n2", 5.0)
    again = measured.fold(
        second, "r6a.large", "id", res(cpu=2000, memory=16 * GI), res(cpu=1940, memory=13 * GI)
    )
    assert again is second  # nothing lower: unchanged, the same object


def test_a_resource_only_one_node_reports_is_kept() -> None:
    a = measured.fold(None, "g", "id", res(cpu=4000), res(cpu=3900, nvidia_gpu_x=1))
    b = measured.fold(a, "g", "id", res(cpu=4000), res(cpu=3800))
    assert b.allocatable == res(cpu=3800, nvidia_gpu_x=1)


@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 10**12)), min_size=1, max_size=8))
def test_folding_in_any_order_gives_the_per_resource_minimum(nodes: list[tuple[int, int]]) -> None:
    def folded(order: list[tuple[int, int]]) -> measured.Measurement:
        m = None
        for cpu, memory in order:
            m = measured.fold(m, "t", "id", res(cpu=cpu, memory=memory), res(cpu=cpu, memory=memory))
        assert m is not None
        return m

    expected = res(cpu=min(c for c, _ in nodes), memory=min(m for _, m in nodes))
    assert folded(nodes).allocatable == folded(list(reversed(nodes))).allocatable == expected
    merged = measured.merge(folded(nodes[:1]), folded(nodes))
    assert merged.allocatable == expected


# -- the override -----------------------------------------------------------------------------


def test_the_measured_values_replace_the_estimate_in_both_directions() -> None:
    it = instance_type("r6a.large", cpu="2", memory="16Gi", overhead={"cpu": "70m", "memory": "1Gi"})
    assert it.allocatable == res(cpu=1930, memory=15 * GI, pods=10)
    lower = measured.Measurement(
        "r6a.large", "id", res(cpu=2000, memory=15 * GI), res(cpu=1930, memory=14 * GI)
    )
    out = measured.apply(it, lower)
    assert out.allocatable == res(cpu=1930, memory=14 * GI, pods=10)  # pods: no Node said, the catalog's
    assert out.capacity == res(cpu=2000, memory=15 * GI, pods=10)
    assert (out.name, out.offerings, out.requirements) == (it.name, it.offerings, it.requirements)
    higher = dataclasses.replace(lower, allocatable=res(memory=15 * GI + 2**20))
    assert measured.apply(it, higher).allocatable.get("memory") == 15 * GI + 2**20
    same = measured.Measurement("r6a.large", "id", it.capacity, it.allocatable)
    assert measured.apply(it, same) is it


def test_override_replaces_only_the_measured_types_and_keeps_the_tuple_otherwise() -> None:
    a, b = instance_type("a", memory="8Gi"), instance_type("b", memory="16Gi")
    types = (a, b)
    assert measured.override(types, {}) is types
    m = measured.Measurement("b", "id", res(memory=15 * GI), res(memory=14 * GI))
    out = measured.override(types, {"b": m})
    assert out[0] is a and out[1].allocatable.get("memory") == 14 * GI


# -- the document -----------------------------------------------------------------------------


def test_the_document_round_trips_exactly_and_sorted() -> None:
    ms = [
        measured.Measurement(
            "r6a.xlarge",
            "EC2NodeClass:ab",
            res(cpu=4000, memory=32 * GI),
            res(cpu=3920, memory=29 * GI + 12345),
            "n2",
            9.5,
        ),
        measured.Measurement(
            "r6a.large",
            "EC2NodeClass:ab",
            res(cpu=2000, memory=16 * GI),
            res(cpu=1930, memory=14 * GI),
            "n1",
            3.0,
        ),
    ]
    doc = measured.to_doc(ms)
    assert doc["version"] == measured.DOC_VERSION
    assert [e["instanceType"] for e in doc["entries"]] == ["r6a.large", "r6a.xlarge"]
    assert doc["entries"][0]["allocatable"] == {"cpu": "1930m", "memory": "14Gi"}
    back, problems = measured.from_doc(doc)
    assert problems == [] and sorted(back, key=lambda m: m.key) == sorted(ms, key=lambda m: m.key)


def test_a_bad_document_or_entry_is_reported_not_raised() -> None:
    assert measured.from_doc("nope")[0] == []
    assert measured.from_doc({"version": 99, "entries": []})[1] == ["document version 99 is not 1: ignored"]
    good = measured.to_doc([measured.Measurement("t", "id", res(cpu=1000), res(cpu=900))])["entries"][0]
    doc = {"version": 1, "entries": [good, {"instanceType": "x"}, {**good, "allocatable": {"cpu": "lots"}}]}
    back, problems = measured.from_doc(doc)
    assert [m.instance_type for m in back] == ["t"]
    assert [p.split(":")[0] for p in problems] == ["entries[1]", "entries[2]"]
