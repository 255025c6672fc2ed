"""Unknown fields: the keys of a raw object its kind's schema does not define (kubectl's field validation).

:func:`unknown_fields` walks a raw object along its :mod:`karpy.api` schema and returns every key
the schema does not know, as a Kubernetes field path (``spec.disruption.consolidateAfer``, list
items ``[0]``, map keys ``[key]``) with the nearest known name (:mod:`difflib`) when one is close.

What counts as known is the upstream schema, not only what karpy reads: the pydantic models give
the fields karpy reads, and :data:`UPSTREAM_ONLY` the fields of the same upstream structs karpy
does not read (``deploy/crds/`` is karpy's own and leaves parts open, such as ``kubelet``, so the
upstream Go types are the reference: karpenter.sh/v1, karpenter.k8s.aws/v1, core/v1 as of
Kubernetes 1.34). A field karpy does not model is not walked into (``spec.volumes``,
``containers[0].env``, ``metadata.managedFields``), and neither is ``status``, which controllers
write: so for Pods and workloads only the structs karpy reads are checked (PodSpec's own keys,
containers, resources, affinity, tolerations, topology spread), for Karpenter's kinds the whole
spec. Called by :mod:`karpy.api.load` for objects read from files.
"""

from __future__ import annotations

import difflib
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from karpy.api import apps_v1, common, core_v1, karpenter_v1, nodeclasses, policy_v1

__all__ = ["IGNORE", "MODES", "STRICT", "UPSTREAM_ONLY", "WARN", "Unknown", "known_fields", "unknown_fields"]

IGNORE = "ignore"  # objects from an API server: it validated them against its own schema
WARN = "warn"  # objects from files (the default): a warning per unknown field
STRICT = "strict"  # --strict: an unknown field is an error and the object is not used
MODES = (IGNORE, WARN, STRICT)

# ObjectMeta's fields (apimachinery meta/v1) that karpy does not read.
_OBJECT_META = frozenset(
    {
        "selfLink",
        "resourceVersion",
        "deletionGracePeriodSeconds",
        "finalizers",
        "managedFields",
        "generateName",
        "namespace",
        "uid",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "ownerReferences",
        "name",
    }
)
_TOP = frozenset({"status"})  # a kind whose status karpy does not model: not checked

UPSTREAM_ONLY: dict[type[BaseModel], frozenset[str]] = {
    common.ObjectMeta: _OBJECT_META,
    common.OwnerReference: frozenset({"blockOwnerDeletion"}),
    common.Taint: frozenset({"timeAdded"}),
    core_v1.PodTemplateMeta: _OBJECT_META,
    core_v1.ContainerPort: frozenset({"name"}),
    core_v1.ResourceRequirements: frozenset({"claims"}),
    core_v1.Container: frozenset(
        {
            "image",
            "command",
            "args",
            "workingDir",
            "envFrom",
            "env",
            "resizePolicy",
            "restartPolicyRules",
            "volumeMounts",
            "volumeDevices",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
            "terminationMessagePath",
            "terminationMessagePolicy",
            "imagePullPolicy",
            "securityContext",
            "stdin",
            "stdinOnce",
            "tty",
        }
    ),
    core_v1.PodSpec: frozenset(
        {
            "volumes",
            "ephemeralContainers",
            "restartPolicy",
            "activeDeadlineSeconds",
            "dnsPolicy",
            "serviceAccountName",
            "serviceAccount",
            "automountServiceAccountToken",
            "hostPID",
            "hostIPC",
            "shareProcessNamespace",
            "securityContext",
            "imagePullSecrets",
            "hostname",
            "subdomain",
            "schedulerName",
            "hostAliases",
            "dnsConfig",
            "readinessGates",
            "runtimeClassName",
            "enableServiceLinks",
            "preemptionPolicy",
            "setHostnameAsFQDN",
            "os",
            "hostUsers",
            "resourceClaims",
            "resources",
            "hostnameOverride",
        }
    ),
    core_v1.NodeSpec: frozenset({"podCIDR", "podCIDRs", "configSource", "externalID"}),
    core_v1.Namespace: frozenset({"spec", "status"}),
    apps_v1.WorkloadSpec: frozenset(
        {"strategy", "minReadySeconds", "revisionHistoryLimit", "paused", "progressDeadlineSeconds"}
    ),
    apps_v1.DaemonSetSpec: frozenset({"updateStrategy", "minReadySeconds", "revisionHistoryLimit"}),
    apps_v1.DaemonSet: _TOP,
    apps_v1.Deployment: _TOP,
    apps_v1.ReplicaSet: _TOP,
    karpenter_v1.NodePool: _TOP,
    nodeclasses.KWOKNodeClass: _TOP,
    nodeclasses.EC2NodeClassSpec: frozenset({"ipPrefixCount"}),
    nodeclasses.SelectorTerm: frozenset({"cidr"}),  # subnets (a security group term has name)
}

