"""A NodeClaim being packed during one solve, and the instance-type filter behind it.

:class:`Template` is a NodePool ready for scheduling (requirements incl. template labels,
pre-filtered instance types, DaemonSet overhead per type). :class:`ClaimInProgress`
accumulates pods: each ``can_add`` checks taints, host ports, requirement compatibility,
the pod's volume topology, topology, then keeps only the instance types that still intersect
the requirements, fit the summed requests plus DaemonSet overhead, have an available compatible
offering and an attach limit that takes the pods' volumes, then checks ``minValues``.
Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from karpy.core.scheduling import volumes
from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.topology import Topology, TopologyError
from karpy.core.scheduling.typeindex import Options, TypeIndex
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
    "domain_key",
    "filter_instance_types",
    "min_values_shortfall",
]


class Unfit(Exception):
    """The pod cannot join this node or NodeClaim; the message says why (built lazily).

    Raised about a million times in a busy hour, so ``__init__`` only stores its arguments
    (``BaseException.__new__`` already did the rest of the set-up). Every attribute is set there:
    a class compiled by mypyc (``karpy.native``) has no class-level defaults for an exception."""

    # a topology failure: (key, node domains); any place with the same domains for that key
    # fails the same pod until a count changes
    domains: tuple[str, Requirement] | None
    # monotone: this place will reject every pod with the same signature (and, when
    # ``resources``, the same requests) for the rest of the solve: taints, host ports,
    # requirement conflicts, used resources and anti-affinity counts only tighten.
    monotone: bool
    resources: bool

    def __init__(
        self,
        why: str | Callable[[], str],
        *,
        monotone: bool = False,
        resources: bool = False,
        domains: tuple[str, Requirement] | None = None,
    ) -> None:
        self._why = why
        self.domains = domains
        self.monotone = monotone
        self.resources = resources

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


def domain_key(req: Requirement) -> tuple[object, ...]:
    """A requirement's allowed values as a hashable tuple (equal tuples: equal requirements)."""
    return (req.complement, req.values, req.gte, req.lte, req.min_values)


@dataclass(slots=True)
class Template:
    pool: NodePool
    requirements: Requirements
    instance_types: list[InstanceType]
    daemon: dict[str, DaemonOverhead]
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    index: TypeIndex | None = None  # arrays over ``instance_types``
    exact_filter: bool = False  # True: claims narrow with ``filter_instance_types`` (the reference path)


def _reference_narrow(
    index: TypeIndex,
    options: Options,
    reqs: Requirements,
    requests: Resources,
    daemon: dict[str, DaemonOverhead],
) -> Options:
    kept, _ = filter_instance_types(index.select(options), reqs, requests=requests, daemon=daemon)
    ids = {id(it) for it in kept}
    return options[[id(index.types[i]) in ids for i in options.tolist()]]


