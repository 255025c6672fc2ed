"""The simulated cloud: kwok Nodes plus launch latency, capacity errors, spot interruptions, billing.

:class:`SimCloud` is a :class:`karpy.ports.CloudProvider` for karpy's controllers (``create``
behaves as :class:`~karpy.providers.kwok.KwokCloudProvider`: the cheapest compatible available
offering by :func:`karpy.core.scheduling.launch.choose`, the Node written only after a launch
latency drawn from :class:`LaunchLatency`) and offers ``launch_node``/``terminate_node`` for the
Cluster Autoscaler model (an ASG launching one instance of a given type in a given zone).

- **Insufficient capacity**: inside an :class:`Insufficient` window a launch of that instance type
  in that zone (and capacity type, if given) raises ``InsufficientCapacity``; karpy then caches
  the offering as unavailable for 3 minutes, as upstream does.
- **Billing**: every launched instance gets a :class:`BillingRecord` (price from the catalog
  offering, from launch until termination); :meth:`SimCloud.cost` bills per second.
- **True allocatable** (:class:`TrueAllocatable`, the scenario's ``cloud.trueAllocatable``): the
  Nodes the cloud writes (karpy's and the Cluster Autoscaler model's) register with capacity and
  allocatable off the catalog's by an offset per resource, while NodeClaims keep the catalog's
  estimate: how a wrong VM memory overhead or reserve looks to the scheduler. None: the catalog's.
- **Spot interruptions**: each spot instance draws its interruption time from an exponential
  distribution (a Poisson process of ``spot_interruption_rate_per_node_hour``). When it comes,
  the instance is gone: the Node turns NotReady and is deleted (karpy's termination and
  lifecycle garbage collection, or the CA model through ``on_interrupt``, react; the workload
  stand-ins replace the pods). Each interruption is logged in ``interruptions``.

Randomness comes only from the injected ``rng``; used by :mod:`karpy.sim.runner` and
:mod:`karpy.sim.ca`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.api import encode
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType, Offering
from karpy.model.nodeclass import NodeClass
from karpy.model.objects import Condition, Node, NodeClaim, NodePool
from karpy.model.resources import CPU, Resources
from karpy.model.taints import Taint
from karpy.ports import Clock, CloudProvider, KubeAPI
from karpy.providers import kwok
from karpy.runtime.loop import Loop

__all__ = [
    "CAPACITY_LABEL",
    "BillingRecord",
    "Insufficient",
    "Interruption",
    "LaunchLatency",
    "Offset",
    "SimCloud",
    "TrueAllocatable",
]

CAPACITY_LABEL = wk.EKS_CAPACITY_TYPE  # what an EKS node group's nodes carry
_Z95 = 1.6448536269514722  # the standard normal's 95th percentile


@dataclass(frozen=True, slots=True)
class LaunchLatency:
    """Seconds from launch to a Ready Node: ``lognormal`` with the given p50 and p95, or ``fixed`` (p50)."""

    p50: float = 40.0
    p95: float = 75.0
    distribution: str = "lognormal"

    def __post_init__(self) -> None:
        if self.distribution not in ("lognormal", "fixed"):
            raise ValueError(f"distribution must be lognormal or fixed, not {self.distribution!r}")
        if self.p50 < 0 or (self.distribution == "lognormal" and (self.p50 <= 0 or self.p95 < self.p50)):
            raise ValueError(f"need 0 < p50 <= p95, got p50={self.p50}, p95={self.p95}")

    @classmethod
    def fixed(cls, seconds: float) -> LaunchLatency:
        return cls(seconds, seconds, "fixed")

    def sample(self, rng: random.Random) -> float:
        if self.distribution == "fixed":
            return self.p50
        sigma = (math.log(self.p95) - math.log(self.p50)) / _Z95
        return rng.lognormvariate(math.log(self.p50), sigma)


@dataclass(frozen=True, slots=True)
class Insufficient:
    """No capacity for ``instance_type`` in ``zone`` ("" = every zone) between ``start`` and ``end``."""

    instance_type: str
    zone: str
    start: float
    end: float
    capacity_type: str = ""  # "" = on-demand and spot

    def covers(self, instance_type: str, zone: str, capacity_type: str, now: float) -> bool:
        return (
            self.instance_type == instance_type
            and self.zone in ("", zone)
            and self.capacity_type in ("", capacity_type)
            and self.start <= now < self.end
        )


@dataclass(frozen=True, slots=True)
class Offset:
    """How far a resource of a registered Node is off the catalog's: ``percent`` of the catalog's
    allocatable (rounded down, to whole MiB for bytes), else ``amount`` (cpu in millicores)."""

    percent: float | None = None
    amount: int = 0

    def delta(self, resource: str, allocatable: int) -> int:
        if self.percent is None:
            return self.amount
        value = allocatable * self.percent / 100.0
        unit = 1 if resource == CPU or resource == "pods" else 2**20
        return math.floor(value / unit) * unit


@dataclass(frozen=True, slots=True)
class TrueAllocatable:
    """What launched Nodes really register with: per resource an :class:`Offset` from the catalog,
    applied to capacity and allocatable alike (never below 0); ``instance_types`` gives a type
    offsets of its own instead."""

    offsets: Mapping[str, Offset] = field(default_factory=dict)
    instance_types: Mapping[str, Mapping[str, Offset]] = field(default_factory=dict)

    def apply(self, node: Node) -> Node:
        """``node`` with the true capacity and allocatable of its instance type."""
        offsets = self.instance_types.get(node.labels.get(wk.INSTANCE_TYPE, ""), self.offsets)
        capacity, allocatable = dict(node.capacity.items()), dict(node.allocatable.items())
        for resource in sorted(offsets):
            if resource not in allocatable:
                continue
            delta = offsets[resource].delta(resource, allocatable[resource])
            allocatable[resource] = max(0, allocatable[resource] + delta)
            if resource in capacity:
                capacity[resource] = max(0, capacity[resource] + delta)
        return dataclasses.replace(node, capacity=Resources(capacity), allocatable=Resources(allocatable))


@dataclass(slots=True)
class BillingRecord:
    node: str
    instance_type: str
    zone: str
    capacity_type: str
    price_per_hour: float
    launched_at: float
    terminated_at: float | None = None

    def cost(self, until: float) -> float:
        end = until if self.terminated_at is None else min(self.terminated_at, until)
        return self.price_per_hour * max(0.0, end - self.launched_at) / 3600.0


@dataclass(frozen=True, slots=True)
class Interruption:
    node: str
    instance_type: str
    zone: str
    at: float


OnInterrupt = Callable[[str], object]  # called with the interrupted node's name
IceWindow = Insufficient | tuple[str, str, float, float]


class SimCloud(kwok.KwokCloudProvider):
    """A kwok provider with latency, ICE windows, spot interruptions and a billing log."""

    name = "sim"

    def __init__(
        self,
        kube: KubeAPI,
        clock: Clock,
        loop: Loop,
        *,
        types_for: kwok.TypesFor,
        node_class_for: Callable[[NodePool], NodeClass | None] | None = None,
        rng: random.Random,
        launch_latency: LaunchLatency = LaunchLatency(),
        insufficient: Iterable[IceWindow] = (),
        spot_interruption_rate_per_node_hour: float = 0.0,
        on_interrupt: OnInterrupt | None = None,
        true_allocatable: TrueAllocatable | None = None,
    ) -> None:
        super().__init__(kube, clock, types_for=types_for, node_class_for=node_class_for, loop=loop)
        self._sim_loop = loop
        self.rng = rng
        self.launch_latency = launch_latency
        self.insufficient = [w if isinstance(w, Insufficient) else Insufficient(*w) for w in insufficient]
        self.spot_rate = spot_interruption_rate_per_node_hour
        self.on_interrupt = on_interrupt
        self.true_allocatable = true_allocatable
        self._true: set[str] = set()  # providerIDs whose Node got its true capacity
        self.billing: list[BillingRecord] = []
        self.interruptions: list[Interruption] = []
        self.ice_errors = 0
        self._open: dict[str, BillingRecord] = {}  # node name -> record of a running instance
        self._plain_ids = itertools.count(1)
        self._plain_types: dict[str, InstanceType] | None = None

    # -- capacity ------------------------------------------------------------------------
    def _short(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        now = self._clock.now()
        return any(w.covers(instance_type, zone, capacity_type, now) for w in self.insufficient)

    def _active_ice(self, types: Sequence[InstanceType]) -> set[kwok.OfferingKey]:
        now = self._clock.now()
        out: set[kwok.OfferingKey] = set()
        windows = [w for w in self.insufficient if w.start <= now < w.end]
        if not windows:
            return out
        names = {w.instance_type for w in windows}
        for it in types:
            if it.name not in names:
                continue
            for o in it.offerings:
                if self._short(it.name, o.zone, o.capacity_type):
                    out.add((it.name, o.zone, o.capacity_type))
        return out

    # -- CloudProvider -------------------------------------------------------------------
    def create(self, claim: NodeClaim) -> NodeClaim:
        pool = self._pool_for(claim)
        self.ice = self._active_ice(self._types(pool, self._node_class_for(pool)))
        self.registration_delay = self.launch_latency.sample(self.rng)
        try:
            hydrated = super().create(claim)
        except errors.InsufficientCapacity:
            self.ice_errors += 1
            raise
        node = hydrated.provider_id[len(kwok.PROVIDER_PREFIX) :]
        if self._batch is None:
            self._written_at_once(hydrated)
        it_name = hydrated.labels.get(wk.INSTANCE_TYPE, "")
        zone = hydrated.labels.get(wk.ZONE, "")
        capacity_type = hydrated.labels.get(wk.CAPACITY_TYPE, "")
        types = self._types_for(pool, self._node_class_for(pool))
        offering = _offering(types, it_name, zone, capacity_type, available_only=False)
        self._bill(node, it_name, zone, capacity_type, offering.price if offering is not None else 0.0)
        return hydrated

    def create_batch(self, claims: Sequence[NodeClaim]) -> list[NodeClaim | errors.CloudError]:
        results = super().create_batch(claims)
        for result in results:
            if isinstance(result, NodeClaim):
                self._written_at_once(result)
        return results

    def _written_at_once(self, hydrated: NodeClaim) -> None:
        """A Node written without a registration delay gets its true capacity now (a delayed one
        gets it in ``_write``; an adopted one has it already)."""
        provider_id = hydrated.provider_id
        if self.true_allocatable is None or provider_id in self._pending or provider_id in self._true:
            return
        self._true.add(provider_id)
        node = self.true_allocatable.apply(
            Node("", labels=hydrated.labels, capacity=hydrated.capacity, allocatable=hydrated.allocatable)
        )
        status = {
            "capacity": encode.resources(node.capacity),
            "allocatable": encode.resources(node.allocatable),
        }
        with contextlib.suppress(errors.NotFound):
            self._kube.patch("Node", provider_id[len(kwok.PROVIDER_PREFIX) :], {"status": status})

    def _write(self, node: Node) -> None:
        if self.true_allocatable is not None:
            self._true.add(node.provider_id)
            node = self.true_allocatable.apply(node)
        super()._write(node)

    def delete(self, claim: NodeClaim) -> None:
        try:
            super().delete(claim)
        finally:  # billing stops whether the instance was just deleted or was already gone
            if claim.provider_id.startswith(kwok.PROVIDER_PREFIX):
                self._stop(claim.provider_id[len(kwok.PROVIDER_PREFIX) :])

    # -- plain instances (the Cluster Autoscaler model's ASGs) ---------------------------
    def launch_node(
        self,
        *,
        instance_type: str,
        zone: str,
        capacity_type: str,
        labels: Mapping[str, str],
        taints: Sequence[Taint],
        name_prefix: str,
        extra_delay: float = 0.0,
    ) -> str:
        """Launch one instance; its Node appears after the launch latency (+ ``extra_delay``).

        Raises ``InsufficientCapacity`` inside an ICE window or when the type has no available
        offering of that zone and capacity type. Billing starts now. Returns the node name.
        """
        it = self._by_name().get(instance_type)
        if it is None:
            raise errors.InsufficientCapacity(f"unknown instance type {instance_type}")
        offering = _offering((it,), instance_type, zone, capacity_type, available_only=True)
        if offering is None or self._short(instance_type, zone, capacity_type):
            self.ice_errors += 1
            raise errors.InsufficientCapacity(
                f"insufficient capacity for {instance_type} in {zone} ({capacity_type})",
                offerings=((instance_type, zone, capacity_type),),
            )
        name = f"{name_prefix}-{next(self._plain_ids):05d}"
        node_labels = {
            **_base_labels(it),
            wk.INSTANCE_TYPE: instance_type,
            wk.ZONE: zone,
            wk.HOSTNAME: name,
            CAPACITY_LABEL: "SPOT" if capacity_type == wk.CAPACITY_TYPE_SPOT else "ON_DEMAND",
            **labels,
        }
        node = Node(
            name=name,
            labels=node_labels,
            taints=tuple(dict.fromkeys(taints)),
            capacity=it.capacity,
            allocatable=it.allocatable,
            provider_id=kwok.PROVIDER_PREFIX + name,
            conditions=(Condition("Ready", "True", reason="KubeletReady"),),
        )
        delay = max(0.0, self.launch_latency.sample(self.rng) + extra_delay)
        self._bill(name, instance_type, zone, capacity_type, offering.price)
        self._sim_loop.call_later(delay, lambda: self._appear(node), name=f"sim:{name}")
        return name

    def terminate_node(self, name: str) -> None:
        """Terminate a plain instance: billing stops, its Node (if any) is deleted."""
        self._stop(name)
        with contextlib.suppress(errors.NotFound):
            self._kube.delete("Node", name)

    def _appear(self, node: Node) -> None:
        if node.name in self._open:
            self._write(node)

    def _by_name(self) -> dict[str, InstanceType]:
        """The catalog without a NodeClass (EKS defaults), by instance-type name."""
        if self._plain_types is None:
            self._plain_types = {it.name: it for it in self._types_for(NodePool(name=""), None)}
        return self._plain_types

    # -- billing -------------------------------------------------------------------------
    def _bill(self, node: str, instance_type: str, zone: str, capacity_type: str, price: float) -> None:
        now = self._clock.now()
        record = BillingRecord(node, instance_type, zone, capacity_type, price, now)
        self.billing.append(record)
        self._open[node] = record
        if capacity_type == wk.CAPACITY_TYPE_SPOT and self.spot_rate > 0:
            after = self.rng.expovariate(self.spot_rate / 3600.0)
            self._sim_loop.call_later(after, lambda: self.interrupt(node), name=f"sim:interrupt:{node}")

    def _stop(self, node: str) -> None:
        record = self._open.pop(node, None)
        if record is not None:
            record.terminated_at = self._clock.now()

    def cost(self, until: float) -> float:
        """USD billed up to ``until`` (per second: price x running time)."""
        return sum(r.cost(until) for r in self.billing if r.launched_at < until)

    def running(self) -> list[BillingRecord]:
        return [self._open[k] for k in sorted(self._open)]

    # -- spot interruptions --------------------------------------------------------------
    def interrupt(self, node: str) -> bool:
        """Reclaim a running instance now (a spot interruption); False when it is already gone."""
        record = self._open.get(node)
        if record is None:
            return False
        now = self._clock.now()
        self._stop(node)
        self.interruptions.append(Interruption(node, record.instance_type, record.zone, now))
        provider_id = kwok.PROVIDER_PREFIX + node
        self._pending.pop(provider_id, None)
        self._terminated.add(provider_id)
        with contextlib.suppress(errors.NotFound):
            not_ready = {"type": "Ready", "status": "False", "reason": "NodeStatusUnknown"}
            self._kube.patch("Node", node, {"status": {"conditions": [not_ready]}})
            self._kube.delete("Node", node)
        if self.on_interrupt is not None:
            self.on_interrupt(node)
        return True


def _offering(
    types: Sequence[InstanceType], instance_type: str, zone: str, capacity_type: str, *, available_only: bool
) -> Offering | None:
    for it in types:
        if it.name == instance_type:
            for o in it.offerings:
                if (
                    o.zone == zone
                    and o.capacity_type == capacity_type
                    and (o.available or not available_only)
                ):
                    return o
    return None


def _base_labels(it: InstanceType) -> dict[str, str]:
    """arch, os and region of an instance type (what a kubelet on it reports)."""
    out: dict[str, str] = {}
    for key in (wk.ARCH, wk.OS, wk.REGION):
        req = it.requirements.get(key)
        if req is not None and not req.complement and req.values:
            out[key] = sorted(req.values)[0]
    return out


def _conforms(cloud: SimCloud) -> CloudProvider:
    """mypy checks here that the simulated cloud satisfies the port."""
    return cloud
