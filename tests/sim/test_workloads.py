"""Deployment, Job, pod-GC and kubelet stand-ins, with the binder, in virtual time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import builders
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim.binder import Binder
from karpy.sim.workloads import DEPLOYMENT, Workloads, _Counts, template_hash
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

START = 1_767_225_600.0
NS = "shop"


@dataclass
class Env:
    loop: Loop
    kube: MemoryKube
    binder: Binder
    workloads: Workloads

    def node(self, name: str, *, cpu: str = "16", pods: str = "50") -> None:
        model = builders.node(name, allocatable={"cpu": cpu, "memory": "64Gi", "pods": pods})
        self.kube.create(encode.node(model))

    def pods(self, app: str = "web") -> list[dict[str, Any]]:
        """The app's pods that count as active (not terminal, not being deleted)."""
        return [
            p
            for p in self.kube.objects("Pod")
            if p["metadata"]["labels"].get("app") == app
            and not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]

    def ready(self, app: str = "web") -> list[dict[str, Any]]:
        return [p for p in self.pods(app) if _is_ready(p)]


def _is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def make(
    ready_after: float | Callable[[dict[str, Any], dict[str, Any]], float] = 5.0,
    workloads_type: type[Workloads] = Workloads,
) -> Env:
    loop = Loop(start=START)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cluster = Cluster(lambda _pool, _nc: ())
    kube.watch(Feed(cluster))
    binder = Binder(kube, cluster, clock)
    loop.add(binder.name, lambda: binder.reconcile().requeue_after)
    workloads = workloads_type(kube, clock, loop=loop, ready_after=ready_after)
    return Env(loop, kube, binder, workloads)


def template(app: str = "web", *, image: str = "v1", cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}, "annotations": {"image": image}},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    }


# -- Deployments ---------------------------------------------------------------------------


def test_scale_up_and_down_with_deterministic_names_and_owners() -> None:
    env = make()
    env.node("n1")
    env.workloads.set_deployment("web", NS, template=template(), replicas=3)
    env.loop.run(START + 10)
    h = template_hash(template())
    assert sorted(p["metadata"]["name"] for p in env.pods()) == [f"web-{h}-{i}" for i in range(3)]
    pod = env.pods()[0]
    assert pod["metadata"]["labels"]["pod-template-hash"] == h
    [owner] = pod["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ReplicaSet", f"web-{h}", True)
    assert len(env.ready()) == 3

    env.workloads.scale("web", NS, replicas=5)
    env.loop.run(START + 20)
    assert len(env.ready()) == 5
    env.workloads.scale("web", NS, replicas=2)
    env.loop.run(START + 21)
    # the two Ready most recently go first (kube-controller-manager's order: karpy.sim.replicaset_order),
    # then one of the three Ready as long ago (on its logarithmic scale) as each other
    kept = sorted(p["metadata"]["name"] for p in env.pods())
    assert len(kept) == 2 and set(kept) < {f"web-{h}-{i}" for i in range(3)}
    status = env.workloads.status("Deployment", "web", NS)
    assert (status.desired, status.active, status.ready, status.updated) == (2, 2, 2, 2)


def test_scale_down_removes_pending_pods_first() -> None:
    env = make()
    env.node("n1", cpu="2")
    env.workloads.set_deployment("web", NS, template=template(), replicas=4)
    env.loop.run(START + 10)
    assert len(env.ready()) == 2
    env.workloads.scale("web", NS, replicas=2)
    env.loop.run(START + 11)
    assert len(env.pods()) == 2
    assert all(p["spec"].get("nodeName") == "n1" for p in env.pods())


def test_evicted_pods_are_recreated() -> None:
    env = make()
    env.node("n1")
    env.workloads.set_deployment("web", NS, template=template(), replicas=2)
    env.loop.run(START + 10)
    victim = env.pods()[0]["metadata"]["name"]
    env.kube.evict(victim, NS)
    env.loop.run(START + 11)
    names = sorted(p["metadata"]["name"] for p in env.pods())
    assert victim not in names and len(names) == 2
    assert names[-1].endswith("-2")  # a fresh index, never a reused name
    assert env.workloads.pods_created == 3


def test_pods_of_a_vanished_node_are_deleted_and_replaced() -> None:
    env = make()
    env.node("n1")
    env.workloads.set_deployment("web", NS, template=template(), replicas=3)
    env.loop.run(START + 10)
    env.node("n2")
    env.kube.delete("Node", "n1")
    env.loop.run(START + 20)
    pods = env.pods()
    assert len(pods) == 3
    assert {p["spec"]["nodeName"] for p in pods} == {"n2"}
    assert len(env.ready()) == 3


