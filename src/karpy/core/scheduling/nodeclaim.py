"""A NodeClaim being packed during one solve, and the instance-type filter behind it.

:class:`Template` is a NodePool ready for scheduling (requirements incl. template labels,
pre-filtered instance types, DaemonSet overhead per type). :class:`ClaimInProgress`
accumulates pods: each ``can_add`` checks taints, host ports, requirement compatibility,
topology, then keeps only the instance types that still intersect the requirements, fit
the summed requests plus DaemonSet overhead, and have an available compatible offering,
then checks ``minValues``. Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.topology import Topology, TopologyError
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import HostPort, NodePool, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import EMPTY, Resources
from karpy.model.taints import Taint, first_untolerated

__all__ = [
    "ClaimInProgress",
    "Template",
    "Unfit",
    "cheapest_price",
    "filter_instance_types",
    "min_values_shortfall",
]


class Unfit(Exception):
    """The pod cannot join this node or NodeClaim; the message says why (built lazily)."""

    def __init__(self, why: str | Callable[[], str]) -> None:
        super().__init__()
        self._why = why

    def __str__(self) -> str:
        if callable(self._why):
            self._why = self._why()
        return self._why


def cheapest_price(it: InstanceType, reqs: Requirements) -> float:
    offering = it.cheapest_offering(reqs)
    return offering.price if offering is not None else math.inf


def order_by_price(its: Sequence[InstanceType], reqs: Requirements) -> list[InstanceType]:
    return sorted(its, key=lambda it: (cheapest_price(it, reqs), it.name))


def min_values_shortfall(its: Sequence[InstanceType], reqs: Requirements) -> str | None:
    """None when ``its`` (cheapest first) offer at least ``minValues`` distinct values per key."""
    wanted = {k: r.min_values for k, r in reqs.items() if r.min_values}
    if not wanted:
        return None
    seen: dict[str, set[str]] = {k: set() for k in wanted}
    for it in its:
        for key in wanted:
            req = it.requirements.get(key)
            if req is not None and not req.complement:
                seen[key].update(v for v in req.values if reqs[key].has(v))
        if all(len(seen[k]) >= n for k, n in wanted.items() if n is not None):
            return None
    short = sorted(
        f"{k} needs {n} values, has {len(seen[k])}" for k, n in wanted.items() if n and len(seen[k]) < n
    )
    return "minValues not met: " + ", ".join(short)


def _ports_conflict(a: Sequence[HostPort], b: Sequence[HostPort]) -> HostPort | None:
    for port in a:
        for other in b:
            if port.conflicts(other):
                return port
    return None


def _offered(it: InstanceType, zone: Requirement | None, capacity_type: Requirement | None) -> bool:
    for offering in it.offerings:
        if not offering.available:
            continue
        if zone is not None and not zone.has(offering.zone):
            continue
        if capacity_type is not None and not capacity_type.has(offering.capacity_type):
            continue
        return True
    return False


def filter_instance_types(
    its: Sequence[InstanceType],
    reqs: Requirements,
    *,
    requests: Resources,
    daemon: dict[str, DaemonOverhead],
    pod_ports: Sequence[HostPort] = (),
) -> tuple[list[InstanceType], Callable[[], str] | None]:
    """Types meeting requirements, resources and offering; or a function naming why none does."""
    zone = reqs.get(labels.ZONE)
    capacity_type = reqs.get(labels.CAPACITY_TYPE)
    totals: dict[int, Resources] = {}
    kept: list[InstanceType] = []
    for it in its:
        overhead = daemon.get(it.name)
        if overhead is not None and pod_ports and _ports_conflict(pod_ports, overhead.host_ports):
            continue
        total = requests
        if overhead is not None and overhead.requests:
            total = totals.get(id(overhead)) or totals.setdefault(id(overhead), requests + overhead.requests)
        if (
            total.fits(it.allocatable)
            and it.requirements.overlaps(reqs)
            and _offered(it, zone, capacity_type)
        ):
            kept.append(it)
    if kept:
        return kept, None
    return kept, lambda: _why_none(its, reqs, requests=requests, daemon=daemon, pod_ports=pod_ports)


def _why_none(
    its: Sequence[InstanceType],
    reqs: Requirements,
    *,
    requests: Resources,
    daemon: dict[str, DaemonOverhead],
    pod_ports: Sequence[HostPort],
) -> str:
    zone = reqs.get(labels.ZONE)
    capacity_type = reqs.get(labels.CAPACITY_TYPE)
    met_reqs = fits_any = has_offering = port_blocked = False
    for it in its:
        overhead = daemon.get(it.name)
        if overhead is not None and pod_ports and _ports_conflict(pod_ports, overhead.host_ports):
            port_blocked = True
            continue
        total = requests if overhead is None else requests + overhead.requests
        met_reqs |= it.requirements.overlaps(reqs)
        fits_any |= total.fits(it.allocatable)
        has_offering |= _offered(it, zone, capacity_type)
    if port_blocked and not (met_reqs or fits_any or has_offering):
        return "host port conflicts with a DaemonSet on every instance type"
    missing = []
    if not met_reqs:
        missing.append("met the requirements")
    if not fits_any:
        missing.append(f"fits requests {{{requests.format()}}}")
    if not has_offering:
        missing.append("has an available offering")
    if not missing:
        missing.append("meets requirements, fits and is offered at once")
    return "no instance type " + " or ".join(missing)


@dataclass(slots=True)
class Template:
    pool: NodePool
    requirements: Requirements
    instance_types: list[InstanceType]
    daemon: dict[str, DaemonOverhead]
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]


@dataclass(slots=True)
class ClaimInProgress:
    template: Template
    hostname: str
    requirements: Requirements
    instance_types: list[InstanceType]
    topology: Topology
    well_known: frozenset[str]
    pods: list[Pod] = field(default_factory=list)
    requests: Resources = EMPTY
    host_ports: list[HostPort] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        template: Template,
        hostname: str,
        instance_types: list[InstanceType],
        topology: Topology,
        well_known: frozenset[str],
    ) -> ClaimInProgress:
        reqs = template.requirements.add(Requirement.in_(labels.HOSTNAME, hostname))
        return cls(template, hostname, reqs, instance_types, topology, well_known)

    def can_add(self, pod: Pod, data: PodData) -> tuple[Requirements, list[InstanceType]]:
        taint = first_untolerated(pod.tolerations, self.template.taints)
        if taint is not None:
            raise Unfit(f"did not tolerate taint {taint}")
        port = _ports_conflict(pod.host_ports, self.host_ports)
        if port is not None:
            raise Unfit(f"host port {port.port}/{port.protocol} already used on this node")
        errors = self.requirements.compatible(data.requirements, self.well_known)
        if errors:
            raise Unfit("incompatible requirements: " + "; ".join(errors))
        reqs = self.requirements.union_with(data.requirements)
        if self.topology.constrains(pod, labels.ZONE):
            # karpy: a zonal topology may only pick zones this claim's options are offered in
            # (upstream picks among all domains, then fails the pool when the zone is unreachable)
            reqs = reqs.add(self._reachable_zones(reqs))
        try:
            topo = self.topology.add_requirements(
                pod, self.template.taints, data.strict, reqs, self.well_known
            )
        except TopologyError as exc:
            raise Unfit(exc.describe()) from None
        errors = reqs.compatible(topo, self.well_known)
        if errors:
            raise Unfit("incompatible topology requirements: " + "; ".join(errors))
        reqs = reqs.union_with(topo)
        its, reason = filter_instance_types(
            self.instance_types,
            reqs,
            requests=self.requests + data.requests,
            daemon=self.template.daemon,
            pod_ports=pod.host_ports,
        )
        if reason is not None:
            raise Unfit(reason)
        if reqs.has_min_values():
            shortfall = min_values_shortfall(order_by_price(its, reqs), reqs)
            if shortfall is not None:
                raise Unfit(shortfall)
        return reqs, its

    def _reachable_zones(self, reqs: Requirements) -> Requirement:
        capacity_type = reqs.get(labels.CAPACITY_TYPE)
        zones = {
            o.zone
            for it in self.instance_types
            for o in it.offerings
            if o.available and (capacity_type is None or capacity_type.has(o.capacity_type))
        }
        return Requirement(labels.ZONE, False, frozenset(zones))

    def add(self, pod: Pod, data: PodData, reqs: Requirements, its: list[InstanceType]) -> None:
        self.pods.append(pod)
        self.instance_types = its
        self.requests = self.requests + data.requests
        self.requirements = reqs
        self.topology.register(labels.HOSTNAME, self.hostname)
        self.topology.record(pod, self.template.taints, reqs, self.well_known)
        self.host_ports.extend(pod.host_ports)
