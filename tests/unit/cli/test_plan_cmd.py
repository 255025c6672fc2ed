"""``karpy plan``: readable output, stable JSON, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from karpy.cli import app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "plan"
runner = CliRunner()

BAD_POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: []}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: good}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  containers:
    - name: app
      image: nginx
      resources: {requests: {cpu: "1", memory: 1Gi}}
"""


def test_plan_examples_as_a_table() -> None:
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert "New NodeClaims" in result.output
    assert "general-purpose" in result.output
    assert "Unschedulable" not in result.output


def test_plan_json_is_the_documented_shape() -> None:
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("karpy.dev/v1alpha1", "Plan")
    assert doc["summary"]["unschedulablePods"] == 0
    assert doc["summary"]["scheduledPods"] == doc["summary"]["pendingPods"] == len(doc["bindings"])
    for claim in doc["nodeClaims"]:
        assert (
            claim["instanceType"] == claim["instanceTypeOptions"][0]
            or claim["instanceType"] in claim["instanceTypeOptions"]
        )
        assert claim["pricePerHour"] > 0
        assert set(claim["pods"]) <= set(doc["bindings"])
    assert round(sum(c["pricePerHour"] for c in doc["nodeClaims"]), 6) == doc["summary"]["hourlyCost"]


def test_plan_is_deterministic() -> None:
    first = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "-o", "json"]).stdout
    second = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "-o", "json"]).stdout
    assert first == second


def test_bad_nodepool_is_one_line_and_exit_2_while_the_rest_is_planned(tmp_path: Path) -> None:
    manifest = tmp_path / "mixed.yaml"
    manifest.write_text(BAD_POOL)
    result = runner.invoke(app, ["plan", "-f", str(manifest), "-o", "json", "--assume-nodeclasses"])
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    line = errors[0]
    assert str(manifest) in line and "document 0" in line and 'NodePool "broken"' in line
    assert "spec.template.spec.requirements[0].values" in line
    doc = json.loads(result.stdout)
    assert doc["bindings"] == {"default/app": doc["nodeClaims"][0]["name"]}
    assert doc["nodeClaims"][0]["nodePool"] == "good"
    assert doc["nodeClaims"][0]["instanceType"].startswith("m5.")


def test_unknown_catalog_file_is_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "--catalog", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "missing.yaml" in result.stderr


def test_bad_output_format_is_exit_2() -> None:
    result = runner.invoke(app, ["plan", "-f", str(EXAMPLES), "-o", "xml"])
    assert result.exit_code == 2
