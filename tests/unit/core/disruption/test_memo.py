"""The disruption memo (karpy.core.disruption.memo) never changes a decision.

A warm :class:`~karpy.core.disruption.Memo`, carried over passes on earlier snapshots that share
Pod, Node, NodeClaim, NodePool, PDB and StateNode objects with the current one, must give the
Decision a cold ``compute`` gives. The random histories start from the property scenarios
(``test_disruption_properties.scenarios``) and change a few objects per pass the way the cluster
state does: copies with the same content, pods relabelled (PDB selection), annotated
do-not-disrupt, made unready, deleting, finished, removed or re-prioritised; PDBs allowing more or
less, reselecting, added or removed; NodeClaims replaced (sharing their label map) or drifted;
Nodes relabelled; NodePools copied or given a conflicting requirement; nodes marked or
nominated; StateNodes rebuilt; the clock advanced. Also: an entry is never used for another
object that has the same id, and the memo stays bounded under churn.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_disruption_properties import NOW, scenarios

import builders as b
from karpy.core.disruption import Memo, compute, drift
from karpy.core.disruption import candidates as cand
from karpy.core.disruption.pdbs import Limits
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels as wk
from karpy.model.objects import Condition, Pod
from karpy.model.requirements import Requirement
from karpy.model.selectors import LabelSelector

MEMO_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

OPS = (
    "copy_pod",
    "relabel_pod",
    "dnd_pod",
    "unready_pod",
    "deleting_pod",
    "finish_pod",
    "priority_pod",
    "remove_pod",
    "pdb_allowed",
    "pdb_selector",
    "add_pdb",
    "remove_pdb",
    "claim_touch",
    "claim_drifted",
    "node_relabel",
    "pool_copy",
    "pool_conflict",
    "mark",
    "restate",
    "advance",
)


# -- snapshot edits that keep every other object ---------------------------------------------------


def _replace_pod(snap: Snapshot, old: Pod, new: Pod | None) -> Snapshot:
    """``old`` becomes ``new`` (None: removed) in the snapshot's pods and its node's pods."""

    def swap(pods: tuple[Pod, ...]) -> tuple[Pod, ...]:
        return tuple(q for q in (new if p is old else p for p in pods) if q is not None)

    nodes = tuple(
        dataclasses.replace(n, pods=swap(n.pods)) if any(p is old for p in n.pods) else n for n in snap.nodes
    )
    return dataclasses.replace(snap, pods=swap(snap.pods), nodes=nodes)


def _replace_node(snap: Snapshot, index: int, state: StateNode) -> Snapshot:
    nodes = list(snap.nodes)
    nodes[index] = state
    return dataclasses.replace(snap, nodes=tuple(nodes))


def _edit(snap: Snapshot, now: float, op: str, pick: int, value: int) -> tuple[Snapshot, float]:
    pods = snap.pods
    pod = pods[pick % len(pods)] if pods else None
    state_index = pick % len(snap.nodes)
    state = snap.nodes[state_index]
    if op == "copy_pod" and pod is not None:
        return _replace_pod(snap, pod, dataclasses.replace(pod)), now
    if op == "relabel_pod" and pod is not None:
        app = ("a", "b", "c", "z")[value % 4]
        return _replace_pod(snap, pod, dataclasses.replace(pod, labels={"app": app})), now
    if op == "dnd_pod" and pod is not None:
        annotations = ({}, {wk.DO_NOT_DISRUPT: "true"}, {wk.DO_NOT_DISRUPT: "5m"}, {wk.DO_NOT_DISRUPT: "x"})
        return _replace_pod(snap, pod, dataclasses.replace(pod, annotations=annotations[value % 4])), now
    if op == "unready_pod" and pod is not None:
        return _replace_pod(snap, pod, dataclasses.replace(pod, ready=not pod.ready)), now
    if op == "deleting_pod" and pod is not None:
        return _replace_pod(snap, pod, dataclasses.replace(pod, deleting=True)), now
    if op == "finish_pod" and pod is not None:
        return _replace_pod(snap, pod, dataclasses.replace(pod, phase="Succeeded")), now
    if op == "priority_pod" and pod is not None:
        changed = dataclasses.replace(
            pod,
            priority=(value % 5 - 2) * 2**24,
            annotations={**pod.annotations, cand.DELETION_COST: str((value % 3 - 1) * 2**27)},
        )
        return _replace_pod(snap, pod, changed), now
    if op == "remove_pod" and pod is not None:
        return _replace_pod(snap, pod, None), now
    if op in ("pdb_allowed", "pdb_selector", "remove_pdb") and snap.pdbs:
        pdbs = list(snap.pdbs)
        i = pick % len(pdbs)
        if op == "remove_pdb":
            del pdbs[i]
        elif op == "pdb_allowed":
            allowed = (0, 1, None)[value % 3]
            pdbs[i] = dataclasses.replace(
                pdbs[i], disruptions_allowed=allowed, min_available=None if allowed is not None else "1"
            )
        else:
            app = ("a", "b", "c")[value % 3]
            pdbs[i] = dataclasses.replace(pdbs[i], selector=LabelSelector.from_labels({"app": app}))
        return dataclasses.replace(snap, pdbs=tuple(pdbs)), now
    if op == "add_pdb":
        app = ("a", "b", "c")[value % 3]
        extra = b.pdb(f"extra-{value}", match_labels={"app": app}, disruptions_allowed=value % 2)
        return dataclasses.replace(snap, pdbs=(*snap.pdbs, extra)), now
    if op == "claim_touch" and state.claim is not None:
        # a status update: a new NodeClaim object sharing its label map
        claim = dataclasses.replace(state.claim, last_pod_event=now - value)
        return _replace_node(snap, state_index, dataclasses.replace(state, claim=claim)), now
    if op == "claim_drifted" and state.claim is not None:
        cond = Condition("Drifted", "True", reason="NodePoolDrifted", last_transition=float(value))
        claim = dataclasses.replace(state.claim, conditions=(*state.claim.conditions, cond))
        return _replace_node(snap, state_index, dataclasses.replace(state, claim=claim)), now
    if op == "node_relabel" and state.node is not None:
        zone = b.ZONES[value % len(b.ZONES)]
        node = dataclasses.replace(state.node, labels={**state.node.labels, wk.ZONE: zone})
        return _replace_node(snap, state_index, dataclasses.replace(state, node=node)), now
    if op in ("pool_copy", "pool_conflict"):
        pools = list(snap.node_pools)
        i = pick % len(pools)
        if op == "pool_copy":
            pools[i] = dataclasses.replace(pools[i])
        else:
            zone = b.ZONES[value % len(b.ZONES)]
            reqs = (*pools[i].requirements, Requirement.in_(wk.ZONE, zone))
            pools[i] = dataclasses.replace(pools[i], requirements=reqs)
        return dataclasses.replace(snap, node_pools=tuple(pools)), now
    if op == "mark":
        changed = dataclasses.replace(
            state,
            marked_for_deletion=value % 3 == 0 and not state.marked_for_deletion,
            nominated=value % 3 == 1 and not state.nominated,
        )
        return _replace_node(snap, state_index, changed), now
    if op == "restate":
        return dataclasses.replace(snap, nodes=tuple(dataclasses.replace(n) for n in snap.nodes)), now
    if op == "advance":
        return snap, now + (10.0, 200.0, 400.0)[value % 3]
    return snap, now


def _same_decision(snap: Snapshot, now: float, memo: Memo) -> None:
    warm = compute(snap, now, memo=memo)
    cold = compute(snap, now)
    assert warm.command == cold.command
    assert warm.records == cold.records
    assert warm.budgets == cold.budgets


edits = st.lists(
    st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=4),
    min_size=1,
    max_size=5,
)


@MEMO_SETTINGS
@given(scenarios("mixed"), edits, st.sampled_from([1, 2, 8]))
def test_warm_memo_decides_as_a_cold_pass(scenario: Any, history: list, per_generation: int) -> None:
    _replay(scenario, history, Memo(passes_per_generation=per_generation))


@MEMO_SETTINGS
@given(scenarios("consolidation"), edits)
def test_warm_memo_decides_as_a_cold_pass_on_busy_clusters(scenario: Any, history: list) -> None:
    _replay(scenario, history, Memo())


def _replay(scenario: Any, history: list, memo: Memo) -> None:
    """Apply the edits step by step; after each step a warm pass decides as a cold one."""
    snap, now = scenario.snapshot, NOW
    _same_decision(snap, now, memo)
    for step in history:
        for op, pick, value in step:
            snap, now = _edit(snap, now, op, pick, value)
        _same_decision(snap, now, memo)


@MEMO_SETTINGS
@given(scenarios("mixed"), edits)
def test_memoized_candidates_equal_the_one_class_builds(scenario: Any, history: list) -> None:
    """``build_classes`` with memo facts gives what ``build_all`` gives per class, cold."""
    snap, now = scenario.snapshot, NOW
    memo = Memo()
    for step in [[], *history]:
        for op, pick, value in step:
            snap, now = _edit(snap, now, op, pick, value)
        memo.begin(snap)
        pools = {p.name: p for p in snap.node_pools}
        types = {name: {it.name: it for it in its} for name, its in snap.instance_types.items()}
        classes = cand.build_classes(
            snap.nodes,
            pools=pools,
            instance_types=types,
            limits=memo.limits(snap.pdbs, snap.pods),
            now=now,
            facts=memo.node,
            price_of=memo.price,
        )
        for disruption_class, found, why in (
            (cand.GRACEFUL, classes.graceful, classes.graceful_why),
            (cand.EVENTUAL, classes.eventual, classes.eventual_why),
        ):
            cold = cand.build_all(
                snap.nodes,
                pools=pools,
                instance_types=types,
                limits=Limits(snap.pdbs, snap.pods),
                now=now,
                disruption_class=disruption_class,
            )
            assert (found, why) == cold


# -- identity --------------------------------------------------------------------------------------


def test_an_entry_is_not_used_for_another_object_with_the_same_id() -> None:
    """Entries are checked with ``is``: a different object under a cached id is computed afresh."""
    memo = Memo()
    memo.begin(Snapshot())
    plain = b.running_pod("plain", "n1")
    pinned = b.running_pod("pinned", "n1", annotations={wk.DO_NOT_DISRUPT: "true"})
    assert memo.pod(plain).dnd_always is False
    # forge the worst case: ``pinned`` living at the id under which ``plain`` is cached
    memo._pods.cur[id(pinned)] = memo._pods.cur.pop(id(plain))
    facts = memo.pod(pinned)
    assert facts.pod is pinned and facts.dnd_always is True


def test_selection_follows_the_pdbs_of_the_pass() -> None:
    pod = b.running_pod("web-1", "n1", labels={"app": "web"})
    web = b.pdb("web", match_labels={"app": "web"}, disruptions_allowed=0)
    other = b.pdb("other", match_labels={"app": "other"}, disruptions_allowed=0)
    memo = Memo()
    memo.begin(Snapshot(pdbs=(web,), pods=(pod,)))
    assert memo.selected(pod) == (0,)
    memo.begin(Snapshot(pdbs=(other,), pods=(pod,)))
    assert memo.selected(pod) == ()
    memo.begin(Snapshot(pdbs=(other, web), pods=(pod,)))
    assert memo.selected(pod) == (1,)
    assert (
        memo.limits((other, web), (pod,)).blocking(pod)
        == "PDB default/web allows no disruption of pod default/web-1"
    )


def test_a_pool_hash_is_recomputed_for_a_changed_pool() -> None:
    memo = Memo()
    pool = b.disruption_pool("p")
    changed = dataclasses.replace(pool, labels={"team": "x"})
    assert memo.pool_hash(pool) == drift.pool_hash(pool)
    assert memo.pool_hash(changed) == drift.pool_hash(changed) != drift.pool_hash(pool)


def test_conflicts_for_a_copy_of_the_pool_reuse_the_entry_of_its_label_maps() -> None:
    """A NodePool object is replaced on every status write: a copy with the same values answers
    from the entry kept for the node's label maps (no new entry); other values are asked anew."""
    memo = Memo()
    memo.begin(Snapshot())
    pool = b.disruption_pool("p")
    the_node, claim = b.managed_node("n1", zone=b.ZONES[0])
    node = StateNode(name="n1", node=the_node, claim=claim)

    def entries() -> int:
        return len(memo._conflict_ids) + len(memo._conflicts)

    assert memo.conflicts(node, pool) is None
    held = entries()
    assert memo.conflicts(node, dataclasses.replace(pool)) is None
    assert entries() == held
    moved = dataclasses.replace(pool, requirements=(*pool.requirements, Requirement.in_(wk.ZONE, b.ZONES[1])))
    assert memo.conflicts(node, moved) == drift.requirement_conflicts(node, moved) is not None
    assert entries() == held + 2


