"""The AWS CloudProvider: NodeClaims become EC2 instances (Karpenter's ``pkg/cloudprovider``).

``instance_types(pool)`` is the discovered catalog of the pool's EC2NodeClass, or nothing while the
NodeClass is missing, deleting or not ``Ready`` for its current generation (so provisioning never
plans on it). ``create``/``create_batch`` launch as upstream does (``docs/upstream-aws.md`` §4):

1. the claim's instance-type options filtered and truncated to the 60 cheapest, and the capacity
   type (reserved, else spot, else on-demand) as upstream (:mod:`.candidates`);
2. per zone the NodeClass subnet with the most free addresses, as upstream predicts them
   (:mod:`.subnets`);
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
from karpy.providers.aws import candidates as candidates_mod
from karpy.providers.aws import drift, instances, userdata
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
from karpy.providers.aws.subnets import ZonalSubnets
from karpy.providers.aws.unavailable import UnavailableOfferings
from karpy.state.cluster import Cluster

__all__ = ["AWSCloudProvider"]

LIST_TTL = (
    30.0  # a drift check of an instance not described yet lists the cluster's instances at most this often
)
NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
RESERVATION_LABEL = "karpenter.k8s.aws/capacity-reservation-id"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
INSTANCE_PROFILE_ANNOTATION = "karpenter.k8s.aws/instance-profile-name"

log = logging.getLogger("karpy.aws.provider")


@dataclass(frozen=True, slots=True)
class _Plan:
    """One claim's launch, ready for CreateFleet."""

    claim: NodeClaim
    node_class: EC2NodeClass
    request: FleetRequest
    types: dict[str, InstanceType]
    min_pods: int
    charged: tuple[str, ...]  # subnets whose free addresses this launch is charged until it returns


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
        self.subnets = ZonalSubnets(ec2, clock=clock)
        self.fleet = Fleet(
            ec2,
            unavailable=unavailable,
            metrics=metrics,
            on_template_gone=launch_templates.forget,
            on_subnet_full=self.subnets.full,
        )
        self._described: dict[str, instances.Instance] = {}  # instance id -> last description
        self._listed_at = -LIST_TTL
        # per NodeClass name: its types by name, and its launch templates by AMI group, each for the
        # objects they were made from (a changed NodeClass or type list starts afresh)
        self._names_memo: dict[str, tuple[tuple[InstanceType, ...], dict[str, InstanceType]]] = {}
        self._template_memo: dict[
            str, tuple[EC2NodeClass, dict[tuple[Any, ...], tuple[str, LaunchTemplateSpec]]]
        ] = {}

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
                kept = outcome.subnet_id if isinstance(outcome, LaunchedInstance) else ""
                for subnet_id in plan.charged:
                    if subnet_id != kept:
                        self.subnets.charge(subnet_id, -plan.min_pods)  # not used: its addresses come back
                if isinstance(outcome, LaunchedInstance):
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
        offered = self._types.list(nc)
        types = candidates_mod.candidates(reqs, claim.requests, offered, by_name=self._by_name(nc, offered))
        if not types:
            raise model_errors.InsufficientCapacity(
                f"NodeClaim {claim.name}: all requested instance types were unavailable during launch"
            )
        capacity_type = candidates_mod.capacity_type(reqs, types)
        subnets = self.subnets.choose(nc)
        if not subnets:
            raise model_errors.InsufficientCapacity(
                f"NodeClaim {claim.name}: no subnet of EC2NodeClass {nc.name} has free addresses left"
            )
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
            zones = ", ".join(sorted(subnets))
            raise model_errors.InsufficientCapacity(
                f"NodeClaim {claim.name}: no {capacity_type} offering with an AMI in a zone whose subnet "
                f"has free addresses ({zones})"
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
        # upstream's in-flight IP prediction: each zonal subnet of the request is charged the fewest
        # pods a candidate type runs until the launch says which one was used (the others get them back);
        # the launched one stays charged until the next DescribeSubnets
        predicted = min(pods) if pods else 0
        charged = tuple(sorted({o.subnet_id for o in overrides}))
        for subnet_id in charged:
            self.subnets.charge(subnet_id, predicted)
        return _Plan(claim, nc, request, by_name, predicted, charged)

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

    def _by_name(self, nc: EC2NodeClass, offered: tuple[InstanceType, ...]) -> dict[str, InstanceType]:
        held = self._names_memo.get(nc.name)
        if held is None or held[0] is not offered:
            held = (offered, {it.name: it for it in offered})
            self._names_memo[nc.name] = held
        return held[1]

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
        """The launch template for ``it`` (its AMI group's); rendered once per distinct group."""
        pods = it.capacity.get(PODS)
        reserved = self._kube_reserved(it.name, nc)
        key = (
            claim.node_pool,
            tuple(sorted(claim.labels.items())),
            claim.taints,
            claim.startup_taints,
            capacity_type,
            ami.id,
            pods,
            reservation,
            info,
            tuple(sorted(reserved.items())),
        )
        memo = self._templates_for(nc)
        known = memo.get(key)
        if known is not None:
            return self.launch_templates.use(*known)
        spec = self._template_spec(claim, nc, it, ami, info, reservation, capacity_type, reserved)
        name = self.launch_templates.ensure(spec)
        memo[key] = (name, spec)
        return name

    def _templates_for(self, nc: EC2NodeClass) -> dict[tuple[Any, ...], tuple[str, LaunchTemplateSpec]]:
        """Launch templates by group for this NodeClass object (a changed NodeClass starts afresh)."""
        held = self._template_memo.get(nc.name)
        if held is None or held[0] is not nc:
            held = (nc, {})
            self._template_memo[nc.name] = held
        return held[1]

    def _kube_reserved(self, name: str, nc: EC2NodeClass) -> Resources:
        """The kube-reserved karpy predicted for type ``name`` (passed to the kubelet, so the node's
        allocatable is the planned one); empty for a type without a known shape."""
        shape = self._types.shape(name)
        if shape is None:
            return Resources()
        return capacity_mod.kube_reserved(
            shape,
            nc,
            vm_memory_overhead_percent=self.settings.vm_memory_overhead_percent,
            reserved_enis=self.settings.reserved_enis,
        )

    def _template_spec(
        self,
        claim: NodeClaim,
        nc: EC2NodeClass,
        it: InstanceType,
        ami: AMI,
        info: ClusterInfo,
        reservation: str,
        capacity_type: str,
        reserved: Resources,
    ) -> LaunchTemplateSpec:
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
        return spec

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
        self._listed_at = self._clock.now()
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
            # one DescribeInstances of the cluster's instances serves many fresh claims
            if self._clock.now() - self._listed_at >= LIST_TTL:
                try:
                    self.list()
                except model_errors.CloudError as exc:
                    log.warning("listing instances for drift failed: %s", exc)
                instance = self._described.get(parsed[1])
            if instance is None:
                try:
                    instance = self._instance(claim.provider_id)
                except model_errors.CloudError:
                    instance = None
        types = self._by_name(nc, self._types.list(nc))

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
