"""The order in which a pod tries the NodeClaims opened in this solve, kept without re-sorting.

Upstream sorts the in-flight claims by pod count (stable) before every pod. Between two sorts
at most one claim changed: it took one more pod, or it was opened (with one pod) and appended.
A stable sort then moves a claim that grew from k to k + 1 pods to the *front* of the claims
with k + 1 pods, and puts a new claim at the *end* of those with one pod. :class:`ClaimOrder`
keeps those buckets and applies the change at the next :meth:`ordered`, so iterating it is the
sorted list, and :meth:`final` is the list as upstream leaves it (the last change unsorted).

:class:`Rejections` remembers, per pod signature, the places a pod failed for a reason that
can only persist (``Unfit.monotone``), so that its identical siblings skip them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["ClaimOrder", "Rejections"]

T = TypeVar("T")


class ClaimOrder(Generic[T]):
    """``reference=True`` keeps upstream's list and sorts it by ``size`` on every :meth:`ordered`."""

    def __init__(self, size: Callable[[T], int], *, reference: bool = False) -> None:
        self._size = size
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
            return
        self._keys[id(claim)] = (before + 1, -self._serial)
        bucket = self._buckets[before]
        for i, item in enumerate(bucket):
            if item is claim:
                del bucket[i]
                break
        if not bucket:
            del self._buckets[before]
        self._buckets.setdefault(before + 1, []).insert(0, claim)

    def ordered(self) -> Iterator[T]:
        """The claims sorted by pod count, as upstream's stable sort leaves them."""
        if self._reference is not None:
            self._reference.sort(key=self._size)
            yield from list(self._reference)
            return
        self._settle()
        for size in sorted(self._buckets):
            yield from self._buckets[size]

    def final(self) -> list[T]:
        """The claim list as upstream ends with it: the last sort's order, a new claim appended."""
        if self._reference is not None:
            return list(self._reference)
        out = [claim for size in sorted(self._buckets) for claim in self._buckets[size]]
        if self._pending is not None and self._pending[1] == 0:
            out.append(self._pending[0])
        return out


class Rejections:
    """Per signature key: the places (by id) that reject it for good."""

    def __init__(self) -> None:
        self._dead: dict[object, set[int]] = {}

    def of(self, key: object) -> set[int]:
        dead = self._dead.get(key)
        if dead is None:
            dead = self._dead[key] = set()
        return dead
