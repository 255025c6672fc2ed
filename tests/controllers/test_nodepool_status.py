"""NodePoolStatus: per-pool summed capacity and node count, and the ValidationSucceeded / NodeClassReady /
Ready conditions, written only when they change."""

from __future__ import annotations

from typing import Any

from harness import World

import builders
from karpy.api import encode
from karpy.controllers.nodepool_status import NodePoolStatus, failed_validation_conditions
from karpy.model.objects import NodeClassRef
from karpy.model.resources import Resources

TYPES = [builders.instance_type("medium", cpu="4", memory="8Gi")]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pool(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": REF}}},
    }


def add_node(world: World, name: str, pool: str, cpu: str, *, register: bool = True) -> None:
    """A NodeClaim ``<name>-claim`` of ``pool`` and (when ``register``) its Node with ``cpu`` capacity."""
    provider_id = f"fake://{name}"
    claim = builders.node_claim(
        f"{name}-claim",
        pool=pool,
        provider_id=provider_id,
        node_name=name if register else "",
        capacity=Resources.parse({"cpu": "2"}),
        node_class_ref=NodeClassRef(**REF),
    )
    world.apply(encode.node_claim(claim))
    if register:
        node = builders.node(name, provider_id=provider_id, capacity={"cpu": cpu}, labels={"pool": pool})
        world.apply(encode.node(node))


def status(world: World, pool: str) -> Any:
    """The pool's status without its conditions (the counter's part)."""
    out = dict(world.kube.get("NodePool", pool).get("status") or {})
    out.pop("conditions", None)
    return out


def patches(world: World) -> list[tuple[str, str, str]]:
    return [c for c in world.kube.calls if c[0] == "patch" and c[1] == "NodePool"]


def test_counts_and_sums_each_pools_nodes_and_follows_changes() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool("a"), raw_pool("b"))
    add_node(world, "n1", "a", "4")
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "4", "nodes": "1"}, "nodes": 1}
    assert status(world, "b") == {"resources": {"nodes": "0"}, "nodes": 0}
    written = len(patches(world))
    controller.reconcile()  # nothing changed: nothing written
    assert len(patches(world)) == written
    add_node(world, "n2", "a", "8")
    add_node(world, "n3", "b", "2", register=False)  # launched, not registered: its claim's capacity
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "12", "nodes": "2"}, "nodes": 2}
    assert status(world, "b") == {"resources": {"cpu": "2", "nodes": "1"}, "nodes": 1}
    world.kube.delete("NodeClaim", "n1-claim")
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "8", "nodes": "1"}, "nodes": 1}
    world.kube.delete("Node", "n1")  # an unmanaged node counts for no pool
    written = len(patches(world))
    controller.reconcile()
    assert len(patches(world)) == written


def test_a_pool_created_later_is_written_too() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool("a"))
    add_node(world, "n1", "late", "4")
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    world.apply(raw_pool("late"))
    controller.reconcile()
    assert not world.problems
    assert status(world, "late") == {"resources": {"cpu": "4", "nodes": "1"}, "nodes": 1}


def test_sums_follow_a_node_or_claim_changed_in_place_not_pods() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool("a"))
    add_node(world, "n1", "a", "4")
    add_node(world, "n2", "a", "2", register=False)
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "6", "nodes": "2"}, "nodes": 2}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }
    world.apply(pod)  # a bound pod: the same sums, nothing written
    written = len(patches(world))
    controller.reconcile()
    assert len(patches(world)) == written
    # the Node alone changes (its claim stays): the sum follows its capacity
    node = builders.node("n1", provider_id="fake://n1", capacity={"cpu": "16"}, labels={"pool": "a"})
    world.kube.patch("Node", "n1", {"status": encode.node(node)["status"]})
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "18", "nodes": "2"}, "nodes": 2}
    # the unregistered claim alone changes: its capacity is the one counted
    claim = builders.node_claim(
        "n2-claim",
        pool="a",
        provider_id="fake://n2",
        capacity=Resources.parse({"cpu": "8"}),
        node_class_ref=NodeClassRef(**REF),
    )
    world.kube.patch("NodeClaim", "n2-claim", {"status": encode.node_claim(claim)["status"]})
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "24", "nodes": "2"}, "nodes": 2}


