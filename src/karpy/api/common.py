"""Shared pieces of the user-facing schemas: the base model, scalar types and small structs.

Every schema in :mod:`karpy.api` derives from :class:`K8sModel` (camelCase aliases,
unknown fields ignored by the schema and reported by :mod:`karpy.api.fields`, ``null`` treated
as unset). The annotated scalar types here
(quantities, durations, RFC3339 times, enums) validate as upstream's OpenAPI/CEL rules
do and raise :class:`FieldError` when a rule points below the field it is checked on.
:func:`format_loc` turns a pydantic error location into a Kubernetes field path; it is
called by :mod:`karpy.api.load`. The other schema modules import the structs.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from karpy.model import quantity

__all__ = [
    "KARPY_API_VERSION",
    "BudgetDuration",
    "Condition",
    "Duration",
    "FieldError",
    "FieldErrors",
    "GoDuration",
    "IntOrString",
    "K8sModel",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NillableDuration",
    "NodeSelectorRequirement",
    "NodeSelectorRequirementWithMinValues",
    "ObjectMeta",
    "OwnerReference",
    "Quantity",
    "ResourceList",
    "Taint",
    "Time",
    "Toleration",
    "at_least",
    "between",
    "build_all",
    "format_loc",
    "label_value_problem",
    "one_of",
    "parse_duration",
    "parse_time",
    "strip_annotation",
]

KARPY_API_VERSION = "karpy.dev/v1alpha1"  # karpy's own documents: Simulation, Plan, DisruptionDecision, ...


class FieldError(ValueError):
    """A rule violation found on a struct but located at ``subpath`` below it."""

    def __init__(self, subpath: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.subpath = subpath
        self.message = message


class FieldErrors(FieldError):
    """Several violations found on one struct (every bad point of a curve): reported one line each;
    read as a :class:`FieldError` it is the first."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        super().__init__(errors[0].subpath, errors[0].message)
        self.errors = list(errors)


class K8sModel(BaseModel):
    """Base of every schema: camelCase aliases, unknown fields ignored (:mod:`karpy.api.fields`
    reports them), ``null`` = unset. A schema's validator is built when it is first used (a
    ``karpy plan`` of pods never builds the DaemonSet's or the EC2NodeClass's), or by
    :func:`build_all`."""

    model_config = ConfigDict(
        extra="ignore", alias_generator=to_camel, coerce_numbers_to_str=True, defer_build=True
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict) and None in data.values():
            return {k: v for k, v in data.items() if v is not None}
        return data


def build_all() -> None:
    """Build the validator of every schema imported so far (the daemon's warm-up, so that the
    commands it forks find them built)."""
    pending: list[type[K8sModel]] = list(K8sModel.__subclasses__())
    while pending:
        schema = pending.pop()
        pending.extend(schema.__subclasses__())
        schema.model_rebuild()


def one_of(*allowed: str) -> AfterValidator:
    """An enum check with a message naming the allowed values."""

    def check(value: str) -> str:
        if value not in allowed:
            names = ", ".join(a for a in allowed if a) + (" (or empty)" if "" in allowed else "")
            raise ValueError(f'"{value}" is not one of {names}')
        return value

    return AfterValidator(check)


def between(low: int, high: int) -> AfterValidator:
    """An inclusive integer range check (``must be between 1 and 100, got 0``)."""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return AfterValidator(check)


def at_least(low: int) -> AfterValidator:
    def check(value: int | None) -> int | None:
        if value is not None and value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        return value

    return AfterValidator(check)


