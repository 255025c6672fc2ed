"""Test builders with keyword overrides, in the style of Karpenter's ``pkg/test``.

``pod()``, ``node_pool()``, ``instance_type()``, ``node()`` and ``snapshot()`` build the
frozen model values the core reads, with small defaults; anything not covered by a
keyword can be set through ``**overrides`` (passed straight to the dataclass).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from karpy import settings as settings_mod
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels as wk
from karpy.model import quantity
from karpy.model.catalog import InstanceType, Offering
from karpy.model.objects import (
    DaemonSet,
    HostPort,
    Node,
    NodePool,
    NodeSelectorTerm,
    OwnerRef,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    WeightedTerm,
)
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources
from karpy.model.selectors import LabelSelector
from karpy.model.taints import Taint, Toleration

__all__ = [
    "ZONES",
    "anti_affinity_term",
    "daemonset",
    "instance_type",
    "node",
    "node_pool",
    "pod",
    "requirement",
    "snapshot",
    "spread",
]

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")

ReqSpec = tuple[str, str, Sequence[str]] | tuple[str, str] | Requirement


def requirement(spec: ReqSpec) -> Requirement:
    """A Requirement from ``(key, op, values)``, ``(key, op)`` or a Requirement itself."""
    if isinstance(spec, Requirement):
        return spec
    if len(spec) == 2:
        key, op = spec
        return Requirement.of(key, op)
    key, op, values = spec
    return Requirement.of(key, op, tuple(values))


def _term(specs: Iterable[ReqSpec]) -> NodeSelectorTerm:
    return NodeSelectorTerm(tuple(requirement(s) for s in specs))


def _resources(raw: Mapping[str, str | int] | Resources | None) -> Resources:
    if raw is None:
        return Resources()
    if isinstance(raw, Resources):
        return raw
    return Resources.parse(raw)


def pod(
    name: str = "p",
    *,
    namespace: str = "default",
    cpu: str = "0",
    memory: str = "0",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    required_terms: Sequence[Sequence[ReqSpec]] | None = None,
    preferred_terms: Sequence[tuple[int, Sequence[ReqSpec]]] | None = None,
    tolerations: Sequence[Toleration] | None = None,
    spread: Sequence[TopologySpreadConstraint] | None = None,
    anti_affinity: Sequence[PodAffinityTerm] | None = None,
    affinity: Sequence[PodAffinityTerm] | None = None,
    host_ports: Sequence[int | HostPort] | None = None,
    node_name: str = "",
    owners: Sequence[OwnerRef] | None = None,
    **overrides: Any,
) -> Pod:
    """A pending pod requesting ``cpu``/``memory``; ``uid`` defaults to ``name``."""
    fields: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": name,
        "labels": dict(labels or {}),
        "node_name": node_name,
        "phase": "Running" if node_name else "Pending",
        "requests": Resources.parse({"cpu": cpu, "memory": memory}),
        "node_selector": dict(node_selector or {}),
        "required_terms": tuple(_term(t) for t in required_terms or ()),
        "preferred_terms": tuple(WeightedTerm(w, _term(t)) for w, t in preferred_terms or ()),
        "tolerations": tuple(tolerations or ()),
        "spread": tuple(spread or ()),
        "anti_affinity": tuple(anti_affinity or ()),
        "affinity": tuple(affinity or ()),
        "host_ports": tuple(p if isinstance(p, HostPort) else HostPort(p) for p in host_ports or ()),
        "owners": tuple(owners or ()),
    }
    fields.update(overrides)
    return Pod(**fields)


def spread(
    key: str = wk.ZONE,
    *,
    max_skew: int = 1,
    when_unsatisfiable: str = "DoNotSchedule",
    match_labels: Mapping[str, str] | None = None,
    **overrides: Any,
) -> TopologySpreadConstraint:
    """A topology spread constraint selecting ``match_labels``."""
    selector = LabelSelector.from_labels(match_labels or {})
    return TopologySpreadConstraint(max_skew, key, when_unsatisfiable, selector, **overrides)


def anti_affinity_term(
    match_labels: Mapping[str, str], *, key: str = wk.HOSTNAME, **overrides: Any
) -> PodAffinityTerm:
    """A pod (anti-)affinity term over ``key`` selecting ``match_labels``."""
    return PodAffinityTerm(key, LabelSelector.from_labels(match_labels), **overrides)


def node_pool(
    name: str = "default",
    *,
    weight: int = 0,
    requirements: Sequence[ReqSpec] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] | None = None,
    limits: Mapping[str, str | int] | Resources | None = None,
    **overrides: Any,
) -> NodePool:
    """A NodePool; ``limits`` as a Kubernetes resource list (``{"cpu": "8"}``)."""
    fields: dict[str, Any] = {
        "name": name,
        "weight": weight,
        "requirements": tuple(requirement(r) for r in requirements or ()),
        "labels": dict(labels or {}),
        "taints": tuple(taints or ()),
        "limits": None if limits is None else dict(_resources(limits)),
    }
    fields.update(overrides)
    return NodePool(**fields)


def default_price(cpu: str, memory: str) -> float:
    """0.1 per vCPU plus 0.1 per GiB of memory."""
    gib = quantity.parse(memory) / Fraction(2**30)
    return float(Fraction(1, 10) * quantity.parse(cpu) + Fraction(1, 10) * gib)


def instance_type(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "4Gi",
    pods: str = "10",
    arch: str = "amd64",
    zones: Sequence[str] = ZONES,
    capacity_types: Sequence[str] = ("spot", "on-demand"),
    price: float | None = None,
    labels: Mapping[str, str] | None = None,
    overhead: Mapping[str, str | int] | Resources | None = None,
    offerings: Sequence[Offering] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
) -> InstanceType:
    """An instance type offered in every ``zones`` × ``capacity_types`` at one price.

    ``offerings`` replaces the generated offerings (zone and capacity-type requirements
    are then derived from them); ``unavailable`` marks (zone, capacity type) pairs.
    """
    if offerings is None:
        cost = default_price(cpu, memory) if price is None else price
        off = set(unavailable)
        offerings = [
            Offering(z, ct, cost, available=(z, ct) not in off) for z in zones for ct in capacity_types
        ]
    offer_zones = tuple(dict.fromkeys(o.zone for o in offerings))
    offer_cts = tuple(dict.fromkeys(o.capacity_type for o in offerings))
    extra = dict(labels or {})
    reqs = [
        Requirement.in_(wk.INSTANCE_TYPE, name),
        Requirement.in_(wk.ARCH, arch),
        Requirement.in_(wk.OS, "linux"),
        Requirement.in_(wk.ZONE, *offer_zones),
        Requirement.in_(wk.CAPACITY_TYPE, *offer_cts),
    ]
    reqs += [Requirement.in_(k, v) for k, v in extra.items()]
    return InstanceType(
        name=name,
        requirements=Requirements(reqs),
        offerings=tuple(offerings),
        capacity=Resources.parse({"cpu": cpu, "memory": memory, "pods": pods}),
        overhead=_resources(overhead),
        labels=extra,
    )


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str | int] | Resources | None = None,
    taints: Sequence[Taint] | None = None,
    capacity: Mapping[str, str | int] | Resources | None = None,
    **overrides: Any,
) -> Node:
    """A ready Node labelled with its hostname; allocatable defaults to 4 cpu, 4Gi, 10 pods."""
    default = {"cpu": "4", "memory": "4Gi", "pods": "10"}
    alloc = _resources(allocatable if allocatable is not None else default)
    fields: dict[str, Any] = {
        "name": name,
        "labels": {wk.HOSTNAME: name, **(labels or {})},
        "taints": tuple(taints or ()),
        "allocatable": alloc,
        "capacity": _resources(capacity) if capacity is not None else alloc,
    }
    fields.update(overrides)
    return Node(**fields)


def daemonset(name: str = "ds", *, namespace: str = "kube-system", **pod_overrides: Any) -> DaemonSet:
    """A DaemonSet whose template is ``pod(name, **pod_overrides)`` owned by it."""
    owner = OwnerRef("DaemonSet", name, controller=True)
    template = pod(name, namespace=namespace, owners=[owner], **pod_overrides)
    return DaemonSet(namespace, name, template)


def snapshot(
    *,
    pools: Sequence[NodePool],
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]],
    nodes: Sequence[Node] = (),
    pods: Sequence[Pod] = (),
    daemonsets: Sequence[DaemonSet] = (),
    settings: settings_mod.Settings | None = None,
    well_known: frozenset[str] | None = None,
    **overrides: Any,
) -> Snapshot:
    """A Snapshot with a StateNode per node (holding its bound pods).

    ``types`` is one list for every pool or a dict of lists per pool name.
    """
    per_pool = (
        {p.name: tuple(types) for p in pools}
        if not isinstance(types, Mapping)
        else {k: tuple(v) for k, v in types.items()}
    )
    state_nodes = tuple(
        StateNode(name=n.name, node=n, pods=tuple(p for p in pods if p.node_name == n.name)) for n in nodes
    )
    fields: dict[str, Any] = {
        "nodes": state_nodes,
        "pods": tuple(pods),
        "node_pools": tuple(pools),
        "instance_types": per_pool,
        "daemonsets": tuple(daemonsets),
        "settings": settings if settings is not None else settings_mod.Settings(),
    }
    if well_known is not None:
        fields["well_known"] = well_known
    fields.update(overrides)
    return Snapshot(**fields)


def replace(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` re-exported for brevity in tests."""
    return dataclasses.replace(obj, **changes)


