"""Well-known, normalized and restricted label keys (karpy.model.labels)."""

from __future__ import annotations

import pytest

from karpy.model import labels as wk


@pytest.mark.parametrize(
    ("key", "restricted"),
    [
        (wk.HOSTNAME, True),
        ("kubernetes.io/foo", True),
        ("sub.kubernetes.io/foo", True),
        ("k8s.io/foo", True),
        ("sub.k8s.io/foo", True),
        ("karpenter.sh/foo", True),
        ("sub.karpenter.sh/foo", True),
        # well-known keys are never restricted
        (wk.CAPACITY_TYPE, False),
        (wk.NODEPOOL, False),
        (wk.ZONE, False),
        (wk.REGION, False),
        (wk.INSTANCE_TYPE, False),
        (wk.ARCH, False),
        (wk.OS, False),
        (wk.WINDOWS_BUILD, False),
        # exception domains
        ("node.kubernetes.io/lifecycle", False),
        ("node-restriction.kubernetes.io/team", False),
        ("kops.k8s.io/instancegroup", False),
        ("sub.node.kubernetes.io/x", False),
        # custom domains and bare keys
        ("example.com/team", False),
        ("team", False),
        ("notkarpenter.sh/x", False),
        ("karpenter.k8s.aws/instance-family", False),
    ],
)
def test_is_restricted_node_label(key: str, restricted: bool) -> None:
    assert wk.is_restricted_node_label(key) is restricted


def test_restricted_node_label_extra_well_known() -> None:
    key = "karpenter.sh/extra"
    assert wk.is_restricted_node_label(key)
    assert not wk.is_restricted_node_label(key, wk.CORE_WELL_KNOWN | {key})


@pytest.mark.parametrize(
    ("key", "restricted"),
    [
        (wk.HOSTNAME, True),
        ("karpenter.sh/foo", True),
        ("sub.karpenter.sh/foo", True),
        (wk.CAPACITY_TYPE, False),
        (wk.NODEPOOL, False),
        (wk.ZONE, False),
        ("kubernetes.io/foo", False),  # pods may select on other kubernetes.io labels of existing nodes
        ("example.com/team", False),
        ("team", False),
    ],
)
def test_is_restricted_for_pods(key: str, restricted: bool) -> None:
    assert wk.is_restricted_for_pods(key) is restricted


def test_hostname_restricted_for_pods_even_if_well_known() -> None:
    assert wk.is_restricted_for_pods(wk.HOSTNAME, wk.CORE_WELL_KNOWN | {wk.HOSTNAME})


@pytest.mark.parametrize(
    ("key", "normalized"),
    [
        ("failure-domain.beta.kubernetes.io/zone", wk.ZONE),
        ("beta.kubernetes.io/arch", wk.ARCH),
        (wk.ZONE, wk.ZONE),
        ("example.com/x", "example.com/x"),
    ],
)
def test_normalize(key: str, normalized: str) -> None:
    assert wk.normalize(key) == normalized


def test_core_well_known_excludes_hostname() -> None:
    assert wk.HOSTNAME not in wk.CORE_WELL_KNOWN
    assert set(wk.NORMALIZED.values()) <= wk.CORE_WELL_KNOWN
