"""Names as the API server validates them: an RFC 1123 subdomain for most kinds, a label for
Namespaces and ``metadata.namespace``; a bad one is one error naming file, object and field, and the
other objects still load."""

from __future__ import annotations

import pytest
import yaml

from karpy.api import load, names

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: "{name}"}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
"""


@pytest.mark.parametrize(
    "name",
    ["default", "gpu-a100", "team.a.pool", "a", "0", "x" * 253, "a-b.c-d"],
)
def test_subdomains_are_accepted(name: str) -> None:
    assert names.subdomain_problem(name) is None


@pytest.mark.parametrize(
    "name",
    ["général-池", "Default", "under_score", "-lead", "trail-", "a..b", ".a", "x" * 254, "sp ace", "a/b"],
)
def test_what_the_api_server_rejects_is_rejected(name: str) -> None:
    problem = names.subdomain_problem(name)
    assert problem is not None and f'"{name}"' in problem


def test_a_namespace_is_a_label() -> None:
    assert names.label_problem("shop") is None
    assert names.label_problem("x" * 63) is None
    assert "63 characters" in (names.label_problem("x" * 64) or "")
    assert names.label_problem("shop.eu") is not None  # a dot: a subdomain, not a label
    assert names.name_problems("Namespace", {"name": "shop.eu"})[0][0] == "metadata.name"
    assert names.name_problems("NodePool", {"name": "shop.eu"}) == []


def test_generate_name_is_a_prefix_and_namespace_is_checked_too() -> None:
    assert names.name_problems("Pod", {"generateName": "web-"}) == []
    assert [p for p, _ in names.name_problems("Pod", {"generateName": "Web-"})] == ["metadata.generateName"]
    found = names.name_problems("Pod", {"name": "web", "namespace": "Shop_EU"})
    assert [p for p, _ in found] == ["metadata.namespace"]


def test_a_bad_name_is_one_error_and_the_others_still_load() -> None:
    text = "---\n".join([POOL.format(name="général-池"), POOL.format(name="good")])
    loaded = load.load_text(text, file="pools.yaml")
    assert [p.name for p in loaded.node_pools] == ["good"]
    (problem,) = loaded.problems
    assert str(problem).startswith(
        'pools.yaml: document 0 (NodePool "général-池"): metadata.name: "général-池" is not a valid name: '
        "a lowercase RFC 1123 subdomain"
    )


def test_names_from_an_api_server_are_not_checked_again() -> None:
    raw = yaml.safe_load(POOL.format(name="Odd_Name"))
    obj, problems = load.parse_object(raw, file="watch:NodePool", index=0)
    assert obj is not None and problems == []
    assert load.load_objects([raw], file="cluster").problems == []


def test_a_pod_in_a_bad_namespace_is_rejected() -> None:
    pod = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: Shop}
spec:
  containers: [{name: web, image: nginx}]
"""
    loaded = load.load_text(pod, file="pod.yaml")
    assert loaded.pods == []
    assert [(p.kind, p.path) for p in loaded.problems] == [("Pod", "metadata.namespace")]