def test_the_memo_stays_bounded_under_churn() -> None:
    """Objects unused for two generations are dropped: all-new pods every pass do not pile up."""
    pool = b.disruption_pool("default")
    memo = Memo(passes_per_generation=2)
    sizes = []
    for round_ in range(12):
        managed = [b.managed_node(f"n{i}", instance_type=b.instance_type("small")) for i in range(3)]
        pods = [b.running_pod(f"p{round_}-{i}", f"n{i % 3}", cpu="100m") for i in range(9)]
        snap = b.managed_snapshot(
            pools=[pool], types=[b.instance_type("small")], managed=managed, pods=pods, now=NOW
        )
        _same_decision(snap, NOW, memo)
        sizes.append(memo.size())
    assert max(sizes[4:]) <= 2 * max(sizes[:2]) + 10


def _pdb_pod_pool() -> list[Pod]:
    """Pod objects in every state a PDB count tells apart, two objects for some keys."""
    pool = []
    for i in range(8):
        app = ("web", "api")[i % 2]
        pool.append(b.running_pod(f"{app}-{i}", f"n{i % 3}", labels={"app": app}, ready=i % 3 != 0))
    pool.append(b.running_pod("web-0", "n0", labels={"app": "web"}, ready=True))  # web-0 turned Ready
    pool.append(b.running_pod("web-9", "n1", labels={"app": "web"}, phase="Succeeded"))
    pool.append(b.running_pod("api-9", "n2", labels={"app": "api"}, deleting=True))
    pool.append(b.running_pod("web-10", "n2", labels={"app": "web"}, namespace="other"))
    return pool


