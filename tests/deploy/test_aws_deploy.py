"""The AWS install: the kustomize overlay, the IRSA ServiceAccount and the controller's IAM policy.

The policy must allow every AWS operation karpy's code makes (found by reading the source of
``karpy.providers.aws``) and nothing broader: no wildcard actions, and the destructive or tagging
actions only on resources tagged for this cluster.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).parents[2]
AWS = ROOT / "deploy" / "aws"
SOURCE = ROOT / "src" / "karpy" / "providers" / "aws"
SERVICES = {"ec2": "ec2", "ssm": "ssm", "iam": "iam", "sqs": "sqs", "pricing": "pricing", "eks": "eks"}


def _doc(name: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((AWS / name).read_text()) if d]
    return dict(doc)


def _policy() -> dict[str, Any]:
    return dict(json.loads((AWS / "controller-policy.json").read_text()))


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def operations_in_source() -> set[str]:
    """``service:Operation`` for every boto3 client call in the AWS provider's source."""
    found: set[str] = set()
    # clients.<service>.<method> and client variables named after their service (ec2, self._ec2...)
    calls = (
        re.compile(r"\bclients\.(ec2|ssm|iam|sqs|pricing|eks)\.([a-z][a-z_]+)\b"),
        re.compile(r"(?<![\w.])(?:self\.)?_?(ec2|ssm|iam|sqs|eks)\.([a-z][a-z_]+)\b"),
    )
    paged = re.compile(r"pages\(\s*[\w.]*?(ec2|ssm|iam|sqs|pricing|eks)\s*,\s*\"([a-z_]+)\"")
    for path in SOURCE.glob("*.py"):
        text = path.read_text()
        pairs = [pair for pattern in (*calls, paged) for pair in pattern.findall(text)]
        for service, method in pairs:
            if method in ("can_paginate", "get_paginator", "meta", "exceptions"):
                continue
            found.add(f"{SERVICES[service]}:{_camel(method)}")
    return found


def test_the_overlay_patches_the_base_install() -> None:
    kustomization = _doc("kustomization.yaml")
    assert kustomization["resources"] == ["../"]
    patched = {p["path"] for p in kustomization["patches"]}
    assert patched == {"deployment-aws.yaml", "serviceaccount-irsa.yaml"}
    (base,) = [d for d in yaml.safe_load_all((ROOT / "deploy/deployment.yaml").read_text()) if d]
    patch = _doc("deployment-aws.yaml")
    merged = copy.deepcopy(base)
    (container,) = merged["spec"]["template"]["spec"]["containers"]
    (override,) = patch["spec"]["template"]["spec"]["containers"]
    assert override["name"] == container["name"]  # strategic merge by container name
    container.update({k: v for k, v in override.items() if k != "name"})
    kubernetes_validate.validate(merged, "1.31", strict=True)
    assert "--provider=aws" in container["args"] and "--leader-elect" in container["args"]
    env = {e["name"] for e in container["env"]}
    assert {"CLUSTER_NAME", "INTERRUPTION_QUEUE", "POD_NAME", "POD_NAMESPACE"} <= env
    assert not any("AWS_ACCESS_KEY" in name or "AWS_SECRET" in name for name in env)  # never keys


def test_the_service_account_carries_the_irsa_role() -> None:
    account = _doc("serviceaccount-irsa.yaml")
    kubernetes_validate.validate(account, "1.31", strict=True)
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    assert account["metadata"]["name"] == "karpy"


def test_the_policy_allows_every_operation_karpy_calls() -> None:
    allowed = {a for s in _policy()["Statement"] if s["Effect"] == "Allow" for a in _actions(s)}
    called = operations_in_source()
    assert {"ec2:CreateFleet", "ec2:TerminateInstances", "ssm:GetParameter", "sqs:ReceiveMessage"} <= called
    assert called - allowed == set()


def test_the_policy_is_least_privilege() -> None:
    policy = _policy()
    assert policy["Version"] == "2012-10-17"
    sids = [s["Sid"] for s in policy["Statement"]]
    assert len(sids) == len(set(sids))
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        for action in _actions(statement):
            assert "*" not in action, statement["Sid"]
    scoped = {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "iam:DeleteInstanceProfile"}
    for statement in policy["Statement"]:
        if scoped & set(_actions(statement)):
            conditions = json.dumps(statement.get("Condition") or {})
            assert "aws:ResourceTag/kubernetes.io/cluster/${CLUSTER_NAME}" in conditions, statement["Sid"]
    creating = [s for s in policy["Statement"] if "ec2:CreateFleet" in _actions(s) and "Condition" in s]
    assert any("aws:RequestTag/eks:eks-cluster-name" in json.dumps(s["Condition"]) for s in creating)


def test_docs_metrics_lists_every_aws_metric() -> None:
    from karpy.providers.aws.metrics import AWSMetrics

    text = (ROOT / "docs/metrics.md").read_text()
    for family in AWSMetrics().registry.collect():
        name = f"{family.name}_total" if family.type == "counter" else family.name
        assert f"`{name}`" in text, name
