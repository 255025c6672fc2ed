"""``apps/v1`` DaemonSet, Deployment and ReplicaSet schemas: pod templates and replicas.

A Deployment or ReplicaSet becomes ``replicas`` pending pods (:func:`karpy.api.convert.expand`);
a DaemonSet's template is the per-node overhead the scheduler adds. Parsed by
:mod:`karpy.api.load`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from karpy.api import common, core_v1

__all__ = ["DaemonSet", "Deployment", "ReplicaSet"]


def _check_selector(selector: common.LabelSelector | None, labels: dict[str, str]) -> None:
    """apps/v1 rejects a selector that does not select its own template."""
    if selector is None:
        return
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            raise common.FieldError(
                ("template", "metadata", "labels"),
                f"selector does not match template labels (needs {key}={value})",
            )


class WorkloadSpec(common.K8sModel):
    replicas: Annotated[int, common.at_least(0)] = 1
    selector: common.LabelSelector | None = None
    template: core_v1.PodTemplateSpec

    @model_validator(mode="after")
    def _selector_matches(self) -> WorkloadSpec:
        _check_selector(self.selector, self.template.metadata.labels)
        return self


class DaemonSetSpec(common.K8sModel):
    selector: common.LabelSelector | None = None
    template: core_v1.PodTemplateSpec

    @model_validator(mode="after")
    def _selector_matches(self) -> DaemonSetSpec:
        _check_selector(self.selector, self.template.metadata.labels)
        return self


class DaemonSet(common.K8sModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["DaemonSet"] = "DaemonSet"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: DaemonSetSpec


class Deployment(common.K8sModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["Deployment"] = "Deployment"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: WorkloadSpec


class ReplicaSet(common.K8sModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["ReplicaSet"] = "ReplicaSet"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: WorkloadSpec
