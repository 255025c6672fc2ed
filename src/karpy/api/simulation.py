"""The ``kind: Simulation`` schema: a scenario for ``karpy simulate`` (see ``docs/simulation.md``).

Top-level and simulator-specific blocks are strict (an unknown field is an error, so a typo
in ``duraton`` does not silently fall back to a default); the Kubernetes objects a scenario
embeds (``nodePools``, ``nodeClasses``, ``daemonSets``, ``objects``, a workload's
``deployment`` or ``job``) are validated with their own :mod:`karpy.api` schemas, so every
problem names the field path inside the scenario (``workloads[2].deployment.spec.template
.spec.containers[0].resources.requests.cpu``). :func:`validate` returns the parsed scenario
or :class:`~karpy.api.load.Problem` lines; :mod:`karpy.sim.scenario` turns it into plain
dataclasses. Times of day are ``"HH:MM"`` in UTC; durations are Go durations (``90s``, ``1h30m``).
The workloads' blocks are :mod:`karpy.api.sim_workloads`'s (their names are re-exported here).

What ``karpy record`` writes uses the same format, with a few more blocks (``docs/backtest.md``):
replica curves and rollouts at absolute RFC3339 times, ``statefulSet`` and bare ``pod`` workloads,
Job ``runs`` (a recorded start and duration each, instead of a cron ``schedule``),
``initialState.pods: false`` (the trace runs the pods alive at its start) and the ``recorded``
block (the nodes that really ran and the figures ``karpy backtest`` compares against; its schema
is :mod:`karpy.sim.recorded`'s).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from karpy.api import common
from karpy.api import load as api_load
from karpy.api.sim_workloads import (
    DAY,
    ClockTime,
    CurveTime,
    JobObject,
    ReplicaCurve,
    Run,
    StatefulSetObject,
    Strategy,
    StrictModel,
    Workload,
    curve_time,
    parse_clock,
)
from karpy.api.sim_workloads import nested as _nested
from karpy.model import quantity

__all__ = [
    "DAY",
    "DEFAULT_START",
    "OBJECT_KINDS",
    "ClockTime",
    "ClusterAutoscaler",
    "CurveTime",
    "InitialState",
    "JobObject",
    "NodeGroup",
    "NonNegative",
    "ReplicaCurve",
    "Run",
    "Simulation",
    "StatefulSetObject",
    "Strategy",
    "StrictModel",
    "TrueAllocatable",
    "Workload",
    "curve_time",
    "parse_clock",
    "validate",
]

DEFAULT_START = "2026-03-02T00:00:00Z"  # a Monday, 00:00 UTC


def _non_negative(value: float) -> float:
    if value < 0:
        raise ValueError(f"must not be negative, got {value}")
    return value


def _fraction(value: float) -> float:
    if not 0 <= value <= 1:
        raise ValueError(f"must be between 0 and 1, got {value}")
    return value


NonNegative = Annotated[float, pydantic.AfterValidator(_non_negative)]
Fraction = Annotated[float, pydantic.AfterValidator(_fraction)]


_Strict = StrictModel

# -- cloud, pricing, baseline ------------------------------------------------------------


class LaunchLatency(_Strict):
    distribution: Annotated[str, common.one_of("lognormal", "fixed")] = "lognormal"
    p50: common.GoDuration = "40s"
    p95: common.GoDuration | None = None  # lognormal only; default 75s

    @model_validator(mode="after")
    def _ordered(self) -> LaunchLatency:
        if self.distribution == "fixed" and self.p95 is not None:
            raise common.FieldError(("p95",), "a fixed latency takes only p50")
        p50 = common.parse_duration(self.p50) or 0.0
        p95 = common.parse_duration(self.p95 or "75s") or 0.0
        if self.distribution == "lognormal" and (p50 <= 0 or p95 < p50):
            raise common.FieldError(("p95",), f"need 0 < p50 <= p95, got p50={self.p50}, p95={self.p95}")
        return self


class PodStartup(_Strict):
    image_pull_cold: common.GoDuration = "25s"
    image_pull_warm: common.GoDuration = "1s"
    ready: common.GoDuration = "5s"


class SpotInterruptions(_Strict):
    rate_per_node_hour: NonNegative = 0.0


class InsufficientCapacity(_Strict):
    instance_type: Annotated[str, Field(min_length=1)]
    zone: str = ""
    capacity_type: Annotated[str, common.one_of("", "on-demand", "spot")] = ""
    from_: ClockTime = Field(alias="from")
    until: ClockTime

    @model_validator(mode="after")
    def _ordered(self) -> InsufficientCapacity:
        if self.until <= self.from_:
            raise common.FieldError(("until",), "must be after from (windows do not wrap midnight)")
        return self


_OFFSET_PERCENT = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)%$")


def _offset(value: Any) -> str:
    """``"-5%"`` (of the catalog's allocatable) or a signed quantity (``"-600Mi"``, ``"-100m"``)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f'expected a percentage such as "-5%" or a quantity such as "-600Mi", got {value!r}')
    text = str(value).strip()
    if _OFFSET_PERCENT.match(text):
        return text
    try:
        quantity.parse(text)
    except quantity.QuantityError:
        raise ValueError(f'"{text}" is neither a percentage ("-5%") nor a quantity ("-600Mi")') from None
    return text


Offset = Annotated[str, BeforeValidator(_offset)]


class TrueAllocatable(_Strict):
    """What launched nodes really register with: per resource an offset from the catalog's capacity
    and allocatable (``offset: {memory: "-5%"}``); ``instanceTypes`` gives a type its own offsets."""

    offset: dict[str, Offset] = Field(default_factory=dict)
    instance_types: dict[str, dict[str, Offset]] = Field(default_factory=dict)


class Cloud(_Strict):
    launch_latency: LaunchLatency = LaunchLatency()
    pod_startup: PodStartup = PodStartup()
    spot_interruptions: SpotInterruptions = SpotInterruptions()
    insufficient_capacity: list[InsufficientCapacity] = Field(default_factory=list)
    true_allocatable: TrueAllocatable | None = None  # None: nodes register with the catalog's allocatable


class Pricing(_Strict):
    prices: str | None = None  # CSV: region,instance_type,capacity_type,usd_per_hour
    on_demand_discount: Annotated[float, pydantic.AfterValidator(_fraction)] = 0.0
    spot_ratio: Annotated[float, pydantic.AfterValidator(_fraction)] = 0.4


class NodeGroup(_Strict):
    name: Annotated[str, Field(min_length=1)]
    instance_types: Annotated[list[str], Field(min_length=1)]
    capacity_type: Annotated[str, common.one_of("on-demand", "spot")] = "on-demand"
    zones: list[str] = Field(default_factory=list)  # empty: every zone the catalog offers
    min: Annotated[int, common.at_least(0)] = 0
    max: Annotated[int, common.at_least(1)] = 1000
    priority: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[common.Taint] = Field(default_factory=list)

    @model_validator(mode="after")
    def _bounds(self) -> NodeGroup:
        if self.min > self.max:
            raise common.FieldError(("min",), f"must not exceed max ({self.max}), got {self.min}")
        return self


class Overprovisioning(_Strict):
    pods: Annotated[int, common.at_least(0)] = 0
    requests: common.ResourceList = Field(default_factory=dict)
    priority: int = -10
    namespace: str = "overprovisioning"
    name: str = "overprovisioning"


class ClusterAutoscaler(common.K8sModel):
    """The fields checked here; further CA flags (``maxNodeProvisionTime``, ``newPodScaleUpDelay``, ...)
    are read and checked by :func:`karpy.sim.ca.parse_config`."""

    model_config = ConfigDict(extra="allow")

    node_groups: Annotated[list[NodeGroup], Field(min_length=1)]
    overprovisioning: Overprovisioning | None = None
    scan_interval: common.GoDuration = "10s"
    asg_launch_overhead: common.GoDuration = "30s"
    scale_down_unneeded_time: common.GoDuration = "10m"
    scale_down_utilization_threshold: Fraction = 0.5
    scale_down_delay_after_add: common.GoDuration = "10m"
    expander: str = "least-waste"  # may chain expanders: "priority,least-waste"

    @model_validator(mode="after")
    def _unique(self) -> ClusterAutoscaler:
        seen: set[str] = set()
        for i, group in enumerate(self.node_groups):
            if group.name in seen:
                raise common.FieldError(("nodeGroups", i, "name"), f'"{group.name}" is used twice')
            seen.add(group.name)
        return self


class Baseline(_Strict):
    cluster_autoscaler: ClusterAutoscaler | None = None


class Scheduler(_Strict):
    scoring: Annotated[str, common.one_of("LeastAllocated", "MostAllocated")] = "LeastAllocated"


class KarpySettings(_Strict):
    """karpy settings of the run (default: as upstream)."""

    measured_capacity: bool = False  # karpy operator --measured-capacity


class InitialState(_Strict):
    """Where the run starts: a ``karpy snapshot`` folder, relative to the scenario file; ``pods:
    false`` leaves its pods out (a recorded trace runs the pods alive at its start itself)."""

    snapshot: Annotated[str, Field(min_length=1)]
    pods: bool = True


class Simulation(_Strict):
    api_version: Literal["karpy.dev/v1alpha1"] = "karpy.dev/v1alpha1"
    kind: Literal["Simulation"]
    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    start: common.Time = common.parse_time(DEFAULT_START)
    duration: common.Duration = "24h"
    catalog: str = "aws:us-east-1"
    node_pools: list[dict[str, Any]] = Field(default_factory=list)
    node_classes: list[dict[str, Any]] = Field(default_factory=list)
    daemon_sets: list[dict[str, Any]] = Field(default_factory=list)
    # PodDisruptionBudgets, Namespaces, StorageClasses, PersistentVolumes, PersistentVolumeClaims
    objects: list[dict[str, Any]] = Field(default_factory=list)
    workloads: list[Workload] = Field(default_factory=list)
    pricing: Pricing = Pricing()
    cloud: Cloud = Cloud()
    scheduler: Scheduler = Scheduler()
    baseline: Baseline = Baseline()
    initial_state: InitialState | None = None
    settings: KarpySettings = KarpySettings()
    recorded: dict[str, Any] | None = None  # validated by karpy.sim.recorded (karpy record's block)

    @field_validator("duration")
    @classmethod
    def _positive(cls, value: str) -> str:
        if not common.parse_duration(value):
            raise ValueError("must be longer than 0s")
        return value


# -- embedded Kubernetes objects ------------------------------------------------------------

_DEFAULT_VERSIONS = {
    "NodePool": "karpenter.sh/v1",
    "EC2NodeClass": "karpenter.k8s.aws/v1",
    "KWOKNodeClass": "karpenter.kwok.sh/v1alpha1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Pod": "v1",
    "PodDisruptionBudget": "policy/v1",
    "Namespace": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
}
OBJECT_KINDS = (
    "PodDisruptionBudget",
    "Namespace",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
)  # what a scenario's objects: may hold


def _with_defaults(raw: dict[str, Any], kind: str | None) -> dict[str, Any]:
    out = dict(raw)
    if kind is not None:
        out.setdefault("kind", kind)
    version = _DEFAULT_VERSIONS.get(str(out.get("kind", "")))
    if version is not None:
        out.setdefault("apiVersion", version)
    return out


def _prefixed(problem: api_load.Problem, prefix: str, base: api_load.Problem) -> api_load.Problem:
    path = problem.path
    full = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"
    return api_load.Problem(base.file, 0, base.kind, base.name, full, problem.message, problem.severity)


def _embedded(
    raw: dict[str, Any],
    *,
    prefix: str,
    kinds: tuple[str, ...],
    base: api_load.Problem,
    checks: api_load.Checks = api_load.FILES,
) -> tuple[dict[str, Any], list[api_load.Problem]]:
    """Defaults filled in, and the problems of one embedded object (paths under ``prefix``): its
    schema's, then its name's and unknown fields' as in a file (:data:`karpy.api.load.FILES`)."""
    obj = _with_defaults(raw, kinds[0] if len(kinds) == 1 else None)
    kind = obj.get("kind")
    if kind not in kinds:
        allowed = " or ".join(kinds)
        message = f"kind must be {allowed}, got {kind!r}" if kind else f"kind is required ({allowed})"
        return obj, [_prefixed(api_load.Problem("", 0, "", "", "kind", message), prefix, base)]
    _, problems = api_load.parse_object(obj, file=base.file, index=0, checks=checks)
    return obj, [_prefixed(p, prefix, base) for p in problems]


def _job_problems(
    raw: dict[str, Any],
    prefix: str,
    base: api_load.Problem,
    schema: type[JobObject] | type[StatefulSetObject] = JobObject,
) -> list[api_load.Problem]:
    """The problems of an embedded Job (or StatefulSet: ``schema``), which karpy's loader does not parse."""
    try:
        schema.model_validate(_with_defaults(raw, None))
    except pydantic.ValidationError as exc:
        return api_load._validation_problems(exc, schema, base, prefix)
    if not (raw.get("metadata") or {}).get("name"):
        return [api_load.Problem(base.file, 0, base.kind, base.name, f"{prefix}.metadata.name", "required")]
    return []


def _pod_problems(
    raw: dict[str, Any], *, prefix: str, base: api_load.Problem, checks: api_load.Checks
) -> tuple[dict[str, Any], list[api_load.Problem]]:
    """A bare pod's template: named (``metadata.name``) or named per run (``generateName``)."""
    meta = raw.get("metadata") or {}
    named = dict(raw)
    if not meta.get("name") and meta.get("generateName"):  # (validated as the pod of its first run)
        named["metadata"] = {**meta, "name": f"{meta['generateName']}0"}
    obj, found = _embedded(named, prefix=prefix, kinds=("Pod",), base=base, checks=checks)
    obj["metadata"] = dict(meta)
    return obj, found


def validate(
    raw: Any, *, file: str, strict: bool = False
) -> tuple[Simulation | None, list[api_load.Problem]]:
    """The scenario with embedded objects' defaults filled in (None when a problem is an error),
    and every problem found: an unknown field of an embedded object is a warning (``strict``: an
    error); one in the simulator's own blocks always an error."""
    checks = api_load.STRICT if strict else api_load.FILES
    name = str(raw.get("name") or "") if isinstance(raw, Mapping) else ""
    base = api_load.Problem(file, 0, "Simulation", name, "", "")
    if not isinstance(raw, Mapping):
        message = f"expected a Simulation (a mapping), got {type(raw).__name__}"
        return None, [api_load.Problem(file, 0, "", "", "", message)]
    try:
        sim = Simulation.model_validate(raw)
    except pydantic.ValidationError as exc:
        found = api_load._validation_problems(exc, Simulation, base, "")
        return None, [api_load.Problem(file, 0, "Simulation", name, p.path, p.message) for p in found]
    problems: list[api_load.Problem] = []

    def check(items: list[dict[str, Any]], field: str, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        out = []
        for i, item in enumerate(items):
            obj, found = _embedded(item, prefix=f"{field}[{i}]", kinds=kinds, base=base, checks=checks)
            problems.extend(found)
            out.append(obj)
        return out

    sim.node_pools = check(sim.node_pools, "nodePools", ("NodePool",))
    sim.node_classes = check(sim.node_classes, "nodeClasses", ("EC2NodeClass", "KWOKNodeClass"))
    sim.daemon_sets = check(sim.daemon_sets, "daemonSets", ("DaemonSet",))
    sim.objects = check(sim.objects, "objects", OBJECT_KINDS)
    for i, wl in enumerate(sim.workloads):
        if wl.deployment is not None:
            prefix = f"workloads[{i}].deployment"
            wl.deployment, found = _embedded(
                wl.deployment, prefix=prefix, kinds=("Deployment",), base=base, checks=checks
            )
            problems.extend(found)
            strategy = (wl.deployment.get("spec") or {}).get("strategy")
            if strategy is not None:
                try:
                    _nested(Strategy, strategy)
                except common.FieldError as exc:
                    path = common.format_loc(Strategy, exc.subpath)
                    where = f"{prefix}.spec.strategy" + (f".{path}" if path else "")
                    problems.append(api_load.Problem(file, 0, "Simulation", name, where, exc.message))
        elif wl.job is not None:
            problems.extend(_job_problems(wl.job, f"workloads[{i}].job", base))
        elif wl.stateful_set is not None:
            prefix = f"workloads[{i}].statefulSet"
            wl.stateful_set = _with_defaults(wl.stateful_set, "StatefulSet")
            problems.extend(_job_problems(wl.stateful_set, prefix, base, StatefulSetObject))
        elif wl.pod is not None:
            wl.pod, found = _pod_problems(wl.pod, prefix=f"workloads[{i}].pod", base=base, checks=checks)
            problems.extend(found)
    failed = any(p.severity == api_load.ERROR for p in problems)
    return (None if failed else sim), problems
