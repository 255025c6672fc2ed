"""The kube-scheduler stand-in against the in-memory API server, in virtual time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim, NodeClassRef
from karpy.model.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim.binder import MOST_ALLOCATED, Binder
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

START = 1_767_225_600.0


@dataclass
class Env:
    loop: Loop
    kube: MemoryKube
    cluster: Cluster
    binder: Binder

    def node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: str = "10",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Taint] = (),
        **overrides: Any,
    ) -> None:
        alloc = {"cpu": cpu, "memory": memory, "pods": pods}
        model = builders.node(name, allocatable=alloc, labels=labels, taints=taints, **overrides)
        self.kube.create(encode.node(model))

    def pod(self, name: str, **kwargs: Any) -> None:
        self.kube.create(pod_raw(name, **kwargs))

    def node_of(self, name: str, namespace: str = "default") -> str:
        return str(self.kube.get("Pod", name, namespace)["spec"].get("nodeName", ""))

    def step(self) -> None:
        """Run the binder's next pass (and anything due before it)."""
        self.loop.run(self.loop.now + 1.0)


def make(scoring: str = "LeastAllocated", binder_class: type[Binder] = Binder) -> Env:
    loop = Loop(start=START)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cluster = Cluster(lambda _pool, _nc: ())
    kube.watch(Feed(cluster))
    binder = binder_class(kube, cluster, clock, scoring=scoring)
    loop.add(binder.name, lambda: binder.reconcile().requeue_after, at=START + 1.0)
    return Env(loop, kube, cluster, binder)


def pod_raw(
    name: str,
    *,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    node_name: str = "",
    ports: Sequence[int] = (),
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    body: dict[str, Any] = {"containers": [container], **spec}
    if priority is not None:
        body["priority"] = priority
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": body,
        "status": dict(status or {"phase": "Running" if node_name else "Pending"}),
    }


def term(match: Mapping[str, str], key: str = wk.HOSTNAME) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": dict(match)}, "topologyKey": key}


# -- basics --------------------------------------------------------------------------------


def test_binds_pending_pod_and_records_latency() -> None:
    env = make()
    env.node("a")
    env.loop.run(START + 0.25)
    env.pod("p")
    assert env.binder.pending() == ["default/p"]
    env.loop.run(START + 1.0)
    assert env.node_of("p") == "a"
    assert env.binder.latencies == [0.75]
    assert env.binder.bindings[0].node == "a"
    assert env.binder.pending() == []


def test_priority_then_arrival_order_for_the_last_slot() -> None:
    env = make()
    env.node("a", cpu="1")
    env.pod("early-low", priority=0)
    env.pod("late-high", priority=100)
    env.pod("late-low", priority=0)
    env.step()
    assert env.node_of("late-high") == "a"
    assert env.node_of("early-low") == env.node_of("late-low") == ""


def test_skips_unready_unschedulable_and_deleting_nodes() -> None:
    env = make()
    env.node("a", ready=False)
    env.node("b", unschedulable=True)
    env.pod("p")
    env.step()
    assert env.node_of("p") == ""
    env.node("c")
    env.step()
    assert env.node_of("p") == "c"


def test_pending_pod_binds_once_capacity_appears_after_idle_passes() -> None:
    env = make()
    env.pod("p", cpu="2")
    for _ in range(3):
        env.step()
    assert env.node_of("p") == ""
    env.node("late", cpu="2")
    env.step()
    assert env.node_of("p") == "late"


def test_a_node_that_changes_is_judged_again_in_a_later_pass() -> None:
    """Per-node verdicts of a pod class live across passes; a Node update must renew them."""
    env = make()
    env.node("a", taints=[Taint("maintenance", NO_SCHEDULE)])
    env.node("b", unschedulable=True)
    env.node("c", ready=False)
    env.pod("p")
    for _ in range(2):
        env.step()
    assert env.node_of("p") == ""
    env.kube.patch("Node", "b", {"spec": {"unschedulable": False}})
    env.pod("other")  # a pass runs only after a change the binder watches
    env.step()
    assert {env.node_of("p"), env.node_of("other")} == {"b"}
    env.kube.patch("Node", "a", {"spec": {"taints": []}})
    env.pod("q", cpu="4")
    env.step()
    assert env.node_of("q") == "a"


class _FreshBinder(Binder):
    """The reference: every pod's class judges every node anew (no verdicts kept)."""

    def _fitting(self, pod: Any, need: Any, signature: Any) -> Any:
        self._classes.clear()
        return super()._fitting(pod, need, signature)