# -- disruption builders (managed nodes, NodeClaims, PDBs) ----------------------------------------


def node_claim(
    name: str,
    *,
    pool: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: float = 0.0,
    initialized: bool = True,
    conditions: Sequence[Any] = (),
    **overrides: Any,
) -> Any:
    """A NodeClaim of ``pool`` (Launched/Registered and, by default, Initialized at ``created``)."""
    from karpy.model.objects import Condition, NodeClaim

    conds = [Condition("Launched", "True", last_transition=created)]
    conds.append(Condition("Registered", "True", last_transition=created))
    if initialized:
        conds.append(Condition("Initialized", "True", last_transition=created))
    conds.extend(conditions)
    fields: dict[str, Any] = {
        "name": name,
        "node_pool": pool,
        "labels": {wk.NODEPOOL: pool, **(labels or {})},
        "annotations": dict(annotations or {}),
        "conditions": tuple(conds),
        "created": created,
    }
    fields.update(overrides)
    return NodeClaim(**fields)


def managed_node(
    name: str,
    *,
    pool: str = "default",
    instance_type: str | InstanceType = "small",
    zone: str = ZONES[0],
    capacity_type: str = "on-demand",
    created: float = 0.0,
    initialized: bool = True,
    allocatable: Mapping[str, str | int] | Resources | None = None,
    node_labels: Mapping[str, str] | None = None,
    node_annotations: Mapping[str, str] | None = None,
    claim_annotations: Mapping[str, str] | None = None,
    claim_conditions: Sequence[Any] = (),
    claim_overrides: Mapping[str, Any] | None = None,
    node_overrides: Mapping[str, Any] | None = None,
) -> tuple[Node, Any]:
    """A Node and its NodeClaim (joined by providerID) of ``pool``.

    ``instance_type`` may be an InstanceType: the Node's allocatable is then its allocatable.
    """
    it_name = instance_type if isinstance(instance_type, str) else instance_type.name
    if allocatable is None:
        allocatable = (
            instance_type.allocatable
            if isinstance(instance_type, InstanceType)
            else {"cpu": "4", "memory": "4Gi", "pods": "10"}
        )
    shared = {
        wk.NODEPOOL: pool,
        wk.INSTANCE_TYPE: it_name,
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
    }
    provider_id = f"kwok://{name}"
    extra_node_labels = {**shared, **(node_labels or {})}
    if initialized:
        extra_node_labels.setdefault(wk.INITIALIZED, "true")
    the_node = node(
        name,
        labels=extra_node_labels,
        allocatable=allocatable,
        provider_id=provider_id,
        created=created,
        annotations=dict(node_annotations or {}),
        **dict(node_overrides or {}),
    )
    alloc = _resources(allocatable)
    claim = node_claim(
        f"{name}-claim",
        pool=pool,
        labels=shared,
        annotations=claim_annotations,
        created=created,
        initialized=initialized,
        conditions=claim_conditions,
        provider_id=provider_id,
        node_name=name,
        capacity=alloc,
        allocatable=alloc,
        **dict(claim_overrides or {}),
    )
    return the_node, claim


