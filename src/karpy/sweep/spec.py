"""A ``kind: Sweep`` file -> a validated :class:`Sweep` (pydantic), or one located line per problem.

The file names scenario files and karpy configuration files (both relative to the sweep file),
whether Cluster Autoscaler runs as a baseline, the seeds, and an optional parameter grid applied
to every NodePool of each configuration (see ``docs/sweep.md`` for every key). Every block is
strict: an unknown field is an error. :func:`load` raises :class:`SweepError`, whose ``problems``
read like the simulator's (``FILE: document 0 (Sweep "NAME"): FIELD.PATH: what is wrong``).
:func:`yaml_documents` reads YAML the way the simulator does (times of day and timestamps stay
strings), for the sweep file and for the scenario texts the workers parse.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import yaml
from pydantic import AfterValidator, ConfigDict, Field, StrictBool, field_validator, model_validator
from pydantic.alias_generators import to_camel

from karpy.api import common
from karpy.api.problems import FILE, Problem
from karpy.model import errors

__all__ = [
    "BASELINE",
    "CLUSTER_AUTOSCALER",
    "PARAMETERS",
    "Configuration",
    "Grid",
    "Sweep",
    "SweepError",
    "load",
    "parse",
    "yaml_documents",
]

BASELINE = "baseline"  # the default configuration: each scenario's own NodePools and NodeClasses
CLUSTER_AUTOSCALER = "cluster-autoscaler"  # the name of the Cluster Autoscaler runs
# grid keys, in the order a grid point is written and applied
PARAMETERS = ("consolidationPolicy", "consolidateAfter", "budgets.nodes", "expireAfter", "spot")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_BUDGET = re.compile(r"^(\d+|\d+%)$")


class SweepError(errors.InputError):
    """A sweep that cannot run; ``problems`` has one located line per finding."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")
        self.problems = list(problems)


