"""A pod template as a recording keeps it: what scheduling and the simulator read, nothing else.

:func:`pod_template` cuts a pod (or a workload's ``spec.template``) to ``metadata.labels`` less
the labels controllers set per pod (``pod-template-hash``, ``job-name``, ...: the simulator sets
its own), the ``metadata.annotations`` karpy, Karpenter and Cluster Autoscaler read
(:data:`KEPT_ANNOTATIONS`; ``kubectl.kubernetes.io/last-applied-configuration`` and the like go),
and the ``spec`` fields of :data:`KEPT_SPEC` (containers and init containers keep ``name``,
``image``, ``resources``, ``ports`` and ``restartPolicy``): environment, commands, volumes, probes
and service accounts are left out, so a trace carries no configuration or secret. Pure; used by
:mod:`karpy.record.recorder` and :mod:`karpy.record.anonymize`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["CONTROLLER_LABELS", "KEPT_ANNOTATIONS", "KEPT_SPEC", "kept_annotation", "pod_template"]

CONTROLLER_LABELS = frozenset(
    {
        "pod-template-hash",
        "controller-revision-hash",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "job-name",
        "batch.kubernetes.io/job-name",
        "controller-uid",
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-completion-index",
    }
)
KEPT_ANNOTATIONS = ("karpenter.sh/", "karpy.dev/", "cluster-autoscaler.kubernetes.io/")
_KEPT_ANNOTATION_KEYS = frozenset({"controller.kubernetes.io/pod-deletion-cost"})
KEPT_SPEC = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "containers",
    "initContainers",
    "overhead",
    "priority",
    "priorityClassName",
    "terminationGracePeriodSeconds",
    "hostNetwork",
)
_KEPT_CONTAINER = ("name", "image", "resources", "ports", "restartPolicy")


def kept_annotation(key: str) -> bool:
    return key in _KEPT_ANNOTATION_KEYS or key.startswith(KEPT_ANNOTATIONS)


def _container(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        return {}
    return {k: copy.deepcopy(raw[k]) for k in _KEPT_CONTAINER if k in raw}


def pod_template(source: Mapping[str, Any]) -> dict[str, Any]:
    """``{metadata: {labels, annotations}, spec}`` of a pod or a pod template (see the module docstring)."""
    meta = source.get("metadata") or {}
    spec = source.get("spec") or {}
    labels = {k: str(v) for k, v in (meta.get("labels") or {}).items() if k not in CONTROLLER_LABELS}
    annotations = {k: str(v) for k, v in (meta.get("annotations") or {}).items() if kept_annotation(k)}
    kept: dict[str, Any] = {}
    for key in KEPT_SPEC:
        if key not in spec or spec[key] is None:
            continue
        if key in ("containers", "initContainers"):
            kept[key] = [_container(c) for c in spec[key] or []]
        else:
            kept[key] = copy.deepcopy(spec[key])
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(sorted(labels.items()))
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    return {"metadata": metadata, "spec": kept}
