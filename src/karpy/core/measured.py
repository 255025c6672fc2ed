"""Measured capacity: what registered Nodes really offer, replacing the catalog's estimate.

The catalog estimates a new node's capacity and allocatable from the instance type (EKS
formulas, VM memory overhead: :mod:`karpy.core.capacity`). When the estimate is too high, pods
are packed onto a node they do not fit and a second launch follows. A :class:`Measurement`
holds what Nodes of one instance type, launched from one NodeClass AMI identity, registered
with; :func:`override` puts it in place of the estimate for later decisions of that type.

- **Key**: the instance type and :func:`identity` of the NodeClass: the kind and a hash of
  what changes a node's allocatable (AMI family, selector terms and the AMIs ``status.amis``
  resolved, kubelet, block devices, instance-store policy, user data). A new AMI, or a changed
  kubelet setting, is a new key: the old measurement no longer applies (it expires).
- **Which Nodes count** (:func:`measurable`): Ready, not being deleted, with an instance-type
  label, joined to a NodeClaim that is ``Initialized`` and not being deleted, and launched from
  the NodeClass as it is now (:func:`launched_from`: same NodeClass hash annotation and one of
  its AMIs, where both sides say).
- **Conservative** (:func:`fold`): per resource, the minimum over every Node seen of the key.
  Each measured value replaces the estimate in both directions (a Node may offer more than the
  catalog says); a resource no Node reported keeps the catalog's value.

Pure: no I/O, no clock (times are passed in). Used by
:mod:`karpy.controllers.measured_capacity`, in the operator and the simulator alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.model import errors, labels
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass, NodeClass
from karpy.model.objects import Node, NodeClaim
from karpy.model.resources import Resources

__all__ = [
    "DOC_VERSION",
    "HASH_ANNOTATION",
    "Measurement",
    "apply",
    "fold",
    "from_doc",
    "identity",
    "launched_from",
    "measurable",
    "merge",
    "override",
    "replaced",
    "to_doc",
]

DOC_VERSION = 1
# Stamped on EC2NodeClasses and their NodeClaims by the AWS provider (providers/aws/drift.py).
HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
NO_NODE_CLASS = "none"
# The EC2NodeClass fields that change what a node registers with (selector terms included:
# without a resolved status they are what picks the AMI).
_ALLOCATABLE_FIELDS = (
    "ami_family",
    "ami_aliases",
    "ami_selector_terms",
    "kubelet",
    "block_device_mappings",
    "instance_store_policy",
    "user_data",
)


@dataclass(frozen=True, slots=True)
class Measurement:
    """The smallest capacity and allocatable registered by Nodes of one instance type and identity."""

    instance_type: str
    identity: str
    capacity: Resources
    allocatable: Resources
    node: str = ""  # the last Node that changed the measurement
    updated: float = 0.0  # when it changed last (seconds since the epoch)

    @property
    def key(self) -> tuple[str, str]:
        return (self.identity, self.instance_type)


def identity(node_class: NodeClass | None) -> str:
    """The AMI identity measurements are kept under: ``EC2NodeClass:<hash>``, ``KWOKNodeClass``
    (its nodes are the catalog's shapes) or ``none``."""
    if isinstance(node_class, EC2NodeClass):
        doc: dict[str, Any] = {name: _plain(getattr(node_class, name)) for name in _ALLOCATABLE_FIELDS}
        doc["amis"] = sorted({ami.id for ami in node_class.status.amis})
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return f"{node_class.kind}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if isinstance(node_class, KWOKNodeClass):
        return node_class.kind
    return NO_NODE_CLASS


def _plain(value: Any) -> Any:
    """A JSON tree of dataclasses, mappings and sequences (mapping keys sorted by json.dumps)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def launched_from(claim: NodeClaim, node_class: NodeClass | None) -> bool:
    """Whether ``claim``'s instance comes from ``node_class`` as it is now (False when it drifted:
    another NodeClass hash, or an image ``status.amis`` does not list). Unknown sides pass."""
    if not isinstance(node_class, EC2NodeClass):
        return True
    claim_hash = claim.annotations.get(HASH_ANNOTATION)
    class_hash = node_class.annotations.get(HASH_ANNOTATION)
    if claim_hash and class_hash and claim_hash != class_hash:
        return False
    amis = {ami.id for ami in node_class.status.amis}
    return not (amis and claim.image_id and claim.image_id not in amis)


def measurable(node: Node, claim: NodeClaim) -> bool:
    """A Node whose capacity may be measured: Ready, initialized, not leaving, of a known type."""
    return (
        node.ready
        and not node.deleting
        and not claim.deleting
        and bool(node.allocatable)
        and bool(node.labels.get(labels.INSTANCE_TYPE))
        and (claim.is_true("Initialized") or node.labels.get(labels.INITIALIZED) == "true")
    )


def _minimum(a: Resources, b: Resources) -> Resources:
    """Per resource the smaller amount; a resource only one side reports keeps that side's."""
    out = dict(a.items())
    for name, amount in b.items():
        out[name] = min(out[name], amount) if name in out else amount
    return Resources(out)


