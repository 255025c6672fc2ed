"""The bound pods of a snapshot's pod tuple as the topology counts read them.

:class:`BoundIndex` holds, for one tuple of pods, the active bound pods (bound, not deleting,
not terminal) per namespace bucketed by identical labels, the ones with required
anti-affinity, and per (namespaces, selector) the buckets a selector matches
(:class:`Matched`). The many solves of one disruption pass share the snapshot's tuple, so
they build it once (:func:`bound_index`).

A pass's tuple differs from the last pass's by a few pods. When both tuples are sorted by
pod key with no key twice (the cluster's tuples are), an index is derived from the previous
one: the pods that changed are found by a merge of the two tuples by key
(:func:`karpy.core.scheduling.podsdiff.changes`), and only the buckets they touch are made
anew; the others (and their :class:`Matched`) are the previous index's objects. The
result is the one a fresh walk over the tuple gives: a bucket's pods in tuple order (key
order), buckets in the order of their first pod, the anti-affinity pods in tuple order.
Any other tuple is walked afresh.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence

from karpy.core.scheduling.cache import IdentityCache, ObjectMemo, by_identity
from karpy.core.scheduling.podsdiff import changes
from karpy.model.objects import TERMINAL_PHASES, Pod
from karpy.model.selectors import LabelSelector

__all__ = ["BoundIndex", "Matched", "bound_index", "clear"]

_Bucket = tuple[Mapping[str, str], list[Pod]]
_LabelKey = tuple[tuple[str, str], ...]
# per pod label map (immutable, one per Pod object): its items sorted, the key of the pod's bucket
_LABEL_KEYS: ObjectMemo[_LabelKey] = ObjectMemo(65536)
_MAX_MATCHING = 256  # distinct (namespaces, selector) pairs remembered per pod tuple
_by_key = operator.attrgetter("key")


def _label_key(pod_labels: Mapping[str, str]) -> _LabelKey:
    return tuple(sorted(pod_labels.items()))


def _active(pod: Pod) -> bool:
    return bool(pod.node_name) and not pod.deleting and pod.phase not in TERMINAL_PHASES


def _sorted_by_key(pods: tuple[Pod, ...]) -> bool:
    """Every pod's key is greater than the one before it."""
    keys = [p.key for p in pods]
    return all(map(operator.lt, keys, keys[1:]))


class _Delta:
    """The active pods that left or came between the previous index's tuple and this one's."""

    __slots__ = ("added", "anti_changed", "namespaces", "removed")

    def __init__(self, removed: list[Pod], added: list[Pod]) -> None:
        self.removed: dict[str, dict[_LabelKey, set[int]]] = {}  # namespace -> labels -> pod ids
        self.added: dict[str, dict[_LabelKey, list[Pod]]] = {}
        self.anti_changed = False
        for pod in removed:
            if _active(pod):
                key = _LABEL_KEYS.of(pod.labels, _label_key)
                self.removed.setdefault(pod.namespace, {}).setdefault(key, set()).add(id(pod))
                self.anti_changed = self.anti_changed or bool(pod.anti_affinity)
        for pod in added:
            if _active(pod):
                key = _LABEL_KEYS.of(pod.labels, _label_key)
                self.added.setdefault(pod.namespace, {}).setdefault(key, []).append(pod)
                self.anti_changed = self.anti_changed or bool(pod.anti_affinity)
        self.namespaces = self.removed.keys() | self.added.keys()


