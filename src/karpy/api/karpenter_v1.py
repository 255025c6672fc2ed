"""``karpenter.sh/v1`` NodePool and NodeClaim schemas with upstream's OpenAPI/CEL rules.

The rules checked here are the cheap ones from ``pkg/apis/crds/karpenter.sh_nodepools.yaml``:
requirement keys (syntax and restricted domains), operators and values, ``minValues``,
restricted template labels, weight, budgets (``nodes`` pattern, schedule together with
duration, reasons), the consolidation policy and duration syntax. Parsed by
:mod:`karpy.api.load`, converted by :mod:`karpy.api.convert`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from croniter import croniter
from pydantic import AfterValidator, Field, model_validator

from karpy.api import common

__all__ = [
    "Budget",
    "Disruption",
    "NodeClaim",
    "NodeClaimSpec",
    "NodeClassReference",
    "NodePool",
    "NodePoolSpec",
    "restricted_requirement_key",
]

_WELL_KNOWN_KUBERNETES_IO = frozenset(
    {
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/windows-build",
    }
)
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_SCHEDULE = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
_REASONS = ("Underutilized", "Empty", "Drifted")


def _domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def restricted_requirement_key(key: str, *, node_claim: bool = False) -> str | None:
    """Why a NodePool (or NodeClaim) requirement may not use ``key`` (upstream's CEL), or None."""
    domain = _domain(key)
    if (
        domain.endswith("kubernetes.io")
        and key not in _WELL_KNOWN_KUBERNETES_IO
        and not domain.endswith("node.kubernetes.io")
        and not domain.endswith("node-restriction.kubernetes.io")
    ):
        return 'label domain "kubernetes.io" is restricted'
    if domain.endswith("k8s.io") and not domain.endswith("kops.k8s.io"):
        return 'label domain "k8s.io" is restricted'
    allowed = (
        ("karpenter.sh/capacity-type", "karpenter.sh/nodepool")
        if node_claim
        else ("karpenter.sh/capacity-type",)
    )
    if domain.endswith("karpenter.sh") and key not in allowed:
        return 'label domain "karpenter.sh" is restricted'
    return None


def _restricted_template_label(key: str) -> str | None:
    if key == "karpenter.sh/nodepool":
        return 'label "karpenter.sh/nodepool" is restricted'
    if key == "kubernetes.io/hostname":
        return 'label "kubernetes.io/hostname" is restricted'
    if _domain(key).endswith("karpenter.sh") and key != "karpenter.sh/capacity-type":
        return 'label domain "karpenter.sh" is restricted'
    return None


def _group(value: str) -> str:
    """``karpenter.k8s.aws/v1`` (an apiVersion written as the group) is read as its group."""
    return value.split("/", 1)[0]


class NodeClassReference(common.K8sModel):
    group: Annotated[str, Field(min_length=1), AfterValidator(_group)]
    kind: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]


class TemplateMeta(common.K8sModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _labels_allowed(self) -> TemplateMeta:
        for key, value in self.labels.items():
            reason = _restricted_template_label(key)
            if reason:
                raise common.FieldError(("labels", key), reason)
            problem = common.label_value_problem(value)
            if problem:
                raise common.FieldError(("labels", key), problem)
        return self


Requirements = Annotated[list[common.NodeSelectorRequirementWithMinValues], Field(max_length=100)]


def _check_keys(requirements: list[common.NodeSelectorRequirementWithMinValues], *, node_claim: bool) -> None:
    for i, req in enumerate(requirements):
        reason = restricted_requirement_key(req.key, node_claim=node_claim)
        if reason:
            raise common.FieldError(("requirements", i, "key"), reason)


class NodeClaimTemplateSpec(common.K8sModel):
    requirements: Requirements = Field(default_factory=list)
    taints: list[common.Taint] = Field(default_factory=list)
    startup_taints: list[common.Taint] = Field(default_factory=list)
    node_class_ref: NodeClassReference
    expire_after: common.NillableDuration = "720h"
    termination_grace_period: common.Duration | None = None

    @model_validator(mode="after")
    def _keys_allowed(self) -> NodeClaimTemplateSpec:
        _check_keys(self.requirements, node_claim=False)
        return self


class NodeClaimTemplate(common.K8sModel):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: NodeClaimTemplateSpec


def _budget_nodes(value: str) -> str:
    if not _BUDGET_NODES.match(value):
        raise ValueError(f'"{value}" must be a node count or a percentage (e.g. 5 or 10%)')
    return value


def _schedule(value: str) -> str:
    text = value.strip()
    macro = text.startswith("@")
    if not _SCHEDULE.match(value) or (not macro and not croniter.is_valid(text)):
        raise ValueError(f'"{value}" is not a cron schedule (5 fields, or @daily, @hourly ...)')
    return value


class Budget(common.K8sModel):
    nodes: Annotated[common.IntOrString, AfterValidator(_budget_nodes)] = "10%"
    schedule: Annotated[str, AfterValidator(_schedule)] | None = None
    duration: common.BudgetDuration | None = None
    reasons: list[Annotated[str, common.one_of(*_REASONS)]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if self.schedule is not None and self.duration is None:
            raise common.FieldError(("duration",), "duration is required when schedule is set")
        if self.duration is not None and self.schedule is None:
            raise common.FieldError(("schedule",), "schedule is required when duration is set")
        return self


class Disruption(common.K8sModel):
    consolidation_policy: Annotated[
        str, common.one_of("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
    ] = "WhenEmptyOrUnderutilized"
    consolidate_after: common.NillableDuration = "0s"
    budgets: Annotated[list[Budget], Field(max_length=50)] = Field(default_factory=lambda: [Budget()])


class NodePoolSpec(common.K8sModel):
    template: NodeClaimTemplate
    disruption: Disruption = Field(default_factory=Disruption)
    limits: common.ResourceList | None = None
    weight: Annotated[int | None, common.between(1, 100)] = None
    replicas: Annotated[int | None, common.at_least(0)] = None


class NodePool(common.K8sModel):
    api_version: Literal["karpenter.sh/v1"] = "karpenter.sh/v1"
    kind: Literal["NodePool"] = "NodePool"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: NodePoolSpec


class NodeClaimResources(common.K8sModel):
    requests: common.ResourceList = Field(default_factory=dict)


class NodeClaimSpec(common.K8sModel):
    requirements: Requirements = Field(default_factory=list)
    taints: list[common.Taint] = Field(default_factory=list)
    startup_taints: list[common.Taint] = Field(default_factory=list)
    node_class_ref: NodeClassReference
    resources: NodeClaimResources = Field(default_factory=NodeClaimResources)
    expire_after: common.NillableDuration | None = None
    termination_grace_period: common.Duration | None = None

    @model_validator(mode="after")
    def _keys_allowed(self) -> NodeClaimSpec:
        _check_keys(self.requirements, node_claim=True)
        return self


class NodeClaimStatus(common.K8sModel):
    provider_id: str = Field("", alias="providerID")
    node_name: str = ""
    image_id: str = Field("", alias="imageID")
    capacity: common.ResourceList = Field(default_factory=dict)
    allocatable: common.ResourceList = Field(default_factory=dict)
    conditions: list[common.Condition] = Field(default_factory=list)
    last_pod_event_time: common.Time | None = None


class NodeClaim(common.K8sModel):
    api_version: Literal["karpenter.sh/v1"] = "karpenter.sh/v1"
    kind: Literal["NodeClaim"] = "NodeClaim"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: NodeClaimSpec
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)
