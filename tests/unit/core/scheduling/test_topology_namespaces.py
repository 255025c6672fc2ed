"""Which namespaces a pod (anti-)affinity term looks in (karpy.core.scheduling.topology, upstream
``topology.go`` buildNamespaceList), and what a solve makes of them for pending and bound pods."""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from karpy.core import scheduling
from karpy.core.scheduling import topology
from karpy.model import labels as wk
from karpy.model.objects import PodAffinityTerm, WeightedPodAffinityTerm
from karpy.model.selectors import LabelSelector, SelectorRequirement

TARGET = {"security": "s2"}
EVERY = LabelSelector()  # namespaceSelector: {}
TYPE = b.instance_type("default", cpu="4", memory="4Gi")


def term(*, namespaces: tuple[str, ...] = (), selector: LabelSelector | None = None) -> PodAffinityTerm:
    return b.anti_affinity_term(TARGET, namespaces=namespaces, namespace_selector=selector)


def by_name(name: str) -> LabelSelector:
    return LabelSelector.from_labels({topology.NAMESPACE_NAME: name})


def universe(snapshot: Any) -> Any:
    return lambda: topology.namespace_universe(snapshot)


def snap(pods: list, *, namespaces: dict | None = None, nodes: list | None = None) -> Any:
    return b.snapshot(
        pools=[b.node_pool("default")],
        types=[TYPE],
        nodes=nodes or [],
        pods=pods,
        namespaces=namespaces or {},
    )


# -- the namespace universe -------------------------------------------------------------------------


def test_the_universe_holds_namespace_objects_and_the_namespaces_of_pods() -> None:
    s = snap(
        [b.pod("a", namespace="team-a"), b.pod("b", namespace="default")], namespaces={"prod": {"tier": "1"}}
    )
    found = topology.namespace_universe(s)
    assert dict(found) == {
        "prod": {"tier": "1", topology.NAMESPACE_NAME: "prod"},
        "default": {topology.NAMESPACE_NAME: "default"},
        "team-a": {topology.NAMESPACE_NAME: "team-a"},
    }
    assert topology.namespace_universe(s) is found  # once per snapshot


def test_the_api_servers_name_label_cannot_be_overridden() -> None:
    s = snap([], namespaces={"prod": {topology.NAMESPACE_NAME: "other"}})
    assert topology.namespace_universe(s)["prod"][topology.NAMESPACE_NAME] == "prod"


# -- buildNamespaceList -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespaces", "selector", "expected"),
    [
        ((), None, {"default"}),  # the pod's own namespace
        (("team-a",), None, {"team-a"}),  # the list only (the pod's own is not added)
        ((), EVERY, {"default", "team-a", "prod"}),  # {} selects every namespace
        ((), LabelSelector.from_labels({"tier": "1"}), {"prod"}),
        ((), by_name("team-a"), {"team-a"}),
        (("ghost",), by_name("team-a"), {"ghost", "team-a"}),  # a union, listed names kept as given
        ((), by_name("nowhere"), set()),
        (
            (),
            LabelSelector((), (SelectorRequirement("tier", "DoesNotExist", ()),)),
            {"default", "team-a"},  # namespaces known only from their pods have no other labels
        ),
    ],
)
def test_term_namespaces(namespaces: tuple, selector: LabelSelector | None, expected: set) -> None:
    pod = b.pod("follower")  # in default
    s = snap([b.pod("a", namespace="team-a"), pod], namespaces={"prod": {"tier": "1"}})
    assert (
        topology.term_namespaces(pod, term(namespaces=namespaces, selector=selector), universe(s)) == expected
    )


def test_the_universe_is_read_only_for_a_selector() -> None:
    def boom() -> Any:
        raise AssertionError("no selector: the universe is not needed")

    assert topology.term_namespaces(b.pod("p"), term(namespaces=("x",)), boom) == {"x"}


# -- in a solve -------------------------------------------------------------------------------------


def _nodes() -> list:
    ready = {wk.ZONE: "test-zone-1", "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true"}
    return [b.node("n1", labels=ready), b.node("n2", labels=ready)]


def _place(pods: list, **kw: Any) -> dict[str, str]:
    results = scheduling.solve(snap(pods, nodes=_nodes(), **kw))
    return dict(results.existing)


def test_required_affinity_with_an_empty_selector_finds_a_target_in_another_namespace() -> None:
    target = b.pod("target", namespace="other", labels=TARGET, node_name="n2", cpu="100m")
    follower = b.pod("follower", cpu="100m", affinity=[term(selector=EVERY)])
    assert _place([target, follower]) == {"default/follower": "n2"}


def test_required_affinity_in_its_own_namespace_does_not_see_the_target() -> None:
    target = b.pod("target", namespace="other", labels=TARGET, node_name="n2", cpu="100m")
    follower = b.pod("follower", cpu="100m", affinity=[term()])
    assert _place([target, follower]) == {}


def test_anti_affinity_selected_by_namespace_labels_counts_bound_pods() -> None:
    web = b.pod("web", namespace="payments", labels=TARGET, node_name="n1", cpu="100m")
    follower = b.pod(
        "follower", cpu="100m", anti_affinity=[term(selector=LabelSelector.from_labels({"team": "pay"}))]
    )
    assert _place([web, follower], namespaces={"payments": {"team": "pay"}}) == {"default/follower": "n2"}
    assert _place([web, follower], namespaces={"payments": {"team": "other"}}) == {"default/follower": "n1"}


def test_preferred_affinity_uses_the_same_namespaces() -> None:
    target = b.pod("target", namespace="other", labels=TARGET, node_name="n2", cpu="100m")
    follower = b.pod(
        "follower", cpu="100m", affinity_preferred=(WeightedPodAffinityTerm(10, term(selector=EVERY)),)
    )
    assert _place([target, follower]) == {"default/follower": "n2"}


def test_a_bound_pods_anti_affinity_repels_in_the_namespaces_it_selects() -> None:
    repel = term(selector=EVERY)
    guard = b.pod("guard", namespace="other", node_name="n1", cpu="100m", anti_affinity=[repel])
    follower = b.pod("follower", labels=TARGET, cpu="100m")
    assert _place([guard, follower]) == {"default/follower": "n2"}
    own = b.replace(guard, anti_affinity=(term(),))  # its own namespace only: default is not repelled
    assert _place([own, follower]) == {"default/follower": "n1"}
