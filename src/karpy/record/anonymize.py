"""``karpy record --anonymize``: pod, owner and namespace names replaced by keyed hashes.

A :class:`Hasher` maps a name to a token (``a`` + 12 base32 characters of HMAC-SHA256 under the
recording's key): the same name always gives the same token within a recording (and across
recordings made with the same key), so owners, their pods and their namespaces stay joined, and
a token is a valid Kubernetes name. :func:`recording` hashes a
:class:`~karpy.record.model.Recording`; :func:`objects` the snapshot written beside it.

Hashed: namespaces (in ``metadata.namespace``, Namespace objects, pod affinity terms'
``namespaces``; ``default``, ``kube-system``, ``kube-public`` and ``kube-node-lease`` are kept,
Cluster Autoscaler treats ``kube-system`` pods apart), the names of pods and of their owners and
workloads (Deployments, ReplicaSets, StatefulSets, Jobs, CronJobs, DaemonSets,
PodDisruptionBudgets, PersistentVolumeClaims; ``generateName`` prefixes; owner references; a
PersistentVolume's ``claimRef``), container names and images (an image stays one image: warm and
cold pulls replay alike), and the values of the labels controllers set to names (``job-name``,
``batch.kubernetes.io/job-name``, ``statefulset.kubernetes.io/pod-name``), so selectors on them
still match. Pod templates and specs are cut to what scheduling reads
(:mod:`karpy.record.templates`: no environment, commands, volumes), annotations to those karpy
reads, and the API server's address is left out.

Not hashed: other labels and label selectors (they stay consistent with each other, and
topology spread and affinity keep working; a label whose value is a name still shows it), node
names and labels, NodePools, NodeClasses and NodeClaims, PriorityClass names. Pure.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from karpy.record import model, templates

__all__ = ["KEPT_NAMESPACES", "NAME_LABELS", "Hasher", "objects", "recording", "template"]

KEPT_NAMESPACES = frozenset({"", "default", "kube-system", "kube-public", "kube-node-lease"})
NAME_LABELS = frozenset({"job-name", "batch.kubernetes.io/job-name", "statefulset.kubernetes.io/pod-name"})
_NAMED_KINDS = frozenset(
    {
        "Pod",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "Job",
        "CronJob",
        "DaemonSet",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "ReplicationController",
    }
)

_WORKLOAD_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "ReplicationController"}
)


class Hasher:
    """Name -> token under a key (see the module docstring)."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._seen: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if not name:
            return name
        if name.endswith("-"):  # a generateName prefix stays a prefix
            return self(name.rstrip("-") or name) + "-"
        token = self._seen.get(name)
        if token is None:
            digest = hmac.new(self._key, name.encode(), hashlib.sha256).digest()
            token = "a" + base64.b32encode(digest).decode("ascii")[:12].lower()
            self._seen[name] = token
        return token

    def namespace(self, name: str) -> str:
        return name if name in KEPT_NAMESPACES else self(name)


def _affinity(spec: dict[str, Any], hasher: Hasher) -> None:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block = affinity.get(kind) or {}
        terms = list(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [
            w.get("podAffinityTerm") or {}
            for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        for term in terms:
            if term.get("namespaces"):
                term["namespaces"] = [hasher.namespace(n) for n in term["namespaces"]]


def _labels(labels: Mapping[str, Any], hasher: Hasher) -> dict[str, str]:
    return {k: hasher(str(v)) if k in NAME_LABELS else str(v) for k, v in labels.items()}


def template(raw: Mapping[str, Any], hasher: Hasher) -> dict[str, Any]:
    """A pod template (or a pod) cut to what scheduling reads, with its names hashed."""
    out = templates.pod_template(raw)
    spec = out["spec"]
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            for field in ("name", "image"):
                if container.get(field):
                    container[field] = hasher(str(container[field]))
    _affinity(spec, hasher)
    if "labels" in out["metadata"]:
        out["metadata"]["labels"] = _labels(out["metadata"]["labels"], hasher)
    return out


def _key(key: model.OwnerKey, hasher: Hasher) -> model.OwnerKey:
    return model.OwnerKey(hasher.namespace(key.namespace), key.kind, hasher(key.name))


def recording(rec: model.Recording, hasher: Hasher) -> model.Recording:
    """``rec`` with its pods', owners' and namespaces' names hashed and no server address."""
    pods = tuple(
        dataclasses.replace(
            p,
            namespace=hasher.namespace(p.namespace),
            name=hasher(p.name),
            owner=_key(p.owner, hasher),
            template=template(p.template, hasher),
            generate_name=hasher(p.generate_name),
            job=hasher(p.job),
        )
        for p in rec.pods
    )
    owners = tuple(
        dataclasses.replace(o, key=_key(o.key, hasher), template=template(o.template, hasher))
        for o in rec.owners
    )
    jobs = tuple(
        dataclasses.replace(
            j,
            namespace=hasher.namespace(j.namespace),
            name=hasher(j.name),
            owner=_key(j.owner, hasher),
            template=template(j.template, hasher),
        )
        for j in rec.jobs
    )
    return dataclasses.replace(rec, pods=pods, owners=owners, jobs=jobs, server="")


def _object(raw: Mapping[str, Any], hasher: Hasher) -> dict[str, Any]:
    obj = copy.deepcopy(dict(raw))
    kind = str(obj.get("kind") or "")
    meta = obj.setdefault("metadata", {})
    if kind == "Namespace":
        meta["name"] = hasher.namespace(str(meta.get("name") or ""))
    elif kind in _NAMED_KINDS:
        meta["name"] = hasher(str(meta.get("name") or ""))
    if meta.get("namespace"):
        meta["namespace"] = hasher.namespace(str(meta["namespace"]))
    if meta.get("generateName"):
        meta["generateName"] = hasher(str(meta["generateName"]))
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") != "Node":
            ref["name"] = hasher(str(ref.get("name") or ""))
    if meta.get("labels"):
        meta["labels"] = _labels(meta["labels"], hasher)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if templates.kept_annotation(k)}
    meta.pop("annotations", None)
    if annotations:
        meta["annotations"] = annotations
    spec = obj.get("spec")
    if isinstance(spec, dict):
        if kind == "Pod":
            node = spec.get("nodeName")
            obj["spec"] = template(obj, hasher)["spec"]
            if node:
                obj["spec"]["nodeName"] = node
            status = obj.get("status") or {}
            obj["status"] = {
                "phase": status.get("phase", "Pending"),
                "conditions": [
                    {"type": c.get("type"), "status": c.get("status")} for c in status.get("conditions") or []
                ],
            }
        elif kind in _WORKLOAD_KINDS and isinstance(spec.get("template"), Mapping):
            spec["template"] = template(spec["template"], hasher)
        claim = spec.get("claimRef")
        if kind == "PersistentVolume" and isinstance(claim, dict):
            claim["namespace"] = hasher.namespace(str(claim.get("namespace") or ""))
            claim["name"] = hasher(str(claim.get("name") or ""))
    return obj


def objects(items: Sequence[Mapping[str, Any]], hasher: Hasher) -> list[dict[str, Any]]:
    """Snapshot objects with their names hashed (see the module docstring)."""
    return [_object(raw, hasher) for raw in items]
