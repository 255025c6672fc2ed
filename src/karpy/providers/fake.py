"""An in-memory CloudProvider for tests (Karpenter's ``cloudprovider/fake``).

``create`` picks the launch rule's instance type and offering
(:func:`karpy.core.scheduling.launch.choose`), records the call and
returns the hydrated NodeClaim; ``next_error`` fails the next create once; ``delete``
removes the instance and raises ``NodeClaimNotFound`` once it is gone (so termination can
finish); ``instances`` is what exists. Nothing here writes Node objects (the kwok provider
does).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

from karpy.core.scheduling.launch import choose
from karpy.model import errors, labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodeClaim, NodePool
from karpy.model.requirements import Requirements

__all__ = ["FakeCloudProvider"]


class FakeCloudProvider:
    name = "fake"

    def __init__(self, instance_types: Sequence[InstanceType]) -> None:
        self.types = tuple(instance_types)
        self.instances: dict[str, NodeClaim] = {}
        self.create_calls: list[NodeClaim] = []
        self.delete_calls: list[NodeClaim] = []
        self.next_error: errors.CloudError | None = None
        self.drifted: dict[str, str] = {}
        self._ids = itertools.count(1)

    def instance_types(self, pool: NodePool) -> tuple[InstanceType, ...]:
        return self.types

    def create(self, claim: NodeClaim) -> NodeClaim:
        self.create_calls.append(claim)
        if self.next_error is not None:
            error, self.next_error = self.next_error, None
            raise error
        chosen = choose(Requirements(claim.requirements), self.types)
        if chosen is None:
            raise errors.InsufficientCapacity(f"no compatible available offering for {claim.name}")
        it, offering = chosen
        provider_id = f"fake://{claim.name or 'claim'}-{next(self._ids)}"
        hydrated = dataclasses.replace(
            claim,
            provider_id=provider_id,
            labels={
                **it.labels,
                **claim.labels,
                labels.INSTANCE_TYPE: it.name,
                labels.ZONE: offering.zone,
                labels.CAPACITY_TYPE: offering.capacity_type,
            },
            capacity=it.capacity,
            allocatable=it.allocatable,
        )
        self.instances[provider_id] = hydrated
        return hydrated

    def delete(self, claim: NodeClaim) -> None:
        self.delete_calls.append(claim)
        if self.instances.pop(claim.provider_id, None) is None:
            raise errors.NodeClaimNotFound(f"instance {claim.provider_id} not found")

    def get(self, provider_id: str) -> NodeClaim:
        try:
            return self.instances[provider_id]
        except KeyError:
            raise errors.NodeClaimNotFound(f"instance {provider_id} not found") from None

    def list(self) -> list[NodeClaim]:
        return [self.instances[k] for k in sorted(self.instances)]

    def is_drifted(self, claim: NodeClaim) -> str:
        return self.drifted.get(claim.provider_id, "")
