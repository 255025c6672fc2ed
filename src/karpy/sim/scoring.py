"""kube-scheduler's Score plugins for the binder: raw scores per feasible node, then the winner.

:func:`raw_scores` gives a node's NodeResourcesFit (``LeastAllocated`` or ``MostAllocated``)
plus NodeResourcesBalancedAllocation score, its count of PreferNoSchedule taints the pod does
not tolerate and the weight of the pod's preferred node-affinity terms it satisfies, with
kube-scheduler's non-zero defaults for pods that request no cpu or memory. :func:`pick`
normalizes the last two over the feasible nodes and weighs Fit 1, Balanced 1, TaintToleration 3
and NodeAffinity 2; ties go to the lowest node name. Used by :mod:`karpy.sim.binder`.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.model.objects import Node, Pod
from karpy.model.resources import CPU, MEMORY
from karpy.model.taints import PREFER_NO_SCHEDULE, tolerates
from karpy.sim.predicates import requirement_ok

__all__ = ["LEAST_ALLOCATED", "MOST_ALLOCATED", "Entry", "nonzero", "pick", "raw_scores"]

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
_NONZERO_CPU = 100  # millicores: kube-scheduler's default request for scoring
_NONZERO_MEMORY = 200 * 1024 * 1024

Entry = tuple[int, int, int]  # fit + balanced score, intolerable PreferNoSchedule taints, affinity weight


def nonzero(pod: Pod) -> tuple[int, int]:
    """The pod's cpu and memory requests for scoring, kube-scheduler's defaults for zero."""
    return (pod.requests.get(CPU) or _NONZERO_CPU, pod.requests.get(MEMORY) or _NONZERO_MEMORY)


def raw_scores(pod: Pod, node: Node, used: tuple[int, int], scoring: str) -> Entry:
    """A feasible node's raw scores; ``used``: the non-zero cpu and memory of its pods."""
    cpu, memory = nonzero(pod)
    used_cpu, used_memory = used
    cpu_cap, memory_cap = node.allocatable.get(CPU), node.allocatable.get(MEMORY)
    cpu_req = min(used_cpu + cpu, cpu_cap)
    memory_req = min(used_memory + memory, memory_cap)
    if scoring == MOST_ALLOCATED:
        cpu_score = cpu_req * 100 // cpu_cap if cpu_cap > 0 else 0
        memory_score = memory_req * 100 // memory_cap if memory_cap > 0 else 0
    else:
        cpu_score = (cpu_cap - cpu_req) * 100 // cpu_cap if cpu_cap > 0 else 0
        memory_score = (memory_cap - memory_req) * 100 // memory_cap if memory_cap > 0 else 0
    cpu_fraction = cpu_req / cpu_cap if cpu_cap > 0 else 1.0
    memory_fraction = memory_req / memory_cap if memory_cap > 0 else 1.0
    balanced = int((1 - abs(cpu_fraction - memory_fraction) / 2) * 100)
    intolerable = 0
    for taint in node.taints:
        if taint.effect == PREFER_NO_SCHEDULE and not any(
            t.effect in ("", PREFER_NO_SCHEDULE) and tolerates(t, taint) for t in pod.tolerations
        ):
            intolerable += 1
    affinity = sum(
        w.weight for w in pod.preferred_terms if all(requirement_ok(r, node) for r in w.term.requirements)
    )
    return ((cpu_score + memory_score) // 2 + balanced, intolerable, affinity)


def pick(rows: Sequence[tuple[str, Entry]]) -> str:
    """The best-scoring node: weights Fit 1, Balanced 1, TaintToleration 3, NodeAffinity 2; ties by name."""
    worst = max(entry[1] for _, entry in rows)
    strongest = max(entry[2] for _, entry in rows)
    best_name, best_score = "", -1
    for name, (fit, intolerable, affinity) in rows:
        taint_score = 100 - intolerable * 100 // worst if worst else 100
        affinity_score = affinity * 100 // strongest if strongest else 0
        score = fit + 3 * taint_score + 2 * affinity_score
        if score > best_score or (score == best_score and name < best_name):
            best_name, best_score = name, score
    return best_name
