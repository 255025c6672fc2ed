"""Conformance-format instance-type catalogs (``shared/conformance/FORMAT.md``, "Catalogs").

A YAML list of entries ``{name, capacity, overhead?, labels?, requirements?, offerings}``, as
Karpenter's fake cloud provider builds them. Each entry becomes an
:class:`~karpy.model.catalog.InstanceType` whose requirements are ``instance-type In [name]``,
each label ``In [value]``, the entry's own requirements, ``zone In [offering zones]`` and
``capacity-type In [offering capacity types]``; offerings keep their listed order (launch ties
go to catalog order). Every label and requirement key named by an entry is well-known for the
catalog, as upstream's fake registers them. Called by :func:`karpy.catalog.load` and the
conformance runner; bad input raises :class:`~karpy.model.errors.InputError` naming the file,
entry index and field.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from karpy.api import documents
from karpy.model import labels as labels_mod
from karpy.model import quantity
from karpy.model import requirements as requirements_mod
from karpy.model.catalog import Catalog, InstanceType, Offering
from karpy.model.errors import InputError
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import EMPTY, Resources

__all__ = ["from_entries", "load"]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_ENTRY_FIELDS = frozenset({"name", "capacity", "overhead", "labels", "requirements", "offerings"})
_REQUIREMENT_FIELDS = frozenset({"key", "operator", "values", "minValues"})
_OFFERING_FIELDS = frozenset({"zone", "capacityType", "price", "available"})


class _EntryError(Exception):
    """A problem in one field of one entry (turned into an InputError with the location)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def load(path: Path) -> Catalog:
    """Read a catalog file; the catalog is named after the file (``karpenter-fake``).

    Results are cached per (path, mtime, size): a conformance run loads the same file for many
    scenarios. Catalogs are immutable values, so sharing them is safe.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise InputError(f"{path}: cannot read catalog: {exc.strerror or exc}") from exc
    return _load_cached(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, mtime_ns: int, size: int) -> Catalog:
    path = Path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read catalog: {exc.strerror or exc}") from exc
    try:
        data = documents.load(text, fast=_LOADER, pure=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, list):
        raise InputError(
            f"{path}: a catalog must be a YAML list of instance types, got {type(data).__name__}"
        )
    return from_entries(data, path.stem, source=str(path))


def from_entries(entries: list[dict[str, Any]], name: str, *, source: str = "<catalog>") -> Catalog:
    """Build a catalog from already-parsed entries (an inline ``instanceTypes`` list)."""
    types: list[InstanceType] = []
    well_known: set[str] = set(labels_mod.CORE_WELL_KNOWN)
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        label = f"{source}: entry {index}"
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            label += f" ({entry['name']})"
        try:
            instance_type, keys = _entry(entry)
        except _EntryError as exc:
            raise InputError(f"{label}: field {exc.field}: {exc.message}") from None
        if instance_type.name in seen:
            raise InputError(
                f"{label}: field name: duplicate instance type (also entry {seen[instance_type.name]})"
            )
        seen[instance_type.name] = index
        well_known.update(keys)
        types.append(instance_type)
    return Catalog(name=name, instance_types=tuple(types), well_known=frozenset(well_known))


def _entry(entry: object) -> tuple[InstanceType, set[str]]:
    if not isinstance(entry, Mapping):
        raise _EntryError("(entry)", f"expected a mapping, got {type(entry).__name__}")
    unknown = sorted(str(k) for k in entry if k not in _ENTRY_FIELDS)
    if unknown:
        raise _EntryError(unknown[0], f"unknown field (expected {', '.join(sorted(_ENTRY_FIELDS))})")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise _EntryError("name", "required, a non-empty string")
    capacity = _resources(entry, "capacity", required=True)
    overhead = _resources(entry, "overhead", required=False)
    labels = _labels(entry.get("labels"))
    extra = _requirements(entry.get("requirements"))
    offerings = _offerings(entry.get("offerings"))
    reqs = [Requirement.in_(labels_mod.INSTANCE_TYPE, name)]
    reqs += [Requirement.in_(labels_mod.normalize(k), v) for k, v in labels.items()]
    reqs += extra
    reqs.append(Requirement.in_(labels_mod.ZONE, *(o.zone for o in offerings)))
    reqs.append(Requirement.in_(labels_mod.CAPACITY_TYPE, *(o.capacity_type for o in offerings)))
    keys = {labels_mod.normalize(k) for k in labels} | {r.key for r in extra}
    instance_type = InstanceType(
        name=name,
        requirements=Requirements(reqs),
        offerings=offerings,
        capacity=capacity,
        overhead=overhead,
        labels=dict(labels),
    )
    return instance_type, keys


def _resources(entry: Mapping[str, Any], field: str, *, required: bool) -> Resources:
    raw = entry.get(field)
    if raw is None:
        if required:
            raise _EntryError(field, "required, a resource list such as {cpu: '4', memory: 4Gi, pods: '5'}")
        return EMPTY
    if not isinstance(raw, Mapping):
        raise _EntryError(field, f"expected a mapping of resource name to quantity, got {type(raw).__name__}")
    for key, value in raw.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _EntryError(f"{field}.{key}", f"expected a quantity, got {value!r}")
    try:
        return _parse_resources(tuple(sorted(raw.items())))
    except quantity.QuantityError as exc:
        raise _EntryError(field, str(exc)) from None


@functools.lru_cache(maxsize=1024)
def _parse_resources(items: tuple[tuple[str, str | int | float], ...]) -> Resources:
    """Resources.parse, memoized: big catalogs repeat the same few resource lists."""
    return Resources.parse(dict(items))


def _scalar(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    return None


def _labels(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _EntryError("labels", f"expected a mapping of label key to value, got {type(raw).__name__}")
    out: dict[str, str] = {}
    for key, value in raw.items():
        text = _scalar(value)
        if not isinstance(key, str) or not key or text is None:
            raise _EntryError(f"labels.{key}", f"expected a string value, got {value!r}")
        out[key] = text
    return out


def _requirements(raw: object) -> list[Requirement]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _EntryError("requirements", f"expected a list, got {type(raw).__name__}")
    out: list[Requirement] = []
    for i, item in enumerate(raw):
        where = f"requirements[{i}]"
        if not isinstance(item, Mapping):
            raise _EntryError(where, "expected {key, operator, values}")
        unknown = sorted(str(k) for k in item if k not in _REQUIREMENT_FIELDS)
        if unknown:
            raise _EntryError(f"{where}.{unknown[0]}", "unknown field")
        key, operator = item.get("key"), item.get("operator")
        if not isinstance(key, str) or not key:
            raise _EntryError(f"{where}.key", "required, a non-empty string")
        if operator not in requirements_mod.OPERATORS:
            raise _EntryError(
                f"{where}.operator",
                f"{operator!r} is not one of {', '.join(sorted(requirements_mod.OPERATORS))}",
            )
        values_raw = item.get("values") or []
        if not isinstance(values_raw, list):
            raise _EntryError(f"{where}.values", "expected a list")
        values = [_scalar(v) for v in values_raw]
        if any(v is None for v in values):
            raise _EntryError(f"{where}.values", f"expected scalar values, got {values_raw!r}")
        min_values = item.get("minValues")
        if min_values is not None and (isinstance(min_values, bool) or not isinstance(min_values, int)):
            raise _EntryError(f"{where}.minValues", f"expected an integer, got {min_values!r}")
        try:
            out.append(Requirement.of(key, str(operator), [v for v in values if v is not None], min_values))
        except ValueError as exc:
            raise _EntryError(where, str(exc)) from None
    return out


def _offerings(raw: object) -> tuple[Offering, ...]:
    if not isinstance(raw, list) or not raw:
        raise _EntryError("offerings", "required, a non-empty list of {zone, capacityType, price}")
    out: list[Offering] = []
    for i, item in enumerate(raw):
        where = f"offerings[{i}]"
        if not isinstance(item, Mapping):
            raise _EntryError(where, "expected {zone, capacityType, price, available}")
        unknown = sorted(str(k) for k in item if k not in _OFFERING_FIELDS)
        if unknown:
            raise _EntryError(f"{where}.{unknown[0]}", "unknown field")
        zone, capacity_type, price = item.get("zone"), item.get("capacityType"), item.get("price")
        available = item.get("available", True)
        if not isinstance(zone, str) or not zone:
            raise _EntryError(f"{where}.zone", "required, a non-empty string")
        if not isinstance(capacity_type, str) or not capacity_type:
            raise _EntryError(f"{where}.capacityType", "required, a non-empty string")
        if (
            isinstance(price, bool)
            or not isinstance(price, int | float)
            or not math.isfinite(price)
            or price < 0
        ):
            raise _EntryError(f"{where}.price", f"required, a finite number >= 0, got {price!r}")
        if not isinstance(available, bool):
            raise _EntryError(f"{where}.available", f"expected true or false, got {available!r}")
        out.append(Offering(zone, capacity_type, float(price), available))
    return tuple(out)