@MEMO_SETTINGS
@given(st.lists(st.lists(st.integers(0, 11), max_size=12, unique=True), min_size=1, max_size=6))
def test_pdb_limits_counted_from_the_pods_that_differ_equal_a_fresh_count(steps: list[list[int]]) -> None:
    pool = _pdb_pod_pool()
    pdbs = (
        b.pdb("web", match_labels={"app": "web"}, min_available="60%"),
        b.pdb("api", match_labels={"app": "api"}, max_unavailable=1),
        b.pdb("other-web", match_labels={"app": "web"}, namespace="other", min_available=1),
        b.pdb("known", match_labels={"app": "db"}, disruptions_allowed=2),
    )
    memo = Memo()
    for step in steps:
        pods = tuple(pool[i] for i in step)
        memo.begin(Snapshot(pdbs=pdbs, pods=pods))
        warm = memo.limits(pdbs, pods)
        cold = Limits(pdbs, pods)
        assert [warm.blocking(p) for p in pool] == [cold.blocking(p) for p in pool]
        assert warm._allowed == cold._allowed


@MEMO_SETTINGS
@given(
    st.lists(st.integers(0, 11), max_size=14),
    st.lists(st.integers(0, 11), max_size=14),
    st.booleans(),
)
def test_pod_changes_rebuild_the_new_tuple_from_the_old(old: list[int], new: list[int], by_key: bool) -> None:
    """``_changes`` over any two tuples (repeats, other orders, equal keys of other objects)."""
    from collections import Counter

    from karpy.core.disruption.memo import _changes

    pool = _pdb_pod_pool()
    before, after = [pool[i] for i in old], [pool[i] for i in new]
    if by_key:  # as the cluster hands them out
        before.sort(key=lambda p: p.key)
        after.sort(key=lambda p: p.key)
    removed, added = _changes(tuple(before), tuple(after))
    left = Counter(map(id, before))
    left.subtract(map(id, removed))
    assert min(left.values(), default=0) >= 0  # only pods it held were removed
    left.update(map(id, added))
    assert +left == Counter(map(id, after))
    unique = all(len({p.key for p in pods}) == len(pods) for pods in (before, after))
    if by_key and unique:  # the cluster's tuples: a pod kept as the same object is not reported
        kept = {id(p) for p in before} & {id(p) for p in after}
        assert not kept & ({id(p) for p in removed} | {id(p) for p in added})
