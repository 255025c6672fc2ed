"""The bound-pod index derived from the previous pod tuple equals the one walked afresh."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import pod
from karpy.core.scheduling.boundindex import BoundIndex
from karpy.model.objects import Pod, PodAffinityTerm
from karpy.model.selectors import LabelSelector

NAMESPACES = ("a", "b")
APPS = ("x", "y")
ANTI = (PodAffinityTerm("kubernetes.io/hostname", LabelSelector.from_labels({"app": "x"})),)
SELECTORS = [LabelSelector.from_labels({"app": app}) for app in APPS] + [LabelSelector()]

# a pod: (name, namespace, app, tier or None, node, deleting, phase, anti-affinity, recreated)
pod_specs = st.tuples(
    st.sampled_from([f"p{i}" for i in range(10)]),
    st.sampled_from(NAMESPACES),
    st.sampled_from(APPS),
    st.sampled_from([None, "web"]),
    st.sampled_from(["", "n1", "n2", "n3"]),
    st.booleans(),
    st.sampled_from(["Running", "Running", "Succeeded"]),
    st.booleans(),
    st.sampled_from([False, False, True]),
)
# a step: pods put and names taken out, and what the index of that tuple is asked before the next
steps = st.tuples(
    st.lists(pod_specs, max_size=6),
    st.sets(st.sampled_from([f"p{i}" for i in range(10)]), max_size=3),
    st.sampled_from([set(NAMESPACES), set(NAMESPACES), {"a"}, set()]),
    st.booleans(),
    st.sampled_from([False, False, False, True]),
)


def _pod(spec: tuple[Any, ...]) -> Pod:
    name, namespace, app, tier, node, deleting, phase, anti, recreated = spec
    labels = {"app": app, **({"tier": tier} if tier else {})}
    return pod(
        name,
        namespace=namespace,
        labels=labels,
        node_name=node,
        deleting=deleting,
        phase=phase if node else "Pending",
        anti_affinity=ANTI if anti else None,
        uid=f"{name}-new" if recreated else name,
    )


def _tuple(
    specs: list[tuple[Any, ...]], gone: set[str], kept: dict[str, Pod], shuffled: bool
) -> tuple[Pod, ...]:
    """The last step's pods with ``specs`` put (one per name, the last wins) and ``gone`` taken
    out; a pod left as it was keeps its object, as the cluster's tuples do."""
    for spec in specs:
        made = _pod(spec)
        old = kept.get(made.key)
        kept[made.key] = old if old is not None and old == made else made
    for name in gone:
        kept.pop(f"default/{name}", None)
        for namespace in NAMESPACES:
            kept.pop(f"{namespace}/{name}", None)
    pods = [kept[k] for k in sorted(kept)]
    if shuffled:
        pods.reverse()
    return tuple(pods)


def _buckets(index: BoundIndex, namespace: str) -> list[tuple[dict[str, str], list[int]]]:
    return [(dict(labels), [id(p) for p in pods]) for labels, pods in index.buckets(namespace)]


def _matching(index: BoundIndex, selector: LabelSelector) -> list[tuple[object, ...]]:
    return [(m.pods, list(m.per_node.items())) for m in index.matching(frozenset(NAMESPACES), selector)]


@settings(max_examples=300, deadline=None)
@given(st.lists(steps, min_size=1, max_size=8))
def test_a_derived_index_equals_the_fresh_walk(chain: list[tuple[Any, ...]]) -> None:
    kept: dict[str, Pod] = {}
    previous: BoundIndex | None = None
    for specs, gone, asked, anti_first, shuffled in chain:
        pods = _tuple(specs, gone, kept, shuffled)
        index = BoundIndex(pods, previous)
        fresh = BoundIndex(pods)
        if previous is not None and previous.pods is not pods and previous.sorted and index.sorted:
            assert index._delta is not None  # derived, not walked
        if anti_first:
            assert [id(p) for p in index.anti_affinity] == [id(p) for p in fresh.anti_affinity]
        for namespace in sorted(asked):
            assert _buckets(index, namespace) == _buckets(fresh, namespace)
            for selector in SELECTORS:
                assert _matching(index, selector) == _matching(fresh, selector)
        assert [id(p) for p in index.anti_affinity] == [id(p) for p in fresh.anti_affinity]
        previous = index


def test_a_changed_pod_keeps_its_place_in_its_bucket_and_the_buckets_their_order() -> None:
    b, c, d = (pod(n, labels={"app": "x"}, node_name="n1") for n in "bcd")
    first = BoundIndex((b, c, d))
    assert [p.name for _, pods in first.buckets("default") for p in pods] == ["b", "c", "d"]
    moved = pod("b", labels={"app": "x"}, node_name="n2")  # the same key: in its place, not at the end
    early = pod("a", labels={"app": "y"}, node_name="n1")  # new labels, first in key order
    second = BoundIndex((early, moved, c, d), first)
    assert second._delta is not None
    assert [(dict(labels), [p.name for p in pods]) for labels, pods in second.buckets("default")] == [
        ({"app": "y"}, ["a"]),
        ({"app": "x"}, ["b", "c", "d"]),
    ]
    assert second.buckets("default")[1][1][0] is moved


def test_unsorted_tuples_are_walked_afresh() -> None:
    first = (pod("a", node_name="n1"), pod("b", node_name="n1"))
    index = BoundIndex(first)
    index.buckets("default")
    backwards = BoundIndex(tuple(reversed(first)), index)
    assert backwards._delta is None
    assert [p.name for _, pods in backwards.buckets("default") for p in pods] == ["b", "a"]


def test_kept_buckets_share_their_matched_counts() -> None:
    one = pod("a", labels={"app": "x"}, node_name="n1")
    two = pod("b", labels={"app": "y"}, node_name="n1")
    first = BoundIndex((one, two))
    x, y = (
        first.matching(frozenset({"default"}), LabelSelector.from_labels({"app": app}))[0] for app in "xy"
    )
    moved = pod("b", labels={"app": "y"}, node_name="n2")
    second = BoundIndex((one, moved), first)
    assert second.matching(frozenset({"default"}), LabelSelector.from_labels({"app": "x"}))[0] is x
    changed = second.matching(frozenset({"default"}), LabelSelector.from_labels({"app": "y"}))[0]
    assert changed is not y and changed.per_node == {"n2": 1}
