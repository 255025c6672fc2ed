"""Label requirement algebra (Karpenter's ``pkg/scheduling/requirement(s).go``).

A :class:`Requirement` is a set of allowed values for one key: either a finite set
(``In``; empty = ``DoesNotExist``) or a complement (``NotIn``; no exclusions =
``Exists``), optionally bounded by inclusive integer limits (``Gt``/``Gte``/``Lt``/
``Lte``) and carrying ``minValues``. :class:`Requirements` maps keys to requirements and
implements intersection, ``compatible`` (with Karpenter's "undefined label" rules) and
``intersects``. Used by the scheduler, the catalog and the disruption core.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from karpy.model import labels as labels_mod
from karpy.model.abcs import own_abc_state

__all__ = [
    "DOES_NOT_EXIST",
    "EXISTS",
    "IN",
    "NEGATIVE_OPERATORS",
    "NOT_IN",
    "OPERATORS",
    "Requirement",
    "Requirements",
    "pair_overlaps",
]

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
GTE = "Gte"
LTE = "Lte"
OPERATORS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE})

_INFINITE = 1 << 62


_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def _as_int(value: str) -> int | None:
    text = value.strip()
    return int(text) if _INTEGER.match(text) else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """Allowed values of one label key."""

    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None = None
    lte: int | None = None
    min_values: int | None = None

    @classmethod
    def of(
        cls, key: str, operator: str, values: Sequence[str] = (), min_values: int | None = None
    ) -> Requirement:
        """Build from a NodeSelectorRequirement (operator already validated)."""
        key = labels_mod.normalize(key)
        if operator == IN:
            return cls(key, False, frozenset(values), None, None, min_values)
        if operator == NOT_IN:
            return cls(key, True, frozenset(values), None, None, min_values)
        if operator == EXISTS:
            return cls(key, True, frozenset(), None, None, min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, frozenset(), None, None, min_values)
        if operator in (GT, GTE, LT, LTE):
            if len(values) != 1 or _as_int(values[0]) is None:
                raise ValueError(f"operator {operator} takes exactly one integer value, got {list(values)}")
            bound = int(values[0])
            if operator == GT:
                return cls(key, True, frozenset(), bound + 1, None, min_values)
            if operator == GTE:
                return cls(key, True, frozenset(), bound, None, min_values)
            if operator == LT:
                return cls(key, True, frozenset(), None, bound - 1, min_values)
            return cls(key, True, frozenset(), None, bound, min_values)
        raise ValueError(f"unknown operator {operator!r}")

    @classmethod
    def exists(cls, key: str) -> Requirement:
        return cls(key, True, frozenset())

    @classmethod
    def does_not_exist(cls, key: str) -> Requirement:
        return cls(key, False, frozenset())

    @classmethod
    def in_(cls, key: str, *values: str) -> Requirement:
        return cls(key, False, frozenset(values))

    def _within(self, value: str) -> bool:
        if self.gte is None and self.lte is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        if self.gte is not None and number < self.gte:
            return False
        return not (self.lte is not None and number > self.lte)

    def has(self, value: str) -> bool:
        """True when ``value`` is allowed."""
        if self.complement:
            return value not in self.values and self._within(value)
        return value in self.values and self._within(value)

    def __len__(self) -> int:
        if self.complement:
            return _INFINITE - len(self.values)
        return len(self.values)

    def is_empty(self) -> bool:
        """No value allowed (the label must be absent)."""
        return not self.complement and not self.values

    @property
    def operator(self) -> str:
        if self.complement:
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def intersection(self, other: Requirement) -> Requirement:
        """Values allowed by both (``minValues`` is the larger of the two)."""
        complement = self.complement and other.complement
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        min_values = _max_opt(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, frozenset(), None, None, min_values)
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        if gte is not None or lte is not None:
            probe = Requirement(self.key, True, frozenset(), gte, lte)
            values = frozenset(v for v in values if probe._within(v))
        if not complement:
            gte = lte = None
        return Requirement(self.key, complement, values, gte, lte, min_values)

    def with_min_values(self, min_values: int | None) -> Requirement:
        return Requirement(self.key, self.complement, self.values, self.gte, self.lte, min_values)

    def any_value(self) -> str | None:
        """A deterministic representative value, or None when none can be named."""
        if not self.complement:
            allowed = sorted(v for v in self.values if self._within(v))
            return allowed[0] if allowed else None
        if self.gte is not None or self.lte is not None:
            low = self.gte if self.gte is not None else 0
            high = self.lte if self.lte is not None else _INFINITE
            for candidate in range(low, min(high, low + len(self.values) + 1) + 1):
                if str(candidate) not in self.values:
                    return str(candidate)
        return None

    def sorted_values(self) -> list[str]:
        return sorted(self.values)

    def __str__(self) -> str:
        op = self.operator
        if op in (EXISTS, DOES_NOT_EXIST):
            text = f"{self.key} {op}"
        else:
            values = sorted(self.values)
            shown = values[:5] + ([f"and {len(values) - 5} others"] if len(values) > 5 else [])
            text = f"{self.key} {op} [{', '.join(shown)}]"
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a > b else b


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b


_NEGATIVE_OPS = (NOT_IN, DOES_NOT_EXIST)


def _pair_overlaps(a: Requirement, b: Requirement) -> bool:
    """``len(a.intersection(b)) > 0`` without building the intersection."""
    if not a.complement and not b.complement:
        return not a.values.isdisjoint(b.values)
    if a.complement and b.complement:
        gte = _max_opt(a.gte, b.gte)
        lte = _min_opt(a.lte, b.lte)
        return gte is None or lte is None or gte <= lte
    concrete, complement = (b, a) if a.complement else (a, b)
    return any(v not in complement.values and complement._within(v) for v in concrete.values)


NEGATIVE_OPERATORS = _NEGATIVE_OPS
pair_overlaps = _pair_overlaps


class Requirements(Mapping[str, Requirement]):
    """An immutable map of label key to :class:`Requirement`."""

    __slots__ = ("_reqs",)

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        merged: dict[str, Requirement] = {}
        for req in requirements:
            existing = merged.get(req.key)
            merged[req.key] = req if existing is None else req.intersection(existing)
        self._reqs = merged

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        return cls(Requirement(labels_mod.normalize(k), False, frozenset((v,))) for k, v in labels.items())

    def __getitem__(self, key: str) -> Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Requirements):
            return self._reqs == other._reqs
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._reqs.items()))

    def get_or_exists(self, key: str) -> Requirement:
        """The requirement for ``key``; an undefined key allows any value (``Exists``)."""
        req = self._reqs.get(key)
        return req if req is not None else Requirement(key, True, frozenset())

    def add(self, *requirements: Requirement) -> Requirements:
        """A new set with ``requirements`` intersected in."""
        merged = dict(self._reqs)
        for req in requirements:
            existing = merged.get(req.key)
            if existing is None:
                merged[req.key] = req
            elif req.gte is None and req.lte is None and (existing is req or existing == req):
                continue  # without bounds r ∩ r is r: keep the object (most pods repeat a claim's)
            else:
                merged[req.key] = req.intersection(existing)
        out = Requirements()
        out._reqs = merged
        return out

    def union_with(self, other: Requirements) -> Requirements:
        """Intersect every requirement of ``other`` into this set (Karpenter ``Add``)."""
        return self.add(*other.values())

    def without(self, *keys: str) -> Requirements:
        out = Requirements()
        out._reqs = {k: v for k, v in self._reqs.items() if k not in keys}
        return out

    def intersects(self, other: Requirements) -> list[str]:
        """Errors for keys defined on both sides that allow no common value.

        Both sides negative (``NotIn``/``DoesNotExist``) is not a conflict, as upstream.
        """
        errors: list[str] = []
        small, large = (
            (self._reqs, other._reqs)
            if len(self._reqs) <= len(other._reqs)
            else (
                other._reqs,
                self._reqs,
            )
        )
        for key in small:
            if key not in large:
                continue
            existing = self._reqs[key]
            incoming = other._reqs[key]
            if len(existing.intersection(incoming)) == 0:
                if incoming.operator in _NEGATIVE_OPS and existing.operator in _NEGATIVE_OPS:
                    continue
                errors.append(f"key {key}, {incoming} not in {existing}")
        return sorted(errors)

    def compatible(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> list[str]:
        """Errors when ``other`` (e.g. a pod's) cannot be met by this set (e.g. a NodePool's).

        A custom key of ``other`` that this set does not define is an error unless its
        operator is ``NotIn``/``DoesNotExist``; keys in ``allow_undefined`` (well-known
        labels) may stay undefined. Defined keys must intersect.
        """
        errors: list[str] = []
        for key, req in other._reqs.items():
            if key in allow_undefined or key in self._reqs or req.operator in _NEGATIVE_OPS:
                continue
            errors.append(f'label "{key}" does not have known values')
        errors.extend(self.intersects(other))
        return errors

    def undefined(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> bool:
        """True when ``other`` needs a key this set does not define (see :meth:`compatible`)."""
        for key, req in other._reqs.items():
            if key in allow_undefined or key in self._reqs or req.operator in _NEGATIVE_OPS:
                continue
            return True
        return False

    def is_compatible(self, other: Requirements, allow_undefined: frozenset[str] = frozenset()) -> bool:
        for key, req in other._reqs.items():
            if key in allow_undefined or key in self._reqs or req.operator in _NEGATIVE_OPS:
                continue
            return False
        return self.overlaps(other)

    def overlaps(self, other: Requirements) -> bool:
        """True when :meth:`intersects` finds no conflict (fast path, no messages)."""
        mine, theirs = self._reqs, other._reqs
        if len(mine) > len(theirs):
            mine, theirs = theirs, mine
        for key, a in mine.items():
            b = theirs.get(key)
            if b is None or a is b or _pair_overlaps(a, b):
                continue
            if a.operator in _NEGATIVE_OPS and b.operator in _NEGATIVE_OPS:
                continue
            return False
        return True

    def labels(self, well_known: frozenset[str] = labels_mod.CORE_WELL_KNOWN) -> dict[str, str]:
        """Labels a node gets from single-valued requirements (restricted keys skipped)."""
        out: dict[str, str] = {}
        for key, req in self._reqs.items():
            if labels_mod.is_restricted_node_label(key, well_known):
                continue
            if not req.complement and len(req.values) == 1:
                out[key] = next(iter(req.values))
        return out

    def has_min_values(self) -> bool:
        return any(r.min_values is not None for r in self._reqs.values())

    def __str__(self) -> str:
        return ", ".join(sorted(str(r) for r in self._reqs.values()))

    def __repr__(self) -> str:
        return f"Requirements({self})"


own_abc_state(Requirements)
