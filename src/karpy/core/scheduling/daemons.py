"""DaemonSet overhead per NodePool template and per existing node.

A DaemonSet pod adds to a new node's overhead when it tolerates the template's taints
(``PreferNoSchedule`` is tolerated implicitly), its strict requirements are compatible
with the template's and intersect the instance type's. Called by the scheduler when it
builds templates and existing nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpy.core.scheduling import podinfo
from karpy.model.catalog import InstanceType
from karpy.model.objects import DaemonSet, HostPort, Pod
from karpy.model.requirements import Requirements
from karpy.model.resources import EMPTY, Resources
from karpy.model.taints import PREFER_NO_SCHEDULE, Taint, first_untolerated

__all__ = ["DaemonOverhead", "node_overhead", "template_overhead"]


@dataclass(frozen=True, slots=True)
class DaemonOverhead:
    """Requests and host ports of the DaemonSet pods that land on one kind of node."""

    requests: Resources = EMPTY
    host_ports: tuple[HostPort, ...] = ()
    daemonsets: tuple[str, ...] = ()


def _tolerates(pod: Pod, taints: Sequence[Taint]) -> bool:
    hard = [t for t in taints if t.effect != PREFER_NO_SCHEDULE]
    return first_untolerated(pod.tolerations, hard) is None


def _fits_requirements(ds_pod: Pod, reqs: Requirements, well_known: frozenset[str]) -> list[Requirements]:
    """The DS pod's alternative strict requirement sets that are compatible with ``reqs``."""
    base = Requirements.from_labels(ds_pod.node_selector)
    alternatives = [base.add(*term.requirements) for term in ds_pod.required_terms] or [base]
    return [alt for alt in alternatives if reqs.is_compatible(alt, well_known)]


def template_overhead(
    daemonsets: Sequence[DaemonSet],
    *,
    taints: Sequence[Taint],
    requirements: Requirements,
    instance_types: Sequence[InstanceType],
    well_known: frozenset[str],
) -> dict[str, DaemonOverhead]:
    """Overhead per instance-type name for a NodePool template."""
    candidates: list[tuple[DaemonSet, list[Requirements]]] = []
    for ds in daemonsets:
        if not _tolerates(ds.template, taints):
            continue
        alts = _fits_requirements(ds.template, requirements, well_known)
        if alts:
            candidates.append((ds, alts))
    cache: dict[tuple[str, ...], DaemonOverhead] = {}
    out: dict[str, DaemonOverhead] = {}
    for it in instance_types:
        names = tuple(
            f"{ds.namespace}/{ds.name}"
            for ds, alts in candidates
            if any(it.requirements.overlaps(alt) for alt in alts)
        )
        overhead = cache.get(names)
        if overhead is None:
            chosen = [ds for ds in candidates if f"{ds[0].namespace}/{ds[0].name}" in names]
            total = EMPTY
            ports: list[HostPort] = []
            for ds, _ in chosen:
                total = total + podinfo.pod_requests(ds.template)
                ports.extend(ds.template.host_ports)
            overhead = DaemonOverhead(total, tuple(ports), names)
            cache[names] = overhead
        out[it.name] = overhead
    return out


def node_overhead(
    daemonsets: Sequence[DaemonSet],
    *,
    taints: Sequence[Taint],
    node_labels: Requirements,
    bound: Sequence[Pod],
) -> Resources:
    """DaemonSet requests still to arrive on an existing node (those already bound subtracted)."""
    expected = EMPTY
    for ds in daemonsets:
        if not _tolerates(ds.template, taints):
            continue
        if not _fits_requirements(ds.template, node_labels, frozenset()):
            continue
        expected = expected + podinfo.pod_requests(ds.template)
    present = EMPTY
    for pod in bound:
        if pod.is_daemonset_pod():
            present = present + podinfo.pod_requests(pod)
    remaining = expected - present
    return Resources({k: v for k, v in remaining.items() if v > 0})