_binder_ops = st.lists(
    st.one_of(
        st.tuples(st.just("node"), st.sampled_from("abcde"), st.sampled_from(["1", "2", "4"])),
        st.tuples(st.just("drop-node"), st.sampled_from("abcde")),
        st.tuples(st.just("cordon"), st.sampled_from("abcde"), st.booleans()),
        st.tuples(st.just("pod"), st.sampled_from(["500m", "1", "2"]), st.booleans()),
        st.tuples(st.just("drop-pod"), st.integers(0, 30)),
        st.tuples(st.just("step")),
    ),
    min_size=5,
    max_size=40,
)


def _where(env: Env, pods: list[str]) -> list[str | None]:
    """Each pod's node ("" pending), None once deleted."""
    out: list[str | None] = []
    for name in pods:
        try:
            out.append(env.node_of(name))
        except errors.NotFound:
            out.append(None)
    return out


def _apply(env: Env, op: tuple[Any, ...], pods: list[str]) -> None:
    kind = op[0]
    nodes = {n for n in env.cluster.nodes}
    if kind == "node" and op[1] not in nodes:
        env.node(op[1], cpu=op[2], pods="4")
    elif kind == "drop-node" and op[1] in nodes:
        env.kube.delete("Node", op[1])
    elif kind == "cordon" and op[1] in nodes:
        env.kube.patch("Node", op[1], {"spec": {"unschedulable": op[2]}})
    elif kind == "pod":
        lonely = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "x"})]}}
        extra: dict[str, Any] = {"labels": {"app": "x"}, "affinity": lonely} if op[2] else {}
        env.pod(f"p{len(pods)}", cpu=op[1], **extra)
    elif kind == "drop-pod" and op[1] < len(pods) and _where(env, [pods[op[1]]]) != [None]:
        env.kube.delete("Pod", pods[op[1]], "default")
    elif kind == "step":
        env.step()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_binder_ops)
def test_verdicts_kept_across_pods_and_passes_bind_as_judging_every_node_anew(ops: list[Any]) -> None:
    kept, fresh = make(), make(binder_class=_FreshBinder)
    pods: list[str] = []
    for op in ops:
        _apply(kept, op, pods)
        _apply(fresh, op, pods)
        if op[0] == "pod":
            pods.append(f"p{len(pods)}")
        assert _where(kept, pods) == _where(fresh, pods)
    for _ in range(2):
        kept.step()
        fresh.step()
    assert _where(kept, pods) == _where(fresh, pods)


# -- filters -------------------------------------------------------------------------------


def test_taints_filter_and_prefer_no_schedule_only_scores() -> None:
    env = make()
    env.node("a-tainted", taints=[Taint("dedicated", NO_SCHEDULE, "gpu")])
    env.pod("plain")
    env.step()
    assert env.node_of("plain") == ""
    env.pod("tolerant", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}])
    env.step()
    assert env.node_of("tolerant") == "a-tainted"
    # PreferNoSchedule: a usable node, but the untainted twin wins despite sorting later
    env.node("b-prefer", taints=[Taint("soft", PREFER_NO_SCHEDULE)])
    env.node("c-clean")
    env.step()
    assert env.node_of("plain") == "c-clean"


def test_node_selector_and_required_affinity_terms_are_ored() -> None:
    env = make()
    env.node("a", labels={"disk": "hdd", "tier": "x"})
    env.node("b", labels={"disk": "ssd", "tier": "y"})
    env.node("c", labels={"disk": "ssd", "tier": "z"})
    env.pod("sel", nodeSelector={"disk": "ssd", "tier": "z"})
    required = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["nope"]}]},
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]},
        ]
    }
    env.pod("aff", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})
    missing = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}
    env.pod("none", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": missing}})
    env.step()
    assert (env.node_of("sel"), env.node_of("aff"), env.node_of("none")) == ("c", "a", "")


def test_resources_including_the_pods_slot() -> None:
    env = make()
    env.node("a", cpu="2", pods="5")
    env.node("b", cpu="8", pods="1")
    env.pod("big", cpu="3")
    env.step()
    assert env.node_of("big") == "b"
    env.pod("second", cpu="1500m")
    env.pod("third", cpu="1500m")
    env.step()
    # b has no pod slot left; a fits one 1.5-cpu pod only
    assert env.node_of("second") == "a"
    assert env.node_of("third") == ""


def test_host_ports_conflict() -> None:
    env = make()
    env.node("a")
    env.node("b")
    for name in ("p1", "p2", "p3"):
        env.pod(name, ports=[8080])
    env.pod("other-port", ports=[9090])
    env.step()
    assert {env.node_of("p1"), env.node_of("p2")} == {"a", "b"}
    assert env.node_of("p3") == ""
    assert env.node_of("other-port") in ("a", "b")


def test_anti_affinity_of_the_incoming_pod() -> None:
    env = make()
    env.node("a")
    env.node("b")
    env.node("c")
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "web"})]}}
    for name in ("w1", "w2", "w3", "w4"):
        env.pod(name, labels={"app": "web"}, affinity=anti)
    env.step()
    placed = [env.node_of(n) for n in ("w1", "w2", "w3", "w4")]
    assert sorted(placed[:3]) == ["a", "b", "c"]
    assert placed[3] == ""


