"""The in-memory API server hands out copies: no caller or watcher can change what it stores."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from karpy.adapters.memory import MemoryKube, _copy
from karpy.ports import WatchEvent


class _Clock:
    def now(self) -> float:
        return 1_772_400_000.0


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@given(json_trees)
def test_copy_equals_deepcopy_and_shares_no_container(tree: Any) -> None:
    copied = _copy(tree)
    assert copied == copy.deepcopy(tree)

    def containers(value: Any) -> list[int]:
        if isinstance(value, dict):
            return [id(value), *(i for v in value.values() for i in containers(v))]
        if isinstance(value, list):
            return [id(value), *(i for v in value for i in containers(v))]
        return []

    assert not set(containers(copied)) & set(containers(tree))


def test_a_subtree_seen_twice_is_copied_twice_and_other_values_are_copied_too() -> None:
    import datetime

    shared = {"cpu": "1"}
    tree = {"requests": shared, "limits": shared, "when": datetime.datetime(2026, 3, 2)}
    copied = _copy(tree)
    assert copied == tree
    copied["requests"]["cpu"] = "2"
    assert copied["limits"] == {"cpu": "1"} and shared == {"cpu": "1"}
    assert copied["when"] == tree["when"]
    plain = {"requests": shared, "limits": shared}  # builtin values only: the marshal path
    again = _copy(plain)
    again["requests"]["cpu"] = "3"
    assert again["limits"] == {"cpu": "1"}


def test_returned_objects_and_events_are_private_copies() -> None:
    kube = MemoryKube(_Clock())
    events: list[WatchEvent] = []
    kube.watch(events.append)
    created = kube.create(_pod())
    created["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "9"
    events[0].obj["metadata"]["labels"]["app"] = "changed"
    stored = kube.get("Pod", "p", "ns")
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert stored["metadata"]["labels"] == {"app": "a"}

    kube.patch("Pod", "p", {"status": {"phase": "Running"}}, "ns")
    events[-1].obj["spec"]["containers"].clear()  # a watcher scribbling on its event
    assert kube.get("Pod", "p", "ns")["spec"]["containers"][0]["name"] == "c"
    assert events[0].obj["metadata"]["resourceVersion"] != events[-1].obj["metadata"]["resourceVersion"]


def _named(kind: str, name: str, namespace: str = "", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace:
        metadata["namespace"] = namespace
    return {"kind": kind, "metadata": metadata}


def _names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects]


def test_lists_hold_one_kind_sorted_through_creates_updates_and_deletes() -> None:
    kube = MemoryKube(_Clock())
    for namespace, name in (("b", "p2"), ("a", "p9"), ("b", "p1"), ("a", "p3")):
        kube.create(_named("Pod", name, namespace))
    kube.create(_named("Node", "n2"))
    kube.create(_named("Node", "n1", finalizers=["karpenter.sh/termination"]))
    assert _names(kube.list("Pod")) == ["a/p3", "a/p9", "b/p1", "b/p2"]
    assert _names(kube.list("Pod", "b")) == ["b/p1", "b/p2"]
    assert _names(kube.list("Node")) == ["/n1", "/n2"]

    kube.delete("Pod", "p9", "a")
    kube.patch("Pod", "p1", {"metadata": {"labels": {"x": "y"}}}, "b")
    kube.delete("Node", "n1")  # held by its finalizer: still listed
    assert _names(kube.list("Node")) == ["/n1", "/n2"]
    node = kube.get("Node", "n1")
    node["metadata"]["finalizers"] = []
    kube.update(node)  # the finalizer goes: the node with it
    kube.create(_named("Pod", "p9", "a"))  # the same name again
    assert _names(kube.list("Pod")) == ["a/p3", "a/p9", "b/p1", "b/p2"]
    assert kube.list("Pod", "b")[0]["metadata"]["labels"] == {"x": "y"}
    assert _names(kube.list("Node")) == ["/n2"]
    assert _names(kube.objects("Node")) == ["/n2"]
    assert kube.list("Lease") == []


def test_read_only_lists_hand_out_the_stored_objects_the_others_copies() -> None:
    kube = MemoryKube(_Clock())
    kube.create(_pod())
    (shared,) = kube.list("Pod", read_only=True)
    (again,) = kube.list("Pod", "ns", read_only=True)
    (copied,) = kube.list("Pod")
    assert shared is again and shared == copied and copied is not shared
    copied["metadata"]["labels"]["app"] = "changed"  # a copy's change stays the caller's
    assert kube.list("Pod", read_only=True)[0]["metadata"]["labels"] == {"app": "a"}
    kube.patch("Pod", "p", {"metadata": {"labels": {"app": "b"}}}, "ns")
    (now,) = kube.list("Pod", read_only=True)
    assert now is not shared and now["metadata"]["labels"] == {"app": "b"}
    assert shared["metadata"]["labels"] == {"app": "a"}  # a write replaces, never edits, the labels


# -- evictions read each PDB's pods from an index kept as pods and PDBs come and go ----------


def _allowed_by_walking(kube: MemoryKube, pdb: dict[str, Any]) -> int:
    """The PDB's allowed disruptions from a walk over every stored pod (the index's reference)."""
    from karpy.adapters.memory import _matches, _ready, _scaled

    namespace = pdb["metadata"]["namespace"]
    spec = pdb["spec"]
    pods = [
        p
        for p in kube.objects("Pod")
        if p["metadata"]["namespace"] == namespace
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and _matches(spec.get("selector"), p["metadata"].get("labels") or {})
    ]
    healthy = sum(1 for p in pods if _ready(p))
    return max(0, healthy - _scaled(spec["minAvailable"], len(pods), round_up=True))


_pdb_ops = st.lists(
    st.tuples(
        st.sampled_from(["pod", "relabel", "ready", "finish", "delete", "evict", "pdb", "drop-pdb"]),
        st.integers(0, 2),  # pod or PDB number
        st.sampled_from(["a", "b"]),  # app label / selected app
        st.sampled_from(["ns", "other"]),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(_pdb_ops)
@example([("pod", 0, "a", "ns"), ("pod", 1, "a", "ns"), ("pdb", 0, "a", "ns"), ("relabel", 0, "b", "ns")])
@example([("pod", 0, "a", "ns"), ("pod", 1, "a", "ns"), ("pdb", 0, "a", "ns"), ("delete", 0, "a", "ns")])
@example(
    [
        ("pod", 0, "a", "ns"),
        ("pod", 1, "a", "ns"),
        ("pod", 2, "a", "ns"),
        ("pdb", 0, "a", "ns"),
        ("delete", 2, "a", "ns"),
    ]
)
def test_pdb_allowed_from_the_index_equals_a_walk_over_every_pod(
    ops: list[tuple[str, int, str, str]],
) -> None:
    from karpy.model import errors

    kube = MemoryKube(_Clock())
    for op, n, app, ns in ops:
        name = f"p{n}"
        try:
            if op == "pod":
                kube.create(
                    {
                        "kind": "Pod",
                        "metadata": {
                            "name": name,
                            "namespace": ns,
                            "labels": {"app": app},
                            # p2 is held by a finalizer: deleting it leaves it terminating
                            "finalizers": ["example.com/hold"] if n == 2 else [],
                        },
                        "status": {"phase": "Running"},
                    }
                )
            elif op == "relabel":
                kube.patch("Pod", name, {"metadata": {"labels": {"app": app}}}, ns)
            elif op == "ready":
                kube.patch(
                    "Pod", name, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, ns
                )
            elif op == "finish":
                kube.patch("Pod", name, {"status": {"phase": "Succeeded"}}, ns)
            elif op == "delete":
                kube.delete("Pod", name, ns)
            elif op == "evict":
                kube.evict(name, ns)
            elif op == "pdb":
                pdb = {
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": f"b{n % 2}", "namespace": ns},
                    "spec": {"selector": {"matchLabels": {"app": app}}, "minAvailable": "50%"},
                }
                if kube.exists("PodDisruptionBudget", f"b{n % 2}", ns):
                    kube.patch("PodDisruptionBudget", f"b{n % 2}", {"spec": pdb["spec"]}, ns)
                else:
                    kube.create(pdb)
            elif op == "drop-pdb":
                kube.delete("PodDisruptionBudget", f"b{n % 2}", ns)
        except (errors.NotFound, errors.AlreadyExists, errors.TooManyRequests):
            pass
        for pdb in kube.objects("PodDisruptionBudget"):
            assert kube.pdb_allowed(pdb) == _allowed_by_walking(kube, pdb)


def test_subclasses_of_json_types_take_the_long_way_and_come_back_plain() -> None:
    import collections

    class Name(str):
        pass

    ordered = collections.OrderedDict(a=[1, {"b": Name("x")}])
    tree = {"o": ordered, "n": Name("y"), "t": True}
    copied = _copy(tree)
    assert copied == tree
    assert type(copied["o"]) is dict and copied["o"]["a"] is not ordered["a"]
    assert copied["o"]["a"][1] is not ordered["a"][1]
    assert copied["n"] is tree["n"]  # an immutable scalar is shared, as before


def test_an_eviction_with_a_uid_precondition_spares_a_pod_recreated_under_the_same_name() -> None:
    import pytest

    from karpy.model import errors

    kube = MemoryKube(_Clock())
    first = kube.create(_pod())
    kube.delete("Pod", first["metadata"]["name"], first["metadata"]["namespace"])
    again = kube.create(_pod())  # a StatefulSet's pod: the same name, a new UID
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    name, namespace = again["metadata"]["name"], again["metadata"]["namespace"]
    with pytest.raises(errors.Conflict, match="Precondition failed"):
        kube.evict(name, namespace, first["metadata"]["uid"])
    assert kube.get("Pod", name, namespace)["metadata"]["uid"] == again["metadata"]["uid"]
    kube.evict(name, namespace, again["metadata"]["uid"])
    with pytest.raises(errors.NotFound):
        kube.get("Pod", name, namespace)
