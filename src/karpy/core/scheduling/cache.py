"""Reuse of the per-snapshot structures that only depend on NodePools and instance types.

A disruption pass solves many snapshots that differ only by removed nodes and pods, and a
simulation solves one per reconcile with the same NodePools and instance-type tuples. The
topology domain universe (:func:`~karpy.core.scheduling.topogroups.build_domain_groups`) and a
NodePool's :class:`~karpy.core.scheduling.nodeclaim.Template` (with its numpy
:class:`~karpy.core.scheduling.typeindex.TypeIndex`) are pure functions of their inputs and are
never mutated by a solve (the index only memoizes pure masks), so they are built once per
distinct input and shared. Inputs match when the instance-type tuples are the *same objects*
and the NodePools, DaemonSets and well-known labels are equal; entries keep their inputs alive
(so identities stay valid) and the caches are bounded (least recently used evicted first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from karpy.model.catalog import InstanceType
from karpy.model.objects import DaemonSet, NodePool

__all__ = ["IdentityCache", "ObjectMemo", "by_identity", "domain_key_of", "template_key_of"]

T = TypeVar("T")
V = TypeVar("V")

MAX_ENTRIES = 16


class IdentityCache(Generic[V]):
    """A small LRU cache: ``key`` is a tuple compared item by item (``is`` first, then ``==``)."""

    def __init__(self, size: int = MAX_ENTRIES) -> None:
        self._size = size
        self._entries: OrderedDict[int, tuple[tuple[object, ...], V]] = OrderedDict()
        self._serial = 0

    def get(self, key: tuple[object, ...], build: Callable[[], V]) -> V:
        for serial, (known, value) in self._entries.items():
            if _same(known, key):
                self._entries.move_to_end(serial)
                return value
        value = build()
        self._serial += 1
        self._entries[self._serial] = (key, value)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return value

    def latest(self) -> V | None:
        """The value found or built last, if any."""
        if not self._entries:
            return None
        return next(reversed(self._entries.values()))[1]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class ObjectMemo(Generic[V]):
    """Values derived from immutable objects, found by the object's identity in O(1).

    An entry keeps its object alive, so an id is never reused while the entry lives, and a hit
    is checked with ``is``. ``check`` (optional) must also accept the stored value, for values
    that depend on a second input. Cleared at once when ``size`` entries are reached.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[int, tuple[object, V]] = {}

    def get(self, obj: object, build: Callable[[], V], check: Callable[[V], bool] | None = None) -> V:
        found = self._entries.get(id(obj))
        if found is not None and found[0] is obj and (check is None or check(found[1])):
            return found[1]
        return self._put(obj, build())

    def of(self, obj: T, build: Callable[[T], V]) -> V:
        """``build(obj)``, memoized like :meth:`get` (no closure to make per call)."""
        found = self._entries.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        return self._put(obj, build(obj))

    def _put(self, obj: object, value: V) -> V:
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value

    def clear(self) -> None:
        self._entries.clear()


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is y:
            continue
        if type(x) is not type(y) or x != y:
            return False
    return True


class _Identity:
    """Wraps an object compared by identity only (instance-type tuples: deep equality is slow)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def by_identity(obj: object) -> object:
    """A key part that matches only ``obj`` itself (for large tuples whose equality is slow)."""
    return _Identity(obj)


def domain_key_of(
    node_pools: Sequence[NodePool], instance_types: Mapping[str, Sequence[InstanceType]]
) -> tuple[object, ...]:
    """What :func:`build_domain_groups` reads: every NodePool and the identity of its types."""
    return (tuple(node_pools), tuple(_Identity(instance_types.get(p.name, ())) for p in node_pools))


def template_key_of(
    pool: NodePool,
    instance_types: Sequence[InstanceType],
    daemonsets: Sequence[DaemonSet],
    well_known: frozenset[str],
) -> tuple[object, ...]:
    """What a NodePool's scheduling template reads."""
    return (pool, _Identity(instance_types), tuple(daemonsets), well_known)
