"""Model objects -> raw Kubernetes JSON, for the objects karpy writes.

The inverse of :mod:`karpy.api.convert` for NodeClaims and Nodes (the kwok provider writes
Nodes, the provisioner NodeClaims), plus the small pieces (requirements, taints, resource
lists, times) controllers use in patches. ``decode(encode(x)) == x`` for the fields karpy
reads (checked by tests).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from karpy.model import quantity
from karpy.model.objects import Condition, Node, NodeClaim, NodeClassRef
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import Taint

__all__ = ["condition", "duration", "node", "node_claim", "requirement", "resources", "taint", "time"]


def time(seconds: float) -> str:
    """RFC 3339, UTC, whole seconds (as the API server writes)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(seconds: float | None) -> str:
    if seconds is None or seconds == float("inf"):
        return "Never"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"


def resources(values: Resources) -> dict[str, str]:
    return {name: quantity.format_quantity(name, amount) for name, amount in sorted(values.items())}


def requirement(req: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": req.key}
    if req.gte is not None or req.lte is not None:
        # bounds are written as Gt/Lt; an Exists with both bounds needs two entries (see requirements())
        if req.gte is not None:
            out.update(operator="Gt", values=[str(req.gte - 1)])
        else:
            out.update(operator="Lt", values=[str(req.lte + 1 if req.lte is not None else 0)])
    else:
        out["operator"] = req.operator
        if req.values:
            out["values"] = sorted(req.values)
    if req.min_values is not None:
        out["minValues"] = req.min_values
    return out


def requirements(reqs: tuple[Requirement, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for req in sorted(reqs, key=lambda r: r.key):
        out.append(requirement(req))
        if req.gte is not None and req.lte is not None:
            out.append({"key": req.key, "operator": "Lt", "values": [str(req.lte + 1)]})
    return out


def taint(t: Taint) -> dict[str, str]:
    out = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def condition(c: Condition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": c.type, "status": c.status}
    if c.reason:
        out["reason"] = c.reason
    if c.message:
        out["message"] = c.message
    if c.last_transition is not None:
        out["lastTransitionTime"] = time(c.last_transition)
    if c.observed_generation is not None:
        out["observedGeneration"] = c.observed_generation
    return out


def _ref(ref: NodeClassRef | None) -> dict[str, str] | None:
    return None if ref is None else {"group": ref.group, "kind": ref.kind, "name": ref.name}


def node_claim(
    claim: NodeClaim, *, generate_name: str = "", finalizers: tuple[str, ...] = ()
) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": dict(claim.labels), "annotations": dict(claim.annotations)}
    if claim.name:
        meta["name"] = claim.name
    elif generate_name:
        meta["generateName"] = generate_name
    if finalizers:
        meta["finalizers"] = list(finalizers)
    spec: dict[str, Any] = {
        "requirements": requirements(claim.requirements),
        "resources": {"requests": resources(claim.requests)},
    }
    if claim.taints:
        spec["taints"] = [taint(t) for t in claim.taints]
    if claim.startup_taints:
        spec["startupTaints"] = [taint(t) for t in claim.startup_taints]
    ref = _ref(claim.node_class_ref)
    if ref is not None:
        spec["nodeClassRef"] = ref
    if claim.expire_after is not None:  # None: the NodePool's expireAfter applies
        spec["expireAfter"] = duration(claim.expire_after)
    if claim.termination_grace_period is not None:
        spec["terminationGracePeriod"] = duration(claim.termination_grace_period)
    status: dict[str, Any] = {}
    if claim.provider_id:
        status["providerID"] = claim.provider_id
    if claim.node_name:
        status["nodeName"] = claim.node_name
    if claim.image_id:
        status["imageID"] = claim.image_id
    if claim.capacity:
        status["capacity"] = resources(claim.capacity)
    if claim.allocatable:
        status["allocatable"] = resources(claim.allocatable)
    if claim.conditions:
        status["conditions"] = [condition(c) for c in claim.conditions]
    if claim.last_pod_event is not None:
        status["lastPodEventTime"] = time(claim.last_pod_event)
    out: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": spec,
    }
    if status:
        out["status"] = status
    return out


def node(n: Node, *, finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": n.name, "labels": dict(n.labels), "annotations": dict(n.annotations)}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    spec: dict[str, Any] = {"providerID": n.provider_id}
    if n.taints:
        spec["taints"] = [taint(t) for t in n.taints]
    if n.unschedulable:
        spec["unschedulable"] = True
    conditions = [condition(c) for c in n.conditions] or [
        {"type": "Ready", "status": "True" if n.ready else "False"}
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": {
            "capacity": resources(n.capacity),
            "allocatable": resources(n.allocatable),
            "conditions": conditions,
        },
    }