def _quantity(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a quantity such as 100m or 1Gi, got {value!r}")
    try:
        amount = quantity.parse(value)
    except quantity.QuantityError:
        raise ValueError(f'"{value}" is not a quantity (expected e.g. 100m, 1.5Gi, 2k or 1e3)') from None
    if amount < 0:
        raise ValueError(f'"{value}" must not be negative')
    return str(value)


Quantity = Annotated[str, BeforeValidator(_quantity)]
"""A Kubernetes quantity (validated with :mod:`karpy.model.quantity`), kept as written."""

ResourceList = dict[str, Quantity]


def _int_or_string(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected an integer or a percentage, got {value!r}")
    return str(value)


IntOrString = Annotated[str, BeforeValidator(_int_or_string)]

_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"^(?:[0-9]+(?:\.[0-9]*)?(?:ns|us|µs|ms|s|m|h))+$")
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_HMS = re.compile(r"^(?:[0-9]+(?:s|m|h))+$")
_BUDGET_DURATION = re.compile(r"^(?:(?:[0-9]+(?:h|m))|(?:[0-9]+h[0-9]+m))(?:0s)?$")


def parse_duration(text: str) -> float | None:
    """Seconds of a Go duration (``"720h"``, ``"1h30m"``, ``"30s"``); ``"Never"`` is None."""
    if text == "Never":
        return None
    if text == "0":
        return 0.0
    if not _GO_DURATION.match(text):
        raise ValueError(f'"{text}" is not a duration (expected e.g. 30s, 1h30m or 720h)')
    return sum(float(num) * _UNIT_SECONDS[unit] for num, unit in _PART.findall(text))


def _duration_check(pattern: re.Pattern[str], *, never: bool, example: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"expected a duration such as {example}, got {value!r}")
        if (never and value == "Never") or pattern.match(value):
            return value
        raise ValueError(f'"{value}" is not a duration (expected e.g. {example})')

    return check


NillableDuration = Annotated[
    str, BeforeValidator(_duration_check(_HMS, never=True, example="30s, 1h30m, 720h or Never"))
]
"""Karpenter's NillableDuration: ``^(([0-9]+(s|m|h))+|Never)$``."""
Duration = Annotated[str, BeforeValidator(_duration_check(_HMS, never=False, example="30s, 1h30m or 24h"))]
"""Karpenter's duration without ``Never``: ``^([0-9]+(s|m|h))+$``."""
BudgetDuration = Annotated[
    str, BeforeValidator(_duration_check(_BUDGET_DURATION, never=False, example="10m, 1h or 1h30m"))
]
"""A budget window: hours and minutes only."""
GoDuration = Annotated[
    str, BeforeValidator(_duration_check(_GO_DURATION, never=False, example="500ms, 30s or 1h30m"))
]


def parse_time(value: Any) -> float:
    """POSIX seconds (UTC) of an RFC3339 time (a string, a datetime or a number)."""
    return _parse_text(value) if type(value) is str else _parse_time(value)


@functools.lru_cache(maxsize=65536)
def _parse_text(value: str) -> float:
    """A watch sees the same timestamps (creation, transitions) on every event of an object:
    each text is parsed once (a bad one raises every time: errors are not cached)."""
    return _parse_time(value)


def _parse_time(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected an RFC3339 time, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dt.datetime):
        stamp = value
    elif isinstance(value, dt.date):
        stamp = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            stamp = dt.datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            raise ValueError(
                f'"{value}" is not an RFC3339 time (expected e.g. 2026-01-01T12:00:00Z)'
            ) from None
    else:
        raise ValueError(f"expected an RFC3339 time, got {value!r}")
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


Time = Annotated[float, BeforeValidator(parse_time)]


class Condition(K8sModel):
    """A status condition (Node and NodeClaim)."""

    type: str
    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: Time | None = None
    observed_generation: int | None = None


class OwnerReference(K8sModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ObjectMeta(K8sModel):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: Annotated[str, one_of("In", "NotIn", "Exists", "DoesNotExist")]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_match_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise FieldError(("values",), f"{self.operator} requires at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise FieldError(("values",), f"{self.operator} takes no values")
        return self


class LabelSelector(K8sModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


def _is_int(text: str, *, signed: bool) -> bool:
    body = text[1:] if signed and text[:1] in "+-" else text
    return body.isdigit()


class NodeSelectorRequirement(K8sModel):
    """A core/v1 NodeSelectorRequirement (pod node affinity)."""

    key: str
    operator: Annotated[str, one_of("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_match_operator(self) -> NodeSelectorRequirement:
        op, values = self.operator, self.values
        if op in ("In", "NotIn") and not values:
            raise FieldError(("values",), f"{op} requires at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise FieldError(("values",), f"{op} takes no values")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise FieldError(("values",), f"{op} requires exactly one value, got {len(values)}")
            if not _is_int(values[0], signed=True):
                raise FieldError(("values", 0), f'{op} requires an integer, got "{values[0]}"')
        return self


_QUALIFIED_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value (at most 63 characters, alphanumerics and -_.), or None."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f'"{value}" is not a valid label value (at most 63 characters: alphanumerics, "-", "_", ".")'
    return None


class NodeSelectorRequirementWithMinValues(K8sModel):
    """A Karpenter requirement (NodePool/NodeClaim): adds Gte/Lte and ``minValues``."""

    key: str
    operator: Annotated[str, one_of("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")]
    values: list[str] = Field(default_factory=list)
    min_values: Annotated[int | None, between(1, 50)] = None

    @model_validator(mode="after")
    def _values_match_operator(self) -> NodeSelectorRequirementWithMinValues:
        op, values = self.operator, self.values
        if len(self.key) > 316 or not _QUALIFIED_KEY.match(self.key):
            raise FieldError(("key",), f'"{self.key}" is not a valid label key')
        if op == "In" and not values:
            raise FieldError(("values",), "In requires at least one value")
        if op in ("Gt", "Lt", "Gte", "Lte"):
            if len(values) != 1:
                raise FieldError(("values",), f"{op} requires exactly one value, got {len(values)}")
            if not _is_int(values[0], signed=False):
                raise FieldError(("values", 0), f'{op} requires an integer >= 0, got "{values[0]}"')
        for i, value in enumerate(values):
            problem = label_value_problem(value)
            if problem:
                raise FieldError(("values", i), problem)
        if op == "In" and self.min_values is not None and self.min_values > len(values):
            raise FieldError(
                ("minValues",),
                f"minValues ({self.min_values}) must not exceed the number of values ({len(values)})",
            )
        return self


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class Taint(K8sModel):
    key: Annotated[str, Field(min_length=1)]
    value: str = ""
    effect: Annotated[str, one_of(*_EFFECTS)]


class Toleration(K8sModel):
    key: str = ""
    operator: Annotated[str, one_of("Equal", "Exists", "")] = "Equal"
    value: str = ""
    effect: Annotated[str, one_of("", *_EFFECTS)] = ""
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise FieldError(("value",), "must be empty when operator is Exists")
        if not self.key and self.operator != "Exists":  # "" means Equal
            raise FieldError(("operator",), "must be Exists when key is empty")
        return self


# --- error locations -----------------------------------------------------------------


def strip_annotation(tp: Any) -> Any:
    """Unwrap Annotated[...] and Optional[...] down to the payload type (a union of several: Any)."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return Any
            tp = members[0]
        else:
            return tp


def _field_type(model: type[BaseModel], alias: str) -> Any:
    for name, info in model.model_fields.items():
        if alias in (info.alias, name):
            return info.annotation
    return Any


def format_loc(root: type[BaseModel], loc: Sequence[str | int]) -> str:
    """``("spec", "limits", "nvidia.com/gpu")`` → ``spec.limits[nvidia.com/gpu]`` (map keys in brackets)."""
    text = ""
    tp: Any = root
    for part in loc:
        tp = strip_annotation(tp)
        origin = typing.get_origin(tp)
        if isinstance(part, int):
            text += f"[{part}]"
            args = typing.get_args(tp)
            tp = args[0] if origin in (list, tuple) and args else Any
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            text += f".{part}" if text else part
            tp = _field_type(tp, part)
        elif origin is dict:
            text += f"[{part}]"
            tp = typing.get_args(tp)[1]
        else:
            text += f".{part}" if text else part
            tp = Any
    return text
