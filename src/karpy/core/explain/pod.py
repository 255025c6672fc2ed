"""Why one pod is (not) placed: ``explain_pod(snapshot, key) -> PodExplanation``.

The answer comes from exactly the solve ``karpy plan`` runs: the snapshot's pending pods through
:class:`~karpy.core.scheduling.scheduler.Solver`, watched (not changed) so the reasons of the
asked pod's last attempt are kept even when it was placed. Then, for that pod:

- ``status``: ``bound`` (it has a node: named, nothing else is solved), ``not-pending``
  (terminal, being deleted, a DaemonSet pod or scheduling-gated: which), ``invalid`` (the
  solve refuses it: the validation message, class ``validation``, or why its volumes cannot be
  used, class ``volume``), ``existing`` (placed on an existing node or an
  in-flight NodeClaim), ``new-nodeclaim`` (a new NodeClaim: its NodePool, its options grouped by
  family and, given the catalog order, what the launch rule would launch) or ``unschedulable``;
- ``relaxations``: the preference-relaxation steps the solve needed;
- ``node_pools``: every NodePool in the solve's order (weight, then name descending) with its
  verdict: ``would-launch``, ``rejected`` (the solver's message, its class, the detail and a
  suggestion from :mod:`karpy.core.explain.suggest`) or ``not-tried`` (the pod was placed before
  the NodePool's turn; NodePools the solve leaves out, deleted or static, come last);
- ``nodes``: every existing node and in-flight NodeClaim with the first check that rejects the
  pod there after the solve (:meth:`Solver.why_not_existing`), ``fits`` where none does, or
  ``placed`` for the one it was placed on.

Pure: the snapshot in, frozen dataclasses out. Rendered by ``karpy explain pod``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpy.core.explain.families import group_families
from karpy.core.explain.reasons import reason_class
from karpy.core.explain.suggest import (
    Advice,
    Detail,
    NodeView,
    PoolView,
    advise_alone,
    advise_node,
    advise_pool,
)
from karpy.core.scheduling import podinfo, preferences
from karpy.core.scheduling.launch import launch
from karpy.core.scheduling.nodeclaim import Template
from karpy.core.scheduling.results import PlannedClaim, Results
from karpy.core.scheduling.scheduler import Solver
from karpy.core.snapshot import Snapshot
from karpy.model.errors import InputError
from karpy.model.objects import Pod

__all__ = [
    "STATUSES",
    "NewClaim",
    "NodeVerdict",
    "PodExplanation",
    "PodNotFound",
    "PoolVerdict",
    "explain_pod",
    "pod_key",
]

STATUSES = ("bound", "existing", "new-nodeclaim", "unschedulable", "invalid", "not-pending")


@dataclass(frozen=True, slots=True)
class NewClaim:
    """The new NodeClaim a pod goes on, and what the launch rule would make of it."""

    name: str
    node_pool: str
    instance_types: tuple[str, ...]  # the options, cheapest first
    families: tuple[str, ...]  # the options grouped by family ("m5: large..4xlarge (4)")
    instance_type: str | None = None  # launched (None: no catalog order given, or nothing offered)
    zone: str | None = None
    capacity_type: str | None = None
    price: float | None = None  # per hour


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """What one NodePool said of the pod."""

    name: str
    weight: int
    verdict: str  # would-launch | rejected | not-tried
    reason: str = ""  # the class of ``message`` (karpy.core.explain.reasons)
    message: str = ""  # the solver's own sentence
    detail: Detail = field(default_factory=dict)
    suggestion: str = ""


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """What one existing node (or in-flight NodeClaim) says of the pod after the solve."""

    name: str
    kind: str  # node | nodeclaim
    verdict: str  # placed | fits | rejected
    reason: str = ""
    message: str = ""
    detail: Detail = field(default_factory=dict)
    suggestion: str = ""


@dataclass(frozen=True, slots=True)
class PodExplanation:
    pod: str  # namespace/name
    status: str  # one of STATUSES
    summary: str  # one sentence
    node: str = ""  # bound / existing: the node or NodeClaim
    claim: NewClaim | None = None  # new-nodeclaim
    reason: str = ""  # unschedulable / invalid: the class of the rejection that says most (_telling)
    message: str = ""
    suggestion: str = ""
    relaxations: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)  # where -> why, as ``karpy plan`` prints
    node_pools: tuple[PoolVerdict, ...] = ()
    nodes: tuple[NodeVerdict, ...] = ()


class PodNotFound(InputError):
    """The asked pod is not in the snapshot; ``nearby``: up to five names that are."""

    def __init__(self, key: str, nearby: Sequence[str]) -> None:
        self.key = key
        self.nearby = tuple(nearby)
        there = ", ".join(self.nearby) if self.nearby else "none"
        super().__init__(f"pod {key} not found; pods there: {there}")


def pod_key(name: str) -> str:
    """``namespace/name``; a name without a namespace is in ``default``."""
    return name if "/" in name else f"default/{name}"


class _Watching(Solver):
    """The production solver, keeping what the last attempt of one pod was told (nothing else
    differs: the solve is the one ``karpy plan`` runs)."""

    def __init__(self, snapshot: Snapshot, pods: Sequence[Pod], watched: str) -> None:
        self.watched = watched
        self.seen: dict[str, str] | None = None
        super().__init__(snapshot, pods)

    def try_schedule(self, pod: Pod) -> tuple[bool, dict[str, str], list[str]]:
        ok, reasons, steps = super().try_schedule(pod)
        if pod.key == self.watched:
            self.seen = dict(reasons)
        return ok, reasons, steps


def _not_pending(pod: Pod) -> str:
    """Why the provisioner leaves an unbound pod alone, or "" when it does not."""
    if pod.is_terminal():
        return f"the pod is terminal (phase {pod.phase})"
    if pod.deleting:
        return "the pod is being deleted"
    if pod.is_daemonset_pod():
        return "a DaemonSet pod: the DaemonSet controller places it"
    if pod.scheduling_gated:
        return "the pod has scheduling gates"
    return ""


def _nearby(snapshot: Snapshot, key: str) -> list[str]:
    keys = sorted({p.key for p in snapshot.pods})
    return difflib.get_close_matches(key, keys, n=5, cutoff=0.0)


def explain_pod(snapshot: Snapshot, key: str, *, catalog_order: Sequence[str] = ()) -> PodExplanation:
    """Explain the pod ``key`` (``namespace/name``, or a name in ``default``) in ``snapshot``.

    ``catalog_order``: the instance-type names in catalog order, for the launch rule's ties; the
    launched type is named only when it is given. Raises :class:`PodNotFound`."""
    key = pod_key(key)
    pod = next((p for p in snapshot.pods if p.key == key), None)
    if pod is None:
        raise PodNotFound(key, _nearby(snapshot, key))
    if pod.node_name:
        known = any(n.name == pod.node_name for n in snapshot.nodes)
        suffix = "" if known else " (a node not among those read)"
        return PodExplanation(key, "bound", f"bound to node {pod.node_name}{suffix}", node=pod.node_name)
    why = _not_pending(pod)
    if why:
        return PodExplanation(key, "not-pending", f"not pending: {why}", message=why)
    pending = snapshot.pending_pods()
    solver = _Watching(snapshot, pending, key)
    results = solver.solve(pending)
    return _Explainer(solver, results, pod, catalog_order).explain()


class _Explainer:
    """The asked pod's explanation, read from one finished solve."""

    def __init__(self, solver: _Watching, results: Results, pod: Pod, catalog_order: Sequence[str]) -> None:
        self.solver, self.results, self.pod, self.order = solver, results, pod, catalog_order
        error = next((e for e in results.errors if e.pod.key == pod.key), None)
        self.reasons: dict[str, str] = dict(solver.seen or {})
        self.steps = results.relaxations.get(pod.key, ())
        self.error = error
        if error is not None:
            self.reasons.update(error.reasons)
            self.steps = error.relaxations
        self.tried = _relaxed(pod, self.steps, solver.prefer_no_schedule_pools)
        self.data = podinfo.pod_data(self.tried, respect_preferences=solver.respect)

    def explain(self) -> PodExplanation:
        pod, results = self.pod, self.results
        if self.error is not None and "validation" in self.error.reasons:
            message = self.error.reasons["validation"]
            advice = advise_alone(message)
            return PodExplanation(
                pod.key,
                "invalid",
                f"Karpenter does not provision for this pod: {message}",
                reason=advice.reason,
                message=message,
                suggestion=advice.suggestion,
                reasons=dict(self.error.reasons),
                node_pools=self._pools(None),
            )
        claim = next((c for c in results.new_claims if any(p.key == pod.key for p in c.pods)), None)
        on_node = results.existing.get(pod.key, "")
        steps, reasons = tuple(self.steps), dict(sorted(self.reasons.items()))
        nodes = self._nodes(on_node)
        if on_node:
            kind = next((n.kind for n in nodes if n.name == on_node), "node")
            where = "existing node" if kind == "node" else "in-flight NodeClaim"
            return PodExplanation(
                pod.key,
                "existing",
                f"placed on {where} {on_node}",
                node=on_node,
                node_pools=self._pools(None),
                nodes=nodes,
                relaxations=steps,
                reasons=reasons,
            )
        if claim is not None:
            new = self._claim(claim)
            return PodExplanation(
                pod.key,
                "new-nodeclaim",
                _claim_summary(new),
                node=new.name,
                claim=new,
                node_pools=self._pools(claim.node_pool),
                nodes=nodes,
                relaxations=steps,
                reasons=reasons,
            )
        pools = self._pools(None)
        first = _telling(pools)
        advice = self._first_other(nodes) if first is None else Advice(first.reason, {}, first.suggestion)
        message = first.message if first is not None else self._other_message()
        rejected = [v for v in pools if v.verdict == "rejected"]
        if rejected:
            summary = "unschedulable: " + "; ".join(f"NodePool {v.name}: {v.reason}" for v in rejected)
        else:
            summary = f"unschedulable: {message}"
        return PodExplanation(
            pod.key,
            "unschedulable",
            summary,
            reason=advice.reason,
            message=message,
            suggestion=advice.suggestion,
            node_pools=pools,
            nodes=nodes,
            relaxations=steps,
            reasons=reasons,
        )

    def _other_message(self) -> str:
        """The reason when no NodePool rejected the pod: there is none, or no existing node fits."""
        for where in ("nodepools", "existing nodes"):
            if where in self.reasons:
                return self.reasons[where]
        return "; ".join(f"{w}: {m}" for w, m in sorted(self.reasons.items()))

    def _first_other(self, nodes: tuple[NodeVerdict, ...]) -> Advice:
        message = self._other_message()
        if reason_class(message) == "no-nodepool":
            return advise_alone(message)
        cls = reason_class(message)
        first = next((n for n in nodes if n.verdict == "rejected"), None)
        return Advice(cls, {}, first.suggestion if first is not None else "")

    def _claim(self, claim: PlannedClaim) -> NewClaim:
        names = tuple(it.name for it in claim.instance_types)
        new = NewClaim(claim.name, claim.node_pool, names, group_families(names))
        if not self.order:
            return new
        launched = launch(claim, self.order, well_known=self.solver.snapshot.well_known)
        if launched is None:
            return new
        offering = launched.offering
        return NewClaim(
            claim.name,
            claim.node_pool,
            names,
            new.families,
            launched.instance_type.name,
            offering.zone,
            offering.capacity_type,
            launched.price,
        )

    def _pools(self, launching: str | None) -> tuple[PoolVerdict, ...]:
        out: list[PoolVerdict] = []
        solver = self.solver
        for template in solver.templates:
            pool = template.pool
            message = self.reasons.get(f"nodepool/{pool.name}")
            if pool.name == launching:
                out.append(PoolVerdict(pool.name, pool.weight, "would-launch"))
            elif message is None:
                out.append(PoolVerdict(pool.name, pool.weight, "not-tried"))
            else:
                view = _view(template, solver.remaining.get(pool.name))
                advice = advise_pool(message, self.tried, self.data, view)
                out.append(
                    PoolVerdict(
                        pool.name,
                        pool.weight,
                        "rejected",
                        advice.reason,
                        message,
                        advice.detail,
                        advice.suggestion,
                    )
                )
        solved = {t.pool.name for t in solver.templates}
        for pool in sorted(solver.snapshot.node_pools, key=lambda p: p.name):
            if pool.name not in solved:
                left_out = "being deleted" if pool.deleting else "static (spec.replicas): not provisioned for"
                out.append(PoolVerdict(pool.name, pool.weight, "not-tried", detail={"excluded": left_out}))
        return tuple(out)

    def _nodes(self, on_node: str) -> tuple[NodeVerdict, ...]:
        solver = self.solver
        verdicts = solver.why_not_existing(self.pod)
        data = solver.pod_data(self.pod)
        out: list[NodeVerdict] = []
        for index, state in enumerate(solver.states):
            kind = "node" if state.node is not None else "nodeclaim"
            message = verdicts.get(state.name, "")
            if state.name == on_node:
                out.append(NodeVerdict(state.name, kind, "placed"))
                continue
            if not message:
                out.append(NodeVerdict(state.name, kind, "fits"))
                continue
            existing, base = solver.existing[index], solver.bases[index]
            free = (
                existing.available - existing.requests
                if existing is not None
                else base.available - base.requests
            )
            view = NodeView(state.name, state.labels, tuple(base.taints), free)
            advice = advise_node(message, self.pod, data, view)
            out.append(
                NodeVerdict(
                    state.name, kind, "rejected", advice.reason, message, advice.detail, advice.suggestion
                )
            )
        return tuple(out)


