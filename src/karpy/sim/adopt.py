"""A snapshot's Nodes, NodeClaims and Pods as what a simulation run holds at its start.

:func:`prepare` decides, for one run (mode ``karpy`` or ``cluster-autoscaler``), what of an
:class:`~karpy.sim.initial.InitialState` goes in, and :meth:`Start.apply` creates it:

- **Nodes** become running capacity of the simulated cloud: instance type, zone and capacity
  type from their labels (``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``,
  ``karpenter.sh/capacity-type`` or ``eks.amazonaws.com/capacityType``; on-demand when neither),
  billed from the start at the catalog's price of that offering; Ready, their capacity and
  allocatable as the snapshot has them (the catalog's when missing); the taints of a node's
  life cycle (``karpenter.sh/unregistered``, ``karpenter.sh/disrupted``, not-ready, unreachable,
  uninitialized) removed. A node whose type is not in the catalog, whose offering the catalog
  lacks, that has no instance-type or zone label or that is being deleted is left out with
  one warning, and its pods start pending.
- In a **karpy** run a node with a NodeClaim (matched by ``status.nodeName`` or providerID) is
  a launched, registered and initialized claim of its NodePool (providerID ``kwok://<node>``,
  so karpy's controllers drain, delete and consolidate it like their own); a node labelled
  ``karpenter.sh/nodepool`` without a claim gets one made from its labels when that NodePool is
  in the run; any other node is capacity karpy does not manage. NodeClaims without a Node are
  left out with a warning.
- In a **cluster-autoscaler** run each node belongs to a node group: the scenario's group named
  by its ``eks.amazonaws.com/nodegroup`` label, or else a group ``snapshot-<type>-<capacity>``
  made for the snapshot's nodes of that instance type and capacity type (min 0, max their
  number, their zones, the labels and taints they all share, the lowest priority): CA may scale
  it down, and back up to its size, never beyond.
- **Pods**: bound pods Running and Ready on their node, pending pods pending; Succeeded, Failed
  and terminating pods left out; pods of a DaemonSet the run has are left to the DaemonSet
  stand-in (one per node), pods of a Deployment the scenario's workload trace runs are left to
  the trace. The others are looked after by :class:`~karpy.sim.snapshot_pods.SnapshotPods`:
  replaced when they go if a ReplicaSet, StatefulSet, Job or ReplicationController owns them
  (a Deployment of the snapshot keeps its replica count), not replaced otherwise; a pod of an
  owner kind the simulator does not know is kept with a warning.

Warnings name the file and object (``nodes.yaml: Node "ip-10-0-3-7": ...``). Called by the runner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import encode
from karpy.api import load as api_load
from karpy.model import labels as wk
from karpy.model.catalog import Catalog, InstanceType
from karpy.model.objects import Condition, Node, NodeClaim, NodePool, Pod
from karpy.model.taints import UNREGISTERED, Taint
from karpy.ports import KubeAPI
from karpy.providers import kwok
from karpy.sim.ca import NODE_GROUP_LABEL, CAConfig, NodeGroupConfig
from karpy.sim.cloud import CAPACITY_LABEL
from karpy.sim.initial import Entry, InitialState, clean
from karpy.sim.snapshot_pods import Rule, SnapshotPods

__all__ = ["KARPY", "Start", "StartNode", "prepare"]

KARPY = "karpy"
UNMANAGED_PREFIX = (
    "snapshot://"  # providerID of nodes no NodeClaim stands for (the kwok provider ignores them)
)
_LIFECYCLE_TAINTS = frozenset(
    {
        UNREGISTERED.key,
        "karpenter.sh/disrupted",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)
_PER_NODE_LABELS = frozenset({wk.HOSTNAME, wk.ZONE, "topology.kubernetes.io/region", wk.INSTANCE_TYPE})
_REPLACED_OWNERS = frozenset({"ReplicaSet", "Job", "ReplicationController"})
Bill = Callable[[str, str, str, str, float], object]  # (node, instance type, zone, capacity type, USD/h)


@dataclass(frozen=True, slots=True)
class StartNode:
    """One node of the snapshot as the run creates it."""

    name: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    node: dict[str, Any]  # the raw Node
    claim: dict[str, Any] | None = None  # the raw NodeClaim (karpy runs)


@dataclass
class Start:
    """What one run creates at its start, and what it left out (``warnings``)."""

    nodes: list[StartNode] = field(default_factory=list)
    pods: list[tuple[dict[str, Any], Rule]] = field(default_factory=list)
    ca_groups: tuple[NodeGroupConfig, ...] = ()
    warnings: list[str] = field(default_factory=list)
    left_out_nodes: int = 0
    left_out_pods: int = 0

    def ca_config(self, baseline: CAConfig) -> CAConfig:
        """The scenario's Cluster Autoscaler configuration plus the snapshot's node groups."""
        return dataclasses.replace(baseline, node_groups=(*baseline.node_groups, *self.ca_groups))

    def apply(self, kube: KubeAPI, bill: Bill, pods: SnapshotPods) -> None:
        """Create the nodes (billed from now), their claims, then the pods."""
        for n in self.nodes:
            kube.create(n.node)
            if n.claim is not None:
                kube.create(n.claim)
            bill(n.name, n.instance_type, n.zone, n.capacity_type, n.price)
        for raw, rule in self.pods:
            pods.create(raw, rule)

    def figures(self) -> dict[str, Any]:
        """The ``initial_state`` block of the run's figures."""
        by_type: dict[str, int] = {}
        for n in self.nodes:
            by_type[n.instance_type] = by_type.get(n.instance_type, 0) + 1
        bound = sum(1 for raw, _ in self.pods if (raw.get("spec") or {}).get("nodeName"))
        return {
            "nodes": len(self.nodes),
            "nodes_by_instance_type": dict(sorted(by_type.items())),
            "pods_bound": bound,
            "pods_pending": len(self.pods) - bound,
            "nodes_left_out": self.left_out_nodes,
            "pods_left_out": self.left_out_pods,
        }