class _Strict(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


def _unique(values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError("needs at least one value")
    seen: list[Any] = []
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.append(value)
    return values


def _duration(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a duration such as 30s, 5m, 24h or Never, got {value!r}")
    try:
        common.parse_duration(value)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return value


def _budget(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f'expected a node count or a percentage such as "1" or "10%", got {value!r}')
    text = str(value)
    if not _BUDGET.match(text):
        raise ValueError(f'"{text}" is not a node count or a percentage (e.g. "1" or "10%")')
    return text


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f'"{value}" is not a name (letters, digits, ".", "_" and "-")')
    return value


Duration = Annotated[Any, AfterValidator(_duration)]
Budget = Annotated[Any, AfterValidator(_budget)]
Name = Annotated[str, AfterValidator(_name)]
Policy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized"]


class Grid(_Strict):
    """Parameters applied to every NodePool of a configuration; the runs take their cross product."""

    consolidation_policy: Annotated[list[Policy], AfterValidator(_unique)] | None = None
    consolidate_after: Annotated[list[Duration], AfterValidator(_unique)] | None = None
    budgets_nodes: Annotated[list[Budget], AfterValidator(_unique)] | None = Field(
        default=None, alias="budgets.nodes"
    )
    expire_after: Annotated[list[Duration], AfterValidator(_unique)] | None = None
    spot: Annotated[list[StrictBool], AfterValidator(_unique)] | None = None

    def axes(self) -> list[tuple[str, list[Any]]]:
        """The parameters given, in :data:`PARAMETERS` order, with their values."""
        given = {
            "consolidationPolicy": self.consolidation_policy,
            "consolidateAfter": self.consolidate_after,
            "budgets.nodes": self.budgets_nodes,
            "expireAfter": self.expire_after,
            "spot": self.spot,
        }
        return [(key, list(values)) for key, values in given.items() if values is not None]


class Configuration(_Strict):
    """A karpy configuration: a Simulation file whose NodePools/NodeClasses/settings replace the
    scenario's (``file``), or, without ``file``, each scenario's own."""

    name: Name
    file: str | None = None

    @field_validator("name")
    @classmethod
    def _not_ca(cls, value: str) -> str:
        if value == CLUSTER_AUTOSCALER:
            raise ValueError(f'"{CLUSTER_AUTOSCALER}" is the name of the Cluster Autoscaler runs')
        return value


def _positive_duration(value: str | None) -> str | None:
    if value is None:
        return None
    _duration(value)
    if not common.parse_duration(value):
        raise ValueError(f'must be longer than 0s, got "{value}"')
    return value


class Sweep(_Strict):
    """The ``kind: Sweep`` document."""

    api_version: Literal["karpy.dev/v1alpha1"] | None = None
    kind: Literal["Sweep"]
    name: Name
    description: str = ""
    scenarios: Annotated[list[str], AfterValidator(_unique)]
    configurations: list[Configuration] = Field(default_factory=lambda: [Configuration(name=BASELINE)])
    cluster_autoscaler: StrictBool = False
    seeds: Annotated[list[Annotated[int, common.at_least(0)]], AfterValidator(_unique)] = Field(
        default_factory=lambda: [1]
    )
    grid: Grid = Field(default_factory=Grid)
    until: Annotated[str | None, AfterValidator(_positive_duration)] = None
    scoring: Literal["LeastAllocated", "MostAllocated"] | None = None
    root: str | None = None

    @model_validator(mode="after")
    def _distinct_configurations(self) -> Sweep:
        if not self.configurations:
            raise common.FieldError(("configurations",), "needs at least one configuration")
        names = [c.name for c in self.configurations]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise common.FieldError(("configurations", i, "name"), f'"{name}" is used twice')
        return self


def yaml_documents(text: str) -> list[Any]:
    """The non-empty YAML documents of ``text``, read as Simulation files are (raises
    ``yaml.YAMLError``)."""
    from karpy.sim import scenario

    return scenario.yaml_documents(text)


def _problems(exc: pydantic.ValidationError, file: str, name: str) -> list[Problem]:
    out: list[Problem] = []
    for err in exc.errors():
        loc: list[str | int] = list(err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, common.FieldError):
            loc = list(cause.subpath)
            message = cause.message
        elif err["type"] in ("value_error", "assertion_error") and cause is not None:
            message = str(cause)
        elif err["type"] == "missing":
            message = "required"
        elif err["type"] == "extra_forbidden":
            message = "unknown field"
        elif err["type"] == "literal_error":
            message = f"must be {(err.get('ctx') or {}).get('expected', '')}, got {err['input']!r}"
        else:
            message = err["msg"]
            if isinstance(err.get("input"), str | int | float | bool):
                message += f" (got {err['input']!r})"
        path = common.format_loc(Sweep, loc)
        out.append(Problem(file, 0, "Sweep", name, path, message))
    return out


def parse(raw: Any, *, file: str = "<sweep>") -> Sweep:
    """Validate a decoded sweep document; raises :class:`SweepError`."""
    if not isinstance(raw, dict):
        raise SweepError(
            [Problem(file, 0, "", "", "", f"expected a Sweep (a mapping), got {type(raw).__name__}")]
        )
    name = str(raw.get("name") or "")
    try:
        return Sweep.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise SweepError(_problems(exc, file, name)) from None


def load(path: Path | str) -> Sweep:
    """Read and validate a sweep file (not the files it names: :mod:`karpy.sweep.expand` reads
    those); raises :class:`SweepError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError([Problem(str(path), FILE, "", "", "", f"cannot read: {exc}")]) from None
    try:
        documents = yaml_documents(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SweepError([Problem(str(path), 0, "", "", "", f"YAML syntax error{where}: {what}")]) from None
    if len(documents) != 1:
        message = f"a Sweep file holds one kind: Sweep document, found {len(documents)}"
        raise SweepError([Problem(str(path), FILE, "", "", "", message)])
    return parse(documents[0], file=str(path))
