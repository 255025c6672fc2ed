"""kube-state-metrics' label names and values back to Kubernetes keys, quantities, taints and tolerations.

kube-state-metrics writes a Kubernetes label ``node.kubernetes.io/instance-type`` as the Prometheus
label ``label_node_kubernetes_io_instance_type`` (every character other than a letter, digit or
``_`` becomes ``_``, camel case becomes snake case, then a prefix: ``label_``, ``annotation_``,
``nodeselector_``), so the original key cannot be read back in general. :func:`key` knows the keys
scheduling and karpy read (:data:`KNOWN`: the well-known node labels, Karpenter's and AWS's, EKS
node groups, the labels controllers set per pod, the annotations karpy keeps); any other name
stays as kube-state-metrics wrote it, without its prefix (``app`` is ``app``;
``app.kubernetes.io/name`` comes back as ``app_kubernetes_io_name``: consistent within a trace,
not the original). Resources are named the same way (``nvidia_com_gpu``); requests are cores and
bytes. Pure; used by :mod:`karpy.record.prom_series` (and by the tests' generator of answers,
which writes series as kube-state-metrics would).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from karpy.catalog import aws
from karpy.model import labels as wk
from karpy.model import quantity
from karpy.record import recorder, templates

__all__ = ["KNOWN", "RESOURCES", "key", "merged", "name_of", "quantity_of", "resource", "taint", "toleration"]

KNOWN: frozenset[str] = (
    aws.well_known_labels()
    | frozenset(wk.NORMALIZED)
    | templates.CONTROLLER_LABELS
    | {
        wk.HOSTNAME,
        wk.DO_NOT_DISRUPT,
        recorder.NODE_GROUP_LABEL,
        recorder.CAPACITY_LABEL,
        "karpenter.k8s.aws/ec2nodeclass",
        "cluster-autoscaler.kubernetes.io/safe-to-evict",
        "controller.kubernetes.io/pod-deletion-cost",
    }
)
RESOURCES = (
    "cpu",
    "memory",
    "ephemeral-storage",
    "nvidia.com/gpu",
    "amd.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "aws.amazon.com/neurondevice",
    "vpc.amazonaws.com/pod-eni",
)
_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def name_of(k8s_key: str) -> str:
    """The Prometheus name kube-state-metrics gives a Kubernetes key (without the prefix)."""
    return _CAMEL.sub(r"\1_\2", _INVALID.sub("_", k8s_key)).lower()


_BY_NAME = {name_of(k): k for k in sorted(KNOWN)}
_RESOURCE_BY_NAME = {_INVALID.sub("_", r): r for r in RESOURCES}


def key(name: str) -> str:
    """The Kubernetes key of a kube-state-metrics label name (prefix removed): known, or as given."""
    return _BY_NAME.get(name, name)


class _Labelled(Protocol):
    @property
    def labels(self) -> Mapping[str, str]: ...


def merged(series: Iterable[_Labelled], *, prefix: str) -> dict[str, str]:
    """The Kubernetes labels (annotations, node selectors) of ``prefix`` in these series, sorted;
    an empty value is no label (Prometheus stores none)."""
    out: dict[str, str] = {}
    for labels in sorted((dict(s.labels) for s in series), key=lambda lb: sorted(lb.items())):
        for name, value in labels.items():
            if name.startswith(prefix) and value:
                out[key(name[len(prefix) :])] = value
    return dict(sorted(out.items()))


def resource(name: str) -> str | None:
    """The resource of a ``resource`` label (``nvidia_com_gpu``); None for one karpy does not model."""
    if name.startswith("hugepages_"):
        return "hugepages-" + name[len("hugepages_") :]
    return _RESOURCE_BY_NAME.get(name)


def quantity_of(resource_name: str, value: float) -> str:
    """A request as Kubernetes writes it: ``cpu`` from cores (``"500m"``), the rest from units."""
    if math.isnan(value) or value < 0:
        value = 0.0
    if resource_name == "cpu":
        return quantity.format_cpu(round(value * 1000))
    return quantity.format_quantity(resource_name, round(value))


def toleration(labels: Mapping[str, str]) -> dict[str, Any]:
    """A toleration from ``kube_pod_tolerations``' labels (empty ones left out)."""
    out: dict[str, Any] = {
        field: labels[field] for field in ("key", "operator", "value", "effect") if labels.get(field)
    }
    seconds = labels.get("toleration_seconds", "")
    if seconds.lstrip("-").isdigit():
        out["tolerationSeconds"] = int(seconds)
    return out


def taint(labels: Mapping[str, str]) -> dict[str, str]:
    """A taint from ``kube_node_spec_taint``' labels."""
    out = {"key": labels.get("key", "")}
    if labels.get("value"):
        out["value"] = labels["value"]
    out["effect"] = labels.get("effect", "")
    return out
