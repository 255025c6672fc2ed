"""Upstream's validation of a consolidation command (karpy.core.disruption.validate): only the
command's own candidates are re-checked and re-simulated."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_consolidation_stop import clusters
from test_methods import LARGE, graceful, pod, snap

import builders as b
from karpy.core.disruption import UNDERUTILIZED, Memo, compute, consolidation, methods, validate
from karpy.core.disruption.types import Command
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk

FIXED = b.node("fixed", allocatable={"cpu": "1500m", "memory": "8Gi", "pods": "20"})  # room for one pod


def cluster(fixed: Any = FIXED, pinned: str = "", extra: tuple[Any, ...] = (), **kwargs: Any) -> Any:
    """n1 and n2 (large, the only type: no multi-node replacement undercuts them), one pod each
    (``pinned``'s annotated do-not-disrupt) and the ``extra`` pods, and an unmanaged node ``fixed``."""
    pods = [
        pod(p, n, annotations={wk.DO_NOT_DISRUPT: "true"} if n == pinned else None)
        for p, n in (("a", "n1"), ("b", "n2"))
    ] + list(extra)
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("n1", "n2")]
    return snap(managed, pods, types=[LARGE], unmanaged=[fixed], **kwargs)


def two_deletable() -> tuple[Any, Command, Command]:
    """The cluster, the single-node delete a pass picks, and the (also valid) one of the other node."""
    s = cluster()
    chosen = compute(s, s.now).command
    assert chosen is not None and chosen.reason == UNDERUTILIZED and chosen.decision == "delete"
    [other] = [c for c in graceful(s) if c.name not in chosen.candidates]
    command, why = consolidation.compute(s, [other], all_candidates=graceful(s), method=chosen.method)
    assert command is not None, why
    return s, chosen, command


def test_a_command_still_valid_for_its_own_candidates_is_kept_when_a_pass_would_pick_another() -> None:
    s, chosen, other = two_deletable()
    assert other.candidates != chosen.candidates
    assert validate(s, chosen) is None
    assert validate(s, other) is None  # the fresh pass prefers ``chosen``: upstream does not ask


def test_a_candidate_whose_pods_no_longer_fit_fails_on_scheduling() -> None:
    _, chosen, _ = two_deletable()
    full = b.node("fixed", allocatable={"cpu": "500m", "memory": "8Gi", "pods": "20"})
    [name] = chosen.candidates
    other = "n2" if name == "n1" else "n1"
    crowded = cluster(full, extra=(pod("big", other, cpu="6500m"),))  # no room left anywhere
    assert validate(crowded, chosen) == "scheduling"


def test_a_candidate_that_is_no_longer_one_fails_on_churn() -> None:
    _, chosen, _ = two_deletable()
    [name] = chosen.candidates
    assert validate(cluster(pinned=name), chosen) == "churn"


def test_a_command_beyond_the_budget_fails_on_budget() -> None:
    _, chosen, _ = two_deletable()
    no_budget = cluster(pools=[b.disruption_pool(budgets=[b.budget("0")])])
    assert validate(no_budget, chosen) == "budget"


def test_a_delete_that_now_needs_a_new_node_fails_and_a_replace_needs_its_types() -> None:
    s = snap([b.managed_node("n1", instance_type=LARGE)], [pod("a", "n1")])
    replace = compute(s, s.now).command
    assert replace is not None and replace.decision == "replace"
    assert validate(s, replace) is None
    as_delete = dataclasses.replace(replace, replacements=())
    assert validate(s, as_delete) == "scheduling"
    [option] = replace.replacements
    unknown = b.instance_type("huge", cpu="64", memory="64Gi")
    wider = dataclasses.replace(option, instance_types=(*option.instance_types, unknown))
    assert validate(s, dataclasses.replace(replace, replacements=(wider,))) == "scheduling"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 3))
def test_the_candidates_of_some_nodes_are_what_the_walk_over_every_node_makes_of_them(
    snapshot: Snapshot, offset: int
) -> None:
    # validation builds candidates for the command's own nodes only
    a_pass = methods.Pass(snapshot, snapshot.now, Memo())
    every = a_pass.candidates()
    some = [n for i, n in enumerate(snapshot.nodes) if (i + offset) % 2 == 0]
    names = {n.name for n in some}
    own = a_pass.candidates(some)
    assert own.graceful == [c for c in every.graceful if c.name in names]
    assert own.eventual == [c for c in every.eventual if c.name in names]
    assert own.graceful_why == {k: v for k, v in every.graceful_why.items() if k in names}
    assert own.eventual_why == {k: v for k, v in every.eventual_why.items() if k in names}