def _telling(pools: Sequence[PoolVerdict]) -> PoolVerdict | None:
    """The rejection that says most: the first (in the solve's order) that is not a taint the
    pod does not tolerate (a NodePool kept for other pods), else the first."""
    rejected = [v for v in pools if v.verdict == "rejected"]
    return next((v for v in rejected if v.reason != "taint"), rejected[0] if rejected else None)


def _view(template: Template, remaining: Mapping[str, int] | None) -> PoolView:
    pool = template.pool
    return PoolView(
        pool.name,
        template.requirements,
        template.taints,
        tuple(template.instance_types),
        template.daemon,
        pool.limits,
        remaining,
    )


def _relaxed(pod: Pod, steps: Sequence[str], prefer_no_schedule_pools: bool) -> Pod:
    """The pod as the solve last tried it: ``steps`` relaxations applied in the solve's order."""
    current = pod
    for _ in steps:
        relaxed = preferences.relax(current, prefer_no_schedule_pools=prefer_no_schedule_pools)
        if relaxed is None:
            break
        current = relaxed[0]
    return current


def _claim_summary(new: NewClaim) -> str:
    text = f"a new NodeClaim {new.name} from NodePool {new.node_pool}"
    if new.instance_type is not None and new.price is not None:
        text += f": {new.instance_type} in {new.zone} ({new.capacity_type}, ${new.price:.4f}/h)"
    return text
