"""Why one node is (not) disrupted: ``explain_node(snapshot, name) -> NodeExplanation``.

The answer comes from exactly the disruption pass ``karpy disrupt`` runs
(:func:`karpy.core.disruption.compute`): its command and its record of the node (the verdict and
reasons ``karpy disrupt`` prints). Then every method is asked about the node in the pass's order
(expiration, emptiness, drift, multi-node and single-node consolidation) through the pass's own
method code: a second pass over the same snapshot whose methods all run, even where an earlier
one acts first, so a method the pass never reached still says what it would do. Per method:

- ``disrupted``: the pass's command removes the node, by this method;
- ``candidate``: the method would take the node, but the pass acts otherwise first (``preemptedBy``);
- ``blocked``: the method would apply, and something in :data:`BLOCKERS` stops it;
- ``not-candidate``: the method does not apply (not expired, not drifted, not empty, nothing cheaper).

Each verdict has a stable reason class (:data:`REASONS`, from the pass's sentence by
:func:`reason_class`), the pass's sentence, a detail of JSON values (do-not-disrupt pods,
blocking PDBs, the budget with its window and what it allows now, the consolidateAfter window,
the drift reason, the expiry) and, for a removal, the :class:`Action` (the nodes, the launched
replacements, the price per hour before and after). Pure: the snapshot in, frozen dataclasses
out. Rendered by ``karpy explain node``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from karpy.core import lifecycle
from karpy.core.disruption import budgets, consolidation, drift, horizon, methods
from karpy.core.disruption import candidates as cand_mod
from karpy.core.disruption import types as dtypes
from karpy.core.disruption.memo import Memo
from karpy.core.scheduling.launch import launch
from karpy.core.scheduling.results import PlannedClaim
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.errors import InputError
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass
from karpy.model.objects import NodeClaim, NodePool, Pod

__all__ = [
    "BLOCKERS",
    "METHODS",
    "REASONS",
    "Action",
    "MethodVerdict",
    "NodeExplanation",
    "NodeNotFound",
    "Replacement",
    "explain_node",
    "iso",
    "reason_class",
    "span",
]

EXPIRATION, EMPTINESS, DRIFT = "expiration", dtypes.EMPTINESS, "drift"
MULTI, SINGLE = dtypes.MULTI_NODE, dtypes.SINGLE_NODE
METHODS = (EXPIRATION, EMPTINESS, DRIFT, MULTI, SINGLE)  # the disruption controller's order
Detail = Mapping[str, object]  # JSON values only
T = TypeVar("T")

# class | the prefixes of the pass's sentences it names (the longest matching prefix wins); "!": a
# blocker, what stops a method that would otherwise apply
_TABLE = """
!do-not-disrupt | node annotated karpenter.sh/do-not-disrupt
!pdb | PDB
!budget | empty, but the Empty budget | outside the Underutilized budget | drift blocked by budget
!budget | consolidation blocked by budget
!consolidate-after | empty, but consolidateAfter | not consolidatable: consolidateAfter
!consolidate-after | not consolidatable yet: consolidateAfter
!policy | not consolidatable: consolidationPolicy
!stabilization | not consolidatable: karpy.sh/consolidation-stabilization
!rollout-guard | not consolidatable: rollout of
!not-initialized | not initialized
!not-registered | NodeClaim has not registered a Node
!nominated | nominated for pending pods
!headroom | headroom:
expired | expired
drifted | drifted
empty | empty: left to emptiness
underutilized
not-expired | not expired
not-drifted | not drifted
not-empty | not empty
not-selected
no-room | drift cannot reschedule all pods | pods would not all fit elsewhere
no-savings | no replacement is cheaper | the replacement is not cheaper | saves | Balanced score
spot-to-spot | would need a new node, and SpotToSpot | SpotToSpotConsolidation is disabled
spot-to-spot | spot-to-spot needs
too-many-nodes | would need
too-few-candidates | fewer than two candidates
min-values | cheaper options do not meet minValues
unpriced | no price known
unknown-instance-type | not consolidatable: instance type unknown
missing-labels | not consolidatable: no capacity-type or zone label
not-managed | not managed: no NodeClaim
no-nodepool
deleting | already being deleted
other
"""
_ROWS = [[part.strip() for part in line.split("|")] for line in _TABLE.strip().splitlines()]
REASONS: tuple[str, ...] = tuple(dict.fromkeys(row[0].lstrip("!") for row in _ROWS))
BLOCKERS = frozenset(row[0][1:] for row in _ROWS if row[0].startswith("!"))
_PREFIXES = sorted(((p, r[0].lstrip("!")) for r in _ROWS for p in r[1:]), key=lambda pc: -len(pc[0]))
_TAKEN = {"Expired": "expired", "Drifted": "drifted", "Empty": "empty", "Underutilized": "underutilized"}
_DRIFT_FIELDS = dict(AMIDrift="ami", SecurityGroupDrift="securityGroups", SubnetDrift="subnet")
_DRIFT_FIELDS["NodeClassDrift"] = "nodeClass"  # what the cloud's Drifted reasons name
_NOT_DRIFTED = "not drifted: no Drifted condition; the NodePool hash and requirements match"


def reason_class(message: str) -> str:
    """The class of one of the pass's sentences (see :data:`REASONS`); ``other`` when none matches."""
    message = message.removeprefix("not consolidated: ")
    if message.startswith("pod ") and "karpenter.sh/do-not-disrupt" in message:
        return "do-not-disrupt"
    if message.startswith("pod ") and "several PDBs" in message:
        return "pdb"
    if message.startswith("NodePool ") and message.endswith("not found"):
        return "no-nodepool"
    return next((cls for prefix, cls in _PREFIXES if message.startswith(prefix)), "other")