# -- conditions -------------------------------------------------------------------------------
KWOK_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


def kwok_pool(name: str, *, generation: int = 1, ref: dict[str, str] | None = None) -> dict[str, Any]:
    pool = raw_pool(name)
    pool["metadata"]["generation"] = generation
    pool["spec"]["template"]["spec"]["nodeClassRef"] = ref or KWOK_REF
    return pool


def kwok_class(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": name}}


def ec2_class(
    *, ready: str | None, generation: int = 2, observed: int = 2, reason: str = ""
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default", "generation": generation},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }
    if ready is not None:
        cond = {"type": "Ready", "status": ready, "reason": reason or "Ready", "observedGeneration": observed}
        if ready != "True":
            cond["message"] = "SubnetsReady=False"
        raw["status"] = {"conditions": [cond]}
    return raw


def conditions(world: World, pool: str) -> dict[str, dict[str, Any]]:
    raw = (world.kube.get("NodePool", pool).get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in raw}


def summary(world: World, pool: str) -> dict[str, tuple[str, str, str]]:
    managed = ("NodeClassReady", "Ready", "ValidationSucceeded")
    return {
        t: (c["status"], c["reason"], c["message"])
        for t, c in conditions(world, pool).items()
        if t in managed
    }


def calls_on(world: World, pool: str) -> list[tuple[str, ...]]:
    return [c for c in world.kube.calls if c[1] == "NodePool" and c[2] == pool and c[0] in ("get", "patch")]


def test_a_valid_pool_with_its_node_class_is_ready_as_upstream_writes_it() -> None:
    world = World.make(TYPES)
    world.apply(kwok_class(), kwok_pool("a", generation=3))
    NodePoolStatus(world.ctx).reconcile()
    raw = (world.kube.get("NodePool", "a").get("status") or {}).get("conditions")
    assert [c["type"] for c in raw] == [
        "NodeClassReady",
        "Ready",
        "ValidationSucceeded",
    ]  # sorted, as upstream
    for cond in raw:  # a True condition: its type as reason, no message, the generation it saw
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", cond["type"], "")
        assert cond["observedGeneration"] == 3
        assert cond["lastTransitionTime"] == encode.time(world.loop.now)
    # one write: the conditions went with the resources
    assert [c[0] for c in calls_on(world, "a")].count("patch") == 1


def test_a_missing_node_class_makes_the_pool_not_ready_until_it_appears() -> None:
    world = World.make(TYPES)
    world.apply(kwok_pool("a"))
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    assert summary(world, "a") == {
        "NodeClassReady": ("False", "NodeClassNotFound", "KWOKNodeClass default not found on the cluster"),
        "Ready": ("False", "UnhealthyDependents", "NodeClassReady=False"),
        "ValidationSucceeded": ("True", "ValidationSucceeded", ""),
    }
    first = conditions(world, "a")
    world.loop.run(until=world.loop.now + 60)
    world.apply(kwok_class())
    controller.reconcile()
    after = conditions(world, "a")
    assert {t: c["status"] for t, c in after.items()} == {
        "NodeClassReady": "True",
        "Ready": "True",
        "ValidationSucceeded": "True",
    }
    # a status that changed has a new transition time; one that stayed keeps its own
    assert after["Ready"]["lastTransitionTime"] == encode.time(world.loop.now)
    assert after["Ready"]["lastTransitionTime"] != first["Ready"]["lastTransitionTime"]
    assert after["ValidationSucceeded"] == first["ValidationSucceeded"]
    world.kube.delete("KWOKNodeClass", "default")
    controller.reconcile()
    assert summary(world, "a")["Ready"] == ("False", "UnhealthyDependents", "NodeClassReady=False")


def test_an_ec2_node_class_must_be_ready_for_its_generation_and_not_terminating() -> None:
    world = World.make(TYPES)
    world.apply(ec2_class(ready="False", reason="SubnetsNotFound"), raw_pool("a"))
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    assert summary(world, "a")["NodeClassReady"] == ("False", "SubnetsNotFound", "SubnetsReady=False")
    assert summary(world, "a")["Ready"][0] == "False"
    world.kube.patch(
        "EC2NodeClass", "default", {"status": ec2_class(ready="True", observed=1)["status"]}
    )  # Ready, but for the generation before
    controller.reconcile()
    status_, reason, message = summary(world, "a")["NodeClassReady"]
    assert (status_, reason) == ("False", "NodeClassNotReady") and "generation 2" in message
    world.kube.patch("EC2NodeClass", "default", {"status": ec2_class(ready="True")["status"]})
    controller.reconcile()
    assert summary(world, "a")["Ready"] == ("True", "Ready", "")
    world.kube.patch(
        "EC2NodeClass", "default", {"metadata": {"finalizers": ["karpenter.k8s.aws/termination"]}}
    )
    world.kube.delete("EC2NodeClass", "default")
    controller.reconcile()
    assert summary(world, "a")["NodeClassReady"] == (
        "False",
        "NodeClassTerminating",
        "EC2NodeClass default is terminating",
    )


def test_conditions_are_read_and_written_only_when_the_pool_or_its_node_class_changed() -> None:
    world = World.make(TYPES)
    world.apply(kwok_class(), kwok_pool("a"))
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    before = len(calls_on(world, "a"))
    for _ in range(3):
        world.loop.run(until=world.loop.now + 10)
        controller.reconcile()
    assert len(calls_on(world, "a")) == before  # no GET, no PATCH
    # a spec change (a new generation): observedGeneration follows, transition times stay
    world.kube.patch("NodePool", "a", {"metadata": {"generation": 2}, "spec": {"weight": 10}})
    stamps = {t: c["lastTransitionTime"] for t, c in conditions(world, "a").items()}
    controller.reconcile()
    assert {c["observedGeneration"] for c in conditions(world, "a").values()} == {2}
    assert {t: c["lastTransitionTime"] for t, c in conditions(world, "a").items()} == stamps


def test_other_conditions_are_kept_and_a_failed_validation_is_replaced_once_the_pool_validates() -> None:
    world = World.make(TYPES)
    pool = kwok_pool("a")
    pool["status"] = {
        "conditions": [
            {
                "type": "ValidationSucceeded",
                "status": "False",
                "reason": "FailedValidation",
                "message": "bad",
            },
            {"type": "NodeRegistrationHealthy", "status": "True", "reason": "NodeRegistrationHealthy"},
        ]
    }
    world.apply(kwok_class(), pool)
    NodePoolStatus(world.ctx).reconcile()
    assert summary(world, "a")["ValidationSucceeded"] == ("True", "ValidationSucceeded", "")
    assert conditions(world, "a")["NodeRegistrationHealthy"] == pool["status"]["conditions"][1]


def test_failed_validation_conditions_turn_ready_false_and_keep_node_class_ready() -> None:
    world = World.make(TYPES)
    world.apply(kwok_class(), kwok_pool("a"))
    NodePoolStatus(world.ctx).reconcile()
    existing = list(conditions(world, "a").values())
    out = failed_validation_conditions(existing, "spec.disruption: bad", generation=4, now=world.loop.now + 5)
    by_type = {c["type"]: c for c in out}
    assert [c["type"] for c in out] == ["NodeClassReady", "Ready", "ValidationSucceeded"]
    assert by_type["NodeClassReady"] == conditions(world, "a")["NodeClassReady"]
    assert (by_type["ValidationSucceeded"]["status"], by_type["ValidationSucceeded"]["reason"]) == (
        "False",
        "FailedValidation",
    )
    assert by_type["ValidationSucceeded"]["message"] == "spec.disruption: bad"
    assert (by_type["Ready"]["status"], by_type["Ready"]["message"]) == ("False", "ValidationSucceeded=False")
    assert by_type["Ready"]["observedGeneration"] == 4
    assert by_type["Ready"]["lastTransitionTime"] == encode.time(world.loop.now + 5)
