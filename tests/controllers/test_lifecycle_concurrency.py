"""The lifecycle's phases: one ``KubeAPI.batch`` per step for every claim of a
pass, each claim seeing the calls it would see alone, and a failing call stopping only its claim.

Against the in-memory API server (whose ``batch`` makes the calls in order) with the kwok provider;
the same phases over HTTP, concurrently, are in tests/adapters/test_kube_concurrency.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from harness import World

from builders import instance_type
from karpy.api import encode
from karpy.controllers.lifecycle import NodeClaimLifecycle
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim, NodeClassRef
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.ports import KubeOp, RawObject
from karpy.providers.fake import FakeCloudProvider
from karpy.providers.kwok import KwokCloudProvider

REF = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
SMALL = instance_type("small", cpu="2", memory="4Gi", price=0.2)
TYPES = (SMALL,)


def _pool() -> dict[str, Any]:
    ref = {"group": REF.group, "kind": REF.kind, "name": REF.name}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": ref}}},
    }


def _claim(name: str) -> dict[str, Any]:
    return encode.node_claim(
        NodeClaim(
            name=name,
            node_pool="default",
            labels={wk.NODEPOOL: "default"},
            requirements=(Requirement.in_(wk.INSTANCE_TYPE, "small"),),
            node_class_ref=REF,
            requests=Resources.parse({"cpu": "1"}),
        )
    )


class Recording:
    """Wraps the in-memory server's ``batch`` to keep every batch's ops."""

    def __init__(self, world: World) -> None:
        self.batches: list[list[KubeOp]] = []
        inner = world.kube.batch

        def batch(ops: Sequence[KubeOp]) -> list[RawObject | errors.KubeError]:
            self.batches.append(list(ops))
            return inner(ops)

        world.kube.batch = batch  # type: ignore[method-assign]


def _kwok_world(*names: str) -> tuple[World, NodeClaimLifecycle]:
    world = World.make(TYPES)
    kwok = KwokCloudProvider(world.kube, world.ctx.clock, types_for=lambda _p, _nc: TYPES, loop=world.loop)
    world.cloud = world.ctx.cloud = kwok
    world.cluster.instance_types = lambda pool, _nc: kwok.instance_types(pool)
    world.apply(
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
    )
    world.apply(_pool(), *(_claim(n) for n in names))
    return world, NodeClaimLifecycle(world.ctx)


def test_a_pass_makes_one_batch_per_step_for_all_its_claims() -> None:
    names = [f"default-{i}" for i in range(1, 6)]
    world, lifecycle = _kwok_world(*names)
    recording = Recording(world)
    lifecycle.reconcile()
    steps = [(b[0].verb, b[0].kind, len(b)) for b in recording.batches]
    assert steps == [
        ("get", "NodeClaim", 5),  # the finalizer
        ("patch", "NodeClaim", 5),  # the NodePool hash
        ("create", "Node", 5),  # the kwok launches (KwokCloudProvider.create_batch)
        ("patch", "NodeClaim", 5),  # Launched
        ("get", "Node", 5),
        ("patch", "Node", 5),  # registration
        ("patch", "NodeClaim", 5),  # Registered
        ("patch", "Node", 5),  # karpenter.sh/initialized
        ("patch", "NodeClaim", 5),  # Initialized
    ]
    assert all([op.name for op in b] == names or b[0].kind == "Node" for b in recording.batches)
    for name in names:
        claim = world.cluster.claims[name]
        assert [c.type for c in claim.conditions if c.status == "True"] == [
            "Launched",
            "Registered",
            "Initialized",
        ]


def _calls_of(world: World, claim: str) -> list[tuple[str, str, str]]:
    """The API calls about ``claim`` and its Node, the Node's name made one."""
    node = world.cluster.claims[claim].node_name
    return [
        (verb, kind, "NODE" if name == node else name)
        for verb, kind, name in world.kube.calls
        if name in (claim, node)
    ]


def test_each_claim_sees_the_calls_and_ends_in_the_state_it_would_alone() -> None:
    names = ["default-1", "default-2", "default-3"]
    together, lifecycle = _kwok_world(*names)
    lifecycle.reconcile()
    for name in names:
        alone, single = _kwok_world(name)
        single.reconcile()
        assert _calls_of(together, name) == _calls_of(alone, name)
        mine, theirs = together.kube.get("NodeClaim", name), alone.kube.get("NodeClaim", name)
        for obj in (mine, theirs):
            for key in ("resourceVersion", "uid"):
                obj["metadata"].pop(key)
            obj["status"].pop("providerID")
            obj["status"].pop("nodeName")
        assert mine == theirs


def test_a_failing_call_stops_only_its_claim_and_the_pass_raises_it_at_its_end() -> None:
    world, lifecycle = _kwok_world("default-1", "default-2", "default-3")
    world.kube.fail_next("patch", "NodeClaim", errors.KubeError("the API server is overloaded"))
    with pytest.raises(errors.KubeError, match="overloaded"):
        lifecycle.reconcile()  # default-1's metadata patch failed
    assert not world.cluster.claims["default-1"].is_true("Launched")
    for name in ("default-2", "default-3"):
        assert world.cluster.claims[name].is_true("Initialized")  # the others went all the way
    lifecycle.reconcile()  # the claim left behind is taken up again
    assert world.cluster.claims["default-1"].is_true("Initialized")
    assert len(world.kube.objects("Node")) == 3


class _FailingKube(FakeCloudProvider):
    """A provider whose create of one claim fails with a Kubernetes error (a Node it cannot write)."""

    def __init__(self, fail: str) -> None:
        super().__init__(TYPES)
        self.fail = fail

    def create(self, claim: NodeClaim) -> NodeClaim:
        if claim.name == self.fail:
            raise errors.KubeError("writing the Node failed")
        return super().create(claim)


def test_a_provider_failing_with_a_kube_error_stops_the_launches_there_the_launched_keep_their_status() -> (
    None
):
    cloud = _FailingKube("default-2")
    world = World.make(TYPES, cloud=cloud)
    world.apply(_pool(), _claim("default-1"), _claim("default-2"), _claim("default-3"))
    with pytest.raises(errors.KubeError, match="writing the Node"):
        NodeClaimLifecycle(world.ctx).reconcile()
    assert [c.name for c in cloud.create_calls] == ["default-1"]  # default-3 not launched this pass
    assert world.cluster.claims["default-1"].is_true("Launched")  # its launch is written, not lost
    assert not world.cluster.claims["default-3"].is_true("Launched")
