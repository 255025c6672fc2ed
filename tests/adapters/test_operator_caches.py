"""Which caches gate the operator's controllers, without a server: the table per
provider, and :class:`karpy.operator.CacheGate`'s ``/readyz`` bodies (a required kind
not watching now fails it), gauge and log lines."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from karpy import operator as operator_mod
from karpy.metrics import Metrics
from karpy.model import errors
from karpy.state.feed import KINDS

CORE = {"Pod", "Node", "NodeClaim", "NodePool", "DaemonSet", "PodDisruptionBudget"}
WORKLOADS = {"Deployment", "StatefulSet"}  # optional: only the rollout guard reads them
STORAGE = {"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"}  # optional: volume rules


@pytest.mark.parametrize(
    ("provider", "node_class", "other"),
    [("kwok", "KWOKNodeClass", "EC2NodeClass"), ("aws", "EC2NodeClass", "KWOKNodeClass")],
)
def test_required_and_optional_kinds_per_provider(provider: str, node_class: str, other: str) -> None:
    required = operator_mod.required_kinds(provider)
    optional = operator_mod.optional_kinds(provider)
    assert required == CORE | {node_class}
    assert optional == {"Namespace", other} | WORKLOADS | STORAGE
    assert required | optional == KINDS and not required & optional


def test_a_provider_without_a_node_class_kind_is_an_input_error() -> None:
    with pytest.raises(errors.InputError, match="'gce'"):
        operator_mod.required_kinds("gce")


@dataclass
class FakeWatcher:
    kind: str
    synced: bool = False
    healthy: bool = False
    absent: bool = False

    @property
    def path(self) -> str:
        return f"/fake/{self.kind}"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _gate(metrics: Metrics | None = None, clock: Clock | None = None) -> operator_mod.CacheGate:
    gate = operator_mod.CacheGate("kwok", metrics=metrics, clock=clock or Clock())
    gate.start()
    return gate


def _sync(gate: operator_mod.CacheGate, *kinds: str) -> None:
    for kind in kinds:
        gate.update(FakeWatcher(kind, synced=True, healthy=True))  # type: ignore[arg-type]


def test_readyz_waits_for_the_required_caches_only_and_names_the_optional_ones() -> None:
    gate = _gate()
    assert gate.readiness() == (
        False,
        "waiting for caches: DaemonSet,KWOKNodeClass,Node,NodeClaim,NodePool,Pod,PodDisruptionBudget",
    )
    _sync(gate, *(CORE - {"Pod", "Node"}), "KWOKNodeClass")
    assert gate.readiness() == (False, "waiting for caches: Node,Pod")
    _sync(gate, "Pod", "Node")
    assert gate.readiness() == (
        True,
        "ok; not synced (optional): CSINode,Deployment,EC2NodeClass,Namespace,PersistentVolume,"
        "PersistentVolumeClaim,StatefulSet,StorageClass",
    )
    _sync(gate, "EC2NodeClass", "Namespace", *WORKLOADS, *STORAGE)
    assert gate.readiness() == (True, "ok")


def test_a_required_kind_not_served_is_named_by_readyz_and_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.operator")
    gate = _gate()
    _sync(gate, *CORE)
    for _ in range(3):
        gate.update(FakeWatcher("KWOKNodeClass", absent=True))  # type: ignore[arg-type]
        gate.update(FakeWatcher("EC2NodeClass", absent=True))  # type: ignore[arg-type]
    assert gate.readiness() == (
        False,
        "waiting for caches: KWOKNodeClass; not served (HTTP 404): KWOKNodeClass",
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "required cache KWOKNodeClass: its resource /fake/KWOKNodeClass is not served (HTTP 404); "
        "the controllers wait until it is (install the CRD)"
    ]


def test_the_gauge_and_readyz_show_what_works_now_while_the_loop_gate_keeps_synced_once() -> None:
    metrics = Metrics()
    gate = _gate(metrics)
    assert {k: metrics.value("karpy_cache_synced", {"kind": k}) for k in KINDS} == dict.fromkeys(KINDS, 0.0)
    _sync(gate, *CORE, "KWOKNodeClass")
    assert metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 1.0
    gate.update(FakeWatcher("Pod", synced=True, healthy=False))  # type: ignore[arg-type]  # a list fails now
    assert metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 0.0
    assert gate.readiness() == (False, "not watching (list/watch failing): Pod")
    assert gate.gate_open() and gate.unsynced() == []  # the controllers keep running on the last state
    gate.update(FakeWatcher("Pod", synced=True, healthy=True))  # type: ignore[arg-type]
    assert metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 1.0
    assert gate.readiness()[0] is True


def test_the_log_names_missing_caches_after_10_s_then_at_most_every_60_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.operator")
    clock = Clock()
    gate = _gate(clock=clock)
    _sync(gate, *(CORE - {"Pod"}), "KWOKNodeClass", "EC2NodeClass", *WORKLOADS, *STORAGE)

    def lines_at(now: float) -> list[str]:
        clock.now = 100.0 + now
        caplog.clear()
        gate.report()
        return [f"{r.levelname} {r.getMessage()}" for r in caplog.records]

    assert lines_at(9.0) == []
    first = lines_at(10.0)
    assert first == [
        "WARNING controllers waiting for caches: Pod (10 s since start)",
        "WARNING not synced (optional; not waited for): Namespace; until they sync: Namespace: pod-affinity "
        "namespaceSelector terms see only the pods' namespaces, each labelled with its name alone "
        "(a selector on another namespace label matches none)",
    ]
    assert [lines_at(t) for t in (11.0, 30.0, 69.0)] == [[], [], []]
    assert lines_at(70.0) == ["WARNING controllers waiting for caches: Pod (70 s since start)"]
    _sync(gate, "Pod")
    assert lines_at(71.0) == ["INFO required caches synced after 71 s; controllers running"]
    assert lines_at(200.0) == []  # the optional one was named once; it has not changed
    _sync(gate, "Namespace")
    assert lines_at(201.0) == ["INFO optional caches synced: Namespace"]