def test_pods_become_ready_after_the_startup_delay() -> None:
    seen: list[tuple[str, str]] = []

    def delay(pod: dict[str, Any], node: dict[str, Any]) -> float:
        seen.append((pod["metadata"]["name"], node["metadata"]["name"]))
        return 25.0

    env = make(ready_after=delay)
    env.node("n1")
    env.workloads.set_deployment("web", NS, template=template(), replicas=1)
    env.loop.run(START + 1)  # bound by the binder's pass at START + 1
    [pod] = env.pods()
    assert pod["spec"]["nodeName"] == "n1"
    assert seen == [(pod["metadata"]["name"], "n1")]
    env.loop.run(START + 25.5)
    assert env.ready() == [] and env.pods()[0]["status"]["phase"] == "Pending"
    env.loop.run(START + 26)
    [pod] = env.pods()
    assert pod["status"]["phase"] == "Running" and _is_ready(pod)
    assert pod["status"]["startTime"] == encode.time(START + 26)
    [start] = env.workloads.started
    assert (start.node, start.bound, start.ready) == ("n1", START + 1, START + 26)


@pytest.mark.parametrize(
    ("strategy", "surge", "unavailable"),
    [
        ({"maxSurge": 1, "maxUnavailable": 1}, 1, 1),
        ({"maxSurge": "25%", "maxUnavailable": 0}, 1, 0),
        ({"maxSurge": 0, "maxUnavailable": "50%"}, 0, 2),
    ],
)
def test_rollout_respects_max_surge_and_max_unavailable_at_every_step(
    strategy: dict[str, Any], surge: int, unavailable: int
) -> None:
    env = make(ready_after=7.0)
    env.node("n1")
    env.node("n2")
    env.workloads.set_deployment("web", NS, template=template(), replicas=4, strategy=strategy)
    env.loop.run(START + 30)
    assert len(env.ready()) == 4
    old_hash = template_hash(template())
    new = template(image="v2")
    env.workloads.rollout("web", NS, template=new)
    new_hash = template_hash(new)
    seen_total, seen_ready = set(), set()
    steps = 0
    while env.loop.now < START + 300:
        env.loop.step()
        steps += 1
        total, ready = len(env.pods()), len(env.ready())
        seen_total.add(total)
        seen_ready.add(ready)
        assert total <= 4 + surge, f"step {steps}: {total} pods"
        assert ready >= 4 - unavailable, f"step {steps}: {ready} ready"
    hashes = [p["metadata"]["labels"]["pod-template-hash"] for p in env.ready()]
    assert hashes == [new_hash] * 4
    assert old_hash != new_hash
    assert max(seen_total) == 4 + surge  # the surge was used ...
    assert min(seen_ready) == 4 - unavailable  # ... and so was the unavailability budget


def test_recreate_strategy_waits_for_old_pods_to_be_gone() -> None:
    env = make()
    env.node("n1")
    env.workloads.set_deployment("web", NS, template=template(), replicas=2, strategy={"type": "Recreate"})
    env.loop.run(START + 10)
    slow = env.pods()[0]["metadata"]["name"]
    env.kube.patch("Pod", slow, {"metadata": {"finalizers": ["test/slow-shutdown"]}}, NS)
    env.workloads.rollout("web", NS, template=template(image="v2"))
    env.loop.run(START + 30)
    assert env.pods() == []  # one old pod is still terminating: nothing new yet
    assert env.kube.get("Pod", slow, NS)["metadata"]["deletionTimestamp"]
    env.kube.patch("Pod", slow, {"metadata": {"finalizers": None}}, NS)
    env.loop.run(START + 60)
    assert len(env.ready()) == 2
    assert env.workloads.status("Deployment", "web", NS).updated == 2


# -- Jobs ----------------------------------------------------------------------------------


