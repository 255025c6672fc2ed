"""The bound pods of a snapshot as topology counts read them (:mod:`karpy.core.scheduling.topology`).

A :class:`BoundIndex` holds the active bound pods of one pod tuple: per namespace, bucketed by
identical labels, and those with required anti-affinity. The many solves of a disruption pass
share the snapshot's tuple, so they share its index (:func:`bound_index`); a group's count of a
bucket, per node, is a :class:`Matched`, kept with the index.

The next pass's tuple differs from the last by a few dozen pods of ~20,000 at scale, so a new
index takes its predecessors' buckets where it can: the last buckets built of each namespace
(by whichever earlier index read it: a provisioning solve between two passes may read none)
are rebuilt only where a pod came or went (found by identity, in one walk of the two lists),
and a bucket left as it was is the same list with the same :class:`Matched`. That is what a
build from nothing gives (the same buckets, order, label maps and pod objects): pods are
immutable, so a pod still there is in the bucket of its labels. A namespace whose pods changed
order, or whose list holds a pod object twice, is built from nothing.
"""

from __future__ import annotations

from bisect import bisect
from collections.abc import Mapping, Sequence
from operator import is_

from karpy.core.scheduling.cache import IdentityCache, ObjectMemo, by_identity
from karpy.model.objects import TERMINAL_PHASES, Pod
from karpy.model.selectors import LabelSelector

__all__ = ["BoundIndex", "Matched", "bound_index", "label_key"]

LabelKey = tuple[tuple[str, str], ...]
Bucket = tuple[Mapping[str, str], list[Pod]]  # a label map (its first pod's) and the pods that have it

# Per pod label map (immutable, one per Pod object): its items sorted, the key of the pod's
# bucket in a bound index.
_LABEL_KEYS: ObjectMemo[LabelKey] = ObjectMemo(65536)


def _sorted_items(pod_labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(pod_labels.items()))


def label_key(pod_labels: Mapping[str, str]) -> LabelKey:
    """The bucket key of a label map (equal maps, equal keys)."""
    return _LABEL_KEYS.of(pod_labels, _sorted_items)


class _Change:
    """From one list of a namespace's pods to the next: the pods gone and the pods new (each in
    its list's order), with the position of each pod of the new list by id."""

    __slots__ = ("gone", "gone_ids", "new", "position")

    def __init__(self, gone: list[Pod], new: list[Pod], position: dict[int, int]) -> None:
        self.gone, self.new, self.position = gone, new, position
        self.gone_ids = {id(pod) for pod in gone}

    @staticmethod
    def of(old: list[Pod], pods: list[Pod]) -> _Change | None:
        """The change from ``old`` to ``pods``; ``None`` unless the pods both lists have are in
        the same order and neither list holds a pod object twice."""
        if len(old) == len(pods) and all(map(is_, old, pods)):  # (at C speed, as are the maps)
            return _Change([], [], {})
        position = dict(zip(map(id, pods), range(len(pods)), strict=True))
        old_ids = set(map(id, old))
        if len(position) != len(pods) or len(old_ids) != len(old):
            return None
        gone: list[Pod] = []
        new: list[Pod] = []
        i = j = 0
        while i < len(old) and j < len(pods):
            if old[i] is pods[j]:
                i += 1
                j += 1
            elif id(old[i]) not in position:
                gone.append(old[i])
                i += 1
            elif id(pods[j]) not in old_ids:
                new.append(pods[j])
                j += 1
            else:  # both are in both lists: the order changed
                return None
        # (what is left of one list is not in the other: with no pod twice, it would have been met)
        return _Change(gone + old[i:], new + pods[j:], position)


def _kept(pods: list[Pod], gone_ids: set[int], new: list[Pod], position: dict[int, int]) -> list[Pod]:
    """``pods`` (in list order) without the ``gone_ids`` and with the ``new`` pods (in list order)
    in their places by ``position``: a new list."""
    out = [pod for pod in pods if id(pod) not in gone_ids] if gone_ids else list(pods)
    for pod in new:
        out.insert(bisect(out, position[id(pod)], key=lambda kept: position[id(kept)]), pod)
    return out


