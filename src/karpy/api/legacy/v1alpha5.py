"""``karpenter.sh/v1alpha5`` Provisioner and ``karpenter.k8s.aws/v1alpha1`` AWSNodeTemplate → v1.

A Provisioner becomes a NodePool: labels/annotations go to the template's metadata;
requirements (with the defaults v1alpha5's webhook added: linux, amd64, on-demand, and
categories c/m/r of generation > 2 when no instance-type key is constrained), taints and
startup taints to the template's spec; ``ttlSecondsAfterEmpty`` → ``WhenEmpty`` after that
many seconds, ``consolidation.enabled: true`` → ``WhenEmptyOrUnderutilized`` after 0s,
neither → ``WhenEmpty`` after ``Never``; ``ttlSecondsUntilExpired`` → ``expireAfter``
(unset → ``Never``); ``limits.resources`` → ``limits``; ``weight``; ``providerRef`` →
``nodeClassRef`` (EC2NodeClass of the same name); an inline ``provider`` → an EC2NodeClass
named after the Provisioner. ``kubeletConfiguration`` is handed on as a
:class:`~karpy.api.legacy.base.KubeletUse` (its v1 home is the EC2NodeClass). An
AWSNodeTemplate becomes an EC2NodeClass: selector maps → selector terms (``aws::ids`` → id
terms, comma-separated tag values → one term per combination), ``amiFamily`` (default AL2)
→ an alias, or kept beside the ``amiSelector`` terms. Called by :mod:`karpy.api.legacy.convert`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from karpy.api.legacy import base, ec2

__all__ = ["aws_node_template", "provisioner"]

_ID_KEYS = ("aws::ids", "aws-ids")
_MAX_TERMS = 30
_TYPE_KEYS = (
    "node.kubernetes.io/instance-type",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-generation",
)


def _split(value: object) -> list[str]:
    return [part.strip() for part in str(value).split(",") if part.strip()]


def _map_key(path: str, key: object) -> str:
    return f"{path}[{key}]"


def _id_terms(raw: Mapping[str, Any], path: str, result: base.Result) -> list[dict[str, Any]]:
    """``aws::ids`` / ``aws-ids`` (comma-separated) → id terms; the other filters beside them warn."""
    ids = [i for k in _ID_KEYS if k in raw for i in _split(raw[k])]
    if ids:
        for k in sorted(str(k) for k in raw if k not in _ID_KEYS):
            result.warn(
                _map_key(path, k),
                "a filter beside aws::ids has no v1 equivalent (an id term stands alone); dropped",
            )
    return [{"id": i} for i in ids]


def _unknown_aws_keys(raw: Mapping[str, Any], path: str, result: base.Result, known: tuple[str, ...]) -> None:
    for k in sorted(str(k) for k in raw if str(k).startswith("aws::") and k not in known):
        result.warn(_map_key(path, k), "has no v1 equivalent; dropped")


def _selector_terms(parent: base.Reader, key: str) -> list[dict[str, Any]] | None:
    """A v1alpha1 selector map → v1 terms: ids alone, else tags (one term per value combination)."""
    raw, path, result = parent.get(key), parent.at(key), parent.result
    if raw is None:
        result.fail(path, "required")
        return None
    if not isinstance(raw, Mapping) or not raw:
        result.fail(path, "expected a map of tag filters (or aws::ids)")
        return None
    ids = _id_terms(raw, path, result)
    if ids:
        return ids
    _unknown_aws_keys(raw, path, result, ())
    tags = {str(k): _split(v) or [str(v)] for k, v in raw.items() if not str(k).startswith("aws::")}
    combos = [dict(zip(tags, values, strict=True)) for values in itertools.product(*tags.values())]
    if len(combos) > _MAX_TERMS:
        result.fail(path, f"comma-separated values make {len(combos)} terms (v1 allows {_MAX_TERMS})")
        return None
    return [{"tags": combo} for combo in combos]


def _ami_terms(parent: base.Reader) -> list[dict[str, Any]]:
    """``amiSelector`` → terms: ``aws::ids`` alone, else owner × name (+ tags) as upstream's converter."""
    raw, path, result = parent.get("amiSelector"), parent.at("amiSelector"), parent.result
    if not isinstance(raw, Mapping) or not raw:
        result.fail(path, "expected a map of AMI filters")
        return []
    ids = _id_terms(raw, path, result)
    if ids:
        return ids
    _unknown_aws_keys(raw, path, result, ("aws::name", "aws::owners"))
    names, owners = _split(raw.get("aws::name", "")), _split(raw.get("aws::owners", ""))
    tags = {str(k): str(v) for k, v in raw.items() if not str(k).startswith("aws::")}
    terms = []
    for owner in owners or [""]:
        for name in names or [""]:
            term = {"name": name, "owner": owner, "tags": dict(tags)}
            terms.append({k: v for k, v in term.items() if v})
    return terms


