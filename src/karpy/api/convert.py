"""Validated schema objects → :mod:`karpy.model` values.

Pure functions, one per kind, called by :mod:`karpy.api.load` once an object has passed
validation (so they do not re-check input). Holds the Kubernetes arithmetic karpy
relies on: a pod's scheduling requests (init containers, sidecars, overhead, limits
as default requests), host ports, and the defaults of NodePool fields. Deployments
and ReplicaSets become :class:`Workload` values that :func:`expand` turns into
pending pods; namespaces become :class:`Namespace` values (the model has neither).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from karpy.api import apps_v1, common, core_v1, karpenter_v1, nodeclasses, policy_v1, rollout_guard
from karpy.api.storage_v1 import pod_volumes
from karpy.model import labels as labels_mod
from karpy.model import nodeclass, objects, requirements, resources, selectors, taints

__all__ = [
    "Namespace",
    "Workload",
    "daemonset",
    "ec2_node_class",
    "expand",
    "kwok_node_class",
    "namespace",
    "node",
    "node_claim",
    "node_pool",
    "pdb",
    "pod",
    "pod_requests",
    "pod_spec_fields",
    "workload",
]

DEFAULT_NAMESPACE = "default"

log = logging.getLogger("karpy.api")
_SIZING_WARNED: set[tuple[str, str]] = set()  # (NodePool, value) pairs already warned about


Namespace = objects.Namespace
Workload = objects.Workload


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "karpy:" + "/".join(parts)))


# --- small structs ---------------------------------------------------------------------


def label_selector(sel: common.LabelSelector | None) -> selectors.LabelSelector | None:
    """None stays None (selects nothing); ``{}`` selects everything."""
    if sel is None:
        return None
    return selectors.LabelSelector(
        tuple(sorted(sel.match_labels.items())),
        tuple(
            selectors.SelectorRequirement(e.key, e.operator, tuple(e.values)) for e in sel.match_expressions
        ),
    )


def taint(t: common.Taint) -> taints.Taint:
    return taints.Taint(t.key, t.effect, t.value)


def toleration(t: common.Toleration) -> taints.Toleration:
    return taints.Toleration(t.key, t.operator or "Equal", t.value, t.effect, t.toleration_seconds)


def requirement(
    r: common.NodeSelectorRequirement | common.NodeSelectorRequirementWithMinValues,
) -> requirements.Requirement:
    min_values = r.min_values if isinstance(r, common.NodeSelectorRequirementWithMinValues) else None
    return requirements.Requirement.of(r.key, r.operator, r.values, min_values)


def _node_selector_term(term: core_v1.NodeSelectorTerm) -> objects.NodeSelectorTerm:
    reqs = [requirement(r) for r in term.match_expressions]
    # matchFields can only name metadata.name; the node's hostname label stands in for it.
    reqs += [
        requirements.Requirement.of(labels_mod.HOSTNAME, f.operator, f.values) for f in term.match_fields
    ]
    return objects.NodeSelectorTerm(tuple(reqs))


def _affinity_term(term: core_v1.PodAffinityTerm) -> objects.PodAffinityTerm:
    return objects.PodAffinityTerm(
        topology_key=term.topology_key,
        selector=label_selector(term.label_selector),
        namespaces=tuple(term.namespaces),
        namespace_selector=label_selector(term.namespace_selector),
        match_label_keys=tuple(term.match_label_keys),
        mismatch_label_keys=tuple(term.mismatch_label_keys),
    )


def _spread(c: core_v1.TopologySpreadConstraint) -> objects.TopologySpreadConstraint:
    return objects.TopologySpreadConstraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        when_unsatisfiable=c.when_unsatisfiable,
        selector=label_selector(c.label_selector),
        min_domains=c.min_domains,
        node_affinity_policy=c.node_affinity_policy,
        node_taints_policy=c.node_taints_policy,
        match_label_keys=tuple(c.match_label_keys),
    )


def _owner(ref: common.OwnerReference) -> objects.OwnerRef:
    return objects.OwnerRef(ref.kind, ref.name, ref.api_version, ref.controller, ref.uid)


def _conditions(conds: Iterable[common.Condition]) -> tuple[objects.Condition, ...]:
    return tuple(
        objects.Condition(
            c.type, c.status, c.reason, c.message, c.last_transition_time, c.observed_generation
        )
        for c in conds
    )


def _limits(raw: dict[str, str]) -> dict[str, int]:
    """NodePool limits keep explicit zeros (``cpu: 0`` forbids launching)."""
    return {name: resources.amount(name, value) for name, value in raw.items()}


def _resources(raw: dict[str, str] | None) -> resources.Resources:
    return resources.Resources.parse(raw) if raw else resources.EMPTY


# --- pods ------------------------------------------------------------------------------


def _container_requests(c: core_v1.Container) -> resources.Resources:
    """Requests, with a limit standing in for a missing request (API-server defaulting)."""
    return resources.Resources.parse({**c.resources.limits, **c.resources.requests})


def pod_requests(spec: core_v1.PodSpec) -> resources.Resources:
    """What the scheduler reserves for a pod (no ``pods`` unit; the scheduler adds it).

    Per resource: max(sum of containers + sum of sidecars, max over init containers of
    the request plus the sidecars started before it), plus the pod overhead.
    """
    regular = resources.total(_container_requests(c) for c in spec.containers)
    sidecars = resources.EMPTY
    init_peak = resources.EMPTY
    for c in spec.init_containers:
        req = _container_requests(c)
        if c.restart_policy == "Always":
            sidecars = sidecars + req
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(req + sidecars)
    return (regular + sidecars).max(init_peak) + _resources(spec.overhead)


def _host_ports(spec: core_v1.PodSpec) -> tuple[objects.HostPort, ...]:
    running = [*spec.containers, *(c for c in spec.init_containers if c.restart_policy == "Always")]
    out: list[objects.HostPort] = []
    for c in running:
        for p in c.ports:
            port = p.host_port or (p.container_port if spec.host_network else 0)
            if port:
                out.append(objects.HostPort(port, p.protocol, p.host_ip))
    return tuple(out)


def pod_spec_fields(spec: core_v1.PodSpec) -> dict[str, Any]:
    """The :class:`~karpy.model.objects.Pod` fields that come from the pod spec alone (not ``nodeName``).

    Pods of one template share them, so :func:`karpy.api.load.parse_object` reuses them for pod
    watch events whose spec it has converted before.
    """
    aff = spec.affinity or core_v1.Affinity()
    node_aff = aff.node_affinity or core_v1.NodeAffinity()
    pod_aff = aff.pod_affinity or core_v1.PodAffinity()
    anti = aff.pod_anti_affinity or core_v1.PodAffinity()
    required = node_aff.required.node_selector_terms if node_aff.required else []
    return {
        "priority": spec.priority or 0,
        "requests": pod_requests(spec),
        "host_ports": _host_ports(spec),
        "node_selector": dict(spec.node_selector),
        "required_terms": tuple(_node_selector_term(t) for t in required),
        "preferred_terms": tuple(
            objects.WeightedTerm(p.weight, _node_selector_term(p.preference)) for p in node_aff.preferred
        ),
        "tolerations": tuple(toleration(t) for t in spec.tolerations),
        "spread": tuple(_spread(c) for c in spec.topology_spread_constraints),
        "affinity": tuple(_affinity_term(t) for t in pod_aff.required),
        "affinity_preferred": tuple(
            objects.WeightedPodAffinityTerm(w.weight, _affinity_term(w.pod_affinity_term))
            for w in pod_aff.preferred
        ),
        "anti_affinity": tuple(_affinity_term(t) for t in anti.required),
        "anti_affinity_preferred": tuple(
            objects.WeightedPodAffinityTerm(w.weight, _affinity_term(w.pod_affinity_term))
            for w in anti.preferred
        ),
        "scheduling_gated": bool(spec.scheduling_gates),
        "termination_grace_seconds": (
            spec.termination_grace_period_seconds if spec.termination_grace_period_seconds is not None else 30
        ),
        "priority_class": spec.priority_class_name,
        "volumes": pod_volumes(spec),
    }


def _pod(
    *,
    namespace: str,
    name: str,
    uid: str,
    meta_labels: dict[str, str],
    meta_annotations: dict[str, str],
    spec: core_v1.PodSpec,
    owners: tuple[objects.OwnerRef, ...] = (),
    created: float = 0.0,
    deleting: bool = False,
    status: core_v1.PodStatus | None = None,
    spec_fields: dict[str, Any] | None = None,
) -> objects.Pod:
    status = status or core_v1.PodStatus()
    fields = spec_fields if spec_fields is not None else pod_spec_fields(spec)
    return objects.Pod(
        namespace=namespace,
        name=name,
        uid=uid,
        labels=dict(meta_labels),
        annotations=dict(meta_annotations),
        owners=owners,
        node_name=spec.node_name,
        phase=status.phase,
        started=status.start_time,
        ready=_pod_ready(status),
        created=created,
        deleting=deleting,
        nominated_node=status.nominated_node_name,
        **{**fields, "node_selector": dict(fields["node_selector"])},
    )


def _pod_ready(status: core_v1.PodStatus) -> bool:
    """The Ready condition; a pod without conditions counts as ready when Running."""
    for cond in status.conditions:
        if cond.type == "Ready":
            return cond.status == "True"
    return status.phase == "Running"


def pod(obj: core_v1.Pod, spec_fields: dict[str, Any] | None = None) -> objects.Pod:
    """The model Pod; ``spec_fields`` (from :func:`pod_spec_fields`) stand in for converting the spec."""
    meta = obj.metadata
    ns = meta.namespace or DEFAULT_NAMESPACE
    return _pod(
        namespace=ns,
        name=meta.name,
        uid=meta.uid or _uid("Pod", ns, meta.name),
        meta_labels=meta.labels,
        meta_annotations=meta.annotations,
        spec=obj.spec,
        owners=tuple(_owner(o) for o in meta.owner_references),
        created=meta.creation_timestamp or 0.0,
        deleting=meta.deletion_timestamp is not None,
        status=obj.status,
        spec_fields=spec_fields,
    )


def daemonset(obj: apps_v1.DaemonSet) -> objects.DaemonSet:
    """The DaemonSet with its template as a pod owned by it (namespace from the DaemonSet)."""
    meta = obj.metadata
    ns = meta.namespace or DEFAULT_NAMESPACE
    ds_uid = meta.uid or _uid("DaemonSet", ns, meta.name)
    template = obj.spec.template
    owner = objects.OwnerRef("DaemonSet", meta.name, "apps/v1", True, ds_uid)
    return objects.DaemonSet(
        namespace=ns,
        name=meta.name,
        template=_pod(
            namespace=ns,
            name=meta.name,
            uid=_uid("DaemonSet", ns, meta.name, "template"),
            meta_labels=template.metadata.labels,
            meta_annotations=template.metadata.annotations,
            spec=template.spec,
            owners=(owner,),
            created=meta.creation_timestamp or 0.0,
        ),
    )


def workload(obj: apps_v1.Deployment | apps_v1.ReplicaSet) -> Workload:
    meta = obj.metadata
    ns = meta.namespace or DEFAULT_NAMESPACE
    template = obj.spec.template
    return Workload(
        kind=obj.kind,
        namespace=ns,
        name=meta.name,
        replicas=obj.spec.replicas,
        uid=meta.uid or _uid(obj.kind, ns, meta.name),
        template=_pod(
            namespace=ns,
            name=meta.name,
            uid="",
            meta_labels=template.metadata.labels,
            meta_annotations=template.metadata.annotations,
            spec=template.spec,
            created=meta.creation_timestamp or 0.0,
        ),
    )


def expand(obj: Workload | apps_v1.Deployment | apps_v1.ReplicaSet) -> list[objects.Pod]:
    """``replicas`` pending pods ``<name>-<i>``, each owned by a ReplicaSet named like the workload."""
    wl = obj if isinstance(obj, Workload) else workload(obj)
    owner = objects.OwnerRef(
        "ReplicaSet", wl.name, "apps/v1", True, _uid("ReplicaSet", wl.namespace, wl.name)
    )
    return [
        replace(
            wl.template,
            name=f"{wl.name}-{i}",
            uid=_uid(wl.kind, wl.namespace, wl.name, str(i)),
            owners=(owner,),
        )
        for i in range(wl.replicas)
    ]


# --- nodes and namespaces --------------------------------------------------------------


def node(obj: core_v1.Node) -> objects.Node:
    """Allocatable falls back to capacity when absent; no Ready condition counts as ready."""
    status = obj.status
    allocatable = status.allocatable if status.allocatable is not None else status.capacity
    ready = all(c.status == "True" for c in status.conditions if c.type == "Ready")
    return objects.Node(
        name=obj.metadata.name,
        labels=dict(obj.metadata.labels),
        annotations=dict(obj.metadata.annotations),
        taints=tuple(taint(t) for t in obj.spec.taints),
        capacity=_resources(status.capacity),
        allocatable=_resources(allocatable),
        provider_id=obj.spec.provider_id,
        unschedulable=obj.spec.unschedulable,
        ready=ready,
        created=obj.metadata.creation_timestamp or 0.0,
        deleting=obj.metadata.deletion_timestamp is not None,
        conditions=_conditions(status.conditions),
    )


def namespace(obj: core_v1.Namespace) -> Namespace:
    return Namespace(obj.metadata.name, dict(obj.metadata.labels))


# --- Karpenter -------------------------------------------------------------------------


def _node_class_ref(ref: karpenter_v1.NodeClassReference) -> objects.NodeClassRef:
    return objects.NodeClassRef(ref.group, ref.kind, ref.name)


def _claim_expiry(text: str | None) -> float | None:
    """A NodeClaim's expireAfter: absent = None (its NodePool's applies), ``Never`` = infinity."""
    if text is None:
        return None
    seconds = common.parse_duration(text)
    return math.inf if seconds is None else seconds


def _seconds(text: str | None) -> float | None:
    return common.parse_duration(text) if text is not None else None


def _check_sizing(name: str, annotations: dict[str, str]) -> None:
    """Warn (once per NodePool and value, for the first 1024 pairs) about a ``karpy.sh/sizing``
    value karpy does not know: the pool keeps the default sizing (``NodePool.sizing``)."""
    value = annotations.get(objects.SIZING_ANNOTATION)
    if value is None or value in objects.SIZING_VALUES or (name, value) in _SIZING_WARNED:
        return
    if len(_SIZING_WARNED) < 1024:
        _SIZING_WARNED.add((name, value))
    args = (name, objects.SIZING_ANNOTATION, value, ", ".join(sorted(objects.SIZING_VALUES)))
    log.warning("NodePool %s: %s %r is unknown (known: %s); the pool keeps the default sizing", *args)


def node_pool(obj: karpenter_v1.NodePool) -> objects.NodePool:
    """Defaults: expireAfter 720h, consolidateAfter 0s, budgets [10%], weight 0 ("Never" = None).
    An unknown ``karpy.sh/sizing`` or ``karpy.sh/rollout-guard`` value is logged as a warning."""
    _check_sizing(obj.metadata.name, obj.metadata.annotations)
    rollout_guard.check(obj.metadata.name, obj.metadata.annotations)
    spec = obj.spec
    tmpl = spec.template
    dis = spec.disruption
    return objects.NodePool(
        name=obj.metadata.name,
        weight=spec.weight or 0,
        labels=dict(tmpl.metadata.labels),
        annotations=dict(tmpl.metadata.annotations),
        requirements=tuple(requirement(r) for r in tmpl.spec.requirements),
        taints=tuple(taint(t) for t in tmpl.spec.taints),
        startup_taints=tuple(taint(t) for t in tmpl.spec.startup_taints),
        node_class_ref=_node_class_ref(tmpl.spec.node_class_ref),
        expire_after=_seconds(tmpl.spec.expire_after),
        termination_grace_period=_seconds(tmpl.spec.termination_grace_period),
        limits=_limits(spec.limits) if spec.limits is not None else None,
        disruption=objects.Disruption(
            consolidation_policy=dis.consolidation_policy,
            consolidate_after=_seconds(dis.consolidate_after),
            budgets=tuple(
                objects.Budget(b.nodes, b.schedule, _seconds(b.duration), tuple(b.reasons))
                for b in dis.budgets
            ),
        ),
        replicas=spec.replicas,
        created=obj.metadata.creation_timestamp or 0.0,
        uid=obj.metadata.uid,
        deleting=obj.metadata.deletion_timestamp is not None,
        meta_annotations=dict(obj.metadata.annotations),
    )


def node_claim(obj: karpenter_v1.NodeClaim) -> objects.NodeClaim:
    meta, spec, status = obj.metadata, obj.spec, obj.status
    return objects.NodeClaim(
        name=meta.name,
        node_pool=meta.labels.get(labels_mod.NODEPOOL, ""),
        labels=dict(meta.labels),
        annotations=dict(meta.annotations),
        requirements=tuple(requirement(r) for r in spec.requirements),
        taints=tuple(taint(t) for t in spec.taints),
        startup_taints=tuple(taint(t) for t in spec.startup_taints),
        node_class_ref=_node_class_ref(spec.node_class_ref),
        requests=_resources(spec.resources.requests),
        provider_id=status.provider_id,
        node_name=status.node_name,
        image_id=status.image_id,
        capacity=_resources(status.capacity),
        allocatable=_resources(status.allocatable),
        conditions=_conditions(status.conditions),
        created=meta.creation_timestamp or 0.0,
        deleting=meta.deletion_timestamp is not None,
        expire_after=_claim_expiry(spec.expire_after),
        termination_grace_period=_seconds(spec.termination_grace_period),
        last_pod_event=status.last_pod_event_time,
    )


def _block_device(m: nodeclasses.BlockDeviceMapping) -> nodeclass.BlockDevice:
    ebs = m.ebs
    if ebs is None:
        return nodeclass.BlockDevice(m.device_name, None, m.root_volume)
    return nodeclass.BlockDevice(
        m.device_name,
        ebs.volume_size,
        m.root_volume,
        volume_type=ebs.volume_type,
        iops=ebs.iops,
        throughput=ebs.throughput,
        encrypted=ebs.encrypted,
        kms_key_id=ebs.kms_key_id,
        snapshot_id=ebs.snapshot_id,
        delete_on_termination=ebs.delete_on_termination,
        volume_initialization_rate=ebs.volume_initialization_rate,
    )


def _selector_term(t: nodeclasses.SelectorTerm) -> nodeclass.SelectorTerm:
    return nodeclass.SelectorTerm(tags=dict(t.tags), id=t.id, name=t.name)


def _ec2_status(status: nodeclasses.EC2NodeClassStatus) -> nodeclass.EC2NodeClassStatus:
    return nodeclass.EC2NodeClassStatus(
        subnets=tuple(nodeclass.Subnet(s.id, s.zone, s.zone_id) for s in status.subnets),
        security_groups=tuple(nodeclass.SecurityGroup(g.id, g.name) for g in status.security_groups),
        amis=tuple(
            nodeclass.AMI(a.id, a.name, a.deprecated, tuple(requirement(r) for r in a.requirements))
            for a in status.amis
        ),
        instance_profile=status.instance_profile,
        capacity_reservations=tuple(
            nodeclass.CapacityReservation(
                id=c.id,
                instance_type=c.instance_type,
                availability_zone=c.availability_zone,
                owner_id=c.owner_id,
                instance_match_criteria=c.instance_match_criteria,
                reservation_type=c.reservation_type,
                state=c.state,
                end_time=c.end_time,
            )
            for c in status.capacity_reservations
        ),
        conditions=_conditions(status.conditions),
    )


def ec2_node_class(obj: nodeclasses.EC2NodeClass) -> nodeclass.EC2NodeClass:
    spec = obj.spec
    kubelet = spec.kubelet
    meta = obj.metadata
    metadata_options = spec.metadata_options
    return nodeclass.EC2NodeClass(
        name=meta.name,
        ami_family=spec.resolved_ami_family(),
        ami_aliases=tuple(t.alias for t in spec.ami_selector_terms if t.alias),
        kubelet=nodeclass.KubeletConfig(
            max_pods=kubelet.max_pods,
            pods_per_core=kubelet.pods_per_core,
            kube_reserved=dict(kubelet.kube_reserved),
            system_reserved=dict(kubelet.system_reserved),
            eviction_hard=dict(kubelet.eviction_hard),
            eviction_soft=dict(kubelet.eviction_soft),
            eviction_soft_grace_period=dict(kubelet.eviction_soft_grace_period),
            eviction_max_pod_grace_period=kubelet.eviction_max_pod_grace_period,
            cluster_dns=tuple(kubelet.cluster_dns),
            image_gc_high_threshold_percent=kubelet.image_gc_high_threshold_percent,
            image_gc_low_threshold_percent=kubelet.image_gc_low_threshold_percent,
            cpu_cfs_quota=kubelet.cpu_cfs_quota,
        ),
        block_device_mappings=tuple(_block_device(m) for m in spec.block_device_mappings),
        instance_store_policy=spec.instance_store_policy,
        subnet_selector_terms=tuple(_selector_term(t) for t in spec.subnet_selector_terms),
        security_group_selector_terms=tuple(_selector_term(t) for t in spec.security_group_selector_terms),
        role=spec.role or "",
        instance_profile=spec.instance_profile or "",
        tags=dict(spec.tags),
        user_data=spec.user_data,
        ami_selector_terms=tuple(
            nodeclass.AMISelectorTerm(
                alias=t.alias,
                id=t.id,
                name=t.name,
                owner=t.owner,
                tags=dict(t.tags),
                ssm_parameter=t.ssm_parameter,
            )
            for t in spec.ami_selector_terms
        ),
        capacity_reservation_selector_terms=tuple(
            nodeclass.CapacityReservationSelectorTerm(
                tags=dict(t.tags),
                id=t.id,
                owner_id=t.owner_id,
                instance_match_criteria=t.instance_match_criteria,
            )
            for t in spec.capacity_reservation_selector_terms
        ),
        metadata_options=nodeclass.MetadataOptions(
            http_endpoint=metadata_options.http_endpoint,
            http_protocol_ipv6=metadata_options.http_protocol_ipv6,
            http_put_response_hop_limit=metadata_options.http_put_response_hop_limit,
            http_tokens=metadata_options.http_tokens,
        ),
        detailed_monitoring=spec.detailed_monitoring,
        associate_public_ip_address=spec.associate_public_ip_address,
        context=spec.context,
        uid=meta.uid,
        generation=meta.generation,
        annotations=dict(meta.annotations),
        deleting=meta.deletion_timestamp is not None,
        status=_ec2_status(obj.status),
    )


def kwok_node_class(obj: nodeclasses.KWOKNodeClass) -> nodeclass.KWOKNodeClass:
    return nodeclass.KWOKNodeClass(
        name=obj.metadata.name, node_registration_delay=_seconds(obj.spec.node_registration_delay) or 0.0
    )


def pdb(obj: policy_v1.PodDisruptionBudget) -> objects.PodDisruptionBudget:
    spec = obj.spec
    return objects.PodDisruptionBudget(
        namespace=obj.metadata.namespace or DEFAULT_NAMESPACE,
        name=obj.metadata.name,
        selector=label_selector(spec.selector),
        min_available=spec.min_available,
        max_unavailable=spec.max_unavailable,
        unhealthy_pod_eviction_policy=spec.unhealthy_pod_eviction_policy,
        disruptions_allowed=obj.status.disruptions_allowed,
    )
