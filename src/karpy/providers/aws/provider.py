"""The AWS CloudProvider: NodeClaims become EC2 instances (Karpenter's ``pkg/cloudprovider``).

``instance_types(pool)`` is the discovered catalog of the pool's EC2NodeClass, or nothing while the
NodeClass is missing, deleting or not ``Ready`` for its current generation (so provisioning never
plans on it). ``create``/``create_batch`` launch as upstream does (``docs/upstream-aws.md`` §4):

1. the claim's instance-type options that fit its requests and have an available compatible
   offering, exotic types (GPU, accelerators, metal) dropped unless nothing else is left, spot
   offerings dearer than the cheapest on-demand one dropped when both are allowed, the 60 cheapest
   kept; the capacity type is reserved, else spot, else on-demand (the first the claim allows);
2. per zone the NodeClass subnet with the most free IPs (DescribeSubnets, cached 1 min, minus what
   this process just launched into it);
3. the types grouped by (AMI, max pods, kube-reserved, reservation) into launch templates (user data
   rendered per AMI family, :mod:`.userdata`; templates content-addressed, :mod:`.launchtemplates`);
4. one CreateFleet ``instant`` request per claim, identical ones batched (:mod:`.fleet`); capacity
   errors mark offerings unavailable for 3 minutes and the claim is tried once more on what is left
   before it fails with InsufficientCapacity (the lifecycle then deletes it and the pods are
   provisioned again).

The hydrated claim gets providerID ``aws:///<zone>/<i-...>``, the image, labels, capacity and
allocatable of the type, and the NodeClass hash annotations (drift). ``delete`` terminates
(idempotent: an instance already gone is NodeClaimNotFound, which ends termination); ``list`` is
every live instance tagged for this cluster (garbage collection); ``is_drifted`` checks
:mod:`.drift` against a DescribeInstances of the claim's instance.

Built by the operator (``--provider aws``) with the state cluster (NodeClasses and NodePools are
read from it, not from the API server).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.core import capacity as capacity_mod
from karpy.core.scheduling.launch import node_labels
from karpy.model import errors as model_errors
from karpy.model import labels, quantity
from karpy.model.catalog import InstanceType, Offering
from karpy.model.nodeclass import AMI, EC2NodeClass
from karpy.model.objects import NodeClaim, NodePool
from karpy.model.requirements import Requirements
from karpy.model.resources import PODS, Resources
from karpy.ports import Clock, CloudProvider
from karpy.providers.aws import amis as amis_mod
from karpy.providers.aws import drift, errors, instances, userdata
from karpy.providers.aws.cluster import ClusterInfo
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.fleet import Fleet, FleetRequest, LaunchedInstance, Override
from karpy.providers.aws.instancetypes import InstanceTypeProvider
from karpy.providers.aws.launchtemplates import (
    MANAGED_BY_TAG,
    LaunchTemplates,
    LaunchTemplateSpec,
    default_block_devices,
)
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.unavailable import UnavailableOfferings
from karpy.state.cluster import Cluster

__all__ = ["MAX_INSTANCE_TYPES", "AWSCloudProvider"]

MAX_INSTANCE_TYPES = 60  # upstream truncates a launch to the 60 cheapest types
SUBNET_TTL = 60.0
NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
RESERVATION_LABEL = "karpenter.k8s.aws/capacity-reservation-id"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
INSTANCE_PROFILE_ANNOTATION = "karpenter.k8s.aws/instance-profile-name"
_GPU_LABELS = ("karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-accelerator-count")
_CT_ORDER = (labels.CAPACITY_TYPE_RESERVED, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND)

log = logging.getLogger("karpy.aws.provider")


@dataclass(frozen=True, slots=True)
class _Plan:
    """One claim's launch, ready for CreateFleet."""

    claim: NodeClaim
    node_class: EC2NodeClass
    request: FleetRequest
    types: dict[str, InstanceType]
    min_pods: int