def _node_class_spec(reader: base.Reader, options: base.Options) -> tuple[dict[str, Any], dict[str, str]]:
    """An AWSNodeTemplate spec (or an inline provider) → a v1 EC2NodeClass spec and its origins."""
    spec: dict[str, Any] = {}
    origin: dict[str, str] = {}
    selected = reader.has("amiSelector")
    family, alias = ec2.ami(
        reader.get("amiFamily", "AL2"), selected=selected, path=reader.at("amiFamily"), result=reader.result
    )
    if family:
        spec["amiFamily"] = family
        origin["spec.amiFamily"] = reader.at("amiFamily")
    spec["amiSelectorTerms"] = _ami_terms(reader) if selected else alias
    origin["spec.amiSelectorTerms"] = reader.at("amiSelector" if selected else "amiFamily")
    for key in ("subnetSelector", "securityGroupSelector"):
        terms = _selector_terms(reader, key)
        if terms is not None:
            spec[f"{key}Terms"] = terms
            origin[f"spec.{key}Terms"] = reader.at(key)
    ec2.identity(reader, spec, options)
    for key in ("userData", "tags", "blockDeviceMappings", "detailedMonitoring", "context"):
        if reader.has(key):
            spec[key] = reader.get(key)
    for key in (
        "userData",
        "tags",
        "blockDeviceMappings",
        "detailedMonitoring",
        "context",
        "role",
        "instanceProfile",
    ):
        origin[f"spec.{key}"] = reader.at(key)
    spec["metadataOptions"] = ec2.metadata_options(reader.child("metadataOptions"))
    origin["spec.metadataOptions"] = reader.at("metadataOptions")
    if reader.has("launchTemplate"):
        reader.get("launchTemplate")
        reader.result.warn(
            reader.at("launchTemplate"),
            "has no v1 equivalent (v1 does not launch from your own launch templates); dropped: "
            "the node class's own fields now decide AMI, user data and security groups",
        )
    reader.done(ignore=("apiVersion", "kind"))
    return spec, origin


def _meta(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A new kind's metadata: name, labels and annotations (server-set fields belong to the old object)."""
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return {}
    return {k: meta[k] for k in ("name", "labels", "annotations") if meta.get(k) is not None}


def aws_node_template(raw: Mapping[str, Any], options: base.Options) -> base.Result:
    meta = _meta(raw)
    result = base.Result("AWSNodeTemplate", str(meta.get("name", "")))
    spec, origin = _node_class_spec(base.Reader(raw.get("spec"), "spec", result), options)
    out = {"apiVersion": "karpenter.k8s.aws/v1", "kind": base.EC2_KIND, "metadata": meta, "spec": spec}
    if isinstance(raw.get("status"), Mapping):
        out["status"] = raw["status"]
    result.outputs.append(base.Output(out, {"metadata": "metadata", **origin}))
    return result


def _requirements(reader: base.Reader) -> Any:
    """The requirements plus the defaults v1alpha5's webhook added for keys left open."""
    reqs = reader.get("requirements", [])
    if not isinstance(reqs, list):
        return reqs  # the v1 schema reports it
    keys = {r.get("key") for r in reqs if isinstance(r, Mapping)}
    added = [
        {"key": key, "operator": "In", "values": [value]}
        for key, value in (
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("karpenter.sh/capacity-type", "on-demand"),
        )
        if key not in keys
    ]
    if not keys.intersection(_TYPE_KEYS):
        added += [
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
        ]
    return [*reqs, *added]


def _disruption(reader: base.Reader) -> dict[str, Any]:
    consolidation = reader.child("consolidation")
    enabled = consolidation.get("enabled")
    consolidation.done()
    if enabled is not None and not isinstance(enabled, bool):
        reader.result.fail(consolidation.at("enabled"), f"expected true or false, got {enabled!r}")
    empty = reader.get("ttlSecondsAfterEmpty")
    if enabled is True:
        if empty is not None:
            reader.result.fail(
                reader.at("ttlSecondsAfterEmpty"), "cannot be set together with consolidation.enabled: true"
            )
        return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    if empty is not None:
        after = base.seconds(empty, reader.at("ttlSecondsAfterEmpty"), reader.result) or "0s"
        return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": after}
    return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}


