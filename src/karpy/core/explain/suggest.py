"""From one solver message to its structured detail and one actionable sentence.

The solver says why a place rejected a pod (:mod:`karpy.core.explain.reasons` names the rule);
:func:`advise_pool` and :func:`advise_node` add what a reader needs to act on it, read from the
pod, the NodePool or node and the instance types: for requirements the key and both sides'
values, for taints the taint, for resources the request against the largest allocatable, for
limits the limit and its use, for topology the key, maxSkew and counts per domain, for minValues
the key and the values needed and found. Nothing here decides anything: every reason is the
solver's; a message this module cannot read gets an empty detail and no suggestion.
Used by :mod:`karpy.core.explain.pod`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from karpy.core.explain import storage, topo
from karpy.core.explain.reasons import reason_class
from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.podinfo import PodData
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Pod
from karpy.model.quantity import format_quantity
from karpy.model.requirements import Requirement, Requirements, pair_overlaps
from karpy.model.resources import Resources
from karpy.model.taints import Taint

__all__ = ["Advice", "Detail", "NodeView", "PoolView", "advise_alone", "advise_node", "advise_pool"]

Detail = Mapping[str, object]  # JSON values only: str, int, lists and mappings of them


@dataclass(frozen=True, slots=True)
class Advice:
    """A rejection explained: its class, the structured facts and one sentence to act on."""

    reason: str
    detail: Detail
    suggestion: str


@dataclass(frozen=True, slots=True)
class PoolView:
    """A NodePool as the solve saw it: its template and its limits."""

    name: str
    requirements: Requirements  # the template's: the NodePool's requirements and labels
    taints: tuple[Taint, ...]
    instance_types: tuple[InstanceType, ...]  # the template's (compatible with its requirements)
    daemon: Mapping[str, DaemonOverhead]  # DaemonSet overhead by instance-type name
    limits: Mapping[str, int] | None
    remaining: Mapping[str, int] | None  # what the limits leave after the solve


@dataclass(frozen=True, slots=True)
class NodeView:
    """An existing node (or in-flight NodeClaim) as the solve saw it after placing its pods."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    free: Resources  # allocatable less bound pods, DaemonSet overhead and pods placed in the solve


def _q(resource: str, amount: int) -> str:
    return format_quantity(resource, amount)


