"""Instance types of one NodePool template as arrays and bitsets, for fast filtering and price order.

:class:`TypeIndex` holds, per type of the template (in the template's order): allocatable and
DaemonSet overhead per resource, each type's requirement per label key, and every offering
flattened (type, zone, capacity type, price, available). A claim's options are an array of
indices into it, in ascending order, and the same set as a bitset (a Python int, bit ``i`` for
type ``i``). ``narrow_bits`` gives exactly what :func:`~karpy.core.scheduling.nodeclaim.
filter_instance_types` keeps: a type is kept when the summed requests plus its overhead fit, its
requirements overlap the claim's key by key, and it has an available offering the claim's zone
and capacity type allow. Each test is a bitset, so narrowing a claim is a few integer ANDs, not
a dozen numpy calls: per resource the types are sorted by room (allocatable less overhead), and
"room >= request" is a suffix of that order (one bisect, one precomputed bitset); per (key,
requirement) and per (zone, capacity type) the bitsets are memoized (the index is shared by the
solves of a disruption pass, cache.py). ``options_of`` turns a bitset back into the index array
(memoized). ``cheapest`` and ``order_by_price`` give the cheapest compatible offering price per
type and upstream's price order (price, then name). Pure: no I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.limits import within_limits
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.requirements import NEGATIVE_OPERATORS, Requirement, Requirements, pair_overlaps
from karpy.model.resources import Resources

__all__ = ["Options", "TypeIndex"]

Options = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]
_LIMIT = 1 << 62
_MEMO_MAX = 4096


def _req_mask(per_type: Sequence[Requirement | None], req: Requirement) -> Mask:
    negative = req.operator in NEGATIVE_OPERATORS
    return np.fromiter(
        (
            other is None
            or other is req
            or pair_overlaps(other, req)
            or (negative and other.operator in NEGATIVE_OPERATORS)
            for other in per_type
        ),
        dtype=np.bool_,
        count=len(per_type),
    )


class TypeIndex:
    """Arrays over ``types``; ``usable`` is False when a quantity is too large for int64."""

    def __init__(self, types: Sequence[InstanceType], daemon: dict[str, DaemonOverhead]) -> None:
        self.types = list(types)
        n = len(self.types)
        self.n = n
        self.all: Options = np.arange(n, dtype=np.intp)
        self.all.flags.writeable = False  # shared by every claim of every solve (see ``narrow``)
        names: dict[str, None] = {}
        for it in self.types:
            names.update(dict.fromkeys(it.allocatable))
            overhead = daemon.get(it.name)
            if overhead is not None:
                names.update(dict.fromkeys(overhead.requests))
        self.columns = {name: i for i, name in enumerate(names)}
        alloc = [[it.allocatable.get(name, 0) for name in names] for it in self.types]
        over = [
            [daemon[it.name].requests.get(name, 0) if it.name in daemon else 0 for name in names]
            for it in self.types
        ]
        self.usable = all(abs(v) < _LIMIT for row in alloc + over for v in row)
        shape = (n, len(names))
        self.alloc = np.array(alloc, dtype=np.int64).reshape(shape) if self.usable else np.zeros(shape)
        self.overhead = np.array(over, dtype=np.int64).reshape(shape) if self.usable else np.zeros(shape)
        # per type and resource: the largest request that fits beside the DaemonSet overhead
        # (allocatable - overhead); 0 where allocatable is below zero and there is no overhead
        # (only a zero request fits), -1 where the overhead alone does not fit. For requests and
        # overheads >= 0, "need == 0 or need <= allocatable" (need = overhead + request) is then
        # "request <= room": one comparison per option instead of five (fits_mask).
        room = self.alloc - self.overhead
        self.room: npt.NDArray[Any] = np.where(room >= 0, room, np.where(self.overhead == 0, 0, -1))
        self.room_exact = bool((self.overhead >= 0).all())
        self.fits_nothing = cast(Mask, (self.room >= 0).all(axis=1))  # per type: requesting nothing fits
        self.has_ports = any(o.host_ports for o in daemon.values())
        # DaemonSet overhead objects are shared between types: a small class id per type
        classes: dict[int, int] = {}
        self._overhead_of: list[DaemonOverhead] = []
        codes = []
        for it in self.types:
            overhead = daemon.get(it.name)
            if overhead is None:
                codes.append(-1)
                continue
            if id(overhead) not in classes:
                classes[id(overhead)] = len(self._overhead_of)
                self._overhead_of.append(overhead)
            codes.append(classes[id(overhead)])
        self.overhead_class = np.array(codes, dtype=np.intp)
        keys: dict[str, list[Requirement | None]] = {}
        for i, it in enumerate(self.types):
            for key, req in it.requirements.items():
                keys.setdefault(key, [None] * n)[i] = req
        self.by_key = keys
        self.all_bits = (1 << n) - 1
        self._bytes = (n + 7) // 8
        # per resource column: the rooms in ascending order, and per position the bitset of the
        # types from there on (room >= the room there); position n: none
        self._rooms: list[list[int]] = []
        self._from: list[list[int]] = []
        for column in range(len(names) if self.usable else 0):
            by_room: list[int] = np.argsort(self.room[:, column], kind="stable").tolist()
            suffix = [0] * (n + 1)
            for position in range(n - 1, -1, -1):
                suffix[position] = suffix[position + 1] | 1 << by_room[position]
            self._rooms.append(self.room[by_room, column].tolist())
            self._from.append(suffix)
        self._fits_nothing = self.bits_of_mask(self.fits_nothing) if self.usable else 0
        # (key, requirement) -> types it allows; also by the requirement's id (the object pinned
        # beside its bitset): claims and pods share requirement objects, and an id is cheaper to
        # look up than a requirement's value
        self._req_bits: dict[tuple[str, Requirement], int] = {}
        self._req_ids: dict[int, tuple[Requirement, int]] = {}
        self._arrays: dict[int, Options] = {}
        self._within: dict[tuple[tuple[str, int], ...], Options] = {}
        off_type: list[int] = []
        off_zone: list[str] = []
        off_ct: list[str] = []
        off_price: list[float] = []
        for i, it in enumerate(self.types):
            for o in it.offerings:
                if o.available:
                    off_type.append(i)
                    off_zone.append(o.zone)
                    off_ct.append(o.capacity_type)
                    off_price.append(o.price)
        self.zones = sorted(set(off_zone))
        self.capacity_types = sorted(set(off_ct))
        zone_code = {z: i for i, z in enumerate(self.zones)}
        ct_code = {c: i for i, c in enumerate(self.capacity_types)}
        self.off_type = np.array(off_type, dtype=np.intp)
        self.off_zone = np.array([zone_code[z] for z in off_zone], dtype=np.intp)
        self.off_ct = np.array([ct_code[c] for c in off_ct], dtype=np.intp)
        self.off_price = np.array(off_price, dtype=np.float64)
        self._offered: dict[tuple[Requirement | None, Requirement | None], tuple[Mask, Mask]] = {}
        self._offered_bits: dict[tuple[Requirement | None, Requirement | None], int] = {}
        self._zone_bits: dict[Requirement | None, npt.NDArray[Any]] = {}
        self._zone_reqs: dict[tuple[bytes, Requirement | None], Requirement] = {}
        self._prices: dict[tuple[Requirement | None, Requirement | None], npt.NDArray[np.float64]] = {}
        rank = sorted(range(n), key=lambda i: self.types[i].name)
        self.name_rank = np.empty(n, dtype=np.intp)
        self.name_rank[rank] = np.arange(n, dtype=np.intp)

    # -- bitsets over all types -----------------------------------------------------------------
    def bits_of_mask(self, mask: Mask) -> int:
        """The bitset of a per-type mask (bit ``i``: ``mask[i]``)."""
        return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")

    def bits_of(self, options: Options) -> int:
        """The bitset of an options array."""
        if options is self.all:
            return self.all_bits
        mask = np.zeros(self.n, dtype=np.bool_)
        mask[options] = True
        return self.bits_of_mask(mask)

    def options_of(self, bits: int) -> Options:
        """The options array of a bitset (ascending; memoized, read-only)."""
        if bits == self.all_bits:
            return self.all
        found = self._arrays.get(bits)
        if found is None:
            raw = np.frombuffer(bits.to_bytes(self._bytes, "little"), dtype=np.uint8)
            found = np.flatnonzero(np.unpackbits(raw, count=self.n, bitorder="little")).astype(np.intp)
            found.flags.writeable = False
            if len(self._arrays) >= _MEMO_MAX:  # shared between solves (cache.py): bounded
                self._arrays.clear()
            self._arrays[bits] = found
        return found

    def requirement_bits(self, reqs: Requirements) -> int:
        """Types whose requirements overlap ``reqs``."""
        out = self.all_bits
        by_key, by_id = self.by_key, self._req_ids
        for key, req in reqs.items():
            pinned = by_id.get(id(req))
            if pinned is not None and pinned[0] is req:
                out &= pinned[1]
                continue
            per_type = by_key.get(key)
            if per_type is None:
                continue
            bits = self._req_bits.get((key, req))
            if bits is None:
                bits = self.bits_of_mask(_req_mask(per_type, req))
                if len(self._req_bits) >= _MEMO_MAX:  # shared between solves (cache.py): bounded
                    self._req_bits.clear()
                self._req_bits[(key, req)] = bits
            if len(by_id) >= _MEMO_MAX:
                by_id.clear()
            by_id[id(req)] = (req, bits)
            out &= bits
        return out

    def fits_bits(self, requests: Resources) -> int:
        """Types where ``requests`` + their DaemonSet overhead fit their allocatable (as
        :meth:`fits_mask`)."""
        if not (self.usable and self.room_exact):
            return self.bits_of_mask(self.fits_mask(self.all, requests))
        out = self._fits_nothing
        for name, value in requests.items():
            column = self.columns.get(name)
            if column is None:
                if value > 0:
                    return 0
                continue
            if abs(value) >= _LIMIT:
                raise OverflowError(name)
            if value < 0:
                return self.bits_of_mask(self.fits_mask(self.all, requests))
            if value > 0:
                out &= self._from[column][bisect_left(self._rooms[column], value)]
        return out

    def offering_bits(self, reqs: Requirements) -> int:
        """Types with an available offering in a zone and capacity type ``reqs`` allow."""
        key = (reqs.get(labels.ZONE), reqs.get(labels.CAPACITY_TYPE))
        bits = self._offered_bits.get(key)
        if bits is None:
            bits = self._offered_bits[key] = self.bits_of_mask(self._offering_masks(reqs)[1])
        return bits

    def _offering_masks(self, reqs: Requirements) -> tuple[Mask, Mask]:
        """(per offering: compatible; per type: has a compatible available offering)."""
        zone = reqs.get(labels.ZONE)
        ct = reqs.get(labels.CAPACITY_TYPE)
        cached = self._offered.get((zone, ct))
        if cached is None:
            zone_ok = np.array([zone is None or zone.has(z) for z in self.zones], dtype=np.bool_)
            ct_ok = np.array([ct is None or ct.has(c) for c in self.capacity_types], dtype=np.bool_)
            per_offering = zone_ok[self.off_zone] & ct_ok[self.off_ct]
            per_type = np.zeros(self.n, dtype=np.bool_)
            per_type[self.off_type[per_offering]] = True
            cached = (per_offering, per_type)
            self._offered[(zone, ct)] = cached
        return cached

    def fits_mask(self, options: Options, requests: Resources) -> Mask:
        """Per option: requests + its DaemonSet overhead fit its allocatable (zero totals skipped)."""
        if not requests:
            if self.room_exact:
                return self.fits_nothing[options]
            need = self.overhead[options]
            empty: Mask = ((need == 0) | (need <= self.alloc[options])).all(axis=1)
            return empty
        vector = np.zeros(len(self.columns), dtype=np.int64)
        negative = False
        for name, value in requests.items():
            column = self.columns.get(name)
            if column is None:
                if value > 0:
                    return np.zeros(len(options), dtype=np.bool_)
                continue
            if abs(value) >= _LIMIT:
                raise OverflowError(name)
            vector[column] = value
            negative = negative or value < 0
        if self.room_exact and not negative:
            return cast(Mask, (self.room[options] >= vector).all(axis=1))
        return self.fits_by_need(options, vector)

    def fits_by_need(self, options: Options, vector: npt.NDArray[np.int64]) -> Mask:
        """:meth:`fits_mask` as the rule says it, for a request vector over :attr:`columns`."""
        need = self.overhead[options] + vector
        fits: Mask = ((need == 0) | (need <= self.alloc[options])).all(axis=1)
        return fits

    def narrow_bits(self, bits: int, reqs: Requirements, requests: Resources) -> int:
        """The options of ``bits`` kept by the instance-type filter (see the module docstring)."""
        return bits & self.fits_bits(requests) & self.requirement_bits(reqs) & self.offering_bits(reqs)

    def narrow(
        self, options: Options, bits: int, reqs: Requirements, requests: Resources
    ) -> tuple[Options, int]:
        """:meth:`narrow_bits` of a claim's options (``options`` as an array, ``bits`` the same set),
        as (array, bitset): ``options`` itself when every option is kept (callers keep what they
        derived from it), else a read-only array."""
        kept = self.narrow_bits(bits, reqs, requests)
        return (options if kept == bits else self.options_of(kept)), kept

    def cheapest(self, reqs: Requirements) -> npt.NDArray[np.float64]:
        """Per type: the cheapest available offering price that ``reqs`` allow (inf: none)."""
        key = (reqs.get(labels.ZONE), reqs.get(labels.CAPACITY_TYPE))
        prices = self._prices.get(key)
        if prices is None:
            per_offering, _ = self._offering_masks(reqs)
            prices = np.full(self.n, np.inf)
            np.minimum.at(prices, self.off_type[per_offering], self.off_price[per_offering])
            self._prices[key] = prices
        return prices

    def order_by_price(self, options: Options, reqs: Requirements) -> Options:
        """``options`` by (cheapest compatible price, name), as ``nodeclaim.order_by_price``."""
        prices = self.cheapest(reqs)[options]
        return options[np.lexsort((self.name_rank[options], prices))]

    def capacity_types_of(self, options: Options, reqs: Requirements) -> list[str]:
        """Sorted capacity types of the compatible available offerings of ``options``."""
        per_offering, _ = self._offering_masks(reqs)
        chosen = np.zeros(self.n, dtype=np.bool_)
        chosen[options] = True
        hits = per_offering & chosen[self.off_type]
        codes = sorted(set(self.off_ct[hits].tolist()))  # np.unique is slow on a few items
        return [self.capacity_types[c] for c in codes]

    def zones_of(self, options: Options, capacity_type: Requirement | None) -> frozenset[str]:
        """Zones of the available offerings of ``options`` with an allowed capacity type."""
        bits = self._zone_bits.get(capacity_type)
        if bits is None:
            ct_ok = np.array(
                [capacity_type is None or capacity_type.has(c) for c in self.capacity_types], dtype=np.bool_
            )
            hits = ct_ok[self.off_ct]
            # one bit per zone (object ints: any number of zones)
            per_type = [0] * self.n
            for t, z in zip(self.off_type[hits].tolist(), self.off_zone[hits].tolist(), strict=True):
                per_type[t] |= 1 << z
            dtype = np.int64 if len(self.zones) <= 62 else object
            bits = self._zone_bits[capacity_type] = np.array(per_type, dtype=dtype)
        union = int(np.bitwise_or.reduce(bits[options])) if len(options) else 0
        return frozenset(zone for i, zone in enumerate(self.zones) if union >> i & 1)

    def zone_requirement(self, options: Options, capacity_type: Requirement | None) -> Requirement:
        """``In`` the :meth:`zones_of` ``options``, one shared object per distinct answer (claims
        whose zone requirement is that object merge it without an intersection)."""
        key = (options.tobytes(), capacity_type)
        req = self._zone_reqs.get(key)
        if req is None:
            req = Requirement(labels.ZONE, False, self.zones_of(options, capacity_type))
            if len(self._zone_reqs) >= _MEMO_MAX:  # shared between solves (cache.py): bounded
                self._zone_reqs.clear()
            self._zone_reqs[key] = req
        return req

    def overheads(self, options: Options) -> list[DaemonOverhead]:
        """The distinct DaemonSet overheads of ``options``, in order of first appearance."""
        # a few dozen options at most: plain Python beats np.unique here
        first = dict.fromkeys(c for c in self.overhead_class[options].tolist() if c >= 0)
        return [self._overhead_of[c] for c in first]

    def within(self, remaining: dict[str, int]) -> Options:
        """The types whose capacity fits a NodePool's ``remaining`` limits
        (:func:`~karpy.core.scheduling.limits.within_limits`), memoized by value: every solve of
        a disruption pass asks with the same remainder. Read-only, like ``all``."""
        key = tuple(remaining.items())
        found = self._within.get(key)
        if found is None:
            found = self.all[[within_limits(it, remaining) for it in self.types]]
            found.flags.writeable = False
            if len(self._within) >= _MEMO_MAX:
                self._within.clear()
            self._within[key] = found
        return found

    def select(self, options: Options) -> list[InstanceType]:
        types = self.types
        return [types[i] for i in options.tolist()]