def prepare(
    state: InitialState,
    catalog: Catalog,
    *,
    mode: str,
    node_pools: Sequence[Mapping[str, Any]],
    daemon_sets: Sequence[Mapping[str, Any]],
    traced: Iterable[tuple[str, str]],
    baseline: CAConfig | None,
    now: float,
) -> Start:
    """What of ``state`` a run in ``mode`` creates (see the module docstring)."""
    start = Start(warnings=list(state.notes))
    pools = {str(raw["metadata"]["name"]): api_load.convert_node_pool(raw) for raw in node_pools}
    types = {it.name: it for it in catalog.instance_types}
    claims = _claims_by_node(state, start) if mode == KARPY else {}
    placed: dict[str, list[Entry]] = {}
    for entry in sorted(state.pods, key=lambda e: (e.namespace, e.name)):
        pod: Pod = entry.typed
        if not (pod.is_terminal() or pod.deleting or pod.is_daemonset_pod()):
            placed.setdefault(pod.node_name, []).append(entry)
    kept: set[str] = set()
    for entry in sorted(state.nodes, key=lambda e: e.name):
        on_node = len(placed.get(entry.name, []))
        found = _offering(entry, types, catalog.name)
        if isinstance(found, str):
            start.warnings.append(f"{entry.where}: {found}: left out{_pods_note(on_node)}")
            start.left_out_nodes += 1
            continue
        it, zone, capacity_type, price = found
        node = _node(entry.typed, it)
        claim = claims.get(entry.name) if mode == KARPY else None
        made = _start_node(entry, node, claim, pools, mode=mode, start=start)
        start.nodes.append(StartNode(node.name, it.name, zone, capacity_type, price, made[0], made[1]))
        kept.add(entry.name)
    if mode != KARPY and baseline is not None:
        start.ca_groups = _ca_groups(start, baseline)
    _pods(state, start, kept=kept, daemon_sets=daemon_sets, traced=set(traced), now=now)
    return start


def _pods_note(count: int) -> str:
    if count == 1:
        return " (its pod starts pending)"
    return f" (its {count} pods start pending)" if count else ""