# Written by controllers, not by users: never checked.
_NOT_CHECKED: frozenset[type[BaseModel]] = frozenset(
    {
        core_v1.PodStatus,
        core_v1.NodeStatus,
        policy_v1.PodDisruptionBudgetStatus,
        karpenter_v1.NodeClaimStatus,
        nodeclasses.EC2NodeClassStatus,
    }
)


@dataclass(frozen=True, slots=True)
class Unknown:
    """A key the schema does not define, at ``path``; ``nearest``: the known name it is closest to."""

    path: str
    nearest: str | None = None

    @property
    def message(self) -> str:
        return "unknown field" + (f"; did you mean {self.nearest}?" if self.nearest else "")


# How a value is walked: a struct (its model), a list or a map of a walked shape; None: not walked.
_Shape = tuple[str, Any] | None


def _shape(tp: Any) -> _Shape:
    tp = common.strip_annotation(tp)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return None if tp in _NOT_CHECKED else ("struct", tp)
    args = typing.get_args(tp)
    if origin in (list, tuple) and args:
        item = _shape(args[0])
        return None if item is None else ("list", item)
    if origin is dict and len(args) == 2:
        item = _shape(args[1])
        return None if item is None else ("map", item)
    return None


@functools.cache
def _children(model: type[BaseModel]) -> dict[str, _Shape]:
    """Wire name (alias) -> how to walk the value of each field the model reads."""
    return {(info.alias or name): _shape(info.annotation) for name, info in model.model_fields.items()}


@functools.cache
def known_fields(model: type[BaseModel]) -> frozenset[str]:
    """Every field name upstream defines on the struct ``model`` stands for."""
    return frozenset(_children(model)) | UPSTREAM_ONLY.get(model, frozenset())


def _nearest(key: str, known: frozenset[str]) -> str | None:
    folded = {k.lower(): k for k in known}
    if key.lower() in folded:
        return folded[key.lower()]
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(value: Any, shape: tuple[str, Any], path: str, out: list[Unknown]) -> None:
    how, inner = shape
    if how == "struct":
        if not isinstance(value, Mapping):
            return  # (a wrong type is the schema's validation error)
        children, known = _children(inner), known_fields(inner)
        for key, item in value.items():
            name = str(key)
            if name not in known:
                out.append(Unknown(_at(path, name), _nearest(name, known)))
            elif item is not None:
                sub = children.get(name)
                if sub is not None:
                    _walk(item, sub, _at(path, name), out)
    elif how == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, inner, f"{path}[{i}]", out)
    elif how == "map" and isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, inner, f"{path}[{key}]", out)


def unknown_fields(raw: Mapping[str, Any], schema: type[BaseModel], *, path: str = "") -> list[Unknown]:
    """The keys of ``raw`` (and below) that ``schema``'s upstream struct does not define, in document
    order; ``path`` is the location of ``raw`` itself (``spec`` when given a Pod's spec)."""
    out: list[Unknown] = []
    shape = _shape(schema)
    if shape is not None:
        _walk(raw, shape, path, out)
    return out
