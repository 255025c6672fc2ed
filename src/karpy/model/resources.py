"""Resource lists as frozen mappings of exact integers.

``cpu`` is held in millicores, every other resource (memory and storage in bytes,
``pods``, extended resources) in whole units. Used everywhere a request, an
allocatable or a limit is compared.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from fractions import Fraction

from karpy.model import quantity
from karpy.model.abcs import own_abc_state

__all__ = ["CPU", "EPHEMERAL_STORAGE", "MEMORY", "PODS", "Resources", "amount"]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"


def amount(resource: str, value: str | int | float | Fraction) -> int:
    """The integer amount of ``resource`` that a quantity denotes (cpu in millicores)."""
    if type(value) is str:
        key = (resource == CPU, value)
        found = _AMOUNTS.get(key)
        if found is None:
            found = quantity.to_milli(value) if key[0] else quantity.to_units(value)
            if len(_AMOUNTS) >= _MAX_AMOUNTS:
                _AMOUNTS.clear()
            _AMOUNTS[key] = found
        return found
    return quantity.to_milli(value) if resource == CPU else quantity.to_units(value)


# (cpu?, quantity text) -> its amount: a pure function of the two, asked for every resource
# list of every watch event
_AMOUNTS: dict[tuple[bool, str], int] = {}
_MAX_AMOUNTS = 4096  # cleared when full


class Resources(Mapping[str, int]):
    """An immutable resource list; missing resources are zero."""

    __slots__ = ("_hash", "_values")

    def __init__(self, values: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        self._hash: int | None = None
        if values == ():  # the empty default (and ``_own``'s start) without the walk
            self._values: dict[str, int] = {}
            return
        # a plain dict first: the ABC check of ``isinstance(values, Mapping)`` is slow
        items = values.items() if type(values) is dict or isinstance(values, Mapping) else values
        self._values = {k: v for k, v in items if v != 0}

    @classmethod
    def _own(cls, values: dict[str, int]) -> Resources:
        """Wrap a dict this module just built and owns (zeros dropped) without copying it again:
        sums are built in the scheduler's inner loops."""
        out = cls()  # (not ``object.__new__``: a class compiled by mypyc refuses it)
        out._values = values if 0 not in values.values() else {k: v for k, v in values.items() if v != 0}
        return out

    @classmethod
    def parse(cls, raw: Mapping[str, str | int | float]) -> Resources:
        """Build from a Kubernetes resource list (``{"cpu": "500m", "memory": "1Gi"}``)."""
        return cls({name: amount(name, value) for name, value in raw.items()})

    def __getitem__(self, key: str) -> int:
        return self._values[key]

    def get(self, key: str, default: int = 0) -> int:  # type: ignore[override]
        return self._values.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    # the dict's own views: Mapping's generic ones go through __getitem__ key by key
    def items(self) -> ItemsView[str, int]:
        return self._values.items()

    def keys(self) -> KeysView[str]:
        return self._values.keys()

    def values(self) -> ValuesView[int]:
        return self._values.values()

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._values == other._values
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._values.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"Resources({self.format()})"

    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._values)
        for key, value in other.items():
            out[key] = out.get(key, 0) + value
        return Resources._own(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._values)
        for key, value in other.items():
            out[key] = out.get(key, 0) - value
        return Resources._own(out)

    def max(self, other: Mapping[str, int]) -> Resources:
        """Per-resource maximum."""
        out = dict(self._values)
        for key, value in other.items():
            if value > out.get(key, 0):
                out[key] = value
        return Resources._own(out)

    def fits(self, available: Mapping[str, int]) -> bool:
        """True when every requested resource is within ``available`` (missing = 0)."""
        avail = available._values if type(available) is Resources else available  # no method call per key
        return all(value <= avail.get(key, 0) for key, value in self._values.items())

    def fits_with(self, other: Resources, available: Mapping[str, int]) -> bool:
        """``(self + other).fits(available)`` without building the sum (a hot scheduling check)."""
        mine, theirs = self._values, other._values
        if type(available) is Resources:
            available = available._values  # the dict's own ``get``: no method call per key
        for key, value in theirs.items():
            if mine.get(key, 0) + value > available.get(key, 0):
                return False
        return all(value <= available.get(key, 0) for key, value in mine.items() if key not in theirs)

    def exceeding(self, available: Mapping[str, int]) -> list[str]:
        """Names of the resources that do not fit in ``available``, sorted."""
        return sorted(k for k, v in self._values.items() if v > available.get(k, 0))

    def any_negative(self) -> bool:
        return any(v < 0 for v in self._values.values())

    def format(self) -> str:
        """``cpu: 1500m, memory: 2Gi`` with Kubernetes-style units."""
        return ", ".join(f"{k}: {quantity.format_quantity(k, v)}" for k, v in sorted(self._values.items()))

    def as_dict(self) -> dict[str, str]:
        return {k: quantity.format_quantity(k, v) for k, v in sorted(self._values.items())}


own_abc_state(Resources)
EMPTY = Resources()


def total(items: Iterable[Mapping[str, int]]) -> Resources:
    """Sum of resource lists."""
    out: dict[str, int] = {}
    for item in items:
        for key, value in item.items():
            out[key] = out.get(key, 0) + value
    return Resources._own(out)
