"""The bound-pod index of a pod tuple derived from the index of an earlier tuple (the last pass's) is
the index built from nothing: the same buckets, in the same order, with the same label maps and the
same pod objects in the same order, and the same matched counts. A bucket that did not change is
the earlier list itself, with its count."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import anti_affinity_term, pod
from karpy.core.scheduling import boundpods
from karpy.core.scheduling.boundpods import BoundIndex
from karpy.core.scheduling.cache import IdentityCache
from karpy.model.objects import Pod
from karpy.model.selectors import LabelSelector

NAMESPACES = ("a", "b", "c")
LABELS = ({"app": "web"}, {"app": "web", "v": "2"}, {"app": "db"}, {})
SELECTORS = (
    LabelSelector.from_labels({"app": "web"}),
    LabelSelector.from_labels({"app": "db"}),
    LabelSelector(),
)


def _pool(size: int) -> list[Pod]:
    """Pods in every namespace, labels maps equal in content but distinct objects, some with
    required anti-affinity, some not bound, terminal or deleting (not indexed)."""
    out = []
    for i in range(size):
        bound = pod(
            f"p{i}",
            namespace=NAMESPACES[i % 3],
            labels=dict(LABELS[(i // 3) % 4]),
            node_name=f"n{i % 5}" if i % 11 else "",
            anti_affinity=[anti_affinity_term({"app": "db"})] if i % 4 == 1 else None,
        )
        if i % 13 == 7:
            bound = dataclasses.replace(bound, phase="Succeeded")
        if i % 17 == 9:
            bound = dataclasses.replace(bound, deleting=True)
        out.append(bound)
    return out


def _shape(index: BoundIndex, namespace: str) -> list[tuple[int, list[int]]]:
    """A namespace's buckets by identity: the label map and each pod."""
    return [(id(labels), [id(p) for p in pods]) for labels, pods in index.buckets(namespace)]


def _counts(index: BoundIndex, namespaces: tuple[str, ...]) -> list[object]:
    """What the selectors match in ``namespaces`` (alone, and together)."""
    groups = [frozenset({ns}) for ns in namespaces] + [frozenset(namespaces)]
    return [
        [(m.pods, list(m.per_node.items()), m.first, m.positions) for m in index.matching(group, sel)]
        for sel in SELECTORS
        for group in groups
    ]


edits = st.lists(
    st.tuples(st.sampled_from(["drop", "add", "replace", "swap", "twice", "relabel"]), st.integers(0, 10**6)),
    max_size=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(edits, st.sets(st.sampled_from(NAMESPACES))), min_size=1, max_size=5))
