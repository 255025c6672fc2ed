"""The raw NodeClaim karpy creates for a planned claim (upstream ``NodeClaimTemplate.ToNodeClaim``).

:func:`new_claim_object` turns a :class:`~karpy.core.scheduling.PlannedClaim` and its
NodePool into the JSON body for ``KubeAPI.create``, following the NodeClaim conventions of
``docs/runtime.md``: ``generateName: <nodepool>-``; labels = template labels +
``karpenter.sh/nodepool`` + ``<nodeclass group>/<lowercase kind>: <name>`` + the labels of
single-valued requirements (restricted keys skipped); annotations = template annotations +
the NodePool hash and hash version (+ ``karpy.sh/creation-reason``); finalizer
``karpenter.sh/termination``; an ownerReference to the NodePool; spec requirements
(instance-type In [options], capacity types, ...), taints, startupTaints, nodeClassRef,
``resources.requests``, expireAfter and terminationGracePeriod from the NodePool.

Called by the provisioner (``reason="provisioned"``) and by disruption orchestration for
replacements (``reason`` = the disruption reason).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from karpy.api import encode
from karpy.api import karpenter_v1 as api_karpenter
from karpy.core.disruption import drift
from karpy.core.scheduling import PlannedClaim
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim, NodePool

__all__ = [
    "MANAGED_BY_ANNOTATION",
    "MANAGED_BY_VALUE",
    "REASON_ANNOTATION",
    "claim_labels",
    "new_claim_object",
    "with_finalizer",
    "without_finalizer",
]

MANAGED_BY_ANNOTATION = "karpy.sh/managed-by"  # the operator refuses to run beside NodeClaims without it
MANAGED_BY_VALUE = "karpy"

REASON_ANNOTATION = "karpy.sh/creation-reason"


def with_finalizer(finalizers: Iterable[str]) -> list[str] | None:
    """``finalizers`` with karpy's termination finalizer added at the end; None when it is there."""
    present = list(finalizers)
    return None if wk.TERMINATION_FINALIZER in present else [*present, wk.TERMINATION_FINALIZER]


def without_finalizer(finalizers: Iterable[str]) -> list[str]:
    """``finalizers`` without karpy's termination finalizer (the others kept, in order)."""
    return [f for f in finalizers if f != wk.TERMINATION_FINALIZER]


def claim_labels(planned: PlannedClaim, pool: NodePool) -> dict[str, str]:
    """Template labels, the NodePool and NodeClass labels, and single-valued requirement labels."""
    out = {**pool.labels, **planned.labels, wk.NODEPOOL: pool.name}
    ref = pool.node_class_ref
    if ref is not None and ref.group:
        out[f"{ref.group}/{ref.kind.lower()}"] = ref.name
    out.update(planned.requirements.labels())
    out.pop(wk.HOSTNAME, None)
    return out


def new_claim_object(planned: PlannedClaim, pool: NodePool, *, reason: str) -> dict[str, Any]:
    """The raw NodeClaim (no name: the API server generates ``<pool>-NNNNN``) for ``planned``."""
    if planned.node_pool != pool.name:
        raise ValueError(f"planned claim {planned.name} belongs to {planned.node_pool}, not {pool.name}")
    requirements = tuple(
        req
        for key, req in sorted(planned.requirements.items())
        if api_karpenter.restricted_requirement_key(key, node_claim=True) is None
    )
    annotations = {
        **pool.annotations,
        drift.HASH_ANNOTATION: drift.pool_hash(pool),
        drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION,
        REASON_ANNOTATION: reason,
        MANAGED_BY_ANNOTATION: MANAGED_BY_VALUE,
    }
    claim = NodeClaim(
        name="",
        node_pool=pool.name,
        labels=claim_labels(planned, pool),
        annotations=annotations,
        requirements=requirements,
        taints=planned.taints,
        startup_taints=planned.startup_taints,
        node_class_ref=pool.node_class_ref,
        requests=planned.requests,
        expire_after=math.inf if pool.expire_after is None else pool.expire_after,
        termination_grace_period=pool.termination_grace_period,
    )
    obj = encode.node_claim(claim, generate_name=f"{pool.name}-", finalizers=(wk.TERMINATION_FINALIZER,))
    owner: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": pool.name,
        "blockOwnerDeletion": True,
    }
    if pool.uid:
        owner["uid"] = pool.uid
    obj["metadata"]["ownerReferences"] = [owner]
    return obj
