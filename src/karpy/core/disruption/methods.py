"""One disruption pass: ``compute(snapshot, now) -> Decision``.

Expired NodeClaims are reported first (forceful, outside budgets, PDBs and do-not-disrupt;
at runtime only the expiration controller acts on them). Then the methods run in
upstream's order — emptiness, drift, multi-node consolidation, single-node consolidation —
and the first that yields a command wins. Every node gets a :class:`NodeRecord` saying why
it is or is not disrupted. Candidates of both disruption classes come from one walk; a
caller running pass after pass passes a :class:`~karpy.core.disruption.memo.Memo`
(``compute(snapshot, now, memo=...)``) to keep what does not depend on ``now``; with it, a pass
over the same objects as the memo's last pass, before the first time-derived change after that
pass (:func:`~karpy.core.disruption.horizon.next_change`), returns that pass's decision.

A caller may ``skip`` consolidation methods (emptiness, multi-node, single-node): upstream skips
each one while the cluster's consolidation state is unchanged since it last found nothing
(``IsConsolidated``). ``Decision.settled`` names the methods that ran, found nothing and held no
candidate back for a budget (upstream's ``markConsolidated``: never a method without any
candidate, which upstream does not run at all). Drift always runs (upstream's has no such skip).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from karpy.core import lifecycle
from karpy.core.disruption import budgets, consolidation, drift, horizon, rollout
from karpy.core.disruption import candidates as cand_mod
from karpy.core.disruption.memo import LastPass, Memo
from karpy.core.disruption.types import (
    DRIFTED,
    EMPTINESS,
    EMPTY,
    EXPIRED,
    MULTI_NODE,
    SINGLE_NODE,
    UNDERUTILIZED,
    Candidate,
    Command,
    Decision,
    NodeRecord,
)
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool

__all__ = ["Memo", "Pass", "compute"]

_STABILIZATION = horizon.STABILIZATION


class Pass:
    """One disruption pass over a snapshot at ``now``: the methods share its candidates, budgets
    and memo; :func:`compute` runs them in the controller's order, ``karpy explain node`` each on
    its own."""

    def __init__(self, snapshot: Snapshot, now: float, memo: Memo) -> None:
        self.snapshot = snapshot
        self.now = now
        self.memo = memo
        memo.begin(snapshot)
        self.pools: dict[str, NodePool] = {p.name: p for p in snapshot.node_pools if p.replicas is None}
        self.types: Mapping[str, Mapping[str, InstanceType]] = memo.types_by_name(snapshot.instance_types)
        self.limits = memo.limits(snapshot.pdbs, snapshot.pods)
        self.notes: dict[str, list[str]] = {n.name: [] for n in snapshot.nodes}
        self.allowed: dict[str, dict[str, int]] = {}
        self.budget_why: dict[tuple[str, str], str] = {}
        self.stabilizing: dict[str, bool] = {}
        self.rollout_guard = rollout.Guard(snapshot, now, self.pools)  # karpy.sh/rollout-guard

    def note(self, node: str, text: str) -> None:
        self.notes.setdefault(node, []).append(text)

    def budget(self, pool: str, reason: str) -> int:
        per_pool = self.allowed.setdefault(pool, {})
        if reason not in per_pool:
            count, why = budgets.allowed(self.pools[pool], self.snapshot.nodes, reason, self.now)
            per_pool[reason] = count
            self.budget_why[(pool, reason)] = why
        return per_pool[reason]

    def candidates(self, nodes: Sequence[StateNode] | None = None) -> cand_mod.Classes:
        """The candidates among ``nodes`` (default: every node; each node's are its own)."""
        return cand_mod.build_classes(
            self.snapshot.nodes if nodes is None else nodes,
            pools=self.pools,
            instance_types=self.types,
            limits=self.limits,
            now=self.now,
            facts=self.memo.node,
            price_of=self.memo.price,
        )

    # -- expiration ----------------------------------------------------------------------
    def expired(self) -> Command | None:
        names = []
        for node in self.snapshot.nodes:
            claim = node.claim
            if claim is None or claim.deleting:
                continue
            pool = self.pools.get(node.node_pool)
            if lifecycle.expired(claim, pool, self.now):
                names.append(node.name)
                self.note(node.name, "expired: expireAfter elapsed since the NodeClaim was created")
        if not names:
            return None
        return Command(
            EXPIRED, "expiration", tuple(names), (), None, "forceful: no budgets, PDBs or do-not-disrupt"
        )

    # -- emptiness -----------------------------------------------------------------------
    def emptiness(self, graceful: Sequence[Candidate]) -> tuple[Command | None, bool]:
        """The emptiness command, and whether its None is settled: some node was an emptiness
        candidate (empty and consolidatable) and no budget held one back."""
        chosen: list[str] = []
        remaining: dict[str, int] = {}
        held = False
        for c in sorted(graceful, key=lambda c: c.name):
            if not c.empty:
                continue
            if c.pool.disruption.consolidate_after is None:
                self.note(c.name, "empty, but consolidateAfter is Never")
                continue
            if not lifecycle.consolidatable(c.pool, c.node.claim, self.now):  # type: ignore[arg-type]
                self.note(c.name, "empty, but consolidateAfter has not elapsed")
                continue
            left = remaining.setdefault(c.pool.name, self.budget(c.pool.name, EMPTY))
            if left <= 0:
                self.note(
                    c.name,
                    f"empty, but the Empty budget allows no more ({self.budget_why[(c.pool.name, EMPTY)]})",
                )
                held = True
                continue
            remaining[c.pool.name] = left - 1
            chosen.append(c.name)
        if not chosen:
            return None, not held and bool(remaining)
        return Command(EMPTY, EMPTINESS, tuple(chosen), (), None, "no reschedulable pods"), False

    # -- drift ---------------------------------------------------------------------------
    def drift(self, eventual: Sequence[Candidate]) -> Command | None:
        drifted: list[tuple[float, str, Candidate]] = []
        for c in eventual:
            why = self.memo.drift_reason(c.node, c.pool)
            if why is None:
                continue
            self.note(c.name, f"drifted: {why}")
            drifted.append((drift.drifted_since(c.node, self.now), c.name, c))
        drifted.sort(key=lambda item: (item[0], item[1]))
        ordered = [c for _, _, c in drifted]
        remaining: dict[str, int] = {}
        empty: list[str] = []
        for c in ordered:
            if c.reschedulable:
                continue
            left = remaining.setdefault(c.pool.name, self.budget(c.pool.name, DRIFTED))
            if left > 0:
                remaining[c.pool.name] = left - 1
                empty.append(c.name)
        if empty:
            return Command(DRIFTED, "drift", tuple(empty), (), None, "empty drifted nodes")
        for c in ordered:
            if self.budget(c.pool.name, DRIFTED) <= 0:
                self.note(c.name, f"drift blocked by budget ({self.budget_why[(c.pool.name, DRIFTED)]})")
                continue
            sim = consolidation.simulate(self.snapshot, [c], consolidation=False, caches=self.memo.scheduling)
            if sim.stranded:
                self.note(c.name, "drift cannot reschedule all pods: " + sim.stranded[0])
                continue
            return Command(DRIFTED, "drift", (c.name,), sim.results.new_claims, None, "replace drifted node")
        return None

    # -- consolidation ---------------------------------------------------------------------
    def consolidatable(self, graceful: Sequence[Candidate]) -> tuple[list[Candidate], bool]:
        """The non-empty consolidation candidates in order, and whether there is any consolidation
        candidate at all (upstream's, an empty one included: a method with none is not run, so
        its None never settles)."""
        out = []
        empty = False
        for c in graceful:
            why = self._not_consolidatable(c)
            if why is not None:
                self.note(c.name, why)
            elif c.empty:
                self.note(c.name, "empty: left to emptiness")
                empty = True
            else:
                out.append(c)
        out.sort(key=lambda c: (-c.savings_ratio, c.name))
        return out, empty or bool(out)

    def _not_consolidatable(self, c: Candidate) -> str | None:
        policy = c.pool.disruption.consolidation_policy
        claim = c.node.claim
        assert claim is not None
        if c.instance_type is None:
            return "not consolidatable: instance type unknown"
        if not c.capacity_type or not c.zone:
            return "not consolidatable: no capacity-type or zone label"
        if c.pool.disruption.consolidate_after is None:
            return "not consolidatable: consolidateAfter is Never"
        if policy not in ("WhenEmptyOrUnderutilized", "Balanced"):
            return f"not consolidatable: consolidationPolicy {policy}"
        if not lifecycle.consolidatable(c.pool, claim, self.now):
            return "not consolidatable yet: consolidateAfter has not elapsed"
        if self._stabilizing(c.pool):
            return f"not consolidatable: {_STABILIZATION} window after recent pod changes"
        guarded = self.rollout_guard(c.node, c.pool)
        return f"not consolidatable: {guarded}" if guarded else None

    def _stabilizing(self, pool: NodePool) -> bool:
        found = self.stabilizing.get(pool.name)
        if found is None:
            found = self.stabilizing[pool.name] = self._stabilizing_now(pool)
        return found

    def _stabilizing_now(self, pool: NodePool) -> bool:
        end = horizon.stabilization_end(pool, self.snapshot.nodes)
        return end is not None and self.now < end

    def multi(
        self, ordered: Sequence[Candidate], all_candidates: Sequence[Candidate]
    ) -> tuple[Command | None, bool]:
        """The multi-node command, and whether a budget held a candidate back."""
        budget_left: dict[str, int] = {}
        within: list[Candidate] = []
        held = False
        for c in ordered:
            left = budget_left.setdefault(c.pool.name, self.budget(c.pool.name, UNDERUTILIZED))
            if left <= 0:
                self.note(
                    c.name,
                    "outside the Underutilized budget for multi-node consolidation "
                    f"({self.budget_why[(c.pool.name, UNDERUTILIZED)]})",
                )
                held = True
                continue
            budget_left[c.pool.name] = left - 1
            within.append(c)
        command, _ = consolidation.multi_node(self.snapshot, within, all_candidates, self.memo.scheduling)
        return command, held

    def single(
        self, ordered: Sequence[Candidate], all_candidates: Sequence[Candidate]
    ) -> tuple[Command | None, bool]:
        """The single-node command, and whether a budget held a candidate back."""
        blocked = set()
        for c in ordered:
            if self.budget(c.pool.name, UNDERUTILIZED) <= 0:
                blocked.add(c.name)
                self.note(
                    c.name,
                    f"consolidation blocked by budget ({self.budget_why[(c.pool.name, UNDERUTILIZED)]})",
                )
        command, reasons = consolidation.single_node(
            self.snapshot, ordered, all_candidates, blocked, self.memo.scheduling
        )
        for name, reason in reasons.items():
            self.note(name, f"not consolidated: {reason}")
        return command, bool(blocked)

    # -- validation ------------------------------------------------------------------------
    def invalid(self, command: Command) -> str | None:
        """Why a consolidation command no longer holds (``churn``, ``budget``, ``scheduling``), or
        None: upstream's validator (see :func:`validate`)."""
        wanted = set(command.candidates)
        own = [n for n in self.snapshot.nodes if n.name in wanted]
        graceful = {c.name: c for c in self.candidates(own).graceful}
        chosen: list[Candidate] = []
        for name in command.candidates:
            c = graceful.get(name)
            if c is None or self._not_consolidatable(c) is not None:
                return "churn"
            chosen.append(c)
        left: dict[str, int] = {}
        for c in chosen:
            allowed = left.setdefault(c.pool.name, self.budget(c.pool.name, UNDERUTILIZED))
            if allowed <= 0:
                return "budget"
            left[c.pool.name] = allowed - 1
        sim = consolidation.simulate(self.snapshot, chosen, consolidation=True, caches=self.memo.scheduling)
        new = sim.results.new_claims
        if sim.stranded or len(new) != len(command.replacements) or len(new) > 1:
            return "scheduling"
        if new and not {it.name for it in command.replacements[0].instance_types} <= {
            it.name for it in new[0].instance_types
        }:
            return "scheduling"
        return None

    # -- the pass --------------------------------------------------------------------------
    def run(self, skip: frozenset[str] = frozenset()) -> Decision:
        """The pass, without the consolidation methods named in ``skip``."""
        command = self.expired()
        classes = self.candidates()
        graceful, graceful_why = classes.graceful, classes.graceful_why
        eventual, eventual_why = classes.eventual, classes.eventual_why
        settled: set[str] = set()
        if command is None and EMPTINESS not in skip:
            command, done = self.emptiness(graceful)
            if done:
                settled.add(EMPTINESS)
        if command is None:
            command = self.drift(eventual)
        if command is None and not (MULTI_NODE in skip and SINGLE_NODE in skip):
            ordered, any_candidate = self.consolidatable(graceful)
            for name, method in ((MULTI_NODE, self.multi), (SINGLE_NODE, self.single)):
                if command is None and name not in skip:
                    command, held = method(ordered, graceful)
                    if command is None and not held and any_candidate:
                        settled.add(name)
        records = self._records(command, graceful, graceful_why, eventual_why)
        return Decision(command, records, self.allowed, frozenset(settled))

    def _records(
        self,
        command: Command | None,
        graceful: Sequence[Candidate],
        graceful_why: Mapping[str, str],
        eventual_why: Mapping[str, str],
    ) -> dict[str, NodeRecord]:
        chosen = set(command.candidates) if command is not None else set()
        candidates = {c.name for c in graceful}
        records: dict[str, NodeRecord] = {}
        for node in self.snapshot.nodes:
            notes = list(self.notes.get(node.name, []))
            if node.name in chosen:
                assert command is not None
                verdict = "disrupted"
                notes.insert(0, f"{command.reason} ({command.method}): {command.detail}")
            elif node.claim is None:
                verdict = "not-managed"
                notes.append(graceful_why.get(node.name, "no NodeClaim"))
            elif node.name in candidates:
                verdict = "candidate"
                if not notes and command is not None:
                    notes.append(f"candidate; not evaluated further: {command.method} acted first this pass")
                elif not notes:
                    notes.append("candidate; no consolidation option saves money this pass")
            else:
                verdict = "blocked"
                notes.append(graceful_why.get(node.name) or eventual_why.get(node.name) or "not a candidate")
            records[node.name] = NodeRecord(node.name, _pool(node), verdict, tuple(notes))
        return records


def _pool(node: StateNode) -> str:
    return node.node_pool


def compute(
    snapshot: Snapshot,
    now: float | None = None,
    *,
    memo: Memo | None = None,
    skip: frozenset[str] = frozenset(),
) -> Decision:
    """One disruption pass at ``now`` (default: the snapshot's time), without the consolidation
    methods named in ``skip`` (see the module docstring).

    ``memo`` keeps now-independent facts from earlier passes (a caller running passes over
    successive snapshots keeps one); without it every fact is computed afresh. The decision
    is the same either way.
    """
    if now is not None and now != snapshot.now:
        snapshot = dataclasses.replace(snapshot, now=now)
    if memo is None:
        return Pass(snapshot, snapshot.now, Memo()).run(skip)
    ids = horizon.state_ids(snapshot, consolidation.EARLY_STOP)
    last = memo.last_pass
    if (
        last is not None
        and last.skip == skip
        and last.ids == ids
        and last.since <= snapshot.now < last.until
        and horizon.same_values(last.snapshot, snapshot)
    ):
        return last.decision
    decision = Pass(snapshot, snapshot.now, memo).run(skip)
    until = horizon.next_change(snapshot, snapshot.now)
    memo.last_pass = LastPass(snapshot, ids, snapshot.now, until, decision, skip)
    return decision


def validate(snapshot: Snapshot, command: Command, *, memo: Memo | None = None) -> str | None:
    """Why the consolidation ``command``, found by an earlier pass, no longer holds on
    ``snapshot``, or None: upstream's validator, 15 s after the decision.

    It asks only about the command's own candidates: each must still be a graceful candidate
    that consolidation may take (consolidateAfter elapsed, not nominated, ...), within its
    NodePool's ``Underutilized`` budget (``budget``; otherwise ``churn``); then a simulation
    of moving their pods must place every non-pending one (on initialized nodes) with no new
    NodeClaim for a delete, and with exactly one for a replace, whose instance types include
    all of the command's replacement's (``scheduling``). Whether another command would now be
    better is not asked, nor is the price checked again.
    """
    return Pass(snapshot, snapshot.now, memo if memo is not None else Memo()).invalid(command)