def test_anti_affinity_of_existing_pods_is_symmetric() -> None:
    env = make()
    env.node("a", cpu="16", memory="64Gi")  # the emptier node: LeastAllocated's choice
    env.node("b")
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "web"})]}}
    env.pod("guard", labels={"app": "guard"}, affinity=anti, node_name="a")
    env.pod("web", labels={"app": "web"})
    env.pod("other", labels={"app": "other"})
    env.step()
    assert env.node_of("web") == "b"
    assert env.node_of("other") == "a"


def test_required_pod_affinity_follows_the_matching_pod() -> None:
    env = make()
    env.node("a", labels={wk.ZONE: "z1"})
    env.node("b", labels={wk.ZONE: "z2"})
    env.pod("cache", labels={"app": "cache"}, node_name="b")
    aff = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "cache"}, wk.ZONE)]}
    }
    env.pod("client", affinity=aff)
    lonely = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"}, wk.ZONE)]}
    }
    env.pod("lonely", affinity=lonely)
    env.step()
    assert env.node_of("client") == "b"
    assert env.node_of("lonely") == ""


def _spread(max_skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": wk.ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
            **extra,
        }
    ]


def test_topology_spread_do_not_schedule() -> None:
    env = make()
    env.node("a", labels={wk.ZONE: "z1"}, cpu="16", memory="64Gi", pods="20")
    env.node("b", labels={wk.ZONE: "z2"})
    env.node("c", labels={wk.ZONE: "z3"})
    for i in range(6):
        env.pod(f"s{i}", labels={"app": "s"}, topologySpreadConstraints=_spread())
    env.step()
    zones = [env.node_of(f"s{i}") for i in range(6)]
    assert sorted(zones) == ["a", "a", "b", "b", "c", "c"]
    # pinned to z1 with nodeAffinityPolicy Ignore (all zones are domains, minimum 2): one more
    # fits (skew 1), a second does not (skew 2)
    ignore = _spread(nodeAffinityPolicy="Ignore")
    for name in ("z1-first", "z1-second"):
        env.pod(name, labels={"app": "s"}, nodeSelector={wk.ZONE: "z1"}, topologySpreadConstraints=ignore)
    env.step()
    assert env.node_of("z1-first") == "a"
    assert env.node_of("z1-second") == ""
    # with the default Honor only z1 is a domain (the pod's own node affinity), so it always fits
    env.pod(
        "z1-honor", labels={"app": "s"}, nodeSelector={wk.ZONE: "z1"}, topologySpreadConstraints=_spread()
    )
    env.step()
    assert env.node_of("z1-honor") == "a"


def test_topology_spread_min_domains_and_node_affinity_policy() -> None:
    env = make()
    env.node("a", labels={wk.ZONE: "z1"}, cpu="16", pods="20")
    env.node("b", labels={wk.ZONE: "z2"}, cpu="16", pods="20")
    env.node("other", labels={wk.ZONE: "z3", "pool": "other"}, cpu="16", pods="20")
    keep_out = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}]
            }
        }
    }
    for i in range(4):
        env.pod(
            f"m{i}", labels={"app": "s"}, affinity=keep_out, topologySpreadConstraints=_spread(minDomains=3)
        )
    env.step()
    placed = [env.node_of(f"m{i}") for i in range(4)]
    # only z1 and z2 are eligible domains (z3 fails the pod's node affinity); with fewer than
    # minDomains=3 domains the global minimum is 0, so each zone takes at most maxSkew=1 pod
    assert sorted(p for p in placed if p) == ["a", "b"]
    assert placed.count("") == 2


# -- scoring -------------------------------------------------------------------------------


