"""The order in which a pod tries the NodeClaims opened in this solve, kept without re-sorting.

Upstream sorts the in-flight claims by pod count (stable) before every pod. Between two sorts
at most one claim changed: it took one more pod, or it was opened (with one pod) and appended.
A stable sort then moves a claim that grew from k to k + 1 pods to the *front* of the claims
with k + 1 pods, and puts a new claim at the *end* of those with one pod. :class:`ClaimOrder`
keeps those buckets and applies the change at the next :meth:`ordered`, so iterating it is the
sorted list, and :meth:`final` is the list as upstream leaves it (the last change unsorted).

Within each bucket the claims are also kept per *pin* (a claim's zone when it is pinned to one;
``None`` otherwise), each list in bucket order, so that :meth:`ordered_unpinned` can merge them
and drop every claim of a pin the caller has learnt to skip without visiting it (a
zonal-spread pod walks only the claims in zones it may use).

:class:`Rejections` remembers, per pod signature, the places a pod failed for a reason that
can only persist (``Unfit.monotone``), so that its identical siblings skip them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["ClaimOrder", "Rejections"]

T = TypeVar("T")
K = TypeVar("K")


class ClaimOrder(Generic[T]):
    """``reference=True`` keeps upstream's list and sorts it by ``size`` on every :meth:`ordered`."""

    def __init__(
        self,
        size: Callable[[T], int],
        *,
        reference: bool = False,
        pin: Callable[[T], Hashable | None] | None = None,
    ) -> None:
        self._size = size
        self._pin_of = pin
        self._pins: dict[int, Hashable | None] = {}  # id(claim) -> its pin when last settled
        self._by_pin: dict[int, dict[Hashable | None, list[T]]] = {}  # size -> pin -> claims
        self._reference: list[T] | None = [] if reference else None
        self._buckets: dict[int, list[T]] = {}
        self._pending: tuple[T, int] | None = None  # (claim, pod count before the change; 0 = new)
        self._keys: dict[int, tuple[int, int]] = {}  # id(claim) -> its sort key (see :meth:`key`)
        self._serial = 0
        self.count = 0
        self.created: list[T] = []  # every claim, in the order they were opened

    def opened(self, claim: T) -> None:
        """A new claim with one pod was appended after the last sort."""
        if self._reference is not None:
            self._reference.append(claim)
        self._settle()
        self._pending = (claim, 0)
        self.count += 1
        self.created.append(claim)

    def grew(self, claim: T, before: int) -> None:
        """``claim`` took one more pod (it had ``before``) after the last sort."""
        self._settle()
        self._pending = (claim, before)

    def key(self, claim: T) -> tuple[int, int]:
        """Sort key of a claim in :meth:`ordered` (after :meth:`settle`): pod count, then a new
        claim by when it was opened and a claim that grew by how recently (most recent first)."""
        return self._keys[id(claim)]

    def pin(self, claim: T) -> Hashable | None:
        """The pin of a claim as of the last settle (``None`` without a ``pin`` function)."""
        return self._pins.get(id(claim))

    def settle(self) -> None:
        """Apply the change since the last sort (as :meth:`ordered` does)."""
        self._settle()

    def _settle(self) -> None:
        if self._pending is None:
            return
        claim, before = self._pending
        self._pending = None
        self._serial += 1
        if before == 0:
            self._buckets.setdefault(1, []).append(claim)
            self._keys[id(claim)] = (1, self._serial)
            if self._pin_of is not None:
                pin = self._pins[id(claim)] = self._pin_of(claim)
                self._by_pin.setdefault(1, {}).setdefault(pin, []).append(claim)
            return
        self._keys[id(claim)] = (before + 1, -self._serial)
        _remove(self._buckets, before, claim)
        self._buckets.setdefault(before + 1, []).insert(0, claim)
        if self._pin_of is not None:
            old = self._pins[id(claim)]
            streams = self._by_pin[before]
            _remove(streams, old, claim)
            if not streams:
                del self._by_pin[before]
            pin = self._pins[id(claim)] = self._pin_of(claim)
            self._by_pin.setdefault(before + 1, {}).setdefault(pin, []).insert(0, claim)

    def ordered(self) -> Iterator[T]:
        """The claims sorted by pod count, as upstream's stable sort leaves them."""
        if self._reference is not None:
            self._reference.sort(key=self._size)
            yield from list(self._reference)
            return
        self._settle()
        for size in sorted(self._buckets):
            yield from self._buckets[size]

    def ordered_unpinned(self, skip: set[Hashable]) -> Iterator[T]:
        """:meth:`ordered` without the claims whose pin is in ``skip`` (read at every step, so
        the caller may add pins while iterating). Needs ``pin``; a ``None`` pin is never skipped."""
        assert self._pin_of is not None and self._reference is None
        self._settle()
        keys = self._keys
        for size in sorted(self._by_pin):
            streams = self._by_pin[size]
            if len(streams) == 1:
                ((pin, claims),) = streams.items()
                if pin is None or pin not in skip:
                    for claim in claims:
                        yield claim
                        if pin is not None and pin in skip:
                            break
                continue
            heap = [
                (keys[id(claims[0])], n, 0, pin, claims)
                for n, (pin, claims) in enumerate(streams.items())
                if pin is None or pin not in skip
            ]
            heapq.heapify(heap)
            while heap:
                _, n, i, pin, claims = heap[0]
                if pin is not None and pin in skip:
                    heapq.heappop(heap)
                    continue
                yield claims[i]
                if i + 1 < len(claims):
                    heapq.heapreplace(heap, (keys[id(claims[i + 1])], n, i + 1, pin, claims))
                else:
                    heapq.heappop(heap)

    def final(self) -> list[T]:
        """The claim list as upstream ends with it: the last sort's order, a new claim appended."""
        if self._reference is not None:
            return list(self._reference)
        out = [claim for size in sorted(self._buckets) for claim in self._buckets[size]]
        if self._pending is not None and self._pending[1] == 0:
            out.append(self._pending[0])
        return out


def _remove(groups: dict[K, list[T]], key: K, claim: T) -> None:
    group = groups[key]
    for i, item in enumerate(group):
        if item is claim:
            del group[i]
            break
    if not group:
        del groups[key]


class Rejections:
    """Per signature key: the places (by id) that reject it for good."""

    def __init__(self) -> None:
        self._dead: dict[object, set[int]] = {}

    def of(self, key: object) -> set[int]:
        dead = self._dead.get(key)
        if dead is None:
            dead = self._dead[key] = set()
        return dead