@dataclass(slots=True, eq=False)
class ClaimInProgress:
    """A NodeClaim being packed; ``options`` index ``template.index.types`` (catalog order kept),
    ``bits`` is the same set as a bitset (:class:`TypeIndex`)."""

    template: Template
    hostname: str
    requirements: Requirements
    options: Options
    topology: Topology
    well_known: frozenset[str]
    pods: list[Pod] = field(default_factory=list)
    requests: Resources = EMPTY
    host_ports: list[HostPort] = field(default_factory=list)
    _types: list[InstanceType] | None = None
    _zones: tuple[Requirement | None, Requirement] | None = None
    domain_memo: dict[tuple[str, int], tuple[object, ...]] = field(default_factory=dict)
    # (claim requests, pod requests, their sum) of the last ``can_add``: ``add`` follows it
    _sum: tuple[Resources, Resources, Resources] | None = None
    attached: dict[str, frozenset[str]] = field(default_factory=dict)  # claims per CSI driver (its pods')
    bits: int = 0  # ``options`` as a bitset (open() sets it)
    # (options, bits) of the last ``can_add``'s narrowing: ``add`` takes the bits with the options
    _narrowed: tuple[Options, int] | None = None

    @classmethod
    def open(
        cls,
        template: Template,
        hostname: str,
        options: Options,
        topology: Topology,
        well_known: frozenset[str],
    ) -> ClaimInProgress:
        reqs = template.requirements.add(Requirement.in_(labels.HOSTNAME, hostname))
        index = template.index
        assert index is not None
        return cls(template, hostname, reqs, options, topology, well_known, bits=index.bits_of(options))

    @property
    def index(self) -> TypeIndex:
        index = self.template.index
        assert index is not None
        return index

    @property
    def instance_types(self) -> list[InstanceType]:
        """The current options as instance types (template order)."""
        if self._types is None:
            self._types = self.index.select(self.options)
        return self._types

    def can_add(self, pod: Pod, data: PodData) -> tuple[Requirements, Options]:
        """The claim's requirements and options with ``pod`` added; raises :class:`Unfit`."""
        taint = first_untolerated(pod.tolerations, self.template.taints)
        if taint is not None:
            raise Unfit(lambda: f"did not tolerate taint {taint}", monotone=True)
        port = _ports_conflict(pod.host_ports, self.host_ports) if pod.host_ports else None
        if port is not None:
            raise Unfit(
                lambda: f"host port {port.port}/{port.protocol} already used on this node", monotone=True
            )
        claim_reqs, well_known = self.requirements, self.well_known
        if not claim_reqs.is_compatible(data.requirements, well_known):
            raise Unfit(
                lambda: (
                    "incompatible requirements: "
                    + "; ".join(claim_reqs.compatible(data.requirements, well_known))
                ),
                monotone=not claim_reqs.undefined(data.requirements, well_known),
            )
        reqs = claim_reqs.union_with(data.requirements)
        found = data.volumes
        if found is not None and found.requirements is not None:
            wanted, base = found.requirements, reqs
            if not base.is_compatible(wanted, well_known):
                raise Unfit(
                    lambda: volumes.conflict(found, base, well_known),
                    monotone=not base.undefined(wanted, well_known),
                )
            reqs = reqs.union_with(wanted)
        if self.topology.constrains(pod, labels.ZONE):
            # karpy: a zonal topology may only pick zones this claim's options are offered in
            # (upstream picks among all domains, then fails the pool when the zone is unreachable)
            reqs = reqs.add(self._reachable_zones(reqs.get(labels.CAPACITY_TYPE)))
        try:
            topo = self.topology.add_requirements(pod, self.template.taints, data.strict, reqs, well_known)
        except TopologyError as exc:
            raise Unfit(
                exc.describe, monotone=exc.monotone, domains=(exc.group.key, exc.node_domains)
            ) from None
        if topo is not reqs:
            if not reqs.is_compatible(topo, well_known):
                base = reqs
                raise Unfit(
                    lambda: (
                        "incompatible topology requirements: " + "; ".join(base.compatible(topo, well_known))
                    )
                )
            reqs = reqs.union_with(topo)
        requests = self.requests + data.requests
        self._sum = (self.requests, data.requests, requests)
        options = self._narrow(reqs, requests, pod.host_ports)
        if len(options) == 0:
            current, daemon, index = self.instance_types, self.template.daemon, self.index
            raise Unfit(
                lambda: _why_none(current, reqs, requests=requests, daemon=daemon, pod_ports=pod.host_ports),
                # no option fits the requests at all: more pods and fewer options will not fit either
                monotone=index.usable and not index.fits_bits(requests) & self.bits,
                resources=True,
            )
        if found is not None and found.attach:
            options = self._attach_limits(options, found.attach)
        if reqs.has_min_values():
            its = self.index.select(self.index.order_by_price(options, reqs))
            shortfall = min_values_shortfall(its, reqs)
            if shortfall is not None:
                raise Unfit(shortfall)
        return reqs, options

    def _attach_limits(self, options: Options, adding: volumes.Attached) -> Options:
        """The options whose CSI attach limits take the claim's volumes and ``adding``; raises
        :class:`Unfit` when none does (for good: the claim's volumes only grow)."""
        types, attached = self.index.types, self.attached
        overs = [volumes.over_limit(attached, adding, types[i].volume_limits) for i in options.tolist()]
        keep = [o is None for o in overs]
        if all(keep):
            return options
        if any(keep):
            return options[keep]
        worst = max((o for o in overs if o is not None), key=lambda o: o[2])
        raise Unfit(lambda: volumes.limit_message(worst, "the largest instance type left"), monotone=True)

    def domain_key(self, key: str, pod: Pod, data: PodData) -> tuple[object, ...]:
        """What ``can_add`` hands the topology as this claim's domains of ``key`` for ``pod``, as a
        plain tuple (memoized per pod signature until the claim changes)."""
        memo = (key, id(data.signature))  # the solver interns signatures (one tuple each)
        cached = self.domain_memo.get(memo)
        if cached is None:
            r = self._node_domains(key, pod, data)
            cached = self.domain_memo[memo] = domain_key(r)
        return cached

    def _node_domains(self, key: str, pod: Pod, data: PodData) -> Requirement:
        domains = self.requirements.get_or_exists(key)
        wanted = data.requirements.get(key)
        if wanted is not None:
            domains = wanted.intersection(domains) if key in self.requirements else wanted
        if key == labels.ZONE and self.topology.constrains(pod, labels.ZONE):
            capacity_type = self.requirements.get(labels.CAPACITY_TYPE)
            pod_ct = data.requirements.get(labels.CAPACITY_TYPE)
            if pod_ct is not None:
                capacity_type = pod_ct if capacity_type is None else pod_ct.intersection(capacity_type)
            zones = self._reachable_zones(capacity_type)
            domains = zones.intersection(domains) if key in self.requirements or wanted else zones
        return domains

    def _reachable_zones(self, capacity_type: Requirement | None) -> Requirement:
        cached = self._zones
        if cached is None or cached[0] != capacity_type:
            cached = (capacity_type, self.index.zone_requirement(self.options, capacity_type))
            self._zones = cached
        return cached[1]

    def _narrow(self, reqs: Requirements, requests: Resources, pod_ports: Sequence[HostPort]) -> Options:
        index = self.index
        self._narrowed = None
        if not index.usable or self.template.exact_filter:
            return _reference_narrow(index, self.options, reqs, requests, self.template.daemon)
        options, bits = index.narrow(self.options, self.bits, reqs, requests)
        self._narrowed = (options, bits)
        if pod_ports and index.has_ports and len(options):
            daemon = self.template.daemon
            blocked = [
                (o := daemon.get(index.types[i].name)) is not None
                and _ports_conflict(pod_ports, o.host_ports) is not None
                for i in options.tolist()
            ]
            options = options[[not b for b in blocked]]
        return options

    def add(self, pod: Pod, data: PodData, reqs: Requirements, options: Options) -> None:
        self.pods.append(pod)
        if options is not self.options:
            narrowed = self._narrowed
            self.bits = (
                narrowed[1]
                if narrowed is not None and narrowed[0] is options
                else self.index.bits_of(options)
            )
            self.options = options
            self._types = None
            self._zones = None
        self._narrowed = None
        last = self._sum
        if last is not None and last[0] is self.requests and last[1] is data.requests:
            self.requests = last[2]
        else:
            self.requests = self.requests + data.requests
        self._sum = None
        self.requirements = reqs
        self.domain_memo.clear()
        self.topology.register(labels.HOSTNAME, self.hostname)
        self.topology.record(pod, self.template.taints, reqs, self.well_known)
        self.host_ports.extend(pod.host_ports)
        if data.volumes is not None and data.volumes.attach:
            self.attached = volumes.merged(self.attached, data.volumes.attach)
