"""A ``kind: Simulation`` file -> a validated :class:`Scenario` of plain dataclasses.

:func:`load` reads the YAML (times of day such as ``07:30`` stay strings, never YAML 1.1
sexagesimal numbers), validates it with :mod:`karpy.api.simulation`, resolves file paths
relative to the scenario (catalog, prices, replica CSVs), and turns the workloads into
:mod:`karpy.sim.trace` values (:mod:`karpy.sim.scenario_workloads`: replica curves with every bad
row reported, cron expressions checked, claim templates read). Any problem raises
:class:`ScenarioError`, whose lines name the file and the field path; a file of several documents
(Karpenter manifests, say) is one line naming what it holds. An unknown field of an embedded
object is a warning (:attr:`Scenario.warnings`; an error with ``strict``). A workload whose peak
replicas, or workloads whose peaks added up, exceed ``max_pods`` (:data:`MAX_PODS`, 100,000 by
default: ``karpy simulate --max-pods``) are an error, before any pod is made. Embedded Kubernetes
objects stay raw dicts (with apiVersion/kind filled in): the runner applies them through the
in-memory API server. :meth:`Scenario.with_karpy_config` and :meth:`Scenario.ablated` give the
variants ``--compare-with`` and ``--ablations`` run. A recorded trace (``karpy record``) is a
scenario too: its StatefulSets, bare pods and Job runs become :mod:`karpy.sim.trace` values, its
``recorded`` block a :class:`~karpy.sim.recorded.Recorded`, and ``initialState.pods: false``
leaves the snapshot's pods out. A scenario with claims and no StorageClass gets EKS's ``gp2``
as its default class (:func:`karpy.sim.storage.with_default_class`). Used by the runner,
``karpy simulate`` and ``karpy backtest``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from karpy.api import documents as documents_mod
from karpy.api import load as api_load
from karpy.api import simulation as schema
from karpy.catalog import prices as prices_mod
from karpy.model import errors, labels, resources
from karpy.sim import ca, scenario_workloads, storage, trace
from karpy.sim import cloud as sim_cloud
from karpy.sim import initial as initial_mod
from karpy.sim import recorded as recorded_mod

__all__ = [
    "MAX_PODS",
    "CloudSpec",
    "IceWindow",
    "PodStartup",
    "Pricing",
    "Scenario",
    "ScenarioError",
    "load",
    "parse",
    "yaml_documents",
]


MAX_PODS = 100_000  # pods one workload, or all workloads' peaks added up, may reach (--max-pods)


class ScenarioError(errors.InputError):
    """A scenario that cannot run; ``problems`` has one located line per finding."""

    def __init__(self, problems: Sequence[api_load.Problem]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class PodStartup:
    image_pull_cold: float = 25.0
    image_pull_warm: float = 1.0
    ready: float = 5.0


@dataclass(frozen=True, slots=True)
class IceWindow:
    """Insufficient capacity every day between two UTC times of day (seconds after midnight)."""

    instance_type: str
    zone: str
    capacity_type: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class CloudSpec:
    launch_latency: sim_cloud.LaunchLatency = dataclasses.field(default_factory=sim_cloud.LaunchLatency)
    pod_startup: PodStartup = PodStartup()
    spot_interruptions_per_node_hour: float = 0.0
    insufficient: tuple[IceWindow, ...] = ()
    true_allocatable: sim_cloud.TrueAllocatable | None = None  # cloud.trueAllocatable


@dataclass(frozen=True, slots=True)
class Pricing:
    on_demand_discount: float = 0.0
    spot_ratio: float = 0.4
    prices: Mapping[tuple[str, str, str], float] | None = None  # (region, type, capacity type) -> USD/h
    prices_file: str = ""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    file: str
    start: float
    duration: float
    catalog: str  # aws:<region> or a resolved file path
    node_pools: tuple[dict[str, Any], ...] = ()
    node_classes: tuple[dict[str, Any], ...] = ()
    daemon_sets: tuple[dict[str, Any], ...] = ()
    objects: tuple[dict[str, Any], ...] = ()
    deployments: tuple[trace.DeploymentTrace, ...] = ()
    jobs: tuple[trace.JobTrace, ...] = ()
    statefulsets: tuple[trace.StatefulSetTrace, ...] = ()
    pods: tuple[trace.PodTrace, ...] = ()  # recorded bare pods
    pricing: Pricing = Pricing()
    cloud: CloudSpec = CloudSpec()
    scoring: str = "LeastAllocated"
    baseline: ca.CAConfig | None = None  # the baseline.clusterAutoscaler block
    description: str = ""
    initial: initial_mod.InitialState | None = None  # the snapshot the run starts from
    measured_capacity: bool = False  # settings.measuredCapacity
    warnings: tuple[api_load.Problem, ...] = ()  # unknown fields of embedded objects
    recorded: recorded_mod.Recorded | None = None  # what really ran (a karpy record trace)

    def with_snapshot(self, state: initial_mod.InitialState) -> Scenario:
        """This scenario starting from ``state``: the snapshot's NodePools and NodeClasses when the
        scenario has none (the scenario's win), its DaemonSets, PDBs and Namespaces added to the
        scenario's (one of the same kind and name in the scenario wins)."""

        def merged(
            own: tuple[dict[str, Any], ...], entries: Sequence[initial_mod.Entry]
        ) -> tuple[dict[str, Any], ...]:
            seen = {_object_key(o) for o in own}
            return own + tuple(initial_mod.clean(e.raw) for e in entries if _object_key(e.raw) not in seen)

        return dataclasses.replace(
            self,
            node_pools=self.node_pools or tuple(initial_mod.clean(e.raw) for e in state.node_pools),
            node_classes=self.node_classes or tuple(initial_mod.clean(e.raw) for e in state.node_classes),
            daemon_sets=merged(self.daemon_sets, state.daemon_sets),
            objects=merged(self.objects, [*state.namespaces, *state.pdbs]),
            initial=state,
        )

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def has_storage(self) -> bool:
        """Whether the run needs the storage stand-ins (:class:`karpy.sim.storage.Provisioner`)."""
        return storage.uses_claims(self.objects, self.statefulsets)

    def with_karpy_config(self, other: Scenario) -> Scenario:
        """This trace with ``other``'s NodePools, NodeClasses and karpy settings (``--compare-with``)."""
        return dataclasses.replace(
            self,
            name=other.name,
            node_pools=other.node_pools,
            node_classes=other.node_classes or self.node_classes,
            measured_capacity=other.measured_capacity,
        )

    def ablated(self, *, no_spot: bool = False, no_consolidation: bool = False) -> Scenario:
        """NodePools restricted to on-demand and/or with consolidation off (``consolidateAfter: Never``)."""
        pools = []
        for raw in self.node_pools:
            pool = copy.deepcopy(raw)
            spec = pool.setdefault("spec", {})
            if no_spot:
                template = spec.setdefault("template", {}).setdefault("spec", {})
                reqs = [r for r in template.get("requirements") or [] if r.get("key") != labels.CAPACITY_TYPE]
                reqs.append({"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]})
                template["requirements"] = reqs
            if no_consolidation:
                spec.setdefault("disruption", {})["consolidateAfter"] = "Never"
            pools.append(pool)
        return dataclasses.replace(self, node_pools=tuple(pools))

    def ice_windows(self) -> list[sim_cloud.Insufficient]:
        """The daily insufficient-capacity windows as absolute windows over the run."""
        out: list[sim_cloud.Insufficient] = []
        for w in self.cloud.insufficient:
            for day_start in trace.daily_times([w.start], self.start - trace.DAY, self.end):
                begin, finish = day_start, day_start - w.start + w.end
                if finish > self.start and begin < self.end:
                    out.append(
                        sim_cloud.Insufficient(w.instance_type, w.zone, begin, finish, w.capacity_type)
                    )
        return sorted(out, key=lambda w: (w.start, w.instance_type, w.zone))


# -- YAML -------------------------------------------------------------------------------


class _Loader(documents_mod.Loader):
    """karpy's loader, also keeping times of day (``07:30``, ``12:00``) as strings."""


class _PureLoader(documents_mod.PureLoader):
    """:class:`_Loader` on PyYAML's own parser (:func:`karpy.api.documents.load`)."""


_TIME_OF_DAY = ("tag:yaml.org,2002:str", re.compile(r"^\d{1,2}:\d{2}(?::\d{2})?$"))
for _loader in (_Loader, _PureLoader):
    _loader.yaml_implicit_resolvers = {
        first: list(found) for first, found in documents_mod.Loader.yaml_implicit_resolvers.items()
    }
    for _digit in "0123456789":
        _loader.yaml_implicit_resolvers.setdefault(_digit, []).insert(0, _TIME_OF_DAY)


def _object_key(raw: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = raw.get("metadata") or {}
    return (str(raw.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def yaml_documents(text: str) -> list[Any]:
    """The non-empty YAML documents of a Simulation (or Sweep) file's ``text``, times of day and
    timestamps kept as strings (raises ``yaml.YAMLError``)."""
    return [d for d in documents_mod.load(text, many=True, fast=_Loader, pure=_PureLoader) if d is not None]


def load(
    path: Path | str,
    *,
    snapshot: Path | str | None = None,
    strict: bool = False,
    max_pods: int = MAX_PODS,
) -> Scenario:
    """Read and validate a scenario file, starting from the ``snapshot`` folder when given (it
    replaces the file's ``initialState.snapshot``); raises :class:`ScenarioError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(
            [api_load.Problem(str(path), api_load.FILE, "", "", "", f"cannot read: {exc}")]
        ) from None
    try:
        documents = yaml_documents(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problem = api_load.Problem(str(path), 0, "", "", "", f"YAML syntax error{where}: {what}")
        raise ScenarioError([problem]) from None
    if len(documents) != 1:
        raise ScenarioError([api_load.Problem(str(path), api_load.FILE, "", "", "", _not_one(documents))])
    return parse(
        documents[0],
        file=str(path),
        base_dir=path.parent,
        snapshot=snapshot,
        strict=strict,
        max_pods=max_pods,
    )


def _not_one(documents: Sequence[Any]) -> str:
    """Why a stream of other than one document is no scenario: what it holds, by kind."""
    if not documents:
        return "empty: a Simulation file holds one kind: Simulation document"
    kinds = [str(d.get("kind") or "?") if isinstance(d, Mapping) else type(d).__name__ for d in documents]
    shown = ", ".join(kinds[:6]) + (f", ... ({len(kinds) - 6} more)" if len(kinds) > 6 else "")
    hint = "" if "Simulation" in kinds else "; Kubernetes manifests are read by karpy plan -f"
    return (
        f"a Simulation file holds one kind: Simulation document, found {len(documents)} documents: "
        f"{shown}{hint}"
    )


def parse(
    raw: Any,
    *,
    file: str = "<scenario>",
    base_dir: Path | None = None,
    snapshot: Path | str | None = None,
    strict: bool = False,
    max_pods: int = MAX_PODS,
) -> Scenario:
    """Validate a decoded scenario document (and read its snapshot); raises :class:`ScenarioError`."""
    sim, problems = schema.validate(raw, file=file, strict=strict)
    if sim is None:
        raise ScenarioError([p for p in problems if p.severity == api_load.ERROR])
    base = base_dir or Path(".")
    found: list[api_load.Problem] = []

    def problem(path: str, message: str) -> None:
        found.append(api_load.Problem(file, 0, "Simulation", sim.name, path, message))

    def resolve(spec: str) -> Path:
        p = Path(spec)
        return p if p.is_absolute() else base / p

    catalog = _catalog(sim.catalog, resolve, problem)
    pricing = _pricing(sim.pricing, resolve, problem)
    traces = scenario_workloads.read(sim.workloads, resolve, problem, max_pods=max_pods)
    deployments, jobs, statefulsets = traces.deployments, traces.jobs, traces.statefulsets
    baseline = _baseline(sim, raw, problem)
    replicated: list[trace.DeploymentTrace | trace.StatefulSetTrace] = [*deployments, *statefulsets]
    names = [(d.namespace, d.name) for d in replicated] + [(j.namespace, j.name) for j in jobs]
    for key in sorted({k for k in names if names.count(k) > 1}):
        problem("workloads", f"two workloads are named {key[0]}/{key[1]}")
    recorded, bad = (
        (None, []) if sim.recorded is None else recorded_mod.validate(sim.recorded, file=file, name=sim.name)
    )
    found.extend(bad)
    if found:
        raise ScenarioError(found)
    state = _snapshot(sim, resolve, snapshot)
    if state is not None and sim.initial_state is not None and not sim.initial_state.pods:
        state = dataclasses.replace(state, pods=())  # the trace runs the pods alive at its start
    scenario = Scenario(
        name=sim.name,
        file=file,
        start=sim.start,
        duration=_seconds(sim.duration),
        catalog=catalog,
        node_pools=tuple(sim.node_pools),
        node_classes=tuple(sim.node_classes),
        daemon_sets=tuple(sim.daemon_sets),
        objects=storage.with_default_class(sim.objects, statefulsets),
        deployments=tuple(deployments),
        jobs=tuple(jobs),
        statefulsets=tuple(statefulsets),
        pods=tuple(traces.pods),
        pricing=pricing,
        cloud=_cloud_spec(sim.cloud),
        scoring=sim.scheduler.scoring,
        baseline=baseline,
        description=sim.description,
        measured_capacity=sim.settings.measured_capacity,
        warnings=tuple(problems),
        recorded=recorded,
    )
    return scenario if state is None else scenario.with_snapshot(state)


_Problem = scenario_workloads.Problem
_Resolve = scenario_workloads.Resolve
_seconds = scenario_workloads.seconds


def _snapshot(
    sim: schema.Simulation, resolve: _Resolve, given: Path | str | None
) -> initial_mod.InitialState | None:
    """The snapshot folder the run starts from (``given``, else ``initialState.snapshot``)."""
    if given is not None:
        folder = Path(given)
    elif sim.initial_state is not None:
        folder = resolve(sim.initial_state.snapshot)
    else:
        return None
    try:
        return initial_mod.read(folder)
    except initial_mod.SnapshotError as exc:
        raise ScenarioError(exc.problems) from None


def _catalog(catalog: str, resolve: _Resolve, problem: _Problem) -> str:
    """``aws:<region>``, or the catalog file's resolved path."""
    if catalog.startswith("aws:"):
        return catalog
    if not resolve(catalog).is_file():
        problem("catalog", f'"{catalog}": no such file (expected aws:<region> or a catalog file)')
    return str(resolve(catalog))


def _pricing(spec: schema.Pricing, resolve: _Resolve, problem: _Problem) -> Pricing:
    pricing = Pricing(spec.on_demand_discount, spec.spot_ratio)
    if spec.prices:
        try:
            loaded = prices_mod.load_prices_csv(resolve(spec.prices))
            pricing = dataclasses.replace(pricing, prices=loaded, prices_file=spec.prices)
        except (errors.InputError, OSError) as exc:
            problem("pricing.prices", str(exc))
    return pricing


def _baseline(sim: schema.Simulation, raw: Any, problem: _Problem) -> ca.CAConfig | None:
    """The ``baseline.clusterAutoscaler`` block, read from the raw document."""
    if sim.baseline.cluster_autoscaler is None:
        return None
    block = raw["baseline"]["clusterAutoscaler"]
    try:
        return ca.parse_config(block, where="baseline.clusterAutoscaler")
    except errors.InputError as exc:
        where, _, message = str(exc).partition(": ")
        problem(where, message)
        return None


def _cloud_spec(c: schema.Cloud) -> CloudSpec:
    latency = c.launch_latency
    launch = (
        sim_cloud.LaunchLatency.fixed(_seconds(latency.p50))
        if latency.distribution == "fixed"
        else sim_cloud.LaunchLatency(_seconds(latency.p50), _seconds(latency.p95 or "75s"))
    )
    return CloudSpec(
        launch_latency=launch,
        pod_startup=PodStartup(
            _seconds(c.pod_startup.image_pull_cold),
            _seconds(c.pod_startup.image_pull_warm),
            _seconds(c.pod_startup.ready),
        ),
        spot_interruptions_per_node_hour=c.spot_interruptions.rate_per_node_hour,
        insufficient=tuple(
            IceWindow(w.instance_type, w.zone, w.capacity_type, w.from_, w.until)
            for w in c.insufficient_capacity
        ),
        true_allocatable=None if c.true_allocatable is None else _true_allocatable(c.true_allocatable),
    )


def _true_allocatable(spec: schema.TrueAllocatable) -> sim_cloud.TrueAllocatable:
    def offsets(raw: Mapping[str, str]) -> dict[str, sim_cloud.Offset]:
        out: dict[str, sim_cloud.Offset] = {}
        for name, text in raw.items():
            if text.endswith("%"):
                out[name] = sim_cloud.Offset(percent=float(text[:-1]))
            else:
                out[name] = sim_cloud.Offset(amount=resources.amount(name, text))
        return out

    return sim_cloud.TrueAllocatable(
        offsets(spec.offset), {name: offsets(raw) for name, raw in spec.instance_types.items()}
    )