def iso(moment: float) -> str:
    """RFC 3339 in UTC (``...Z``)."""
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def span(seconds: float) -> str:
    """A duration for people: ``29d 18h``, ``4m 30s``, ``0s`` (its two largest units)."""
    left = round(abs(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
    return ("-" if seconds < 0 else "") + " ".join(parts[:2])


@dataclass(frozen=True, slots=True)
class Replacement:
    """A NodeClaim a removal launches, and what the launch rule makes of it."""

    node_pool: str
    instance_types: tuple[str, ...]  # the options, as the command carries them
    pods: int
    instance_type: str | None = None  # None: no option has an available offering
    zone: str | None = None
    capacity_type: str | None = None
    price: float | None = None  # per hour


@dataclass(frozen=True, slots=True)
class Action:
    """What a method would do: remove ``nodes`` (this one among them), launching ``replacements``."""

    decision: str  # delete | replace
    nodes: tuple[str, ...]
    replacements: tuple[Replacement, ...] = ()
    removed_price: float | None = None  # per hour, the removed nodes together
    launched_price: float | None = None  # per hour, the replacements together
    savings: float | None = None  # per hour (the command's own figure where it has one)


@dataclass(frozen=True, slots=True)
class MethodVerdict:
    method: str  # one of METHODS
    verdict: str  # disrupted | candidate | blocked | not-candidate
    reason: str  # one of REASONS
    message: str  # the pass's sentence (where the pass says nothing: why the method does not apply)
    detail: Detail = field(default_factory=dict)
    action: Action | None = None


@dataclass(frozen=True, slots=True)
class NodeExplanation:
    node: str
    node_claim: str  # "" for a Node without a NodeClaim
    node_pool: str
    now: float
    verdict: str  # the pass's record: disrupted | candidate | blocked | not-managed
    summary: str
    reason: str  # the class that says most (the disrupting method's, else the first blocker's ...)
    blockers: tuple[str, ...]  # every blocking class, in method order
    pass_reasons: tuple[str, ...]  # the pass's record of the node, as karpy disrupt prints it
    command: dtypes.Command | None  # the command of the pass karpy disrupt runs at the same time
    methods: tuple[MethodVerdict, ...]
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    price: float | None = None  # per hour
    pods: tuple[str, ...] = ()  # live pods bound to it
    state: Mapping[str, bool] = field(default_factory=dict)  # initialized, nominated, deleting
    next_change: float | None = None  # the first later time a pass over the same objects may differ


class NodeNotFound(InputError):
    """The asked node is neither a Node nor a NodeClaim of the snapshot; ``nearby``: a few that are."""

    def __init__(self, name: str, nearby: Sequence[str], total: int) -> None:
        self.name, self.nearby, self.total = name, tuple(nearby), total
        super().__init__(f"node {name} not found; nodes there ({total}): {', '.join(nearby) or 'none'}")


def _find(snapshot: Snapshot, name: str) -> StateNode | None:
    for state in snapshot.nodes:
        if state.name == name or (state.node is not None and state.node.name == name):
            return state
    return next((s for s in snapshot.nodes if s.claim is not None and s.claim.name == name), None)


def explain_node(
    snapshot: Snapshot,
    name: str,
    *,
    now: float | None = None,
    catalog_order: Sequence[str] = (),
    node_classes: Sequence[EC2NodeClass | KWOKNodeClass] = (),
) -> NodeExplanation:
    """Explain the node named ``name`` (a Node or a NodeClaim name) at ``now`` (default: the
    snapshot's time). ``catalog_order``: the instance-type names in catalog order, for the launch
    rule's ties; ``node_classes``: to name the AMIs a NodeClass resolves. Raises
    :class:`NodeNotFound` (with up to five close or first names)."""
    if now is not None and now != snapshot.now:
        snapshot = dataclasses.replace(snapshot, now=now)
    state = _find(snapshot, name)
    if state is None:
        names = sorted({s.name for s in snapshot.nodes} | {s.claim.name for s in snapshot.nodes if s.claim})
        nearby = difflib.get_close_matches(name, names, n=5, cutoff=0.6) or names[:5]
        raise NodeNotFound(name, nearby, len(snapshot.nodes))
    return _Explainer(snapshot, state, catalog_order, node_classes).explain()


class _Explainer:
    def __init__(
        self,
        snapshot: Snapshot,
        state: StateNode,
        order: Sequence[str],
        node_classes: Sequence[EC2NodeClass | KWOKNodeClass],
    ) -> None:
        self.snapshot, self.state, self.name, self.order = snapshot, state, state.name, order
        self.node_classes = {nc.name: nc for nc in node_classes}
        self.now = snapshot.now
        self.decision = methods.compute(snapshot, self.now)  # the pass karpy disrupt runs
        self.probe = methods.Pass(snapshot, self.now, Memo())  # its methods, each run on its own
        self.classes = self.probe.candidates()
        self.graceful = {c.name: c for c in self.classes.graceful}
        self.eventual = {c.name: c for c in self.classes.eventual}
        self.pool: NodePool | None = self.probe.pools.get(state.node_pool)
        found, self.gate_notes = self._run(lambda: self.probe.consolidatable(self.classes.graceful))
        self.ordered = found[0]

    def _run(self, fn: Callable[[], T]) -> tuple[T, tuple[str, ...]]:
        """``fn()``, and the notes it made about this node."""
        before = len(self.probe.notes.get(self.name, []))
        out = fn()
        return out, tuple(self.probe.notes.get(self.name, [])[before:])

    # -- the explanation -------------------------------------------------------------------------
    def explain(self) -> NodeExplanation:
        verdicts = (self.expiration(), self.emptiness(), self.drift(), self.multi(), self.single())
        record, cmd = self.decision.records.get(self.name), self.decision.command
        telling = _telling(verdicts)
        state, claim = self.state, self.state.claim
        node_labels = state.labels
        it = self.probe.types.get(state.node_pool, {}).get(node_labels.get(labels.INSTANCE_TYPE, ""))
        keys = tuple(i for i in node_labels.items() if i[0] in (labels.ZONE, labels.CAPACITY_TYPE))
        price = None if it is None else cand_mod.price(it, keys)
        deleting = state.marked_for_deletion or (state.node is not None and state.node.deleting)
        flags = {"initialized": state.initialized, "nominated": state.nominated}
        flags["deleting"] = deleting or (claim is not None and claim.deleting)
        until = horizon.next_change(self.snapshot, self.now)
        return NodeExplanation(
            node=self.name,
            node_claim=claim.name if claim is not None else "",
            node_pool=state.node_pool,
            now=self.now,
            verdict=record.verdict if record is not None else "not-managed",
            summary=self._summary(telling, verdicts),
            reason=telling.reason,
            blockers=tuple(dict.fromkeys(v.reason for v in verdicts if v.verdict == "blocked")),
            pass_reasons=record.reasons if record is not None else (),
            command=cmd,
            methods=verdicts,
            instance_type=node_labels.get(labels.INSTANCE_TYPE, ""),
            zone=node_labels.get(labels.ZONE, ""),
            capacity_type=node_labels.get(labels.CAPACITY_TYPE, ""),
            price=price,
            pods=tuple(p.key for p in state.pods if not p.is_terminal()),
            state=flags,
            next_change=None if math.isinf(until) else until,
        )

    def _summary(self, telling: MethodVerdict, verdicts: Sequence[MethodVerdict]) -> str:
        if telling.verdict == "disrupted":
            return f"disrupted this pass by {telling.method}: {telling.message}"
        if telling.verdict == "blocked":
            where = [v.method for v in verdicts if v.verdict == "blocked" and v.reason == telling.reason]
            return f"not disrupted this pass: {telling.message} (blocks {', '.join(where)})"
        cmd = self.decision.command
        if telling.verdict == "candidate" and cmd is not None:
            first = f"{cmd.method} acts first ({cmd.decision} {', '.join(cmd.candidates)})"
            return f"not disrupted this pass: {telling.method} would take it, but {first}"
        return f"not disrupted this pass: {telling.message}"

    def _verdict(self, method: str, message: str, detail: Detail) -> MethodVerdict:
        cls = reason_class(message)
        return MethodVerdict(method, "blocked" if cls in BLOCKERS else "not-candidate", cls, message, detail)

    def _taken(self, method: str, command: dtypes.Command, message: str, detail: Detail) -> MethodVerdict:
        """The method removes the node: disrupted when the pass's command does, else a candidate."""
        action, cls, cmd = self._action(command), _TAKEN.get(command.reason, "other"), self.decision.command
        if cmd is not None and cmd.method == method and self.name in cmd.candidates:
            return MethodVerdict(method, "disrupted", cls, message, detail, action)
        if cmd is not None:
            first = {"method": cmd.method, "decision": cmd.decision, "nodes": list(cmd.candidates)}
            detail = {**detail, "preemptedBy": first}
        return MethodVerdict(method, "candidate", cls, message, detail, action)

    def _base(self, method: str, *, graceful: bool, detail: Detail) -> MethodVerdict | None:
        """Why the node is no candidate of the method's disruption class, or None."""
        why = (self.classes.graceful_why if graceful else self.classes.eventual_why).get(self.name)
        if why is None:
            return None
        return self._verdict(method, why, {**detail, **self._blocker_detail(reason_class(why))})

    # -- the methods -----------------------------------------------------------------------------
    def expiration(self) -> MethodVerdict:
        claim = self.state.claim
        if claim is None:
            return self._verdict(EXPIRATION, "not managed: no NodeClaim", {})
        at = lifecycle.expires_at(claim, self.pool)
        detail = _expiry_detail(claim, self.pool, at, self.now)
        if claim.deleting:
            return self._verdict(EXPIRATION, "already being deleted", detail)
        command, notes = self._run(self.probe.expired)
        if command is not None and self.name in command.candidates:
            return self._taken(EXPIRATION, command, notes[0] if notes else command.detail, detail)
        if at is None:
            return self._verdict(EXPIRATION, "not expired: expireAfter is Never", detail)
        return self._verdict(
            EXPIRATION, f"not expired: expires at {iso(at)} (in {span(at - self.now)})", detail
        )

    def emptiness(self) -> MethodVerdict:
        moving = tuple(p.key for p in self.state.pods if cand_mod.reschedulable(p))
        detail: dict[str, object] = {"reschedulablePods": list(moving)}
        if self.state.claim is not None and self.pool is not None:
            detail.update(self._consolidate_after(self.pool, self.state.claim))
            detail["budget"] = self._budget(self.pool, dtypes.EMPTY)
        if moving:
            shown = ", ".join(moving[:3]) + (f" +{len(moving) - 3}" if len(moving) > 3 else "")
            pods = f"{len(moving)} pod" + ("s" if len(moving) > 1 else "")
            return self._verdict(EMPTINESS, f"not empty: {pods} would have to move ({shown})", detail)
        base = self._base(EMPTINESS, graceful=True, detail=detail)
        if base is not None:
            return base
        (command, _), notes = self._run(lambda: self.probe.emptiness(self.classes.graceful))
        if command is not None and self.name in command.candidates:
            return self._taken(EMPTINESS, command, "empty: no reschedulable pods", detail)
        return self._verdict(EMPTINESS, notes[-1] if notes else "empty", detail)

    def drift(self) -> MethodVerdict:
        claim, pool = self.state.claim, self.pool
        if claim is None or pool is None:
            return self._base(DRIFT, graceful=False, detail={}) or self._verdict(DRIFT, "not managed", {})
        why = drift.drift_reason(self.state, pool)
        detail: dict[str, object] = {"drift": self._drift_detail(claim, pool, why)}
        if why is None:
            return self._verdict(DRIFT, _NOT_DRIFTED, detail)
        detail["budget"] = self._budget(pool, dtypes.DRIFTED)
        base = self._base(DRIFT, graceful=False, detail=detail)
        if base is not None:
            return base
        command, notes = self._run(lambda: self.probe.drift(self.classes.eventual))
        drifted = next((n for n in notes if n.startswith("drifted: ")), f"drifted: {why}")
        if command is not None and self.name in command.candidates:
            return self._taken(DRIFT, command, drifted, detail)
        blocking = [n for n in notes if not n.startswith("drifted: ")]
        if blocking:
            return self._verdict(DRIFT, blocking[-1], detail)
        c = self.eventual[self.name]
        if not c.reschedulable:  # empty, past what the budget leaves after earlier empty drifted nodes
            used = self.probe.budget_why.get((pool.name, dtypes.DRIFTED), "")
            return self._verdict(DRIFT, f"drift blocked by budget ({used}): taken by other nodes", detail)
        caches = self.probe.memo.scheduling
        sim = consolidation.simulate(self.snapshot, [c], consolidation=False, caches=caches)
        if sim.stranded:
            return self._verdict(DRIFT, "drift cannot reschedule all pods: " + sim.stranded[0], detail)
        new = sim.results.new_claims
        own = dtypes.Command(dtypes.DRIFTED, DRIFT, (c.name,), new, None, "replace drifted node")
        return self._taken(DRIFT, own, drifted, detail)

    def _gate(self, method: str, detail: dict[str, object]) -> MethodVerdict | None:
        """Why consolidation does not consider the node (the pass's candidate and consolidation checks)."""
        if self.pool is not None and self.state.claim is not None:
            detail["consolidationPolicy"] = self.pool.disruption.consolidation_policy
            detail.update(self._consolidate_after(self.pool, self.state.claim))
            detail["budget"] = self._budget(self.pool, dtypes.UNDERUTILIZED)
        base = self._base(method, graceful=True, detail=detail)
        if base is not None or not self.gate_notes:
            return base
        return self._verdict(method, self.gate_notes[-1], detail)

    def multi(self) -> MethodVerdict:
        detail: dict[str, object] = {}
        gate = self._gate(MULTI, detail)
        if gate is not None:
            return gate
        sizes = {n: len(v) for n, v in self.probe.notes.items()}
        (command, _), notes = self._run(lambda: self.probe.multi(self.ordered, self.classes.graceful))
        rank = [c.name for c in self.ordered].index(self.name)
        detail["rank"] = {"position": rank + 1, "of": len(self.ordered)}  # by savings ratio
        if command is not None and self.name in command.candidates:
            return self._taken(MULTI, command, f"{command.reason}: {command.detail}", detail)
        if notes:
            return self._verdict(MULTI, notes[-1], detail)
        if command is not None:
            message = f"multi-node consolidation would {command.decision} {', '.join(command.candidates)}"
            return MethodVerdict(
                MULTI, "not-candidate", "not-selected", message + ", without this node", detail
            )
        held = {n for n, v in self.probe.notes.items() if len(v) > sizes.get(n, 0)}  # by the budget
        within = [c for c in self.ordered if c.name not in held]
        caches = self.probe.memo.scheduling
        _, why = consolidation.multi_node(self.snapshot, within, self.classes.graceful, caches)
        return self._verdict(MULTI, f"not consolidated: {why}", {**detail, **self._destinations()})

    def single(self) -> MethodVerdict:
        detail: dict[str, object] = {}
        gate = self._gate(SINGLE, detail)
        if gate is not None:
            return gate
        (command, _), notes = self._run(lambda: self.probe.single(self.ordered, self.classes.graceful))
        if command is not None and self.name in command.candidates:
            return self._taken(SINGLE, command, f"{command.reason}: {command.detail}", detail)
        budget = [n for n in notes if reason_class(n) == "budget"]
        if budget:
            return self._verdict(SINGLE, budget[-1], detail)
        own, why = consolidation.compute(  # what the pass's single-node step asks of each candidate
            self.snapshot,
            [self.graceful[self.name]],
            all_candidates=self.classes.graceful,
            method=SINGLE,
            caches=self.probe.memo.scheduling,
        )
        if own is not None:
            return self._taken(SINGLE, own, f"{own.reason}: {own.detail}", detail)
        return self._verdict(SINGLE, f"not consolidated: {why}", {**detail, **self._destinations()})

    # -- details ---------------------------------------------------------------------------------
    def _action(self, command: dtypes.Command) -> Action:
        launched = tuple(self._replacement(r) for r in command.replacements)
        prices = [self.eventual[n].price if n in self.eventual else None for n in command.candidates]
        removed = None if None in prices else sum(p for p in prices if p is not None)
        new = [r.price for r in launched]
        added = None if None in new else sum(p for p in new if p is not None)
        savings = command.savings_per_hour
        if savings is None and removed is not None and added is not None:
            savings = removed - added
        return Action(command.decision, command.candidates, launched, removed, added, savings)

    def _replacement(self, claim: PlannedClaim) -> Replacement:
        options = tuple(it.name for it in claim.instance_types)
        done = launch(claim, self.order, well_known=self.snapshot.well_known)
        if done is None:
            return Replacement(claim.node_pool, options, len(claim.pods))
        o, name = done.offering, done.instance_type.name
        return Replacement(claim.node_pool, options, len(claim.pods), name, o.zone, o.capacity_type, o.price)

    def _consolidate_after(self, pool: NodePool, claim: NodeClaim) -> dict[str, object]:
        after, since = pool.disruption.consolidate_after, lifecycle.consolidatable_since(claim)
        ends = None if after is None or since is None else since + after
        window = {"seconds": after, "since": None if since is None else iso(since)}  # seconds None: Never
        window["endsAt"] = None if ends is None else iso(ends)
        window["remainingSeconds"] = None if ends is None else max(0.0, ends - self.now)
        return {"consolidateAfter": window}

    def _budget(self, pool: NodePool, reason: str) -> dict[str, object]:
        """The pool's budgets for ``reason``: what each allows, its window, and what they leave now."""
        allowed, why = self.probe.budget(pool.name, reason), self.probe.budget_why[(pool.name, reason)]
        total, disrupting = budgets.counts(pool, self.snapshot.nodes)
        rows: list[dict[str, object]] = []
        for index, b in enumerate(pool.disruption.budgets):
            if b.reasons and reason not in b.reasons:
                continue
            row: dict[str, object] = {"index": index, "nodes": b.nodes, "reasons": list(b.reasons)}
            row.update({"schedule": b.schedule, "durationSeconds": b.duration, "invalid": None})
            found = None
            try:
                budgets.validate(b)
                row["allows"], found = budgets.budget_nodes(b, total), budgets.window(b, self.now)
            except (budgets.BudgetError, ValueError) as exc:
                row.update({"allows": 0, "invalid": str(exc)})
            row["active"] = found[0] if found is not None else True  # an invalid budget fails closed
            row["windowStart"] = None if found is None else iso(found[1])
            row["windowEnd"] = None if found is None else iso(found[2])
            rows.append(row)
        summary = {"reason": reason, "allowedNow": allowed, "decidedBy": why, "nodes": total}
        return {**summary, "disrupting": disrupting, "budgets": rows}

    def _blocker_detail(self, cls: str) -> dict[str, object]:
        pods = [p for p in self.state.pods if not p.is_terminal()]
        if cls == "do-not-disrupt":
            dnd = labels.DO_NOT_DISRUPT
            found = [
                {"pod": p.key, "value": p.annotations[dnd], "until": _until(p)}
                for p in pods
                if cand_mod.do_not_disrupt_active(p, self.now)
            ]
            node = self.state.node
            return {
                "doNotDisruptPods": found,
                "nodeAnnotated": bool(node and node.annotations.get(dnd) == "true"),
            }
        if cls != "pdb":
            return {}
        limits, pdbs = self.probe.limits, self.snapshot.pdbs
        blocked: dict[str, list[str]] = {}
        for p in pods:
            if cand_mod.evictable(p) and limits.blocking(p) is not None:
                for i in limits.selected(p):
                    blocked.setdefault(f"{pdbs[i].namespace}/{pdbs[i].name}", []).append(p.key)
        return {"pdbs": [{"pdb": k, "pods": v} for k, v in sorted(blocked.items())]}

    def _destinations(self) -> dict[str, object]:
        """The other nodes a consolidation moves no running pod onto (not initialized, or inside
        their consolidateAfter window), when there are any."""
        out = []
        for other in self.snapshot.nodes:
            pool = self.probe.pools.get(other.node_pool)
            if other.name == self.name or other.node is None:
                continue
            if not other.initialized:
                out.append({"node": other.name, "why": "not initialized"})
            elif pool is not None and lifecycle.under_consolidate_after(pool, other.claim, self.now):
                assert other.claim is not None
                ends = self._consolidate_after(pool, other.claim)["consolidateAfter"]
                assert isinstance(ends, dict)
                out.append(
                    {"node": other.name, "why": f"inside its consolidateAfter window until {ends['endsAt']}"}
                )
        return {"destinationsExcluded": out} if out else {}

    def _drift_detail(self, claim: NodeClaim, pool: NodePool, why: str | None) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": None,
            "nodeClaimHash": claim.annotations.get(drift.HASH_ANNOTATION),
            "nodePoolHash": drift.pool_hash(pool),
            "hashVersion": claim.annotations.get(drift.HASH_VERSION_ANNOTATION),
        }
        cond = claim.condition("Drifted")
        if why is not None and why.startswith("Drifted condition") and cond is not None:
            out.update(
                {"kind": "condition", "conditionReason": cond.reason, "conditionMessage": cond.message}
            )
            out["since"] = None if cond.last_transition is None else iso(cond.last_transition)
            out.update({"field": _DRIFT_FIELDS.get(cond.reason), "imageID": claim.image_id or None})
            ref = claim.node_class_ref
            nc = self.node_classes.get(ref.name) if ref is not None else None
            out["nodeClassAMIs"] = [a.id for a in nc.status.amis] if isinstance(nc, EC2NodeClass) else None
        elif why is not None and why.startswith("NodePool template changed"):
            out["kind"] = "nodepool-hash"
        elif why is not None:
            out.update({"kind": "requirements", "conflicts": why.split(": ", 1)[-1].split("; ")})
        return out


def _until(pod: Pod) -> str | None:
    until = cand_mod.do_not_disrupt_until(pod)
    return None if until is None else iso(until)


def _expiry_detail(claim: NodeClaim, pool: NodePool | None, at: float | None, now: float) -> Detail:
    own = claim.expire_after
    after = own if own is not None else (pool.expire_after if pool is not None else None)
    return {
        "expireAfterSeconds": None if after is None or math.isinf(after) else after,
        "expireAfterFrom": "NodeClaim" if own is not None else "NodePool",
        "createdAt": iso(claim.created),
        "expiresAt": None if at is None else iso(at),
        "secondsLeft": None if at is None else max(0.0, at - now),
    }


def _telling(verdicts: Sequence[MethodVerdict]) -> MethodVerdict:
    """The verdict that says most: the disrupting one, else the first blocked one, else the first
    candidate, else single-node consolidation's (the most general question)."""
    for wanted in ("disrupted", "blocked", "candidate"):
        found = next((v for v in verdicts if v.verdict == wanted), None)
        if found is not None:
            return found
    return verdicts[-1]