class AWSCloudProvider:
    name = "aws"

    def __init__(
        self,
        ec2: Any,
        *,
        cluster: Cluster,
        settings: AWSSettings,
        cluster_info: Callable[[], ClusterInfo],
        instance_types: InstanceTypeProvider,
        unavailable: UnavailableOfferings,
        launch_templates: LaunchTemplates,
        metrics: AWSMetrics,
        clock: Clock,
    ) -> None:
        self._ec2 = ec2
        self._cluster = cluster
        self.settings = settings
        self._cluster_info = cluster_info
        self._types = instance_types
        self._unavailable = unavailable
        self.launch_templates = launch_templates
        self._metrics = metrics
        self._clock = clock
        self.fleet = Fleet(
            ec2,
            unavailable=unavailable,
            metrics=metrics,
            on_template_gone=launch_templates.forget,
            on_subnet_full=self._subnet_full,
        )
        self._subnet_ips: dict[str, int] = {}
        self._subnets_at = -SUBNET_TTL
        self._described: dict[str, instances.Instance] = {}  # instance id -> last description

    # -- node classes and types ----------------------------------------------------------
    def node_class(self, ref_name: str) -> EC2NodeClass | None:
        found = self._cluster.node_classes.get(("EC2NodeClass", ref_name))
        return found if isinstance(found, EC2NodeClass) else None

    def _node_class_of(self, pool_or_claim: NodePool | NodeClaim) -> EC2NodeClass | None:
        ref = pool_or_claim.node_class_ref
        if ref is None or ref.kind != "EC2NodeClass":
            return None
        return self.node_class(ref.name)

    def instance_types(self, pool: NodePool) -> tuple[InstanceType, ...]:
        nc = self._node_class_of(pool)
        if nc is None or nc.deleting or not nc.ready():
            return ()
        return self._types.list(nc)

    # -- create ----------------------------------------------------------------------------
    def create(self, claim: NodeClaim) -> NodeClaim:
        result = self.create_batch([claim])[0]
        if isinstance(result, model_errors.CloudError):
            raise result
        return result

    def create_batch(self, claims: Sequence[NodeClaim]) -> list[NodeClaim | model_errors.CloudError]:
        """Launch ``claims`` together (identical launches share a CreateFleet); one result each."""
        results: list[NodeClaim | model_errors.CloudError | None] = [None] * len(claims)
        pending = list(range(len(claims)))
        for attempt in range(2):  # the second attempt runs on the offerings the first left available
            plans: list[tuple[int, _Plan]] = []
            for index in pending:
                try:
                    plans.append((index, self._plan(claims[index])))
                except model_errors.CloudError as exc:
                    results[index] = exc
            launched = self.fleet.launch([plan.request for _, plan in plans])
            pending = []
            for (index, plan), outcome in zip(plans, launched, strict=True):
                if isinstance(outcome, LaunchedInstance):
                    self._spent(outcome.subnet_id, plan.min_pods)
                    results[index] = self._hydrate(plan, outcome)
                elif isinstance(outcome, model_errors.InsufficientCapacity) and attempt == 0:
                    pending.append(index)
                else:
                    results[index] = outcome
            if not pending:
                break
        return [r if r is not None else model_errors.CloudError("not launched") for r in results]

    def _plan(self, claim: NodeClaim) -> _Plan:
        nc = self._node_class_of(claim)
        if nc is None:
            ref = claim.node_class_ref
            raise model_errors.InsufficientCapacity(
                f"NodeClaim {claim.name}: EC2NodeClass {ref.name if ref else '(none)'!r} not found"
            )
        if nc.deleting or not nc.ready():
            raise model_errors.NodeClassNotReady(
                f"EC2NodeClass {nc.name} is not Ready for generation {nc.generation}"
            )
        info = self._cluster_info()
        reqs = Requirements(claim.requirements)
        types = self._candidates(claim, reqs, self._types.list(nc))
        if not types:
            raise model_errors.InsufficientCapacity(
                f"NodeClaim {claim.name}: all requested instance types were unavailable during launch"
            )
        capacity_type = self._capacity_type(reqs, types)
        subnets = self._zonal_subnets(nc)
        if not subnets:
            raise model_errors.NodeClassNotReady(f"EC2NodeClass {nc.name}: no subnet with free addresses")
        overrides: list[Override] = []
        by_name: dict[str, InstanceType] = {}
        pods: list[int] = []
        for it in types:
            ami = self._ami_for(nc, it)
            if ami is None:
                continue
            offerings = [
                o
                for o in it.offerings
                if o.available
                and o.capacity_type == capacity_type
                and o.compatible(reqs)
                and o.zone in subnets
            ]
            for reservation, group in _by_reservation(offerings).items():
                template = self._template(claim, nc, it, ami, info, reservation, capacity_type)
                for o in group:
                    overrides.append(Override(template, it.name, o.zone, subnets[o.zone], ami.id, o.price))
            if offerings:
                by_name[it.name] = it
                pods.append(it.capacity.get(PODS))
        if not overrides:
            raise model_errors.InsufficientCapacity(
                f"NodeClaim {claim.name}: no {capacity_type} offering with an AMI and a subnet"
            )
        tags = self._tags(nc, claim)
        capacity_block = any(
            cr.reservation_type == "capacity-block"
            for cr in nc.status.capacity_reservations
            if capacity_type == labels.CAPACITY_TYPE_RESERVED
        )
        request = FleetRequest(
            capacity_type=capacity_type,
            overrides=tuple(sorted(overrides, key=lambda o: (o.launch_template, o.instance_type, o.zone))),
            tags=tuple(sorted(tags.items())),
            context=nc.context,
            capacity_block=capacity_block,
        )
        return _Plan(claim, nc, request, by_name, min(pods) if pods else 0)

    def _tags(self, nc: EC2NodeClass, claim: NodeClaim) -> dict[str, str]:
        """The tags of everything a launch creates (the controller policy's conditions need them)."""
        return {
            **nc.tags,
            f"kubernetes.io/cluster/{self.settings.cluster_name}": "owned",
            "eks:eks-cluster-name": self.settings.cluster_name,
            labels.NODEPOOL: claim.node_pool,
            NODECLASS_LABEL: nc.name,
            MANAGED_BY_TAG[0]: MANAGED_BY_TAG[1],
        }

    def _candidates(
        self, claim: NodeClaim, reqs: Requirements, offered: tuple[InstanceType, ...]
    ) -> list[InstanceType]:
        """The claim's types that can launch it, filtered and truncated as upstream."""
        fits: list[tuple[float, InstanceType]] = []
        for it in offered:
            if not it.requirements.overlaps(reqs) or not claim.requests.fits(it.allocatable):
                continue
            cheapest = it.cheapest_offering(reqs)
            if cheapest is not None:
                fits.append((cheapest.price, it))
        min_values = reqs.has_min_values()
        if not min_values:
            ordinary = [(p, it) for p, it in fits if not _exotic(it)]
            fits = ordinary or fits
            fits = self._spot_no_dearer_than_on_demand(reqs, fits)
        fits.sort(key=lambda pair: (pair[0], pair[1].name))
        return [it for _, it in fits[:MAX_INSTANCE_TYPES]]

    def _spot_no_dearer_than_on_demand(
        self, reqs: Requirements, fits: list[tuple[float, InstanceType]]
    ) -> list[tuple[float, InstanceType]]:
        ct = reqs.get(labels.CAPACITY_TYPE)
        both = ct is None or (ct.has(labels.CAPACITY_TYPE_SPOT) and ct.has(labels.CAPACITY_TYPE_ON_DEMAND))
        if not both:
            return fits
        on_demand = [
            o.price
            for _, it in fits
            for o in it.offerings
            if o.available and o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND and o.compatible(reqs)
        ]
        if not on_demand:
            return fits
        ceiling = min(on_demand)
        out: list[tuple[float, InstanceType]] = []
        for price, it in fits:
            kept = tuple(
                o
                for o in it.offerings
                if o.capacity_type != labels.CAPACITY_TYPE_SPOT or o.price <= ceiling or not o.available
            )
            if len(kept) != len(it.offerings):
                it = dataclasses.replace(it, offerings=kept)
            if it.cheapest_offering(reqs) is not None:
                out.append((price, it))
        return out

    @staticmethod
    def _capacity_type(reqs: Requirements, types: Sequence[InstanceType]) -> str:
        for ct in _CT_ORDER:
            for it in types:
                if any(o.available and o.capacity_type == ct and o.compatible(reqs) for o in it.offerings):
                    return ct
        return labels.CAPACITY_TYPE_ON_DEMAND

    def _ami_for(self, nc: EC2NodeClass, it: InstanceType) -> AMI | None:
        found = amis_mod.amis_for(nc.status.amis, it.requirements)
        return found[0] if found else None

    def _template(
        self,
        claim: NodeClaim,
        nc: EC2NodeClass,
        it: InstanceType,
        ami: AMI,
        info: ClusterInfo,
        reservation: str,
        capacity_type: str,
    ) -> str:
        shape = self._types.shape(it.name)
        kube_reserved: dict[str, str] = {}
        if shape is not None:
            reserved = capacity_mod.kube_reserved(
                shape,
                nc,
                vm_memory_overhead_percent=self.settings.vm_memory_overhead_percent,
                reserved_enis=self.settings.reserved_enis,
            )
            kube_reserved = _quantities(reserved)
        options = userdata.BootstrapOptions(
            cluster=info,
            kubelet=nc.kubelet,
            max_pods=it.capacity.get(PODS) or None,
            taints=(*claim.taints, *claim.startup_taints),
            labels={**claim.labels, labels.CAPACITY_TYPE: capacity_type, labels.NODEPOOL: claim.node_pool},
            instance_store_policy=nc.instance_store_policy,
            kube_reserved=kube_reserved,
        )
        try:
            text = userdata.render(nc.ami_family, nc.user_data, options)
        except userdata.UserDataError as exc:
            raise model_errors.NodeClassNotReady(f"EC2NodeClass {nc.name}: spec.userData: {exc}") from None
        spec = LaunchTemplateSpec(
            image_id=ami.id,
            user_data=text,
            security_group_ids=tuple(sorted(g.id for g in nc.status.security_groups)),
            instance_profile=nc.status.instance_profile,
            block_devices=nc.block_device_mappings or default_block_devices(nc.ami_family),
            metadata_options=nc.metadata_options,
            detailed_monitoring=bool(nc.detailed_monitoring),
            associate_public_ip_address=nc.associate_public_ip_address,
            capacity_reservation_id=reservation,
            tags=tuple(sorted(self._tags(nc, claim).items())),
            node_class=nc.name,
        )
        return self.launch_templates.ensure(spec)

    # -- subnets ---------------------------------------------------------------------------
    def _refresh_subnets(self, ids: list[str]) -> None:
        try:
            found = errors.pages(self._ec2, "describe_subnets", "Subnets", SubnetIds=ids)
        except errors.AWSError as exc:
            log.warning("DescribeSubnets failed (%s); using the last known free addresses", exc)
            for subnet_id in ids:
                self._subnet_ips.setdefault(subnet_id, 1)
            return
        for subnet in found:
            self._subnet_ips[str(subnet["SubnetId"])] = int(subnet.get("AvailableIpAddressCount") or 0)
        self._subnets_at = self._clock.now()

    def _zonal_subnets(self, nc: EC2NodeClass) -> dict[str, str]:
        """zone -> the NodeClass subnet there with the most free IPs (ties: the lower id)."""
        ids = sorted({s.id for s in nc.status.subnets})
        if self._clock.now() - self._subnets_at >= SUBNET_TTL or any(i not in self._subnet_ips for i in ids):
            self._refresh_subnets(ids)
        best: dict[str, tuple[int, str]] = {}
        for subnet in nc.status.subnets:
            ips = self._subnet_ips.get(subnet.id, 0)
            if ips <= 0:
                continue
            known = best.get(subnet.zone)
            if known is None or (-ips, subnet.id) < (-known[0], known[1]):
                best[subnet.zone] = (ips, subnet.id)
        return {zone: subnet_id for zone, (_, subnet_id) in best.items()}

    def _spent(self, subnet_id: str, addresses: int) -> None:
        if subnet_id in self._subnet_ips:
            self._subnet_ips[subnet_id] = max(0, self._subnet_ips[subnet_id] - max(addresses, 1))

    def _subnet_full(self, subnet_id: str) -> None:
        self._subnet_ips[subnet_id] = 0

    # -- hydrate -----------------------------------------------------------------------------
    def _hydrate(self, plan: _Plan, launched: LaunchedInstance) -> NodeClaim:
        claim, nc = plan.claim, plan.node_class
        it = plan.types[launched.instance_type]
        offering = next(
            (
                o
                for o in it.offerings
                if o.zone == launched.zone and o.capacity_type == launched.capacity_type
            ),
            Offering(launched.zone, launched.capacity_type, 0.0),
        )
        reqs = Requirements(claim.requirements)
        node = node_labels(
            reqs,
            it,
            offering,
            template_labels=claim.labels,
            node_pool=claim.node_pool,
            hostname="",
            well_known=self._cluster.well_known,
        )
        node.pop(labels.HOSTNAME, None)
        node[NODECLASS_LABEL] = nc.name
        zone_id = next((s.zone_id for s in nc.status.subnets if s.zone == launched.zone and s.zone_id), "")
        if zone_id:
            node[ZONE_ID_LABEL] = zone_id
        if offering.reservation_id:
            node[RESERVATION_LABEL] = offering.reservation_id
        annotations = dict(claim.annotations)
        if drift.HASH_ANNOTATION in nc.annotations:
            annotations[drift.HASH_ANNOTATION] = nc.annotations[drift.HASH_ANNOTATION]
            annotations[drift.HASH_VERSION_ANNOTATION] = nc.annotations.get(
                drift.HASH_VERSION_ANNOTATION, drift.HASH_VERSION
            )
        if nc.status.instance_profile:
            annotations[INSTANCE_PROFILE_ANNOTATION] = nc.status.instance_profile
        log.info(
            "launched NodeClaim %s: %s %s %s in %s",
            claim.name,
            launched.instance_id,
            launched.instance_type,
            launched.capacity_type,
            launched.zone,
        )
        return dataclasses.replace(
            claim,
            provider_id=instances.provider_id(launched.zone, launched.instance_id),
            image_id=launched.image_id,
            labels=node,
            annotations=annotations,
            capacity=it.capacity,
            allocatable=it.allocatable,
        )

    # -- delete / get / list -------------------------------------------------------------------
    def _instance(self, provider_id: str) -> instances.Instance:
        parsed = instances.parse(provider_id)
        if parsed is None:
            raise model_errors.NodeClaimNotFound(f"{provider_id!r} is not an AWS providerID")
        found = instances.describe(self._ec2, [parsed[1]])
        if not found or found[0].state == "terminated":
            self._described.pop(parsed[1], None)
            raise model_errors.NodeClaimNotFound(f"instance {parsed[1]} not found")
        self._described[found[0].id] = found[0]
        return found[0]

    def delete(self, claim: NodeClaim) -> None:
        if not claim.provider_id:
            raise model_errors.NodeClaimNotFound(f"NodeClaim {claim.name} has no instance")
        instance = self._instance(claim.provider_id)
        instances.terminate(self._ec2, [instance.id])
        log.info("terminating instance %s of NodeClaim %s (%s)", instance.id, claim.name, instance.state)

    def get(self, provider_id: str) -> NodeClaim:
        return self._claim_of(self._instance(provider_id))

    def list(self) -> list[NodeClaim]:
        found = instances.list_instances(self._ec2, cluster=self.settings.cluster_name)
        self._described = {i.id: i for i in found}
        return [self._claim_of(i) for i in found]

    @staticmethod
    def _claim_of(instance: instances.Instance) -> NodeClaim:
        tags = instance.tags
        return NodeClaim(
            name=tags.get("karpenter.sh/nodeclaim", ""),
            node_pool=tags.get(labels.NODEPOOL, ""),
            labels={
                labels.INSTANCE_TYPE: instance.instance_type,
                labels.ZONE: instance.zone,
                labels.CAPACITY_TYPE: instance.capacity_type,
                **({labels.NODEPOOL: tags[labels.NODEPOOL]} if labels.NODEPOOL in tags else {}),
            },
            provider_id=instance.provider_id,
            image_id=instance.image_id,
            created=instance.launch_time,
        )

    # -- drift -------------------------------------------------------------------------------
    def is_drifted(self, claim: NodeClaim) -> str:
        nc = self._node_class_of(claim)
        if nc is None or not claim.provider_id:
            return ""
        parsed = instances.parse(claim.provider_id)
        instance = self._described.get(parsed[1]) if parsed else None
        if instance is None and parsed is not None:
            try:
                instance = self._instance(claim.provider_id)
            except model_errors.CloudError:
                instance = None
        types = {it.name: it for it in self._types.list(nc)}

        def amis_for_type(name: str) -> list[AMI]:
            it = types.get(name)
            return [] if it is None else amis_mod.amis_for(nc.status.amis, it.requirements)

        return drift.drift_reason(
            claim,
            nc,
            amis_for_type=amis_for_type,
            instance_security_groups=instance.security_groups if instance is not None else None,
            instance_subnet=instance.subnet_id if instance is not None else None,
        )


def _exotic(it: InstanceType) -> bool:
    return any(key in it.labels for key in _GPU_LABELS) or "metal" in it.name.split(".", 1)[-1]


def _by_reservation(offerings: list[Offering]) -> dict[str, list[Offering]]:
    out: dict[str, list[Offering]] = {}
    for o in offerings:
        out.setdefault(o.reservation_id, []).append(o)
    return out


def _quantities(resources: Resources) -> dict[str, str]:
    return {name: quantity.format_quantity(name, amount) for name, amount in sorted(resources.items())}


def _conforms(provider: AWSCloudProvider) -> CloudProvider:
    """mypy checks here that the AWS provider satisfies the port."""
    return provider
