"""PodDisruptionBudgets as the disruption core sees them (karpy.core.disruption.pdbs.Limits)."""

from __future__ import annotations

import pytest

import builders as b
from karpy.core.disruption.pdbs import Limits

WEB = {"app": "web"}


def web_pods(count: int, *, unready: int = 0, namespace: str = "default") -> list:
    pods = [
        b.running_pod(f"web-{i}", f"n{i}", labels=WEB, namespace=namespace, ready=i >= unready)
        for i in range(count)
    ]
    return pods


def test_status_disruptions_allowed_zero_blocks_even_when_spec_would_allow() -> None:
    pods = web_pods(3)
    limits = Limits([b.pdb("web", match_labels=WEB, min_available=1, disruptions_allowed=0)], pods)
    why = limits.blocking(pods[0])
    assert why is not None
    assert "default/web" in why and "default/web-0" in why


def test_status_disruptions_allowed_positive_lets_pods_go_even_when_spec_would_block() -> None:
    pods = web_pods(3)
    limits = Limits([b.pdb("web", match_labels=WEB, min_available=3, disruptions_allowed=1)], pods)
    assert limits.blocking(pods[0]) is None


@pytest.mark.parametrize(
    ("kwargs", "count", "unready", "blocked"),
    [
        ({"min_available": 1}, 2, 0, False),
        ({"min_available": 2}, 2, 0, True),
        ({"min_available": 2}, 3, 1, True),  # only 2 healthy
        ({"min_available": "50%"}, 3, 0, False),  # ceil(1.5) = 2 of 3 healthy -> 1 allowed
        ({"min_available": "67%"}, 3, 0, True),  # ceil(2.01) = 3
        ({"min_available": "100%"}, 4, 0, True),
        ({"min_available": "0%"}, 1, 0, False),
        ({"max_unavailable": 0}, 3, 0, True),
        ({"max_unavailable": 1}, 3, 0, False),
        ({"max_unavailable": 1}, 3, 1, True),  # the unready pod uses the one allowed
        ({"max_unavailable": "10%"}, 5, 0, False),  # ceil(0.5) = 1
        ({"max_unavailable": "10%"}, 5, 1, True),
        ({"max_unavailable": "0%"}, 5, 0, True),
        ({"max_unavailable": "50%"}, 4, 1, False),  # 2 unavailable allowed, 1 used
    ],
)
def test_allowed_computed_from_spec_when_status_is_absent(
    kwargs: dict, count: int, unready: int, blocked: bool
) -> None:
    pods = web_pods(count, unready=unready)
    limits = Limits([b.pdb("web", match_labels=WEB, **kwargs)], pods)
    ready_pod = pods[-1]
    assert ready_pod.ready
    assert (limits.blocking(ready_pod) is not None) is blocked


def test_pdb_without_min_or_max_allows_nothing() -> None:
    pods = web_pods(3)
    assert Limits([b.pdb("web", match_labels=WEB)], pods).blocking(pods[0]) is not None


def test_terminal_and_deleting_pods_are_not_counted_as_healthy() -> None:
    pods = [
        *web_pods(2),
        b.running_pod("done", "n9", labels=WEB, phase="Succeeded"),
        b.running_pod("leaving", "n9", labels=WEB, deleting=True),
    ]
    limits = Limits([b.pdb("web", match_labels=WEB, min_available=2)], pods)
    assert limits.blocking(pods[0]) is not None


def test_always_allow_lets_unready_pods_go_but_not_ready_ones() -> None:
    pods = web_pods(3, unready=1)
    pdb = b.pdb("web", match_labels=WEB, disruptions_allowed=0, unhealthy_pod_eviction_policy="AlwaysAllow")
    limits = Limits([pdb], pods)
    assert not pods[0].ready
    assert limits.blocking(pods[0]) is None
    assert limits.blocking(pods[1]) is not None


def test_if_healthy_budget_blocks_unready_pods_when_nothing_is_allowed() -> None:
    pods = web_pods(3, unready=1)
    limits = Limits([b.pdb("web", match_labels=WEB, disruptions_allowed=0)], pods)
    assert limits.blocking(pods[0]) is not None


def test_several_pdbs_on_one_pod_block_even_when_each_allows() -> None:
    pods = web_pods(3)
    pdbs = [
        b.pdb("a", match_labels=WEB, disruptions_allowed=5),
        b.pdb("b", match_labels={"app": "web"}, disruptions_allowed=5),
    ]
    why = Limits(pdbs, pods).blocking(pods[0])
    assert why is not None
    assert "several PDBs" in why and "default/a" in why and "default/b" in why


def test_pdb_only_selects_pods_of_its_namespace() -> None:
    pods = web_pods(2, namespace="other")
    limits = Limits([b.pdb("web", match_labels=WEB, disruptions_allowed=0)], pods)
    assert limits.blocking(pods[0]) is None


def test_unselected_pod_is_free() -> None:
    pods = [*web_pods(2), b.running_pod("db-0", "n5", labels={"app": "db"})]
    limits = Limits([b.pdb("web", match_labels=WEB, disruptions_allowed=0)], pods)
    assert limits.blocking(pods[-1]) is None
    assert limits.blocking(pods[0]) is not None


def test_no_pdbs_blocks_nothing() -> None:
    pods = web_pods(2)
    assert Limits([], pods).blocking(pods[0]) is None