class BoundIndex:
    """The active bound pods of one pod tuple: per namespace bucketed by identical labels (built
    when a namespace is first asked), and those with required anti-affinity. Pure of the tuple;
    the pods a solve schedules are skipped where they are read."""

    def __init__(self, pods: tuple[Pod, ...], previous: BoundIndex | None = None) -> None:
        self.pods = pods
        self.sorted = _sorted_by_key(pods)
        self._by_namespace: dict[str, list[Pod]] | None = None
        self._anti: list[Pod] | None = None
        self._buckets: dict[str, list[_Bucket]] = {}
        self._matching: dict[tuple[frozenset[str], LabelSelector], list[Matched]] = {}
        self._matched: dict[int, tuple[list[Pod], Matched]] = {}  # id(bucket's pods) -> its Matched
        self._previous: BoundIndex | None = None
        self._delta: _Delta | None = None
        if previous is not None and previous.sorted and self.sorted and previous.pods is not pods:
            self._previous = previous
            previous._previous = None  # (two indexes at most stay linked)
            self._delta = _Delta(*changes(previous.pods, pods))

    @property
    def anti_affinity(self) -> list[Pod]:
        """The active bound pods with required anti-affinity, in tuple order."""
        if self._anti is None:
            previous, delta = self._previous, self._delta
            if previous is not None and delta is not None and previous._anti is not None:
                if not delta.anti_changed:
                    self._anti = previous._anti
                else:
                    gone = {i for labels in delta.removed.values() for ids in labels.values() for i in ids}
                    kept = [p for p in previous._anti if id(p) not in gone]
                    came = [p for labels in delta.added.values() for ps in labels.values() for p in ps]
                    self._anti = sorted([*kept, *(p for p in came if p.anti_affinity)], key=_by_key)
            else:
                self._walk()
        assert self._anti is not None
        return self._anti

    def _walk(self) -> None:
        by_namespace: dict[str, list[Pod]] = {}
        anti: list[Pod] = []
        for pod in self.pods:  # (_active, inline: this walks every pod of the tuple)
            if not pod.node_name or pod.deleting or pod.phase in TERMINAL_PHASES:
                continue
            found = by_namespace.get(pod.namespace)
            if found is None:
                found = by_namespace[pod.namespace] = []
            found.append(pod)
            if pod.anti_affinity:
                anti.append(pod)
        self._by_namespace = by_namespace
        if self._anti is None:
            self._anti = anti

    def buckets(self, namespace: str) -> list[_Bucket]:
        """The namespace's active bound pods (in tuple order) bucketed by identical labels, the
        buckets in the order of their first pod."""
        found = self._buckets.get(namespace)
        if found is None:
            previous, delta = self._previous, self._delta
            before = previous._buckets.get(namespace) if previous is not None else None
            if before is not None and delta is not None:
                found = self._derive(before, delta, namespace)
            else:
                found = self._fresh(namespace)
            self._buckets[namespace] = found
        return found

    def _fresh(self, namespace: str) -> list[_Bucket]:
        if self._by_namespace is None:
            self._walk()
        assert self._by_namespace is not None
        by_labels: dict[_LabelKey, _Bucket] = {}
        for pod in self._by_namespace.get(namespace, ()):
            key = _LABEL_KEYS.of(pod.labels, _label_key)
            held = by_labels.get(key)
            if held is None:
                held = by_labels[key] = (pod.labels, [])
            held[1].append(pod)
        return list(by_labels.values())

    def _derive(self, before: list[_Bucket], delta: _Delta, namespace: str) -> list[_Bucket]:
        """The previous tuple's buckets of ``namespace`` less the pods that left, with the pods
        that came (both tuples in key order: a bucket's pods and the buckets sorted by key)."""
        if namespace not in delta.namespaces:
            self._inherit(before)
            return before
        removed = delta.removed.get(namespace, {})
        added = dict(delta.added.get(namespace, {}))
        out: list[_Bucket] = []
        changed = False
        for bucket in before:
            key = _LABEL_KEYS.of(bucket[0], _label_key)
            gone, came = removed.get(key), added.pop(key, None)
            if gone is None and came is None:
                out.append(bucket)
                continue
            changed = True
            pods = [p for p in bucket[1] if id(p) not in gone] if gone is not None else list(bucket[1])
            if came is not None:
                pods = sorted([*pods, *came], key=_by_key)
            if pods:
                out.append((pods[0].labels, pods))
        for came in added.values():  # labels no pod of the previous tuple had
            changed = True
            out.append((came[0].labels, sorted(came, key=_by_key)))
        if not changed:
            self._inherit(before)
            return before
        out.sort(key=lambda b: b[1][0].key)
        self._inherit(out)
        return out

    def _inherit(self, buckets: list[_Bucket]) -> None:
        """Take the previous index's Matched of the buckets kept as they were."""
        previous = self._previous
        if previous is None:
            return
        for _, pods in buckets:
            entry = previous._matched.get(id(pods))
            if entry is not None and entry[0] is pods:
                self._matched[id(pods)] = entry

    def matching(self, namespaces: frozenset[str], selector: LabelSelector) -> list[Matched]:
        """The buckets a group's selector matches, in the order a group counts them (namespaces
        sorted, then bucket order). Solves of one pass build many equal groups: matched once."""
        key = (namespaces, selector)
        found = self._matching.get(key)
        if found is None:
            if len(self._matching) >= _MAX_MATCHING:
                self._matching.clear()
            found = self._matching[key] = [
                self._matched_of(pods)
                for namespace in sorted(namespaces)
                for pod_labels, pods in self.buckets(namespace)
                if selector.matches(pod_labels)
            ]
        return found

    def _matched_of(self, pods: list[Pod]) -> Matched:
        entry = self._matched.get(id(pods))
        if entry is None or entry[0] is not pods:
            entry = self._matched[id(pods)] = (pods, Matched(pods))
        return entry[1]


class Matched:
    """One bucket of bound pods a selector matches, counted per node as a group counts them: pods per
    node name in the order first seen. Kept with the bound index, so a solve only corrects the
    count for the pods it schedules (``without``)."""

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


_BOUND: IdentityCache[BoundIndex] = IdentityCache(4)  # the indexes of the last few pod tuples
_LAST: list[BoundIndex] = []  # the index made last: the next one is derived from it


def bound_index(pods: Sequence[Pod]) -> BoundIndex:
    """The index of ``pods`` (one per tuple object while it is among the last few asked)."""
    if not isinstance(pods, tuple):  # only an immutable tuple can be recognised again
        return BoundIndex(tuple(pods))
    return _BOUND.get((by_identity(pods),), lambda: _made(pods))


def _made(pods: tuple[Pod, ...]) -> BoundIndex:
    index = BoundIndex(pods, _LAST[0] if _LAST else None)
    _LAST[:] = [index]
    return index


def clear() -> None:
    """Forget every index (the next one is walked afresh)."""
    _BOUND.clear()
    _LAST.clear()
