"""The instance types an EC2NodeClass can launch, discovered from EC2 (Karpenter's instance-type provider).

:class:`InstanceTypeProvider` calls ``DescribeInstanceTypes`` (HVM, x86_64/arm64),
``DescribeInstanceTypeOfferings`` (availability zones) and ``DescribeAvailabilityZones`` (zone
ids) at start and every 12 h (``docs/upstream-aws.md`` §2), turns each answer into a
:class:`~karpy.core.capacity.Ec2Shape` exactly as the shipped data derives its fields
(:func:`shape_from_info`), and builds :class:`~karpy.model.catalog.InstanceType` values per
NodeClass with the one builder of :mod:`karpy.catalog.aws` (the operator passes that module in:
the provider layer may not import the catalog layer). Zones are the offering zones ∩ the zones
of the NodeClass's ``status.subnets``; prices come from the
:class:`~karpy.providers.aws.pricing.PricingProvider`; offerings in the unavailable-offerings
cache are unavailable; each active capacity reservation in ``status.capacityReservations`` adds a
``reserved`` offering priced on-demand / 10 000 000 (upstream: "free" yet ordered). Until the
first successful discovery the shipped catalog's shapes and offerings for the region stand in.

Built by the operator (``--provider aws``); :meth:`InstanceTypeProvider.list` is called by the
AWS cloud provider for ``instance_types`` and launches, :meth:`~InstanceTypeProvider.reconcile`
by the controller loop.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from karpy import settings as settings_mod
from karpy.controllers.result import Result
from karpy.core import capacity as capacity_mod
from karpy.model import labels as labels_mod
from karpy.model.catalog import InstanceType, Offering
from karpy.model.nodeclass import CapacityReservation, EC2NodeClass
from karpy.ports import Clock
from karpy.providers.aws import errors, sdk
from karpy.providers.aws import pricing as pricing_mod
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.pricing import PricingProvider
from karpy.providers.aws.unavailable import UnavailableOfferings

__all__ = [
    "ARCHITECTURES",
    "REFRESH_SECONDS",
    "RESERVED_PRICE_DIVISOR",
    "RETRY_SECONDS",
    "InstanceTypeProvider",
    "ShippedCatalog",
    "shape_from_info",
]

REFRESH_SECONDS = 12 * 3600.0
RETRY_SECONDS = 300.0
RESERVED_PRICE_DIVISOR = 10_000_000.0  # upstream: reserved capacity is "free" but keeps its order
ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}  # EC2 -> kubernetes.io/arch
_FILTERS = [
    {"Name": "supported-virtualization-type", "Values": ["hvm"]},
    {"Name": "processor-info.supported-architecture", "Values": list(ARCHITECTURES)},
]
_CATEGORY_GENERATION = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
_USAGE_CLASSES = (labels_mod.CAPACITY_TYPE_ON_DEMAND, labels_mod.CAPACITY_TYPE_SPOT)
_RESERVABLE_STATES = frozenset({"active", "expiring"})
_KIND = "instance_types"
_Reserved = dict[str, list[Offering]]  # instance type -> its reserved offerings


class ShippedCatalog(pricing_mod.ShippedPrices, Protocol):
    """What the AWS provider uses of :mod:`karpy.catalog.aws` (pricing's needs included): the
    operator passes that module, since the provider layer may not import the catalog layer."""

    def build_instance_types(
        self,
        shapes: Iterable[capacity_mod.Ec2Shape],
        *,
        region: str,
        zones: Sequence[tuple[str, str]],
        offered: Mapping[str, Collection[str]],
        price_of: Callable[[str, str, str], float | None],
        nodeclass: EC2NodeClass | None = ...,
        pricing: settings_mod.PricingSettings = ...,
        prices_override: Mapping[tuple[str, str, str], float] | None = ...,
        is_available: Callable[[str, str, str], bool] | None = ...,
        extra_offerings: Mapping[str, Sequence[Offering]] | None = ...,
    ) -> tuple[InstanceType, ...]: ...

    def shapes_by_name(self) -> Mapping[str, capacity_mod.Ec2Shape]: ...

    def regions(self) -> list[str]: ...

    def zones(self, region: str) -> tuple[tuple[str, str], ...]: ...

    def zone_offerings(self, region: str) -> Mapping[str, tuple[str, ...]]: ...


def _kebab(value: str | None) -> str | None:
    """Karpenter's ``lowerKabobCase``."""
    return None if value is None else value.replace(" ", "-").lower()


def _accelerator(info: Mapping[str, Any]) -> tuple[str | None, str | None, int | None, int | None]:
    """(name, manufacturer, count, neuron cores): a single Neuron device, else a single inference
    accelerator (only when there is no NeuronInfo), as upstream's labels and resources."""
    neuron = info.get("NeuronInfo")
    if neuron is not None:
        devices = neuron.get("NeuronDevices") or []
        cores = sum(d.get("Count", 0) * (d.get("CoreInfo") or {}).get("Count", 0) for d in devices)
        if len(devices) == 1:
            return _kebab(devices[0].get("Name")), "aws", devices[0].get("Count"), cores
        return None, None, None, cores if devices else None
    accelerators = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if len(accelerators) == 1:
        one = accelerators[0]
        return _kebab(one.get("Name")), _kebab(one.get("Manufacturer")), one.get("Count"), None
    return None, None, None, None


def _processor(info: Mapping[str, Any]) -> tuple[str | None, str | None, int]:
    """(kubernetes architecture, CPU manufacturer, sustained clock in MHz, 0 when unknown)."""
    proc = info.get("ProcessorInfo") or {}
    archs = proc.get("SupportedArchitectures") or []
    clock = proc.get("SustainedClockSpeedInGhz")
    return (
        next((ARCHITECTURES[a] for a in archs if a in ARCHITECTURES), None),
        _kebab(proc.get("Manufacturer")),
        round(float(clock) * 1000) if clock is not None else 0,
    )


def _karpenter_eligible(info: Mapping[str, Any]) -> bool:
    """HVM virtualisation and an architecture Karpenter labels."""
    archs = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    return "hvm" in (info.get("SupportedVirtualizationTypes") or ()) and any(
        a in ARCHITECTURES for a in archs
    )


def _gpu(info: Mapping[str, Any]) -> tuple[int | None, str | None, str | None, int | None]:
    """(count, name, manufacturer, memory MiB) of a single GPU kind, else all None."""
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    gpu = gpus[0] if len(gpus) == 1 else None
    if not gpu:
        return None, None, None, None
    memory = (gpu.get("MemoryInfo") or {}).get("SizeInMiB")
    return gpu.get("Count"), _kebab(gpu.get("Name")), _kebab(gpu.get("Manufacturer")), memory


def _network(info: Mapping[str, Any]) -> tuple[int | None, int | None, int | None, bool | None]:
    """(ENIs of the default network card, IPv4 addresses per ENI, EFA interfaces, encryption in transit)."""
    net = info.get("NetworkInfo") or {}
    card_index = net.get("DefaultNetworkCardIndex", 0)
    cards = [c for c in net.get("NetworkCards") or [] if c.get("NetworkCardIndex", 0) == card_index]
    max_enis = cards[0].get("MaximumNetworkInterfaces") if cards else net.get("MaximumNetworkInterfaces")
    efa_max = (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    return max_enis, net.get("Ipv4AddressesPerInterface"), efa_max, net.get("EncryptionInTransitSupported")


def _storage(info: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(EBS bandwidth in Mbps when EBS-optimized by default, local NVMe GB, instance storage GB)."""
    ebs = info.get("EbsInfo") or {}
    ebs_bandwidth = None
    if ebs.get("EbsOptimizedSupport") == "default":
        ebs_bandwidth = (ebs.get("EbsOptimizedInfo") or {}).get("MaximumBandwidthInMbps")
    store = info.get("InstanceStorageInfo")
    storage_gb = store.get("TotalSizeInGB") if store else None
    nvme = store is not None and store.get("NvmeSupport") not in (None, "unsupported")
    return ebs_bandwidth, storage_gb if nvme else None, storage_gb


def shape_from_info(info: Mapping[str, Any], shipped: capacity_mod.Ec2Shape | None) -> capacity_mod.Ec2Shape:
    """One DescribeInstanceTypes ``InstanceTypeInfo`` as an :class:`Ec2Shape`, each field derived
    as ``shared/data/aws/README.md`` states (the shipped data came from the same answers).

    ``pod_eni`` and ``network_bandwidth_mbps`` are not in the API (Karpenter generates them into
    its vpclimits and bandwidth tables): they come from ``shipped``, the shipped shape of the same
    name, when there is one.
    """
    name = info["InstanceType"]
    family, _, size = name.partition(".")
    match = _CATEGORY_GENERATION.match(name)
    kube_arch, cpu_manufacturer, cpu_clock_mhz = _processor(info)
    gpu_count, gpu_name, gpu_manufacturer, gpu_memory_mib = _gpu(info)
    acc_name, acc_manufacturer, acc_count, neuron_cores = _accelerator(info)
    max_enis, ipv4_per_eni, efa_max, encryption_in_transit = _network(info)
    ebs_bandwidth, local_nvme_gb, storage_gb = _storage(info)
    return capacity_mod.Ec2Shape(
        name=name,
        family=family,
        size=size,
        vcpu=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(info["MemoryInfo"]["SizeInMiB"]),
        category=match.group(1) if match else None,
        generation=int(match.group(3)) if match else None,
        kube_arch=kube_arch,
        cpu_manufacturer=cpu_manufacturer,
        cpu_clock_mhz=cpu_clock_mhz,
        gpu_count=gpu_count,
        gpu_name=gpu_name,
        gpu_manufacturer=gpu_manufacturer,
        gpu_memory_mib=gpu_memory_mib,
        accelerator_name=acc_name,
        accelerator_manufacturer=acc_manufacturer,
        accelerator_count=acc_count,
        neuron_cores=neuron_cores,
        max_enis=max_enis,
        ipv4_per_eni=ipv4_per_eni,
        pod_eni=shipped.pod_eni if shipped else None,
        efa_max=efa_max,
        network_bandwidth_mbps=shipped.network_bandwidth_mbps if shipped else None,
        ebs_bandwidth_mbps=ebs_bandwidth,
        local_nvme_gb=local_nvme_gb,
        instance_storage_gb=storage_gb,
        hypervisor=info.get("Hypervisor", ""),  # absent on bare metal: Karpenter labels ""
        bare_metal=info.get("BareMetal"),
        capacity_types=tuple(u for u in info.get("SupportedUsageClasses") or () if u in _USAGE_CLASSES),
        encryption_in_transit=encryption_in_transit,
        karpenter_eligible=_karpenter_eligible(info),
    )


def _frozen(value: Any) -> Any:
    """A hashable stand-in for ``value`` (dicts become sorted item tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class _Discovered:
    """One consistent answer of the three describe calls (or the shipped stand-in)."""

    shapes: tuple[capacity_mod.Ec2Shape, ...]  # sorted by name
    zones: tuple[tuple[str, str], ...]  # (name, zone id), sorted by name
    offered: Mapping[str, tuple[str, ...]]  # type -> zone names
    shipped: bool


class InstanceTypeProvider:
    """Discovered EC2 instance types and their offerings per EC2NodeClass."""

    name = "aws.instancetypes"

    def __init__(
        self,
        clients: sdk.Clients,
        *,
        region: str,
        pricing: PricingProvider,
        unavailable: UnavailableOfferings,
        settings: AWSSettings,
        clock: Clock,
        metrics: AWSMetrics,
        shipped: ShippedCatalog,
        pricing_settings: settings_mod.PricingSettings = settings_mod.PricingSettings(),
        prices_override: Mapping[tuple[str, str, str], float] | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        """``shipped`` is :mod:`karpy.catalog.aws`. ``pricing_settings`` brings the on-demand
        discount (Savings Plans) as in the shipped catalog; its memory overhead and reserved ENIs
        are replaced by ``settings``'. ``prices_override`` rows ``(region, type, capacity type)``
        replace offering prices exactly, as in the shipped catalog."""
        self._clients = clients
        self.region = region
        self._pricing = pricing
        self._unavailable = unavailable
        self._clock = clock
        self._metrics = metrics
        self._catalog = shipped
        self._log = log if log is not None else logging.getLogger("karpy.aws.instancetypes")
        self._price_settings = dataclasses.replace(
            pricing_settings,
            vm_memory_overhead_percent=settings.vm_memory_overhead_percent,
            reserved_enis=settings.reserved_enis,
        )
        self._prices_override = dict(prices_override or {})
        self._data = self._shipped_data()
        self._by_name = {s.name: s for s in self._data.shapes}
        self._generation = 0
        self._due = clock.now()
        self._cache: dict[Any, tuple[tuple[int, int, int], tuple[InstanceType, ...]]] = {}

    def _shipped_data(self) -> _Discovered:
        """The shipped catalog's shapes and zone offerings for the region (the builder drops the
        types Karpenter would not offer, exactly as for the shipped catalog)."""
        if self.region not in self._catalog.regions():
            self._log.warning("no shipped instance-type offerings for %s: none until discovery", self.region)
            return _Discovered(shapes=(), zones=(), offered={}, shipped=True)
        return _Discovered(
            shapes=tuple(sorted(self._catalog.shapes_by_name().values(), key=lambda s: s.name)),
            zones=self._catalog.zones(self.region),
            offered=self._catalog.zone_offerings(self.region),
            shipped=True,
        )

    @property
    def discovered(self) -> bool:
        """Whether the instance types come from EC2 (False: the shipped stand-in)."""
        return not self._data.shipped

    @property
    def generation(self) -> int:
        """Moves whenever a refresh changes the shapes, zones or zone offerings."""
        return self._generation

    # -- discovery -----------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Describe instance types, their zone offerings and the zones; True on success.

        On failure the last good data stay (the shipped catalog's before any success): one
        warning and ``karpy_aws_refresh_failures{kind="instance_types"}``.
        """
        ec2 = self._clients.ec2
        try:
            infos = errors.pages(ec2, "describe_instance_types", "InstanceTypes", Filters=_FILTERS)
            rows = errors.pages(
                ec2,
                "describe_instance_type_offerings",
                "InstanceTypeOfferings",
                LocationType="availability-zone",
            )
            azs = errors.call(ec2.describe_availability_zones).get("AvailabilityZones") or []
            if not infos or not rows:
                raise errors.AWSError(
                    "DescribeInstanceTypes", "NoInstanceTypes", "no instance types or offerings"
                )
        except errors.AWSError as exc:
            source = "the shipped catalog" if self._data.shipped else "the last discovered ones"
            self._log.warning(
                "instance-type discovery failed, keeping %s (retry in %.0f s): %s",
                source,
                RETRY_SECONDS,
                pricing_mod.brief(exc),
            )
            self._metrics.refresh_failures.labels(kind=_KIND).inc()
            return False
        known = self._catalog.shapes_by_name()
        shapes = sorted(
            (shape_from_info(i, known.get(i["InstanceType"])) for i in infos), key=lambda s: s.name
        )
        zone_ids = {z["ZoneName"]: z.get("ZoneId", "") for z in azs if z.get("ZoneName")}
        offered: dict[str, set[str]] = {}
        for row in rows:
            zone = row.get("Location", "")
            name = row.get("InstanceType", "")
            if name and zone in zone_ids:
                offered.setdefault(name, set()).add(zone)
        data = _Discovered(
            shapes=tuple(shapes),
            zones=tuple(sorted(zone_ids.items())),
            offered={name: tuple(sorted(zones)) for name, zones in offered.items()},
            shipped=False,
        )
        if data != self._data:
            self._data = data
            self._by_name = {s.name: s for s in data.shapes}
            self._generation += 1
            self._cache.clear()
            self._log.info("discovered %d instance types in %d zones", len(data.shapes), len(data.zones))
        self._metrics.refresh_last_success.labels(kind=_KIND).set(self._clock.now())
        return True

    def shape(self, name: str) -> capacity_mod.Ec2Shape | None:
        """The raw shape of ``name`` as last discovered (or shipped); None when unknown."""
        return self._by_name.get(name)

    # -- instance types ------------------------------------------------------------------------
    def list(self, node_class: EC2NodeClass | None) -> tuple[InstanceType, ...]:
        """The instance types ``node_class`` can launch, sorted by name.

        The same tuple object comes back while nothing that matters changed (the NodeClass's
        capacity-relevant fields, subnet zones and reservations, prices, unavailable offerings,
        discovery): callers may compare by identity.
        """
        subnet_zones = frozenset(s.zone for s in node_class.status.subnets) if node_class else frozenset()
        reservations = tuple(
            cr
            for cr in (node_class.status.capacity_reservations if node_class else ())
            if cr.state in _RESERVABLE_STATES
        )
        key = self._node_class_key(node_class, subnet_zones, reservations)
        versions = (self._pricing.version, self._unavailable.version(), self._generation)
        hit = self._cache.get(key)
        if hit is not None and hit[0] == versions:
            return hit[1]
        types = self._build(node_class, subnet_zones, reservations)
        if len(self._cache) >= 64:
            self._cache.clear()
        self._cache[key] = (versions, types)
        return types

    @staticmethod
    def _node_class_key(
        node_class: EC2NodeClass | None,
        subnet_zones: frozenset[str],
        reservations: tuple[CapacityReservation, ...],
    ) -> Any:
        """What of a NodeClass changes its instance types (capacity inputs, zones, reservations)."""
        if node_class is None:
            return None
        return (
            node_class.ami_family,
            _frozen(dataclasses.astuple(node_class.kubelet)),
            node_class.block_device_mappings,
            node_class.instance_store_policy,
            subnet_zones,
            reservations,
        )

    def _build(
        self,
        node_class: EC2NodeClass | None,
        subnet_zones: frozenset[str],
        reservations: Sequence[CapacityReservation],
    ) -> tuple[InstanceType, ...]:
        data = self._data
        zones = [z for z in data.zones if not subnet_zones or z[0] in subnet_zones]
        gone, gone_types = self._unavailable.current()
        pricing = self._pricing
        on_demand, spot = labels_mod.CAPACITY_TYPE_ON_DEMAND, labels_mod.CAPACITY_TYPE_SPOT

        def price_of(name: str, zone: str, capacity_type: str) -> float | None:
            if capacity_type == on_demand:
                return pricing.on_demand(name)
            return pricing.spot(name, zone) if capacity_type == spot else None

        def is_available(name: str, zone: str, capacity_type: str) -> bool:
            return capacity_type not in gone_types and (capacity_type, name, zone) not in gone

        return self._catalog.build_instance_types(
            data.shapes,
            region=self.region,
            zones=zones,
            offered=data.offered,
            price_of=price_of,
            nodeclass=node_class,
            pricing=self._price_settings,
            prices_override=self._prices_override,
            is_available=is_available,
            extra_offerings=self._reserved(reservations, is_available),
        )

    def _reserved(
        self, reservations: Sequence[CapacityReservation], is_available: Callable[[str, str, str], bool]
    ) -> _Reserved:
        """One ``reserved`` offering per capacity reservation, priced on-demand / 10 000 000 (0 when
        unpriced, still usable, as upstream); an expiring reservation's offering is unavailable."""
        reserved = labels_mod.CAPACITY_TYPE_RESERVED
        out: _Reserved = {}
        for cr in reservations:
            od = self._pricing.on_demand(cr.instance_type)
            ok = cr.state == "active" and is_available(cr.instance_type, cr.availability_zone, reserved)
            out.setdefault(cr.instance_type, []).append(
                Offering(
                    cr.availability_zone,
                    reserved,
                    0.0 if od is None else od / RESERVED_PRICE_DIVISOR,
                    ok,
                    reservation_id=cr.id,
                )
            )
        return out

    # -- controller ----------------------------------------------------------------------------
    def reconcile(self) -> Result:
        """Discover when due (at start, then every 12 h; 5 min after a failure); requeue for the next."""
        now = self._clock.now()
        if now >= self._due:
            ok = self.refresh()
            self._due = now + (REFRESH_SECONDS if ok else RETRY_SECONDS)
        return Result(requeue_after=max(self._due - now, 1.0))
