"""Kubernetes resource quantities as exact integers.

``parse`` turns "100m", "1.5Gi", "1e3", "2k" into an exact :class:`fractions.Fraction`;
:func:`to_milli` and :func:`to_units` round *up* to whole milli-units or units, as
Kubernetes' ``MilliValue()`` / ``Value()`` do (so "0.9Gi" is a valid byte count).
Used by :mod:`karpy.model.resources` and by the ``api`` layer.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "format_bytes", "format_cpu", "format_quantity", "parse", "to_milli", "to_units"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]))?$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


_PARSED: dict[str, Fraction] = {}  # quantity text -> its value (a pure function of the text)
_MAX_PARSED = 4096  # cleared when full


def parse(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity into an exact fraction of base units."""
    if type(value) is str:  # the common case: the same few texts over and over (watch events)
        found = _PARSED.get(value)
        if found is None:
            found = _parse(value)
            if len(_PARSED) >= _MAX_PARSED:
                _PARSED.clear()
            _PARSED[value] = found
        return found
    return _parse(value)


def _parse(value: str | int | float) -> Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be numbers or strings, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantities must be finite, not {value!r}")
        return Fraction(str(value))
    text = value.strip()
    match = _PATTERN.match(text)
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity (expected e.g. 100m, 1.5Gi, 2k, 1e3)")
    number = Fraction(match.group("num"))
    if match.group("bin"):
        return number * _BINARY[match.group("bin")]
    if match.group("exp"):
        exponent = int(match.group("exp")[1:])
        return number * (Fraction(10) ** exponent)
    return number * _DECIMAL[match.group("dec") or ""]


def to_milli(value: str | int | float | Fraction) -> int:
    """Whole milli-units, rounded up (Kubernetes ``MilliValue``)."""
    q = value if isinstance(value, Fraction) else parse(value)
    return math.ceil(q * 1000)


def to_units(value: str | int | float | Fraction) -> int:
    """Whole units, rounded up (Kubernetes ``Value``)."""
    q = value if isinstance(value, Fraction) else parse(value)
    return math.ceil(q)


def format_cpu(millis: int) -> str:
    """Millicores as Kubernetes writes them: ``"2"`` or ``"1500m"``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(count: int) -> str:
    """Bytes in the largest exact binary unit: ``"1Gi"``, ``"1536Mi"``, ``"100"``."""
    for suffix, size in sorted(_BINARY.items(), key=lambda item: -item[1]):
        if count != 0 and count % size == 0:
            return f"{count // size}{suffix}"
    return str(count)


def format_quantity(resource: str, amount: int) -> str:
    """Format an integer amount of ``resource`` (cpu in millicores, the rest in units)."""
    if resource == "cpu":
        return format_cpu(amount)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)