def running_pod(
    name: str,
    node_name: str,
    *,
    cpu: str = "0",
    memory: str = "0",
    owner_kind: str | None = "ReplicaSet",
    started: float = 0.0,
    ready: bool = True,
    annotations: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Pod:
    """A Running, Ready pod bound to ``node_name``, owned (by default) by a ReplicaSet."""
    owners = [] if owner_kind is None else [OwnerRef(owner_kind, f"{name}-owner", controller=True)]
    return pod(
        name,
        cpu=cpu,
        memory=memory,
        node_name=node_name,
        owners=owners,
        started=started,
        ready=ready,
        annotations=dict(annotations or {}),
        **overrides,
    )


def pdb(
    name: str = "pdb",
    *,
    namespace: str = "default",
    match_labels: Mapping[str, str] | None = None,
    min_available: str | int | None = None,
    max_unavailable: str | int | None = None,
    disruptions_allowed: int | None = None,
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget",
) -> Any:
    """A PodDisruptionBudget selecting ``match_labels`` in ``namespace``."""
    from karpy.model.objects import PodDisruptionBudget

    return PodDisruptionBudget(
        namespace=namespace,
        name=name,
        selector=LabelSelector.from_labels(match_labels or {}),
        min_available=None if min_available is None else str(min_available),
        max_unavailable=None if max_unavailable is None else str(max_unavailable),
        unhealthy_pod_eviction_policy=unhealthy_pod_eviction_policy,
        disruptions_allowed=disruptions_allowed,
    )


def budget(
    nodes: str = "10%",
    *,
    schedule: str | None = None,
    duration: float | None = None,
    reasons: Sequence[str] = (),
) -> Any:
    """A NodePool disruption budget (``duration`` in seconds)."""
    from karpy.model.objects import Budget

    return Budget(nodes=nodes, schedule=schedule, duration=duration, reasons=tuple(reasons))


def disruption_pool(
    name: str = "default",
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    consolidate_after: float | None = 0.0,
    budgets: Sequence[Any] | None = None,
    meta_annotations: Mapping[str, str] | None = None,
    **overrides: Any,
) -> NodePool:
    """A NodePool with a ``disruption`` block (budgets default to one ``nodes: 100%``)."""
    from karpy.model.objects import Budget, Disruption

    disruption = Disruption(
        consolidation_policy=policy,
        consolidate_after=consolidate_after,
        budgets=tuple(budgets) if budgets is not None else (Budget(nodes="100%"),),
    )
    return node_pool(name, disruption=disruption, meta_annotations=dict(meta_annotations or {}), **overrides)


def managed_snapshot(
    *,
    pools: Sequence[NodePool],
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]],
    managed: Sequence[tuple[Node, Any]] = (),
    unmanaged: Sequence[Node] = (),
    pods: Sequence[Pod] = (),
    pdbs: Sequence[Any] = (),
    now: float = 0.0,
    settings: settings_mod.Settings | None = None,
    marked_for_deletion: Iterable[str] = (),
    nominated: Iterable[str] = (),
    **overrides: Any,
) -> Snapshot:
    """A Snapshot of managed (Node, NodeClaim) pairs and unmanaged Nodes at ``now``."""
    marked = set(marked_for_deletion)
    nominated_set = set(nominated)
    state_nodes = [
        StateNode(
            name=n.name,
            node=n,
            claim=c,
            pods=tuple(p for p in pods if p.node_name == n.name),
            marked_for_deletion=n.name in marked,
            nominated=n.name in nominated_set,
        )
        for n, c in managed
    ]
    state_nodes += [
        StateNode(name=n.name, node=n, pods=tuple(p for p in pods if p.node_name == n.name))
        for n in unmanaged
    ]
    state_nodes.sort(key=lambda s: s.name)
    base = snapshot(pools=pools, types=types, pods=pods, settings=settings)
    fields: dict[str, Any] = {"nodes": tuple(state_nodes), "pdbs": tuple(pdbs), "now": now}
    fields.update(overrides)
    return dataclasses.replace(base, **fields)