class _Buckets:
    """One namespace's bound pods (a list in tuple order) bucketed by identical labels: each
    bucket's label key, and its count (:class:`Matched`) once a selector matched it."""

    __slots__ = ("buckets", "counts", "keys", "pods")

    def __init__(
        self, pods: list[Pod], buckets: list[Bucket], keys: list[LabelKey], counts: list[Matched | None]
    ) -> None:
        self.pods, self.buckets, self.keys, self.counts = pods, buckets, keys, counts

    @staticmethod
    def of(pods: list[Pod]) -> _Buckets:
        by_labels: dict[LabelKey, Bucket] = {}
        for pod in pods:
            key = label_key(pod.labels)
            held = by_labels.get(key)
            if held is None:
                held = by_labels[key] = (pod.labels, [])
            held[1].append(pod)
        return _Buckets(pods, list(by_labels.values()), list(by_labels), [None] * len(by_labels))

    def changed(self, pods: list[Pod], change: _Change) -> _Buckets:
        """These buckets with ``change`` applied (``pods``: the list it leads to). A bucket that
        lost or gained no pod is kept as the same list, with its count."""
        added: dict[LabelKey, list[Pod]] = {}
        for pod in change.new:
            key = label_key(pod.labels)
            found = added.get(key)
            if found is None:
                found = added[key] = []
            found.append(pod)
        losing = {label_key(pod.labels) for pod in change.gone}
        position = change.position
        out: list[tuple[Bucket, LabelKey, Matched | None]] = []
        for bucket, key, count in zip(self.buckets, self.keys, self.counts, strict=True):
            extra = added.pop(key, None)
            if extra is None and key not in losing:
                out.append((bucket, key, count))
                continue
            kept = _kept(bucket[1], change.gone_ids if key in losing else set(), extra or [], position)
            if kept:
                out.append(((kept[0].labels, kept), key, None))
        for key, kept in added.items():  # labels no pod of the namespace had
            out.append(((kept[0].labels, kept), key, None))
        out.sort(key=lambda entry: position[id(entry[0][1][0])])
        return _Buckets(pods, [e[0] for e in out], [e[1] for e in out], [e[2] for e in out])

    def count(self, i: int) -> Matched:
        found = self.counts[i]
        if found is None:
            found = self.counts[i] = Matched(self.buckets[i][1])
        return found


class BoundIndex:
    """The active bound pods of one pod tuple (see the module). ``previous``: the index of an
    earlier tuple, from which a namespace's buckets are then derived where they can be."""

    def __init__(self, pods: tuple[Pod, ...], previous: BoundIndex | None = None) -> None:
        self.pods = pods
        self._by_namespace, self.anti_affinity = _walked(pods)
        self._built: dict[str, _Buckets] = {}
        self._matching: dict[tuple[frozenset[str], LabelSelector], list[Matched]] = {}
        # the last buckets built of each namespace, by this index's predecessors (not the
        # indexes: no chain of them lives on)
        self._old: dict[str, _Buckets] = {}
        if previous is not None:
            self._old = {**previous._old, **previous._built}

    def _namespace(self, namespace: str) -> _Buckets:
        found = self._built.get(namespace)
        if found is None:
            pods = self._by_namespace.get(namespace, [])
            old = self._old.get(namespace)
            change = None if old is None else _Change.of(old.pods, pods)
            if old is None or change is None:
                found = _Buckets.of(pods)
            elif not change.gone and not change.new:  # the same pods: the same buckets
                found = old
            else:
                found = old.changed(pods, change)
            self._built[namespace] = found
        return found

    def buckets(self, namespace: str) -> list[Bucket]:
        """The namespace's bound pods bucketed by identical labels: buckets in the order their
        first pod comes, each the label map of that pod and its pods in tuple order."""
        return self._namespace(namespace).buckets

    def matching(self, namespaces: frozenset[str], selector: LabelSelector) -> list[Matched]:
        """The buckets a group's selector matches, in the order a group counts them (namespaces
        sorted, then bucket order). Solves of one pass build many equal groups: matched once."""
        key = (namespaces, selector)
        found = self._matching.get(key)
        if found is None:
            if len(self._matching) >= _MAX_MATCHING:
                self._matching.clear()
            found = self._matching[key] = []
            for namespace in sorted(namespaces):
                held = self._namespace(namespace)
                for i, (pod_labels, _pods) in enumerate(held.buckets):
                    if selector.matches(pod_labels):
                        found.append(held.count(i))
        return found