def test_an_index_derived_from_the_last_one_is_the_index_built_from_nothing(
    steps: list[tuple[list[tuple[str, int]], set[str]]],
) -> None:
    spare = _pool(60)
    pods = spare[:30]
    previous: BoundIndex | None = None
    for changes, read in steps:
        pods = list(pods)
        for kind, n in changes:
            at = n % (len(pods) + 1)
            if kind == "drop" and pods:
                del pods[n % len(pods)]
            elif kind == "add":
                pods.insert(at, spare[n % len(spare)])  # may already be there: twice
            elif kind == "replace" and pods:  # a new object for the same pod (a status update)
                pods[n % len(pods)] = dataclasses.replace(pods[n % len(pods)])
            elif kind == "swap" and len(pods) > 1:  # the order of two pods changes
                i, j = n % len(pods), (n // 7) % len(pods)
                pods[i], pods[j] = pods[j], pods[i]
            elif kind == "twice" and pods:
                pods.insert(at, pods[n % len(pods)])
            elif kind == "relabel" and pods:
                i = n % len(pods)
                pods[i] = dataclasses.replace(pods[i], labels=dict(LABELS[n % 4]))
        derived = BoundIndex(tuple(pods), previous)
        fresh = BoundIndex(tuple(pods))
        # an index reads only some namespaces: the next takes the others from an earlier one
        read_now = tuple(sorted(read))
        for namespace in read_now:
            assert _shape(derived, namespace) == _shape(fresh, namespace)
            assert derived._namespace(namespace).keys == fresh._namespace(namespace).keys
        assert _counts(derived, read_now) == _counts(fresh, read_now)
        assert [id(p) for p in derived.anti_affinity] == [id(p) for p in fresh.anti_affinity]
        previous = derived
    assert previous is not None
    final = BoundIndex(previous.pods, previous)
    assert _counts(final, NAMESPACES) == _counts(BoundIndex(previous.pods), NAMESPACES)


def _bucket(index: BoundIndex, namespace: str, labels: dict[str, str]) -> list[Pod]:
    return next(pods for pod_labels, pods in index.buckets(namespace) if pod_labels == labels)


def test_a_bucket_that_did_not_change_is_the_same_list_with_the_same_count() -> None:
    first = tuple(_pool(30))
    web, v2 = {"app": "web"}, {"app": "web", "v": "2"}
    before = BoundIndex(first)
    selector = LabelSelector.from_labels(web)
    matched_before = {id(m.pods): m for m in before.matching(frozenset({"a"}), selector)}
    gone = _bucket(before, "a", web)[0]
    after = BoundIndex(tuple(p for p in first if p is not gone), before)
    assert _bucket(after, "a", v2) is _bucket(before, "a", v2)  # untouched: the same list
    assert _bucket(after, "a", web) is not _bucket(before, "a", web)  # lost a pod: a new list
    assert _bucket(after, "a", web) == _bucket(before, "a", web)[1:]
    matched_after = after.matching(frozenset({"a"}), selector)
    assert len(matched_after) == len(matched_before) == 2
    kept = [m for m in matched_after if id(m.pods) in matched_before]
    assert len(kept) == 1 and kept[0] is matched_before[id(kept[0].pods)]  # the "v": "2" count, reused
    assert kept[0].pods == tuple((p.uid, p.node_name) for p in _bucket(after, "a", v2))


def test_solves_derive_the_index_from_the_one_used_last() -> None:
    cache: IdentityCache[BoundIndex] = IdentityCache(4)
    first = tuple(_pool(30))
    index = boundpods.bound_index(first, cache)
    index.buckets("b")
    second = (*first, pod("late", namespace="b", labels={"app": "db"}, node_name="n1"))
    derived = boundpods.bound_index(second, cache)
    assert derived is not index and derived._old["b"] is index._built["b"]
    third = (*second, pod("later", namespace="a", labels={"app": "db"}, node_name="n2"))
    skipped = boundpods.bound_index(third, cache)  # derived from second, which never read "b"
    assert "b" not in derived._built and skipped._old["b"] is index._built["b"]
    assert _shape(skipped, "b") == _shape(BoundIndex(third), "b")
    assert boundpods.bound_index(first, cache) is index  # still known
    cache.clear()
    assert boundpods.bound_index(second, cache)._old == {}


def test_a_namespace_is_bucketed_from_nothing_where_the_order_changed_or_a_pod_comes_twice() -> None:
    first = tuple(_pool(30))
    in_a = [p for p in first if p.namespace == "a" and p.node_name]
    assert boundpods._Change.of(in_a, in_a[1:] + in_a[:1]) is None
    assert boundpods._Change.of(in_a, [*in_a, in_a[0]]) is None
    assert boundpods._Change.of([*in_a, in_a[0]], in_a) is None
    assert boundpods._Change.of(in_a, in_a[2:]).gone == in_a[:2]  # type: ignore[union-attr]
    before = BoundIndex(first)
    before.buckets("a")
    swapped = (in_a[1], in_a[0], *(p for p in first if p not in in_a[:2]))
    for pods in (swapped, (*first, in_a[3])):
        index = BoundIndex(pods, before)
        assert _shape(index, "a") == _shape(BoundIndex(pods), "a")
        assert not any(bucket[1] is old[1] for bucket in index.buckets("a") for old in before.buckets("a"))
