"""The workloads of a ``kind: Simulation`` scenario: Deployments, StatefulSets, Jobs and bare pods.

A workload is a Deployment with a replica curve (:class:`ReplicaCurve`: ``"HH:MM"`` points that
repeat daily, RFC3339 points of a recording, or a CSV file) and rollouts, a StatefulSet with a
replica curve, a Job run on a cron ``schedule`` or at recorded ``runs``, or a bare pod created at
recorded ``runs`` (:class:`Run`). The blocks are strict (``extra="forbid"``, :data:`StrictModel`);
the embedded objects are checked by :mod:`karpy.api.simulation`, which re-exports these names and
is what callers import. Times of day are seconds after midnight (:func:`parse_clock`), RFC3339
times POSIX seconds (:func:`curve_time` tells them apart).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from karpy.api import common, core_v1

__all__ = [
    "DAY",
    "ClaimRetention",
    "ClaimTemplate",
    "ClockTime",
    "CurveTime",
    "JobObject",
    "ReplicaCurve",
    "Run",
    "StatefulSetObject",
    "Strategy",
    "StrictModel",
    "Workload",
    "curve_time",
    "nested",
    "parse_clock",
]

_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def parse_clock(text: str) -> float:
    """Seconds after midnight of ``"HH:MM"`` or ``"HH:MM:SS"`` (``"24:00"`` allowed as a day's end)."""
    match = _CLOCK.match(text.strip())
    if match is None:
        raise ValueError(f'"{text}" is not a time of day (expected HH:MM, e.g. "07:30")')
    hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3] or 0)
    if minutes > 59 or seconds > 59 or hours > 24 or (hours == 24 and (minutes or seconds)):
        raise ValueError(f'"{text}" is not a time of day (00:00 to 23:59, or 24:00)')
    return hours * 3600.0 + minutes * 60.0 + seconds


def _clock(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f'expected a quoted time of day such as "07:30", got {value!r}')
    return parse_clock(value)


ClockTime = Annotated[float, BeforeValidator(_clock)]
"""A UTC time of day, ``"HH:MM"``; validated to seconds after midnight."""

