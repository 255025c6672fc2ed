"""``claims.new_claim_object``: the raw NodeClaim built from a planned claim and its NodePool."""

from __future__ import annotations

from typing import Any

import pytest

import builders
from karpy import api
from karpy.controllers import claims
from karpy.core.disruption import drift
from karpy.core.scheduling import PlannedClaim, solve
from karpy.model import labels as wk
from karpy.model.objects import NodeClassRef, NodePool
from karpy.model.taints import Taint

TYPES = [
    builders.instance_type("small", cpu="2", memory="4Gi"),
    builders.instance_type("medium", cpu="4", memory="8Gi"),
    builders.instance_type("large", cpu="8", memory="16Gi"),
]
REF = NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")


def _pool(**overrides: Any) -> NodePool:
    fields: dict[str, Any] = {
        "labels": {"team": "a"},
        "annotations": {"example.com/owner": "ops"},
        "taints": [Taint("dedicated", "NoSchedule", "a")],
        "startup_taints": (Taint("example.com/booting", "NoSchedule"),),
        "node_class_ref": REF,
        "expire_after": 3600.0,
        "termination_grace_period": 600.0,
        "uid": "pool-uid-1",
        "requirements": [
            (wk.CAPACITY_TYPE, "In", ["on-demand"]),
            ("example.com/tier", "In", ["gold"]),
        ],
    }
    fields.update(overrides)
    return builders.node_pool("general", **fields)


def _planned(pool: NodePool) -> PlannedClaim:
    from karpy.model.taints import Toleration

    tolerate = (Toleration(key="dedicated", operator="Equal", value="a", effect="NoSchedule"),)
    pods = [builders.pod(f"p{i}", cpu="1", memory="1Gi", tolerations=tolerate) for i in range(3)]
    results = solve(builders.snapshot(pools=[pool], types=TYPES, pods=pods), pods)
    assert not results.errors, results.errors
    (planned,) = results.new_claims
    return planned


def test_object_shape() -> None:
    pool = _pool()
    planned = _planned(pool)
    obj = claims.new_claim_object(planned, pool, reason="provisioned")
    meta = obj["metadata"]
    assert obj["apiVersion"] == "karpenter.sh/v1" and obj["kind"] == "NodeClaim"
    assert "name" not in meta and meta["generateName"] == "general-"
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "general",
            "uid": "pool-uid-1",
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"]["team"] == "a"
    assert meta["labels"][wk.NODEPOOL] == "general"
    assert meta["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert meta["labels"]["example.com/tier"] == "gold"  # single-valued requirement
    assert meta["labels"][wk.CAPACITY_TYPE] == "on-demand"
    assert wk.HOSTNAME not in meta["labels"]
    assert wk.INSTANCE_TYPE not in meta["labels"]  # several options: no label
    assert meta["annotations"][drift.HASH_ANNOTATION] == drift.pool_hash(pool)
    assert meta["annotations"][drift.HASH_VERSION_ANNOTATION] == drift.HASH_VERSION == "karpy-v1"
    assert meta["annotations"]["example.com/owner"] == "ops"
    assert meta["annotations"][claims.REASON_ANNOTATION] == "provisioned"
    spec = obj["spec"]
    reqs = {r["key"]: r for r in spec["requirements"]}
    assert reqs[wk.INSTANCE_TYPE] == {
        "key": wk.INSTANCE_TYPE,
        "operator": "In",
        "values": sorted(it.name for it in planned.instance_types),
    }
    assert set(reqs[wk.INSTANCE_TYPE]["values"]) == {"medium", "large"}  # 3 cpu: small is too small
    assert reqs[wk.CAPACITY_TYPE]["values"] == ["on-demand"]
    assert reqs[wk.NODEPOOL]["values"] == ["general"]
    assert wk.HOSTNAME not in reqs
    assert spec["taints"] == [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "example.com/booting", "effect": "NoSchedule"}]
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["expireAfter"] == "1h" and spec["terminationGracePeriod"] == "10m"
    assert spec["resources"]["requests"]["cpu"] == "3"
    assert "status" not in obj


def test_round_trips_through_the_api_schema() -> None:
    pool = _pool()
    planned = _planned(pool)
    obj = claims.new_claim_object(planned, pool, reason="provisioned")
    obj["metadata"]["name"] = "general-00001"
    claim = api.convert_node_claim(obj)
    assert claim.node_pool == "general"
    assert claim.requests == planned.requests
    assert claim.expire_after == 3600.0 and claim.termination_grace_period == 600.0
    assert claim.node_class_ref == REF
    assert {r.key: r for r in claim.requirements}[wk.INSTANCE_TYPE].values == frozenset(
        it.name for it in planned.instance_types
    )


def test_never_expiring_pool_and_no_uid() -> None:
    pool = _pool(expire_after=None, termination_grace_period=None, uid="")
    obj = claims.new_claim_object(_planned(pool), pool, reason="drifted")
    assert obj["spec"]["expireAfter"] == "Never"
    assert "terminationGracePeriod" not in obj["spec"]
    assert "uid" not in obj["metadata"]["ownerReferences"][0]
    assert obj["metadata"]["annotations"][claims.REASON_ANNOTATION] == "drifted"


def test_wrong_pool_is_rejected() -> None:
    pool = _pool()
    planned = _planned(pool)
    with pytest.raises(ValueError, match="belongs to general"):
        claims.new_claim_object(planned, builders.replace(pool, name="other"), reason="provisioned")