# -- simulator scenarios (a ``kind: Simulation`` document) -----------------------------------------


def simulation(
    name: str,
    *,
    start: str,
    duration: str,
    consolidate_after: str,
    requests: Mapping[str, str],
    replicas: Sequence[tuple[str, int]],
    pool: str = "general",
    annotations: Mapping[str, str] | None = None,
    instance_family: str = "c6a",
    instance_cpu: Sequence[str] = ("4", "8"),
    deployment: str = "api",
    namespace: str = "app",
    strategy: Mapping[str, Any] | None = None,
    rollouts: Sequence[str] = (),
    daemon_sets: Sequence[Mapping[str, Any]] = (),
    pod_startup: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Simulation on the ``aws:us-east-1`` catalog, as the mapping its YAML file decodes to.

    One NodePool ``pool`` (its ``annotations``; on-demand ``instance_family`` types of
    ``instance_cpu`` vCPUs on the EC2NodeClass ``default``; consolidated when empty or
    underutilized after ``consolidate_after``) and one Deployment ``deployment`` in
    ``namespace``, labelled ``app: <deployment>``, its container (image ``<deployment>:1``)
    requesting ``requests``, its replicas stepping through ``("HH:MM", count)`` points;
    ``strategy``, ``rollouts``, ``daemon_sets`` and ``pod_startup`` are left out unless given.
    Launches take 40 s (p50) to 75 s (p95), lognormal. Write it with ``yaml.safe_dump`` and
    read it with ``scenario.load``.
    """
    container = {"name": deployment, "image": f"{deployment}:1", "resources": {"requests": dict(requests)}}
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": deployment}}}
    if strategy is not None:
        spec["strategy"] = dict(strategy)
    spec["template"] = {"metadata": {"labels": {"app": deployment}}, "spec": {"containers": [container]}}
    workload: dict[str, Any] = {
        "deployment": {"metadata": {"name": deployment, "namespace": namespace}, "spec": spec},
        "replicas": {"interpolate": "step", "points": [[at, count] for at, count in replicas]},
    }
    if rollouts:
        workload["rollouts"] = list(rollouts)
    node_pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool, "annotations": dict(annotations or {})},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": [instance_family],
                        },
                        {
                            "key": "karpenter.k8s.aws/instance-cpu",
                            "operator": "In",
                            "values": list(instance_cpu),
                        },
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
            },
        },
    }
    node_class = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-test",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        },
    }
    cloud: dict[str, Any] = {"launchLatency": {"distribution": "lognormal", "p50": "40s", "p95": "75s"}}
    if pod_startup is not None:
        cloud["podStartup"] = dict(pod_startup)
    raw: dict[str, Any] = {
        "kind": "Simulation",
        "name": name,
        "start": start,
        "duration": duration,
        "catalog": "aws:us-east-1",
        "nodePools": [node_pool],
        "nodeClasses": [node_class],
    }
    if daemon_sets:
        raw["daemonSets"] = [dict(ds) for ds in daemon_sets]
    raw["workloads"] = [workload]
    raw["cloud"] = cloud
    return raw
