"""``karpenter.sh/v1beta1`` NodePool and NodeClaim, ``karpenter.k8s.aws/v1beta1`` EC2NodeClass → v1.

NodePool: ``WhenUnderutilized`` → ``WhenEmptyOrUnderutilized`` after 0s (as upstream's
conversion webhook); ``WhenEmpty`` keeps its ``consolidateAfter``; ``disruption.expireAfter``
(default 720h) → ``template.spec.expireAfter``; ``nodeClassRef.apiVersion`` → ``group``;
``template.spec.kubelet`` is handed on as a :class:`~karpy.api.legacy.base.KubeletUse` (its
v1 home is the EC2NodeClass). EC2NodeClass: without ``amiSelectorTerms`` the family becomes
an alias (``AL2`` → ``al2@latest``); the legacy metadata-options default (hop limit 2) is
written out. NodeClaim: ``nodeClassRef`` as above; its ``kubelet`` has no v1 place. The
objects keep their metadata and status (same kinds, a newer version). Called by
:mod:`karpy.api.legacy.convert`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.api.legacy import base, ec2

__all__ = ["ec2_node_class", "node_claim", "node_pool"]

_NODE_CLASS_FIELDS = (
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "role",
    "instanceProfile",
    "userData",
    "tags",
    "kubelet",
    "blockDeviceMappings",
    "instanceStorePolicy",
    "detailedMonitoring",
    "associatePublicIPAddress",
    "context",
)


def _start(raw: Mapping[str, Any], kind: str) -> tuple[dict[str, Any], base.Result]:
    meta = raw.get("metadata")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    return meta, base.Result(kind, str(meta.get("name", "")))


def _finish(raw: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(raw.get("status"), Mapping):
        out["status"] = raw["status"]
    return out


def _ref(parent: base.Reader) -> dict[str, Any]:
    """``{apiVersion, kind, name}`` → ``{group, kind, name}`` (default: karpenter.k8s.aws EC2NodeClass)."""
    if not parent.has("nodeClassRef"):
        parent.result.fail(parent.at("nodeClassRef"), "required")
    ref = parent.child("nodeClassRef")
    api_version = str(ref.get("apiVersion", f"{base.EC2_GROUP}/v1beta1"))
    out = {
        "group": str(ref.get("group", api_version.split("/", 1)[0])),
        "kind": ref.get("kind", base.EC2_KIND),
        "name": ref.get("name", ""),
    }
    ref.done()
    return out


def _disruption(reader: base.Reader, template_spec: dict[str, Any]) -> dict[str, Any]:
    policy = reader.get("consolidationPolicy", "WhenUnderutilized")
    after = reader.get("consolidateAfter")
    template_spec["expireAfter"] = reader.get("expireAfter", "720h")
    out: dict[str, Any] = {}
    if policy == "WhenUnderutilized":
        out = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        if after is not None:
            reader.result.warn(
                reader.at("consolidateAfter"),
                "cannot be combined with WhenUnderutilized in v1beta1; dropped "
                "(v1 consolidates after 0s, as upstream's conversion does)",
            )
    elif policy == "WhenEmpty":
        if after is None:
            reader.result.fail(reader.at("consolidateAfter"), "required with consolidationPolicy WhenEmpty")
        out = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": after}
    else:
        reader.result.fail(
            reader.at("consolidationPolicy"), f"must be WhenEmpty or WhenUnderutilized, got {policy!r}"
        )
    if reader.has("budgets"):
        out["budgets"] = reader.get("budgets")
    reader.done()
    return out


def node_pool(raw: Mapping[str, Any], options: base.Options) -> base.Result:
    del options  # nothing in a v1beta1 NodePool depends on the cluster's settings
    meta, result = _start(raw, "NodePool")
    spec = base.Reader(raw.get("spec"), "spec", result)
    template = spec.child("template")
    template_spec_in = template.child("spec")
    template_spec: dict[str, Any] = {"nodeClassRef": _ref(template_spec_in)}
    for key in ("requirements", "taints", "startupTaints", "terminationGracePeriod"):
        if template_spec_in.has(key):
            template_spec[key] = template_spec_in.get(key)
    has_kubelet = template_spec_in.has("kubelet")
    kubelet = base.kubelet(template_spec_in.child("kubelet")) if has_kubelet else {}
    template_spec_in.done()
    out_template: dict[str, Any] = {}
    if template.has("metadata"):
        out_template["metadata"] = template.get("metadata")
    template.done()
    out_template["spec"] = template_spec
    out_spec: dict[str, Any] = {
        "template": out_template,
        "disruption": _disruption(spec.child("disruption"), template_spec),
    }
    for key in ("limits", "weight"):
        if spec.has(key):
            out_spec[key] = spec.get(key)
    spec.done()
    # (a NodePool's status is the controller's to write again: not carried over)
    out = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": out_spec}
    origin = {"spec.template.spec.expireAfter": "spec.disruption.expireAfter"}
    pool = base.Output(out, origin)
    result.outputs.append(pool)
    ref = template_spec["nodeClassRef"]
    if (ref["group"], ref["kind"]) == (base.EC2_GROUP, base.EC2_KIND) and ref["name"]:
        result.kubelet = base.KubeletUse(
            result.name, str(ref["name"]), kubelet, "spec.template.spec.kubelet", pool
        )
    elif kubelet:
        result.warn("spec.template.spec.kubelet", f"has no v1 place for a {ref['kind']} node class; dropped")
    return result


def ec2_node_class(raw: Mapping[str, Any], options: base.Options) -> base.Result:
    del options  # a v1beta1 EC2NodeClass names its own role or instance profile
    meta, result = _start(raw, base.EC2_KIND)
    spec = base.Reader(raw.get("spec"), "spec", result)
    out: dict[str, Any] = {}
    selected = spec.has("amiSelectorTerms")
    if not spec.has("amiFamily"):
        result.fail(spec.at("amiFamily"), "required (v1beta1 has no default AMI family)")
    family, alias = ec2.ami(
        spec.get("amiFamily", "AL2"), selected=selected, path=spec.at("amiFamily"), result=result
    )
    if family:
        out["amiFamily"] = family
    out["amiSelectorTerms"] = spec.get("amiSelectorTerms") if selected else alias
    for key in _NODE_CLASS_FIELDS:
        if spec.has(key):
            out[key] = spec.get(key)
    out["metadataOptions"] = ec2.metadata_options(spec.child("metadataOptions"))
    spec.done()
    doc = _finish(
        raw, {"apiVersion": "karpenter.k8s.aws/v1", "kind": base.EC2_KIND, "metadata": meta, "spec": out}
    )
    origin = {} if selected else {"spec.amiSelectorTerms": "spec.amiFamily"}
    result.outputs.append(base.Output(doc, origin))
    return result


def node_claim(raw: Mapping[str, Any], options: base.Options) -> base.Result:
    del options
    meta, result = _start(raw, "NodeClaim")
    spec = base.Reader(raw.get("spec"), "spec", result)
    out: dict[str, Any] = {"nodeClassRef": _ref(spec)}
    for key in ("requirements", "taints", "startupTaints", "resources"):
        if spec.has(key):
            out[key] = spec.get(key)
    if spec.has("kubelet"):
        spec.get("kubelet")
        result.warn(
            spec.at("kubelet"),
            "has no v1 equivalent on a NodeClaim (a v1 kubelet is set on the EC2NodeClass); dropped",
        )
    spec.done()
    doc = _finish(raw, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta, "spec": out})
    result.outputs.append(base.Output(doc))
    return result
