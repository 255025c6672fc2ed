"""The workloads of a ``kind: Simulation`` scenario as :mod:`karpy.sim.trace` values.

:func:`read` turns the validated ``workloads`` (:mod:`karpy.api.sim_workloads`) into the
Deployments with their replica curves and rollouts, the cron (or recorded) Jobs, the
StatefulSets with their curves and claim templates
(:class:`~karpy.sim.statefulsets.ClaimTemplates`) and the recorded bare pods, reading replica
CSVs (paths resolved by the caller) and reporting each bad workload as one located problem (it is
skipped); no workload above ``max_pods`` pods at its peak, nor all of them together. Called by
:mod:`karpy.sim.scenario`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croniter import croniter

from karpy.api import common
from karpy.api import simulation as schema
from karpy.sim import statefulsets, trace

__all__ = ["Problem", "Resolve", "Traces", "read", "seconds"]

Problem = Callable[[str, str], None]  # (field path, message)
Resolve = Callable[[str], Path]  # a path relative to the scenario file


@dataclass(frozen=True, slots=True)
class Traces:
    deployments: list[trace.DeploymentTrace]
    jobs: list[trace.JobTrace]
    statefulsets: list[trace.StatefulSetTrace]
    pods: list[trace.PodTrace]


def seconds(text: str | None, default: float = 0.0) -> float:
    """A Go duration in seconds (``default`` when not given)."""
    if text is None:
        return default
    value = common.parse_duration(text)
    return 0.0 if value is None else value


def read(
    workloads: Sequence[schema.Workload], resolve: Resolve, problem: Problem, *, max_pods: int
) -> Traces:
    """The scenario's workloads as trace values; each problem reported through ``problem``."""
    deployments, jobs = _workloads(workloads, resolve, problem)
    sets, pods = _recorded_workloads(workloads, resolve, problem)
    _check_pods(workloads, [*deployments, *sets], jobs, max_pods, problem)
    return Traces(deployments, jobs, sets, pods)


def _workloads(
    workloads: Sequence[schema.Workload], resolve: Resolve, problem: Problem
) -> tuple[list[trace.DeploymentTrace], list[trace.JobTrace]]:
    """The Deployments with their replica curves and the cron Jobs; a bad one is reported and skipped."""
    deployments: list[trace.DeploymentTrace] = []
    jobs: list[trace.JobTrace] = []
    for i, wl in enumerate(workloads):
        if wl.deployment is not None:
            deployment = _deployment(i, wl, wl.deployment, resolve, problem)
            if deployment is not None:
                deployments.append(deployment)
        elif wl.job is not None:
            job = _job(i, wl, wl.job, problem)
            if job is not None:
                jobs.append(job)
    return deployments, jobs


def _peak(deployment: trace.DeploymentTrace | trace.StatefulSetTrace) -> int:
    return max(v for _, v in deployment.replicas.points)


def _check_pods(
    workloads: Sequence[schema.Workload],
    deployments: Sequence[trace.DeploymentTrace | trace.StatefulSetTrace],
    jobs: Sequence[trace.JobTrace],
    max_pods: int,
    problem: Problem,
) -> None:
    """No workload above ``max_pods`` pods (its curve's peak, or a job run's pods), nor all of them
    together (their peaks added up, an upper bound of the pods at once)."""
    where = {}
    for i, wl in enumerate(workloads):
        meta = (wl.deployment or wl.stateful_set or wl.job or {}).get("metadata") or {}
        field = "job.spec.parallelism" if wl.job is not None else "replicas"
        where[(meta.get("namespace") or "default", meta.get("name"))] = f"workloads[{i}].{field}"
    raise_it = f"the cap is {max_pods:,} pods (--max-pods N raises it)"
    peaks = [(d.namespace, d.name, _peak(d)) for d in deployments]
    peaks += [(j.namespace, j.name, min(j.parallelism, j.completions)) for j in jobs]
    for namespace, name, pods in peaks:
        if pods > max_pods:
            problem(where.get((namespace, name), "workloads"), f"{pods:,} pods at the peak; {raise_it}")
    total = sum(pods for *_, pods in peaks)
    if total > max_pods and all(pods <= max_pods for *_, pods in peaks):
        problem("workloads", f"the workloads' peaks add up to {total:,} pods; {raise_it}")


def _curve(
    i: int, wl: schema.Workload, spec: Mapping[str, Any], resolve: Resolve, problem: Problem
) -> trace.Curve | None:
    """A Deployment's or StatefulSet's replicas over time (None: a CSV that cannot be read)."""
    replicas = wl.replicas
    if replicas is None:
        return trace.Curve.constant(int(spec.get("replicas", 1)))
    if isinstance(replicas, int):
        return trace.Curve.constant(replicas)
    if isinstance(replicas, str):
        return _csv(resolve(replicas), "linear", problem, f"workloads[{i}].replicas")
    if replicas.csv is not None:
        where = f"workloads[{i}].replicas.csv"
        return _csv(resolve(replicas.csv), replicas.interpolate, problem, where)
    assert replicas.points is not None
    return trace.Curve(tuple(replicas.points), replicas.interpolate, replicas.daily)