def _claims_by_node(state: InitialState, start: Start) -> dict[str, Entry]:
    """The NodeClaims by the name of their Node; claims of no Node of the snapshot are warned of."""
    by_provider = {e.typed.provider_id: e.name for e in state.nodes if e.typed.provider_id}
    names = {e.name for e in state.nodes}
    out: dict[str, Entry] = {}
    for entry in sorted(state.node_claims, key=lambda e: e.name):
        claim: NodeClaim = entry.typed
        node = claim.node_name if claim.node_name in names else by_provider.get(claim.provider_id, "")
        if not node:
            start.warnings.append(f"{entry.where}: no Node of the snapshot (still launching?): left out")
        else:
            if claim.deleting:
                start.warnings.append(f"{entry.where}: being deleted in the snapshot: taken as running")
            out[node] = entry
    return out


def _offering(
    entry: Entry, types: Mapping[str, InstanceType], catalog: str
) -> tuple[InstanceType, str, str, float] | str:
    """The node's instance type, zone, capacity type and price, or why it cannot be taken."""
    node: Node = entry.typed
    if node.deleting:
        return "being deleted in the snapshot"
    it_name, zone = node.labels.get(wk.INSTANCE_TYPE, ""), node.labels.get(wk.ZONE, "")
    if not it_name or not zone:
        missing = wk.INSTANCE_TYPE if not it_name else wk.ZONE
        return f"no {missing} label"
    it = types.get(it_name)
    if it is None:
        return f"instance type {it_name} is not in the catalog {catalog}"
    capacity_type = _capacity_type(node.labels)
    for offering in it.offerings:
        if offering.zone == zone and offering.capacity_type == capacity_type:
            return it, zone, capacity_type, offering.price
    return f"the catalog {catalog} has no {capacity_type} offering of {it_name} in {zone}"


def _capacity_type(node_labels: Mapping[str, str]) -> str:
    found = node_labels.get(wk.CAPACITY_TYPE)
    if found:
        return found
    eks = node_labels.get(CAPACITY_LABEL, "")
    return wk.CAPACITY_TYPE_SPOT if eks == "SPOT" else wk.CAPACITY_TYPE_ON_DEMAND


def _node(node: Node, it: InstanceType) -> Node:
    """The node as it runs in the simulation: Ready, without life-cycle taints, sized."""
    return dataclasses.replace(
        node,
        taints=tuple(t for t in node.taints if t.key not in _LIFECYCLE_TAINTS),
        capacity=node.capacity if len(node.capacity) else it.capacity,
        allocatable=node.allocatable if len(node.allocatable) else it.allocatable,
        ready=True,
        deleting=False,
        conditions=(Condition("Ready", "True", reason="KubeletReady"),),
    )