def test_job_pods_succeed_after_run_for_with_bounded_parallelism() -> None:
    env = make(ready_after=5.0)
    env.node("n1")
    env.workloads.run_job("batch", NS, template=template("batch"), completions=3, parallelism=2, run_for=60)
    env.loop.run(START + 1)
    assert sorted(p["metadata"]["name"] for p in env.pods("batch")) == ["batch-0", "batch-1"]
    owner = env.pods("batch")[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Job", "batch")
    while env.loop.now < START + 200:
        env.loop.step()
        assert len(env.pods("batch")) <= 2
    # bound at +1, running at +6, done at +66; the third: bound at +67, running +72, done +132
    done = {p["metadata"]["name"]: p for p in env.kube.objects("Pod") if p["status"]["phase"] == "Succeeded"}
    assert sorted(done) == ["batch-0", "batch-1", "batch-2"]
    status = env.workloads.status("Job", "batch", NS)
    assert (status.succeeded, status.complete, status.active) == (3, True, 0)
    assert [s.ready for s in env.workloads.started] == [START + 6, START + 6, START + 72]


def test_job_pod_evicted_before_completion_is_replaced() -> None:
    env = make(ready_after=0.0)
    env.node("n1")
    env.workloads.run_job("once", NS, template=template("once"), run_for=100)
    env.loop.run(START + 50)
    env.kube.evict("once-0", NS)
    env.loop.run(START + 300)
    status = env.workloads.status("Job", "once", NS)
    assert (status.succeeded, status.complete) == (1, True)
    assert env.kube.get("Pod", "once-1", NS)["status"]["phase"] == "Succeeded"


class _WalkingWorkloads(Workloads):
    """The reference: garbage collection walks every pod of every workload, and so does each count
    of a Deployment's pods."""

    @staticmethod
    def _counts(wl: Any) -> Any:
        active = [p for p in wl.pods.values() if p.active]
        new = sum(1 for p in active if p.hash == wl.hash)
        return _Counts(len(active), new, len(active) - new, sum(1 for p in active if p.ready))

    def _stranded(self) -> dict[tuple[str, str, str], list[Any]]:
        self._gone = set()
        found: dict[tuple[str, str, str], list[Any]] = {}
        for key, wl in self._workloads.items():
            for pod in wl.pods.values():
                if pod.node and pod.node not in self._nodes and pod.active:
                    found.setdefault(key, []).append(pod)
        return found


def _run_ops(workloads_type: type[Workloads], ops: list[tuple[str, int]]) -> list[tuple[str, ...]]:
    env = make(2.0, workloads_type)
    loop, kube, workloads = env.loop, env.kube, env.workloads
    now = START
    for op, arg in ops:
        name = f"n{arg % 3}"
        if op == "node" and ("Node", "", name) not in kube._objects:
            env.node(name, cpu="4", pods="6")
        elif op == "drop" and ("Node", "", name) in kube._objects:
            kube.delete("Node", name)
        elif op == "scale":
            workloads.set_deployment(f"app{arg % 2}", NS, template=template(f"app{arg % 2}"), replicas=arg)
        elif op == "rollout" and (DEPLOYMENT, NS, f"app{arg % 2}") in workloads._workloads:
            workloads.rollout(f"app{arg % 2}", NS, template=template(f"app{arg % 2}", image=f"v{arg}"))
        elif op == "evict":
            pods = sorted(p["metadata"]["name"] for p in kube.objects("Pod"))
            if pods:
                kube.delete("Pod", pods[arg % len(pods)], NS)
        now += 1 + arg % 4
        loop.run(now)
    loop.run(now + 30)
    return sorted(
        (p["metadata"]["name"], p["spec"].get("nodeName", ""), p["status"].get("phase", ""))
        for p in kube.objects("Pod")
    ) + [call for call in kube.calls if call[1] == "Pod"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["node", "drop", "scale", "rollout", "evict"]), st.integers(0, 7)),
        max_size=25,
    )
)
def test_garbage_collection_and_counts_kept_as_pods_change_act_as_walks_over_every_pod(
    ops: list[tuple[str, int]],
) -> None:
    assert _run_ops(Workloads, ops) == _run_ops(_WalkingWorkloads, ops)


@pytest.mark.parametrize("workloads_type", [Workloads, _WalkingWorkloads])
def test_a_pod_bound_to_a_node_never_seen_is_collected_with_the_next_node_gone(
    workloads_type: type[Workloads],
) -> None:
    env = make(2.0, workloads_type)
    loop, kube, workloads = env.loop, env.kube, env.workloads
    workloads.set_deployment("web", NS, template=template(), replicas=1)
    loop.run(START + 1)
    [pod] = env.pods()  # pending: no node yet
    pod["spec"]["nodeName"] = "ghost"  # written around the binder, to a node no watch announced
    kube.update(pod)
    loop.run(START + 5)
    assert [p["spec"]["nodeName"] for p in env.pods()] == ["ghost"]  # nothing looked yet
    env.node("n1")
    kube.delete("Node", "n1")
    loop.run(START + 10)
    assert "ghost" not in {p["spec"].get("nodeName") for p in env.pods()}  # deleted (and replaced)
    assert pod["metadata"]["uid"] not in {p["metadata"]["uid"] for p in env.pods()}