def _node_class_ref(reader: base.Reader, name: str, options: base.Options) -> tuple[str, base.Output | None]:
    """(the EC2NodeClass name, the class made from an inline provider or None)."""
    result = reader.result
    if reader.has("provider"):
        if reader.has("providerRef"):
            result.fail(reader.at("provider"), "cannot be set together with spec.providerRef")
        spec, origin = _node_class_spec(reader.child("provider"), options)
        meta = {"name": name}
        out = {"apiVersion": "karpenter.k8s.aws/v1", "kind": base.EC2_KIND, "metadata": meta, "spec": spec}
        return name, base.Output(out, {"metadata": "metadata", **origin})
    if not reader.has("providerRef"):
        result.fail(reader.at("providerRef"), "required (or spec.provider)")
        return "", None
    ref = reader.child("providerRef")
    kind = ref.get("kind", "AWSNodeTemplate")
    ref.get("apiVersion")
    target = str(ref.get("name", ""))
    if kind != "AWSNodeTemplate":
        result.fail(ref.at("kind"), f"only AWSNodeTemplate references convert, got {kind!r}")
    if not target:
        result.fail(ref.at("name"), "required")
    ref.done()
    return target, None


def provisioner(raw: Mapping[str, Any], options: base.Options) -> base.Result:
    meta = _meta(raw)
    name = str(meta.get("name", ""))
    result = base.Result("Provisioner", name)
    reader = base.Reader(raw.get("spec"), "spec", result)
    class_name, inline = _node_class_ref(reader, name, options)
    template_meta = {k: reader.get(k) for k in ("labels", "annotations") if reader.has(k)}
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": base.EC2_GROUP, "kind": base.EC2_KIND, "name": class_name},
        "expireAfter": "Never",
        "requirements": _requirements(reader),
    }
    if reader.has("ttlSecondsUntilExpired"):
        path = reader.at("ttlSecondsUntilExpired")
        template_spec["expireAfter"] = (
            base.seconds(reader.get("ttlSecondsUntilExpired"), path, result) or "Never"
        )
    for key in ("taints", "startupTaints"):
        if reader.has(key):
            template_spec[key] = reader.get(key)
    template: dict[str, Any] = {"metadata": template_meta} if template_meta else {}
    template["spec"] = template_spec
    spec: dict[str, Any] = {"template": template, "disruption": _disruption(reader)}
    if reader.has("limits"):
        limits = reader.child("limits")
        spec["limits"] = limits.get("resources", {})
        limits.done()
    if reader.has("weight"):
        spec["weight"] = reader.get("weight")
    kubelet = base.kubelet(reader.child("kubeletConfiguration")) if reader.has("kubeletConfiguration") else {}
    reader.done()
    out = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": spec}
    pool = base.Output(out, dict(_POOL_ORIGIN))
    result.outputs.append(pool)
    if inline is not None:
        result.outputs.append(inline)
    if class_name:
        result.kubelet = base.KubeletUse(name, class_name, kubelet, "spec.kubeletConfiguration", pool)
    return result


_POOL_ORIGIN = {
    "metadata": "metadata",
    "spec.template.metadata.labels": "spec.labels",
    "spec.template.metadata.annotations": "spec.annotations",
    "spec.template.spec.requirements": "spec.requirements",
    "spec.template.spec.taints": "spec.taints",
    "spec.template.spec.startupTaints": "spec.startupTaints",
    "spec.template.spec.nodeClassRef": "spec.providerRef",
    "spec.template.spec.expireAfter": "spec.ttlSecondsUntilExpired",
    "spec.disruption": "spec.consolidation",
    "spec.disruption.consolidateAfter": "spec.ttlSecondsAfterEmpty",
    "spec.limits": "spec.limits.resources",
    "spec.weight": "spec.weight",
}