DAY = 86_400.0
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def curve_time(value: Any) -> float:
    """A replica curve's (or a rollout's) time: ``"HH:MM"`` (seconds after midnight, repeating
    daily) or an RFC3339 time (POSIX seconds; a recording's). The two are told apart by value:
    every time of day is at most :data:`DAY`, every RFC3339 time accepted is later."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f'expected a quoted time of day such as "07:30" or an RFC3339 time, got {value!r}')
    if not _DATE.match(value.strip()):
        return parse_clock(value)
    seconds = common.parse_time(value.strip())
    if seconds <= DAY:
        raise ValueError(f'"{value}" is too early: an RFC3339 time must be after 1970-01-02')
    return seconds


CurveTime = Annotated[float, BeforeValidator(curve_time)]
"""A time of day (``"HH:MM"``, daily) or an RFC3339 time (absolute)."""


class _Strict(common.K8sModel):
    model_config = ConfigDict(extra="forbid")


StrictModel = _Strict  # a simulator block: an unknown field is an error


def nested(model: type[pydantic.BaseModel], value: Any) -> pydantic.BaseModel:
    """Validate ``value`` against ``model``; every problem becomes a located FieldError (several:
    a :class:`~karpy.api.common.FieldErrors`, one line each)."""
    try:
        return model.model_validate(value)
    except pydantic.ValidationError as exc:
        found: list[common.FieldError] = []
        for err in exc.errors():
            cause = (err.get("ctx") or {}).get("error")
            loc = tuple(err["loc"])
            if isinstance(cause, common.FieldErrors):
                found.extend(common.FieldError(loc + e.subpath, e.message) for e in cause.errors)
                continue
            if isinstance(cause, common.FieldError):
                loc += cause.subpath
                message = cause.message
            elif cause is not None:
                message = str(cause)
            else:
                message = "required" if err["type"] == "missing" else err["msg"]
            found.append(common.FieldError(loc, message))
        raise (found[0] if len(found) == 1 else common.FieldErrors(found)) from None


# -- workloads ----------------------------------------------------------------------------


class ReplicaCurve(_Strict):
    """Replicas over time: ``points`` of ``["HH:MM", replicas]`` (daily) or ``[RFC3339, replicas]``
    (absolute: a recording's), or a ``csv`` file of time,replicas."""

    interpolate: Annotated[str, common.one_of("linear", "step")] = "linear"
    points: list[tuple[CurveTime, Annotated[int, common.at_least(0)]]] | None = None
    csv: str | None = None

    @property
    def daily(self) -> bool:
        """Whether the points are times of day (else RFC3339 times)."""
        return not self.points or self.points[0][0] <= DAY

    @model_validator(mode="after")
    def _one_source(self) -> ReplicaCurve:
        if (self.points is None) == (self.csv is None):
            raise common.FieldError(("points",), "give either points or csv")
        if self.points is not None:
            if not self.points:
                raise common.FieldError(("points",), "needs at least one point")
            daily = self.daily
            mixed = [i for i, (t, _) in enumerate(self.points) if (t <= DAY) != daily]
            if mixed:
                raise common.FieldError(("points", mixed[0], 0), "mixes times of day and RFC3339 times")
            order = "times must increase within a day" if daily else "times must increase"
            bad = [
                common.FieldError(("points", i, 0), order)
                for i in range(1, len(self.points))
                if self.points[i][0] <= self.points[i - 1][0]
            ]
            if bad:
                raise bad[0] if len(bad) == 1 else common.FieldErrors(bad)
        return self


class RollingUpdate(_Strict):
    max_surge: common.IntOrString = "25%"
    max_unavailable: common.IntOrString = "25%"


class Strategy(common.K8sModel):
    type: Annotated[str, common.one_of("RollingUpdate", "Recreate")] = "RollingUpdate"
    rolling_update: RollingUpdate | None = None


class JobSpec(common.K8sModel):
    completions: Annotated[int, common.at_least(1)] = 1
    parallelism: Annotated[int, common.at_least(1)] = 1
    template: core_v1.PodTemplateSpec


class JobObject(common.K8sModel):
    """A ``batch/v1`` Job as far as the simulator runs it."""

    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: JobSpec


class ClaimTemplate(common.K8sModel):
    """One of a StatefulSet's ``volumeClaimTemplates``: a PersistentVolumeClaim without namespace."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: core_v1.PersistentVolumeClaimSpec = core_v1.PersistentVolumeClaimSpec()

    @model_validator(mode="after")
    def _named(self) -> ClaimTemplate:
        if not self.metadata.name:
            raise common.FieldError(
                ("metadata", "name"), "required (the pod's volume and claim are named after it)"
            )
        return self


_RETAIN = ("Retain", "Delete")


class ClaimRetention(common.K8sModel):
    """``persistentVolumeClaimRetentionPolicy``: ``whenScaled: Delete`` drops a scaled-away
    ordinal's claims (``whenDeleted`` is accepted: simulated StatefulSets are never deleted)."""

    when_deleted: Annotated[str, common.one_of(*_RETAIN)] = "Retain"
    when_scaled: Annotated[str, common.one_of(*_RETAIN)] = "Retain"


class StatefulSetSpec(common.K8sModel):
    replicas: Annotated[int, common.at_least(0)] = 1
    selector: common.LabelSelector | None = None
    template: core_v1.PodTemplateSpec
    pod_management_policy: Annotated[str, common.one_of("OrderedReady", "Parallel")] = "OrderedReady"
    volume_claim_templates: list[ClaimTemplate] = Field(default_factory=list)
    persistent_volume_claim_retention_policy: ClaimRetention | None = None

    @model_validator(mode="after")
    def _unique_claims(self) -> StatefulSetSpec:
        seen: set[str] = set()
        for i, template in enumerate(self.volume_claim_templates):
            if template.metadata.name in seen:
                raise common.FieldError(
                    ("volumeClaimTemplates", i, "metadata", "name"),
                    f'"{template.metadata.name}" is used twice',
                )
            seen.add(template.metadata.name)
        return self


class StatefulSetObject(common.K8sModel):
    """An ``apps/v1`` StatefulSet as far as the simulator runs it (its claims included)."""

    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["StatefulSet"] = "StatefulSet"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: StatefulSetSpec


class Run(_Strict):
    """One recorded run of a Job (it starts ``at``; each pod succeeds ``runFor`` after it started
    running) or of a bare pod (created ``at``; succeeds after ``runFor``, or deleted at ``deleteAt``)."""

    at: common.Time
    run_for: common.GoDuration | None = None
    delete_at: common.Time | None = None
    name: Annotated[str, Field(min_length=1)] | None = None  # a Job run's name (default <job>-<minute>)

    @model_validator(mode="after")
    def _ordered(self) -> Run:
        if self.delete_at is not None and self.delete_at < self.at:
            raise common.FieldError(("deleteAt",), "must not be before at")
        return self


_KINDS = ("deployment", "stateful_set", "job", "pod")


class Workload(_Strict):
    """A Deployment or StatefulSet with a replica curve (a Deployment also rollouts), a Job run on
    a cron schedule or at recorded ``runs``, or a bare pod created at recorded ``runs``."""

    deployment: dict[str, Any] | None = None
    stateful_set: dict[str, Any] | None = None
    replicas: int | str | ReplicaCurve | None = None  # None: the Deployment's spec.replicas
    rollouts: list[CurveTime] = Field(default_factory=list)
    job: dict[str, Any] | None = None
    pod: dict[str, Any] | None = None
    schedule: str | None = None
    run_for: common.GoDuration | None = None
    runs: list[Run] | None = None

    @field_validator("replicas", mode="before")
    @classmethod
    def _replicas(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bool):
            raise ValueError(f"expected a number, a CSV path or a curve, got {value!r}")
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"must not be negative, got {value}")
            return value
        if isinstance(value, Mapping):
            return nested(ReplicaCurve, value)
        raise ValueError(f"expected a number, a CSV path or a curve with points, got {value!r}")

    @model_validator(mode="after")
    def _one_kind(self) -> Workload:
        given = [k for k in _KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            where = _camel(given[1]) if len(given) > 1 else "deployment"
            raise common.FieldError((where,), "give one of deployment, statefulSet, job or pod")
        if self.job is None and self.pod is None:
            if self.runs is not None:
                raise common.FieldError(("runs",), "only a job or a pod takes runs")
            for name in ("schedule", "run_for"):
                if getattr(self, name) is not None:
                    raise common.FieldError((_camel(name),), "only a job takes a schedule and runFor")
            if self.stateful_set is not None and self.rollouts:
                raise common.FieldError(("rollouts",), "only a deployment takes rollouts")
        elif self.job is not None:
            self._check_job()
        else:
            self._check_pod()
        return self

    def _check_job(self) -> None:
        if self.replicas is not None or self.rollouts:
            raise common.FieldError(("replicas",), "a job takes schedule and runFor, not replicas")
        if self.runs is not None:
            if self.schedule is not None:
                raise common.FieldError(("schedule",), "give either schedule or runs")
            self._check_runs(deletes=False)
            return
        if not self.schedule:
            raise common.FieldError(
                ("schedule",), 'required for a job (cron, e.g. "0 3 * * *"), or give runs'
            )
        if self.run_for is None:
            raise common.FieldError(("runFor",), "required for a job (e.g. 40m)")

    def _check_pod(self) -> None:
        for name in ("replicas", "schedule"):
            if getattr(self, name) is not None:
                raise common.FieldError((name,), "a pod takes runs (and runFor), not " + name)
        if self.rollouts:
            raise common.FieldError(("rollouts",), "only a deployment takes rollouts")
        if self.runs is None:
            raise common.FieldError(("runs",), "required for a pod (when it was created: [{at: ...}])")
        self._check_runs(deletes=True)

    def _check_runs(self, *, deletes: bool) -> None:
        assert self.runs is not None
        if not self.runs:
            raise common.FieldError(("runs",), "needs at least one run")
        for i, run in enumerate(self.runs):
            if self.job is not None and run.run_for is None and self.run_for is None:
                raise common.FieldError(("runs", i, "runFor"), "required (here or for the whole job)")
            if not deletes and run.delete_at is not None:
                raise common.FieldError(("runs", i, "deleteAt"), "only a pod's run takes deleteAt")
            if self.pod is not None and run.name is not None:
                raise common.FieldError(("runs", i, "name"), "only a job's run takes a name")
            if i and run.at < self.runs[i - 1].at:
                raise common.FieldError(("runs", i, "at"), "runs must be in time order")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
