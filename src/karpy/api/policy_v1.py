"""``policy/v1`` PodDisruptionBudget schema: selector, minAvailable/maxUnavailable, status.

Disruption reads it to decide which pods may be evicted. Parsed by :mod:`karpy.api.load`,
converted by :mod:`karpy.api.convert`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from karpy.api import common

__all__ = ["PodDisruptionBudget"]

_COUNT_OR_PERCENT = re.compile(r"^(?:[0-9]+|[0-9]+%)$")


def _count_or_percent(value: str | None) -> str | None:
    if value is not None and not _COUNT_OR_PERCENT.match(value):
        raise ValueError(f'"{value}" must be a non-negative integer or a percentage (e.g. 1 or 20%)')
    return value


CountOrPercent = Annotated[common.IntOrString | None, AfterValidator(_count_or_percent)]


class PodDisruptionBudgetSpec(common.K8sModel):
    selector: common.LabelSelector | None = None
    min_available: CountOrPercent = None
    max_unavailable: CountOrPercent = None
    unhealthy_pod_eviction_policy: Annotated[str, common.one_of("IfHealthyBudget", "AlwaysAllow")] = (
        "IfHealthyBudget"
    )

    @model_validator(mode="after")
    def _one_of_min_max(self) -> PodDisruptionBudgetSpec:
        if self.min_available is not None and self.max_unavailable is not None:
            raise common.FieldError(("maxUnavailable",), "minAvailable and maxUnavailable cannot both be set")
        return self


class PodDisruptionBudgetStatus(common.K8sModel):
    disruptions_allowed: int | None = None


class PodDisruptionBudget(common.K8sModel):
    api_version: Literal["policy/v1"] = "policy/v1"
    kind: Literal["PodDisruptionBudget"] = "PodDisruptionBudget"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)