def _deployment(
    i: int, wl: schema.Workload, d: Mapping[str, Any], resolve: Resolve, problem: Problem
) -> trace.DeploymentTrace | None:
    spec = d.get("spec") or {}
    curve = _curve(i, wl, spec, resolve, problem)
    if curve is None:
        return None
    meta = d.get("metadata") or {}
    return trace.DeploymentTrace(
        name=meta["name"],
        namespace=meta.get("namespace") or "default",
        template=spec.get("template") or {},
        strategy=spec.get("strategy"),
        replicas=curve,
        rollouts=tuple(t for t in wl.rollouts if t <= schema.DAY),
        rollout_times=tuple(sorted(t for t in wl.rollouts if t > schema.DAY)),
    )


def _recorded_workloads(
    workloads: Sequence[schema.Workload], resolve: Resolve, problem: Problem
) -> tuple[list[trace.StatefulSetTrace], list[trace.PodTrace]]:
    """The StatefulSets with their replica curves and the recorded bare pods (after the
    Deployments and Jobs, so their problems come after those)."""
    sets: list[trace.StatefulSetTrace] = []
    pods: list[trace.PodTrace] = []
    for i, wl in enumerate(workloads):
        if wl.stateful_set is not None:
            stateful_set = _stateful_set(i, wl, wl.stateful_set, resolve, problem)
            if stateful_set is not None:
                sets.append(stateful_set)
        elif wl.pod is not None:
            pods.append(_pod(wl, wl.pod))
    return sets, pods


def _stateful_set(
    i: int, wl: schema.Workload, raw: Mapping[str, Any], resolve: Resolve, problem: Problem
) -> trace.StatefulSetTrace | None:
    spec = raw.get("spec") or {}
    curve = _curve(i, wl, spec, resolve, problem)
    if curve is None:
        return None
    meta = raw.get("metadata") or {}
    return trace.StatefulSetTrace(
        name=meta["name"],
        namespace=meta.get("namespace") or "default",
        template=spec.get("template") or {},
        replicas=curve,
        parallel=spec.get("podManagementPolicy") == "Parallel",
        claims=_claim_templates(spec),
    )


def _pod(wl: schema.Workload, raw: Mapping[str, Any]) -> trace.PodTrace:
    """A recorded bare pod with its runs."""
    assert wl.runs is not None
    meta = raw.get("metadata") or {}
    default = None if wl.run_for is None else seconds(wl.run_for)
    runs = tuple(
        trace.PodRun(r.at, default if r.run_for is None else seconds(r.run_for), r.delete_at) for r in wl.runs
    )
    template = {"metadata": {k: v for k, v in meta.items() if k in ("labels", "annotations")}}
    return trace.PodTrace(
        name=str(meta.get("name") or ""),
        generate_name=str(meta.get("generateName") or ""),
        namespace=meta.get("namespace") or "default",
        template={**template, "spec": raw.get("spec") or {}},
        runs=runs,
    )


def _claim_templates(spec: Mapping[str, Any]) -> statefulsets.ClaimTemplates | None:
    """A StatefulSet's ``volumeClaimTemplates`` with its selector's labels and retention policy."""
    templates = tuple(spec.get("volumeClaimTemplates") or ())
    if not templates:
        return None
    retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    return statefulsets.ClaimTemplates(
        templates,
        labels=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        delete_when_scaled=retention.get("whenScaled") == "Delete",
    )


def _job(i: int, wl: schema.Workload, job: Mapping[str, Any], problem: Problem) -> trace.JobTrace | None:
    if wl.schedule is not None and not croniter.is_valid(wl.schedule):
        problem(f"workloads[{i}].schedule", f'"{wl.schedule}" is not a cron expression (e.g. "0 3 * * *")')
        return None
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    run_for = seconds(wl.run_for)
    runs = tuple(
        trace.JobRun(
            r.at,
            run_for if r.run_for is None else seconds(r.run_for),
            r.name or f"{meta['name']}-{int(r.at // 60)}",
        )
        for r in wl.runs or ()
    )
    return trace.JobTrace(
        name=meta["name"],
        namespace=meta.get("namespace") or "default",
        template=spec.get("template") or {},
        schedule=wl.schedule or "",
        run_for=run_for,
        completions=int(spec.get("completions", 1)),
        parallelism=int(spec.get("parallelism", 1)),
        runs=runs,
    )


def _csv(path: Path, interpolate: str, problem: Problem, where: str) -> trace.Curve | None:
    try:
        return trace.load_csv(path, interpolate=interpolate)
    except trace.TraceError as exc:
        for line in exc.lines:
            problem(where, line)
        return None