@pytest.mark.parametrize(("scoring", "expected"), [("LeastAllocated", "b"), (MOST_ALLOCATED, "a")])
def test_least_and_most_allocated_choose_different_nodes(scoring: str, expected: str) -> None:
    env = make(scoring)
    env.node("a")
    env.node("b")
    env.pod("existing", cpu="2", memory="4Gi", node_name="a")
    env.pod("p", cpu="1", memory="2Gi")
    env.step()
    assert env.node_of("p") == expected


def test_ties_go_to_the_first_node_name() -> None:
    env = make()
    for name in ("c", "a", "b"):
        env.node(name)
    env.pod("p")
    env.step()
    assert env.node_of("p") == "a"


# -- nomination and preemption -------------------------------------------------------------


def test_nominated_node_is_preferred_when_it_fits() -> None:
    env = make()
    env.node("a")
    env.node("b")
    env.pod("existing", cpu="2", memory="4Gi", node_name="a")
    env.pod("nominated", status={"phase": "Pending", "nominatedNodeName": "a"})
    env.pod("free")
    env.step()
    assert env.node_of("nominated") == "a"  # LeastAllocated alone would pick b
    assert env.node_of("free") == "b"


def test_karpenter_nomination_of_a_nodeclaim_is_followed() -> None:
    env = make()
    env.node("a")
    env.node("b", cpu="3")
    ref = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
    env.kube.create(encode.node_claim(NodeClaim(name="claim-1", node_name="b", node_class_ref=ref)))
    assert "claim-1" in env.cluster.claims
    env.pod("p")
    env.binder.nominate("default/p", "claim-1")
    env.step()
    assert env.node_of("p") == "b"


def test_preemption_evicts_a_pause_pod_and_holds_the_room() -> None:
    env = make()
    env.node("a", cpu="4")
    env.node("b", cpu="4")
    env.pod("app-a", cpu="2", node_name="a")
    env.pod("pause-a", cpu="2", priority=-10, labels={"app": "pause"}, node_name="a")
    env.pod("pause-b", cpu="1", priority=-10, labels={"app": "pause"}, node_name="b")
    env.pod("app-b", cpu="2500m", node_name="b")
    env.pod("real", cpu="2")
    env.pod("pause-pending", cpu="2", priority=-10, labels={"app": "pause"})
    env.step()
    assert env.node_of("real") == ""
    assert env.node_of("pause-pending") == ""  # the freed room is held for the nominated pod
    assert [(p.pod, p.node, p.victims) for p in env.binder.preemptions] == [
        ("default/real", "a", ("default/pause-a",))
    ]
    assert not env.kube.exists("Pod", "pause-a", "default")
    assert env.kube.get("Pod", "real", "default")["status"]["nominatedNodeName"] == "a"
    # a replacement pause pod arrives before the next pass: the nomination keeps the room
    env.pod("pause-a2", cpu="2", priority=-10, labels={"app": "pause"})
    env.step()
    assert env.node_of("real") == "a"
    assert env.node_of("pause-a2") == ""
    assert len(env.binder.preemptions) == 1  # pause pods never preempt each other


def test_no_preemption_of_equal_priority_pods() -> None:
    env = make()
    env.node("a", cpu="2")
    env.pod("old", cpu="2", node_name="a")
    env.pod("new", cpu="2")
    env.step()
    env.step()
    assert env.binder.preemptions == []
    assert env.kube.exists("Pod", "old", "default")


def test_preemption_prefers_victims_without_a_pdb() -> None:
    env = make()
    env.node("a", cpu="2")
    env.node("b", cpu="2")
    env.pod("guarded", cpu="2", priority=-5, labels={"app": "guarded"}, node_name="a")
    env.pod("loose", cpu="2", priority=-5, labels={"app": "loose"}, node_name="b")
    env.kube.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    env.pod("real", cpu="2")
    env.step()
    assert [p.victims for p in env.binder.preemptions] == [("default/loose",)]
    env.step()
    assert env.node_of("real") == "b"


def test_same_story_twice_gives_the_same_bindings() -> None:
    def story() -> list[tuple[str, str, float]]:
        env = make()
        for i in range(4):
            env.node(f"n{i}", labels={wk.ZONE: f"z{i % 2}"})
        for i in range(12):
            env.pod(f"p{i}", cpu="500m", labels={"app": "s"}, topologySpreadConstraints=_spread())
        env.step()
        return [(b.pod, b.node, b.bound) for b in env.binder.bindings]

    first = story()
    assert len(first) == 12
    assert story() == first
