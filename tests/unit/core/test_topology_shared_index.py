"""Solves that share a snapshot's pod tuple (a disruption pass) share its bound-pod index, and each
still counts exactly as a cold solve: the pods a solve schedules are not counted where they were."""

from __future__ import annotations

import dataclasses

from builders import instance_type, node, node_pool, pod, snapshot, spread
from karpy.core import scheduling
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.objects import Pod

ZONES = ("z1", "z2", "z3")
WEB = {"app": "web"}


def _snapshot() -> tuple[Snapshot, list[Pod]]:
    room = {"cpu": "4", "memory": "8Gi", "pods": "20"}
    nodes = [node(f"n{i}", labels={wk.ZONE: ZONES[i % 3]}, allocatable=room) for i in range(6)]
    where = ["n0", "n0", "n0", "n0", "n1", "n2", "n3", "n4"]  # n0 (z1) is being drained
    bound = [
        pod(f"w{i}", cpu="500m", labels=WEB, spread=[spread(match_labels=WEB)], node_name=name)
        for i, name in enumerate(where)
    ]
    types = [instance_type("m", cpu="4", memory="8Gi", zones=ZONES)]
    return snapshot(pools=[node_pool("default")], types=types, nodes=nodes, pods=bound), bound


def _placements(results: scheduling.Results) -> tuple[object, ...]:
    errors = sorted(e.pod.key for e in results.errors)
    return (sorted(results.existing.items()), len(results.new_claims), errors)


def test_solves_sharing_the_pod_tuple_do_not_count_the_pods_they_move() -> None:
    snap, bound = _snapshot()
    caches = scheduling.SchedulingCaches()  # the solves of a pass share it
    for draining in ("n0", "n3", "n4"):
        nodes = tuple(
            dataclasses.replace(n, marked_for_deletion=True) if n.name == draining else n for n in snap.nodes
        )
        reduced = dataclasses.replace(snap, nodes=nodes)  # same pod tuple: the index is shared
        moved = [dataclasses.replace(p, node_name="") for p in bound if p.node_name == draining]
        warm = scheduling.solve(reduced, moved, caches=caches)
        caches.bound_indexes.clear()
        cold = scheduling.solve(reduced, moved)
        assert _placements(warm) == _placements(cold)
        keys = {p.key for p in moved}  # reference: a snapshot that never had the moved pods
        without = dataclasses.replace(reduced, pods=tuple(p for p in snap.pods if p.key not in keys))
        assert _placements(scheduling.solve(without, moved)) == _placements(warm)
    assert not warm.errors