_MAX_MATCHING = 256  # distinct (namespaces, selector) pairs remembered per pod tuple


def _walked(pods: tuple[Pod, ...]) -> tuple[dict[str, list[Pod]], list[Pod]]:
    """The indexed pods per namespace, and those with required anti-affinity, in tuple order."""
    by_namespace: dict[str, list[Pod]] = {}
    anti_affinity: list[Pod] = []
    for pod in pods:
        if not pod.node_name or pod.deleting or pod.phase in TERMINAL_PHASES:
            continue
        found = by_namespace.get(pod.namespace)
        if found is None:
            found = by_namespace[pod.namespace] = []
        found.append(pod)
        if pod.anti_affinity:
            anti_affinity.append(pod)
    return by_namespace, anti_affinity


class Matched:
    """One bucket of bound pods a selector matches, counted per node as a group counts them: pods per
    node name in the order first seen. Kept with the bound index (and the next, while the bucket
    is the same), so a solve only corrects the count for the pods it schedules (``without``)."""

    __slots__ = ("first", "per_node", "pods", "positions", "uids", "where")

    def __init__(self, pods: Sequence[Pod]) -> None:
        self.pods = tuple((pod.uid or pod.key, pod.node_name) for pod in pods)
        self.uids = frozenset(uid for uid, _ in self.pods)
        self.where: dict[str, list[int]] = {}  # uid -> its positions in the bucket
        self.positions: dict[str, list[int]] = {}  # node name -> positions of its pods, ascending
        for position, (uid, name) in enumerate(self.pods):
            self.where.setdefault(uid, []).append(position)
            self.positions.setdefault(name, []).append(position)
        self.per_node = {name: len(found) for name, found in self.positions.items()}
        self.first = {name: found[0] for name, found in self.positions.items()}

    def without(self, excluded: frozenset[str]) -> dict[str, int]:
        """Pods per node name without the ``excluded`` uids, in the order their first pod left is
        seen (the same as counting the bucket pod by pod, skipping the excluded)."""
        hit = excluded & self.uids
        if not hit:
            return self.per_node
        gone: dict[str, set[int]] = {}  # node name -> positions of its excluded pods
        for uid in hit:
            for position in self.where[uid]:
                gone.setdefault(self.pods[position][1], set()).add(position)
        per_node = dict(self.per_node)
        reordered = False
        for name, positions in gone.items():
            left = per_node[name] - len(positions)
            if left:
                per_node[name] = left
                reordered = reordered or self.first[name] in positions
            else:
                del per_node[name]
        if not reordered:
            return per_node
        first = dict(self.first)
        for name, positions in gone.items():
            if name in per_node:
                first[name] = next(p for p in self.positions[name] if p not in positions)
        return {name: per_node[name] for name in sorted(per_node, key=first.__getitem__)}


def bound_index(pods: tuple[Pod, ...], cache: IdentityCache[BoundIndex]) -> BoundIndex:
    """The index of ``pods``: one ``cache`` knows, or one derived from the index it gave last."""
    if not isinstance(pods, tuple):  # only an immutable tuple can be recognised again
        return BoundIndex(tuple(pods))
    return cache.get((by_identity(pods),), lambda: BoundIndex(pods, cache.latest()))