def fold(
    previous: Measurement | None,
    instance_type: str,
    ident: str,
    capacity: Resources,
    allocatable: Resources,
    *,
    node: str = "",
    now: float = 0.0,
) -> Measurement:
    """``previous`` with one more Node's capacity and allocatable (the per-resource minimum);
    ``previous`` itself when nothing changes."""
    if previous is None:
        return Measurement(instance_type, ident, capacity, allocatable, node, now)
    cap = _minimum(previous.capacity, capacity)
    alloc = _minimum(previous.allocatable, allocatable)
    if cap == previous.capacity and alloc == previous.allocatable:
        return previous
    return dataclasses.replace(previous, capacity=cap, allocatable=alloc, node=node, updated=now)


def merge(a: Measurement, b: Measurement) -> Measurement:
    """Two measurements of one key as one (the per-resource minimum; the later one's node)."""
    later = a if a.updated >= b.updated else b
    cap, alloc = _minimum(a.capacity, b.capacity), _minimum(a.allocatable, b.allocatable)
    if cap == later.capacity and alloc == later.allocatable:
        return later
    return dataclasses.replace(later, capacity=cap, allocatable=alloc)


def replaced(estimate: Resources, measured: Resources) -> Resources:
    """``estimate`` with each resource a Node reported replaced by the measured amount."""
    if not any(name in measured for name in estimate):
        return estimate
    return Resources(
        {
            name: measured.get(name, amount) if name in measured else amount
            for name, amount in estimate.items()
        }
    )


def apply(it: InstanceType, measurement: Measurement) -> InstanceType:
    """``it`` with the measured capacity and allocatable (overhead = capacity - allocatable)."""
    capacity = replaced(it.capacity, measurement.capacity)
    allocatable = replaced(it.allocatable, measurement.allocatable)
    if capacity == it.capacity and allocatable == it.allocatable:
        return it
    return dataclasses.replace(it, capacity=capacity, overhead=capacity - allocatable)


def override(types: Sequence[InstanceType], by_type: Mapping[str, Measurement]) -> tuple[InstanceType, ...]:
    """``types`` with the measured ones replaced (the same tuple when none is)."""
    out = tuple(apply(it, by_type[it.name]) if it.name in by_type else it for it in types)
    if all(a is b for a, b in zip(out, types, strict=True)) and isinstance(types, tuple):
        return types
    return out


# -- the persisted document -----------------------------------------------------------------


def to_doc(measurements: Iterable[Measurement]) -> dict[str, Any]:
    """The JSON document of measurements (sorted by identity, then instance type)."""
    entries = [
        {
            "instanceType": m.instance_type,
            "identity": m.identity,
            "capacity": m.capacity.as_dict(),
            "allocatable": m.allocatable.as_dict(),
            "node": m.node,
            "updated": m.updated,
        }
        for m in sorted(measurements, key=lambda m: m.key)
    ]
    return {"version": DOC_VERSION, "entries": entries}


def from_doc(doc: Any) -> tuple[list[Measurement], list[str]]:
    """The measurements of a document and a problem line per entry left out."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("entries"), list):
        return [], ["not a measured-capacity document (expected an object with an entries list)"]
    if doc.get("version") != DOC_VERSION:
        return [], [f"document version {doc.get('version')!r} is not {DOC_VERSION}: ignored"]
    out: list[Measurement] = []
    problems: list[str] = []
    for i, entry in enumerate(doc["entries"]):
        try:
            out.append(
                Measurement(
                    instance_type=str(entry["instanceType"]),
                    identity=str(entry["identity"]),
                    capacity=Resources.parse(entry.get("capacity") or {}),
                    allocatable=Resources.parse(entry["allocatable"]),
                    node=str(entry.get("node") or ""),
                    updated=float(entry.get("updated") or 0.0),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError, errors.KarpyError) as exc:
            problems.append(f"entries[{i}]: {type(exc).__name__}: {exc}")
    return out, problems