def _listed(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


# --- shared by NodePools and nodes -----------------------------------------------------------


def _taint(message: str, taints: tuple[Taint, ...]) -> tuple[Detail, str]:
    text = message.removeprefix("did not tolerate taint ").strip()
    found = next((t for t in taints if str(t) == text), None)
    if found is None:
        return {"taint": text}, f"add a toleration for taint {text}"
    detail = {"key": found.key, "value": found.value, "effect": found.effect}
    if found.value:
        return detail, f"add toleration {found.key}={found.value}:{found.effect}"
    return detail, f"add toleration {found.key}:{found.effect} (operator Exists)"


def _ports(pod: Pod) -> list[str]:
    return [f"{p.port}/{p.protocol}" for p in pod.host_ports]


def _validation(message: str) -> tuple[Detail, str]:
    match = re.match(r'label "([^"]+)"', message)
    key = match.group(1) if match else ""
    return {"label": key}, (
        f"remove {key} from the pod's nodeSelector and node affinity: Karpenter does not provision for it"
    )


def _min_values(message: str, where: str) -> tuple[Detail, str]:
    found = [(k, int(n), int(h)) for k, n, h in re.findall(r"(\S+) needs (\d+) values, has (\d+)", message)]
    if not found:
        return {}, ""
    key, needed, has = found[0]
    detail: dict[str, object] = {"key": key, "needed": needed, "has": has}
    if len(found) > 1:
        detail["more"] = [{"key": k, "needed": n, "has": h} for k, n, h in found[1:]]
    return detail, (
        f"{where} needs {needed} distinct {key} values (minValues) but the instance types left by the "
        f"pod's and the NodePool's requirements offer {has}: lower minValues or widen the requirements"
    )


def _conflicts(message: str) -> list[tuple[str, str, str]]:
    """(key, the pod's side, the place's side) of each conflict in "incompatible ...: a; b"."""
    body = message.split(": ", 1)[1] if ": " in message else ""
    out: list[tuple[str, str, str]] = []
    for part in body.split("; "):
        undefined = re.match(r'label "([^"]+)" does not have known values', part)
        if undefined:
            out.append((undefined.group(1), "", ""))
            continue
        match = re.match(r"key ([^,]+), (.*) not in (.*)$", part)
        if match:
            out.append((match.group(1), match.group(2), match.group(3)))
    return out


def _conflict_detail(conflicts: list[tuple[str, str, str]], pod_reqs: Requirements, side: str) -> Detail:
    key, pod_side, place_side = conflicts[0]
    wanted = pod_reqs.get(key)
    detail: dict[str, object] = {
        "key": key,
        "pod": pod_side or (str(wanted) if wanted is not None else ""),
        side: place_side or None,
    }
    if len(conflicts) > 1:
        detail["more"] = [{"key": k, "pod": p, side: n or None} for k, p, n in conflicts[1:]]
    return detail


def _topology(message: str, pod: Pod) -> tuple[Detail, str]:
    read = topo.parse(message)
    if read is None:
        return {}, ""
    return read.detail(), topo.suggest(read, pod)


# --- NodePools -------------------------------------------------------------------------------


def _pool_requirements(message: str, pod: Pod, data: PodData, view: PoolView) -> tuple[Detail, str]:
    if message.startswith("no instance type is compatible with the NodePool's requirements"):
        return {"requirements": str(view.requirements)}, (
            f"no instance type of the catalog meets NodePool {view.name}'s requirements "
            f"({view.requirements}): widen them"
        )
    if message.startswith("no instance type met the requirements"):
        return _types_ruled_out(data, view)
    conflicts = _conflicts(message)
    if not conflicts:
        return {}, ""
    key, pod_side, _ = conflicts[0]
    detail = _conflict_detail(conflicts, data.requirements, "nodePool")
    if not pod_side:
        return detail, (
            f"NodePool {view.name} does not define {key}: add it to its requirements or template labels, "
            f"or drop it from the pod's nodeSelector and node affinity"
        )
    theirs = view.requirements.get(key)
    if theirs is not None and not theirs.complement:
        return detail, (
            f"NodePool {view.name} allows {key} in {_listed(sorted(theirs.values))} only; "
            f"the pod requires {pod_side}"
        )
    return detail, f"NodePool {view.name} requires {detail['nodePool']}; the pod requires {pod_side}"


def _types_ruled_out(data: PodData, view: PoolView) -> tuple[Detail, str]:
    """Which of the wanted keys rule out how many of the NodePool's instance types."""
    wanted = view.requirements.union_with(data.requirements)
    out: dict[str, int] = {}
    for key, req in sorted(wanted.items()):
        if key in (labels.NODEPOOL, labels.HOSTNAME):
            continue
        count = sum(1 for it in view.instance_types if not _allows(it.requirements.get(key), req))
        if count:
            out[key] = count
    detail: dict[str, object] = {
        "instanceTypes": len(view.instance_types),
        "ruledOutBy": out,
        "required": {k: str(wanted[k]) for k in out},
    }
    if not out:
        return detail, ""
    shown = ", ".join(f"{wanted[k]} rules out {n}" for k, n in out.items())
    return detail, (
        f"no instance type of NodePool {view.name} meets the requirements together "
        f"({shown} of its {len(view.instance_types)} types): widen the pod's or the NodePool's requirements"
    )


def _allows(offered: Requirement | None, wanted: Requirement) -> bool:
    if offered is None or pair_overlaps(offered, wanted):
        return True
    return offered.operator in ("NotIn", "DoesNotExist") and wanted.operator in ("NotIn", "DoesNotExist")


def _largest(view: PoolView) -> Resources:
    """Per resource, the most any one of the pool's types leaves for pods after DaemonSets."""
    best = Resources()
    for it in view.instance_types:
        best = best.max(_room(it, view))
    return best


def _room(it: InstanceType, view: PoolView) -> Resources:
    """What one instance type of the pool leaves for pods after the DaemonSets."""
    overhead = view.daemon.get(it.name)
    return it.allocatable - overhead.requests if overhead is not None else it.allocatable


def _pool_resources(message: str, pod: Pod, data: PodData, view: PoolView) -> tuple[Detail, str]:
    requests, largest = data.requests, _largest(view)
    short = {r: v - largest.get(r) for r, v in sorted(requests.items()) if v > largest.get(r)}
    detail = {
        "requested": requests.as_dict(),
        "largestAllocatable": {r: _q(r, largest.get(r)) for r in sorted(requests)},
        "shortfall": {r: _q(r, v) for r, v in short.items()},
    }
    if short:
        has = ", ".join(f"{_q(r, largest.get(r))} {r}" for r in short)
        wants = ", ".join(f"{_q(r, requests[r])}" + f" {r}" for r in short)
        return (
            detail,
            f"largest instance type of NodePool {view.name} allocates {has}; the pod requests {wants}",
        )
    names = " and ".join(r for r in sorted(requests) if r != "pods")
    return detail, (
        f"each of {names} fits some instance type of NodePool {view.name}, but no single type has them "
        f"all at once: split the pod's requests or add such a type"
    )


def _pool_limit(message: str, pod: Pod, data: PodData, view: PoolView) -> tuple[Detail, str]:
    names = [n.strip() for n in message.removeprefix("would exceed NodePool limit").split(",") if n.strip()]
    if not names or view.limits is None:
        return {"limits": names}, ""
    rows: list[dict[str, object]] = []
    for name in names:
        limit = view.limits.get(name, 0)
        left = (view.remaining or {}).get(name, limit)
        row: dict[str, object] = {
            "resource": name,
            "limit": _q(name, limit),
            "used": _q(name, max(limit - left, 0)),
        }
        smallest = _smallest_fit(name, data, view)
        if smallest is not None:
            row["smallestFit"] = _q(name, smallest)
        rows.append(row)
    detail: dict[str, object] = dict(rows[0])
    if len(rows) > 1:
        detail["more"] = rows[1:]
    first = rows[0]
    tail = (
        f"; the smallest instance type that fits the pod adds {first['smallestFit']} {first['resource']}"
        if "smallestFit" in first
        else ""
    )
    return detail, (
        f"raise NodePool {view.name} spec.limits.{first['resource']} "
        f"({first['used']} used of {first['limit']}, counting the NodeClaims this solve opens{tail})"
    )


def _smallest_fit(resource: str, data: PodData, view: PoolView) -> int | None:
    """The least of ``resource`` a new node that fits the pod counts against the limit."""
    if resource == "nodes":
        return 1
    wanted = view.requirements.union_with(data.requirements)
    found = [
        it.capacity.get(resource)
        for it in view.instance_types
        if data.requests.fits(_room(it, view)) and it.requirements.overlaps(wanted)
    ]
    return min(found) if found else None


def _pool_host_port(message: str, pod: Pod, data: PodData, view: PoolView) -> tuple[Detail, str]:
    wanted = {(p.port, p.protocol) for p in pod.host_ports}
    users = sorted(
        {
            ds
            for overhead in view.daemon.values()
            if any((p.port, p.protocol) in wanted for p in overhead.host_ports)
            for ds in overhead.daemonsets
        }
    )
    ports = _ports(pod)
    detail = {"ports": ports, "daemonSets": users}
    who = f"DaemonSet {', '.join(users)}" if users else "a DaemonSet"
    return detail, (
        f"{who} uses host port {', '.join(ports)} on every instance type of NodePool {view.name}: "
        f"give the pod another hostPort"
    )


def _pool_offering(message: str, pod: Pod, data: PodData, view: PoolView) -> tuple[Detail, str]:
    wanted = view.requirements.union_with(data.requirements)
    zone, capacity = wanted.get(labels.ZONE), wanted.get(labels.CAPACITY_TYPE)
    offered = sorted({o.zone for it in view.instance_types for o in it.offerings if o.available})
    detail = {
        "zones": str(zone) if zone is not None else "any",
        "capacityTypes": str(capacity) if capacity is not None else "any",
        "offeredZones": offered,
    }
    return detail, (
        f"no instance type of NodePool {view.name} has an available offering for "
        f"{detail['zones']} and {detail['capacityTypes']}: allow more zones or capacity types"
    )


def _pool_at_once(message: str, pod: Pod, data: PodData, view: PoolView) -> tuple[Detail, str]:
    return {}, (
        f"some instance type of NodePool {view.name} meets the requirements, some fits the requests and "
        f"some is offered, but none does all three: widen the requirements or add such a type"
    )


_Handler = Callable[[str, Pod, PodData, PoolView], tuple[Detail, str]]

_POOL: dict[str, _Handler] = {
    "taint": lambda m, p, d, v: _taint(m, v.taints),
    "host-port": _pool_host_port,
    "resources": _pool_resources,
    "requirements": _pool_requirements,
    "offering": _pool_offering,
    "instance-types": _pool_at_once,
    "nodepool-limit": _pool_limit,
    "min-values": lambda m, p, d, v: _min_values(m, f"NodePool {v.name}"),
    "topology-spread": lambda m, p, d, v: _topology(m, p),
    "pod-affinity": lambda m, p, d, v: _topology(m, p),
    "pod-anti-affinity": lambda m, p, d, v: _topology(m, p),
    "topology": lambda m, p, d, v: _topology_conflict(m, d, f"NodePool {v.name}"),
    "validation": lambda m, p, d, v: _validation(m),
    "volume-topology": lambda m, p, d, v: storage.volume_topology(m, f"NodePool {v.name}"),
    "volume-limit": lambda m, p, d, v: storage.volume_limit(m, f"a NodeClaim of NodePool {v.name}"),
}


def advise_pool(message: str, pod: Pod, data: PodData, view: PoolView) -> Advice:
    """The class, detail and suggestion of a NodePool's rejection of ``pod`` (``data``: the pod as
    the solve last tried it)."""
    cls = reason_class(message)
    handler = _POOL.get(cls)
    detail, suggestion = handler(message, pod, data, view) if handler is not None else ({}, "")
    return Advice(cls, detail, suggestion)


# --- existing nodes --------------------------------------------------------------------------


def _node_resources(message: str, data: PodData, view: NodeView) -> tuple[Detail, str]:
    names = [n.strip() for n in message.removeprefix("not enough ").split(",") if n.strip()]
    requests, free = data.requests, view.free
    detail = {
        "requested": {r: _q(r, requests.get(r)) for r in names},
        "free": {r: _q(r, max(free.get(r), 0)) for r in names},
    }
    if not names:
        return detail, ""
    has = ", ".join(f"{_q(r, max(free.get(r), 0))} {r}" for r in names)
    wants = ", ".join(f"{_q(r, requests.get(r))} {r}" for r in names)
    return detail, f"node {view.name} has {has} free; the pod requests {wants}"


def _node_requirements(message: str, data: PodData, view: NodeView) -> tuple[Detail, str]:
    conflicts = _conflicts(message)
    if not conflicts:
        return {}, ""
    key, pod_side, _ = conflicts[0]
    detail = _conflict_detail(conflicts, data.requirements, "node")
    value = view.labels.get(key)
    wanted = pod_side or str(data.requirements.get(key) or key)
    if value is None:
        return detail, f"node {view.name} has no label {key}; the pod requires {wanted}"
    return detail, f"node {view.name} has {key}={value}; the pod requires {wanted}"


def _topology_conflict(message: str, data: PodData, where: str) -> tuple[Detail, str]:
    conflicts = _conflicts(message)
    if not conflicts:
        return {}, ""
    detail = _conflict_detail(conflicts, data.requirements, "place")
    key = conflicts[0][0]
    return detail, f"the {key} domains the pod's topology allows are not among those of {where}"


def advise_node(message: str, pod: Pod, data: PodData, view: NodeView) -> Advice:
    """The class, detail and suggestion of an existing node's rejection of ``pod``."""
    cls = reason_class(message)
    detail: Detail = {}
    suggestion = ""
    if cls == "taint":
        detail, suggestion = _taint(message, view.taints)
    elif cls == "host-port":
        detail = {"ports": _ports(pod)}
        suggestion = f"a pod on node {view.name} already uses host port {', '.join(_ports(pod))}"
    elif cls == "resources":
        detail, suggestion = _node_resources(message, data, view)
    elif cls == "requirements":
        detail, suggestion = _node_requirements(message, data, view)
    elif cls in ("topology-spread", "pod-affinity", "pod-anti-affinity"):
        detail, suggestion = _topology(message, pod)
    elif cls == "topology":
        detail, suggestion = _topology_conflict(message, data, f"node {view.name}")
    elif cls == "volume-topology":
        detail, suggestion = storage.volume_topology(message, f"node {view.name}")
    elif cls == "volume-limit":
        detail, suggestion = storage.volume_limit(message, f"node {view.name}")
    return Advice(cls, detail, suggestion)


def advise_alone(message: str) -> Advice:
    """The class and suggestion of a message that names no place (validation, volumes, no NodePool)."""
    cls = reason_class(message)
    if cls == "validation":
        detail, suggestion = _validation(message)
        return Advice(cls, detail, suggestion)
    if cls == "volume":
        detail, suggestion = storage.pod_problem(message)
        return Advice(cls, detail, suggestion)
    if cls == "no-nodepool":
        return Advice(cls, {}, "create a NodePool: none can launch nodes for this pod")
    return Advice(cls, {}, "")