def _start_node(
    entry: Entry,
    node: Node,
    claim: Entry | None,
    pools: Mapping[str, NodePool],
    *,
    mode: str,
    start: Start,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The raw Node and (karpy runs) the raw NodeClaim of one node of the snapshot."""
    if mode != KARPY:
        return encode.node(dataclasses.replace(node, provider_id=kwok.PROVIDER_PREFIX + node.name)), None
    pool_name = node.labels.get(wk.NODEPOOL, "")
    typed: NodeClaim | None = claim.typed if claim is not None else None
    if typed is None and pool_name in pools:
        typed = _made_claim(node, pools[pool_name])
    if typed is None:
        if pool_name:
            start.warnings.append(
                f"{entry.where}: no NodeClaim, and NodePool {pool_name} is not in the simulation: "
                "kept as capacity karpy does not manage"
            )
        raw = encode.node(dataclasses.replace(node, provider_id=UNMANAGED_PREFIX + node.name))
        return raw, None
    if typed.node_pool not in pools:
        start.warnings.append(
            f"{entry.where}: NodePool {typed.node_pool or '(none)'} is not in the simulation: "
            "the node runs for the whole run (karpy does not disrupt it)"
        )
    provider_id = kwok.PROVIDER_PREFIX + node.name
    pool_label = {wk.NODEPOOL: typed.node_pool} if typed.node_pool else {}
    labels = {**node.labels, **pool_label, wk.REGISTERED: "true", wk.INITIALIZED: "true"}
    raw_node = encode.node(
        dataclasses.replace(node, provider_id=provider_id, labels=labels),
        finalizers=(wk.TERMINATION_FINALIZER,),
    )
    conditions = tuple(Condition(kind, "True") for kind in ("Launched", "Registered", "Initialized"))
    hydrated = dataclasses.replace(
        typed,
        provider_id=provider_id,
        node_name=node.name,
        capacity=typed.capacity if len(typed.capacity) else node.capacity,
        allocatable=typed.allocatable if len(typed.allocatable) else node.allocatable,
        conditions=conditions,
        deleting=False,
        last_pod_event=None,
    )
    return raw_node, encode.node_claim(hydrated, finalizers=(wk.TERMINATION_FINALIZER,))


def _made_claim(node: Node, pool: NodePool) -> NodeClaim:
    """A NodeClaim for a node of a NodePool whose claim the snapshot lacks: its labels, the pool's ref."""
    return NodeClaim(
        name=node.name,
        node_pool=pool.name,
        labels={k: v for k, v in node.labels.items() if k != wk.HOSTNAME},
        node_class_ref=pool.node_class_ref,
        taints=pool.taints,
    )


def _ca_groups(start: Start, baseline: CAConfig) -> tuple[NodeGroupConfig, ...]:
    """Node groups for the snapshot's nodes no configured group owns; labels each node with its group."""
    configured = {g.name for g in baseline.node_groups}
    lowest = min((g.priority for g in baseline.node_groups), default=0) - 1
    members: dict[tuple[str, str], list[int]] = {}
    for i, n in enumerate(start.nodes):
        owner = (n.node["metadata"].get("labels") or {}).get(NODE_GROUP_LABEL, "")
        if owner not in configured:
            members.setdefault((n.instance_type, n.capacity_type), []).append(i)
    groups: list[NodeGroupConfig] = []
    for (it_name, capacity_type), indexes in sorted(members.items()):
        name = f"snapshot-{it_name}-{capacity_type}"
        while name in configured:
            name += "-x"
        nodes = [start.nodes[i] for i in indexes]
        shared = _shared_labels([n.node for n in nodes])
        groups.append(
            NodeGroupConfig(
                name=name,
                instance_types=(it_name,),
                capacity_type=capacity_type,
                min=0,
                max=len(nodes),
                priority=lowest,
                labels=shared,
                taints=_shared_taints([n.node for n in nodes]),
                zones=tuple(sorted({n.zone for n in nodes})),
            )
        )
        for i in indexes:
            labels = start.nodes[i].node["metadata"]["labels"]
            labels[NODE_GROUP_LABEL] = name
            labels[CAPACITY_LABEL] = "SPOT" if capacity_type == wk.CAPACITY_TYPE_SPOT else "ON_DEMAND"
    return tuple(groups)


def _shared_labels(nodes: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The labels every node has with the same value, less those each node has its own of."""
    first = dict((nodes[0]["metadata"].get("labels") or {}).items())
    for raw in nodes[1:]:
        labels = raw["metadata"].get("labels") or {}
        first = {k: v for k, v in first.items() if labels.get(k) == v}
    return {k: v for k, v in sorted(first.items()) if k not in _PER_NODE_LABELS and k != NODE_GROUP_LABEL}


def _shared_taints(nodes: Sequence[Mapping[str, Any]]) -> tuple[Taint, ...]:
    def taints(raw: Mapping[str, Any]) -> set[Taint]:
        return {
            Taint(t["key"], t.get("effect", ""), t.get("value", ""))
            for t in (raw.get("spec") or {}).get("taints") or []
        }

    common = taints(nodes[0])
    for raw in nodes[1:]:
        common &= taints(raw)
    return tuple(sorted(common, key=lambda t: (t.key, t.value, t.effect)))


# -- pods --------------------------------------------------------------------------------


def _deployments_of(state: InitialState) -> dict[tuple[str, str], str]:
    """(namespace, ReplicaSet) -> its Deployment, from the ReplicaSets' owners."""
    out: dict[tuple[str, str], str] = {}
    for entry in state.replica_sets:
        for owner in (entry.raw.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "Deployment" and owner.get("controller"):
                out[(entry.namespace, entry.name)] = str(owner.get("name", ""))
    return out


def _deployment(pod: Pod, rs: str, known: Mapping[tuple[str, str], str]) -> str:
    found = known.get((pod.namespace, rs))
    if found is not None:
        return found
    suffix = f"-{pod.labels.get('pod-template-hash', '')}"
    return rs.removesuffix(suffix) if suffix != "-" and rs.endswith(suffix) else ""


def _pods(
    state: InitialState,
    start: Start,
    *,
    kept: set[str],
    daemon_sets: Sequence[Mapping[str, Any]],
    traced: set[tuple[str, str]],
    now: float,
) -> None:
    """The pods the run creates, bound ones first, each with its replacement rule."""
    ds_keys = {
        (str(d["metadata"].get("namespace") or "default"), str(d["metadata"]["name"])) for d in daemon_sets
    }
    rs_owner = _deployments_of(state)
    in_snapshot = {e.name for e in state.nodes}
    unknown_nodes: dict[str, int] = {}
    traced_pods: dict[tuple[str, str], int] = {}
    chosen: list[tuple[dict[str, Any], Rule]] = []
    for entry in sorted(state.pods, key=lambda e: (e.namespace, e.name)):
        pod: Pod = entry.typed
        if pod.is_terminal() or pod.deleting:
            continue
        owner = pod.controller
        kind, owner_name = (owner.kind, owner.name) if owner is not None else ("", "")
        if kind == "DaemonSet" and (pod.namespace, owner_name) in ds_keys:
            continue  # the DaemonSet stand-in runs one on every node
        if kind == "ReplicaSet":
            deployment = _deployment(pod, owner_name, rs_owner)
            if (pod.namespace, deployment) in traced:
                traced_pods[(pod.namespace, deployment)] = traced_pods.get((pod.namespace, deployment), 0) + 1
                continue
        rule = _rule(entry, kind, owner_name, start)
        bound = pod.node_name if pod.node_name in kept else ""
        if pod.node_name and pod.node_name not in in_snapshot:
            unknown_nodes[pod.node_name] = unknown_nodes.get(pod.node_name, 0) + 1
        chosen.append((_pod(entry.raw, bound, now), rule))
    for node, count in sorted(unknown_nodes.items()):
        start.warnings.append(
            f"{state.directory}: {count} pod{'' if count == 1 else 's'} bound to Node {node}, which the "
            "snapshot does not hold: they start pending"
        )
    for (namespace, name), count in sorted(traced_pods.items()):
        start.warnings.append(
            f"{state.directory}: {count} pod{'' if count == 1 else 's'} of Deployment {namespace}/{name} "
            "left out: the scenario's workload trace runs it"
        )
        start.left_out_pods += count
    chosen.sort(key=lambda item: not (item[0].get("spec") or {}).get("nodeName"))
    start.pods = chosen


def _rule(entry: Entry, kind: str, owner: str, start: Start) -> Rule:
    if kind in _REPLACED_OWNERS:
        return Rule(prefix=f"{owner}-")
    if kind == "StatefulSet":
        return Rule(same_name=True)
    if kind == "DaemonSet":
        start.warnings.append(
            f"{entry.where}: its DaemonSet {owner} is not in the simulation: kept on its node, not replaced"
        )
    elif kind not in ("", "Node"):
        start.warnings.append(
            f"{entry.where}: owned by {kind} {owner}, which the simulator does not run: kept, "
            "not replaced when it goes"
        )
    return Rule()


def _pod(raw: Mapping[str, Any], node: str, now: float) -> dict[str, Any]:
    """The pod as the run creates it: bound to ``node`` Running and Ready, or pending."""
    out = clean(raw)
    spec = out.setdefault("spec", {})
    spec.pop("nodeName", None)
    if not node:
        out["status"] = {"phase": "Pending"}
        return out
    spec["nodeName"] = node
    stamp = encode.time(now)
    out["status"] = {
        "phase": "Running",
        "startTime": stamp,
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": stamp}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
    }
    return out
