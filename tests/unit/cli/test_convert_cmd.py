"""``karpy convert``: v1 YAML on stdout or per file, warnings on stderr, exit 2 on bad input, and the
round trip: converted legacy examples plan the same pods the same way as the legacy files and as
hand-written v1 equivalents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from karpy.api import load
from karpy.cli import app

ROOT = Path(__file__).resolve().parents[3]
LEGACY = ROOT / "tests" / "data" / "legacy"
WORKLOADS = LEGACY / "workloads.yaml"
runner = CliRunner()

PROVISIONER = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: default}
  ttlSecondsAfterEmpty: 30
"""
TEMPLATE = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def _plan(*paths: Path) -> dict[str, Any]:
    args = ["plan", "-o", "json"]
    for path in paths:
        args += ["-f", str(path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_stdout_is_v1_yaml_that_loads_without_problems_or_warnings() -> None:
    result = runner.invoke(app, ["convert", "-f", str(LEGACY / "v1alpha5")])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [(d["apiVersion"], d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("karpenter.sh/v1", "NodePool", "default"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass", "default"),
        ("karpenter.sh/v1", "NodePool", "gpu"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass", "gpu"),
    ]
    loaded = load.load_text(result.stdout, file="converted.yaml")
    assert loaded.ok and loaded.warnings == [] and loaded.skipped == []
    assert len(loaded.node_pools) == 2 and len(loaded.ec2_node_classes) == 2
    warnings = result.stderr.splitlines()
    assert all(line.startswith("warning: ") for line in warnings)
    assert any(
        "spec.kubeletConfiguration.containerRuntime: has no v1 equivalent" in line for line in warnings
    )
    assert any('(AWSNodeTemplate "default"): spec.instanceProfile' in line for line in warnings)


def test_output_dir_gets_one_file_per_input_with_the_same_name(tmp_path: Path) -> None:
    out = tmp_path / "v1"
    result = runner.invoke(app, ["convert", "-f", str(LEGACY / "v1beta1"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["default.yaml", "gpu.yaml"]
    assert result.stdout.splitlines() == [
        f"wrote {out / 'default.yaml'}: 3 documents",
        f"wrote {out / 'gpu.yaml'}: 1 document",
    ]
    # the gpu pool's own kubelet needs its own class: a copy, written beside the class it copies
    default = list(yaml.safe_load_all((out / "default.yaml").read_text()))
    assert [d["metadata"]["name"] for d in default] == ["default", "default", "default-gpu"]
    assert default[2]["spec"]["kubelet"] == {"maxPods": 110}
    (gpu,) = yaml.safe_load_all((out / "gpu.yaml").read_text())
    assert gpu["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default-gpu"
    assert "written to a copy, EC2NodeClass 'default-gpu'" in result.stderr


def test_role_and_instance_profile_options(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(PROVISIONER + "---\n" + TEMPLATE)
    result = runner.invoke(app, ["convert", "-f", str(tmp_path / "old.yaml"), "--role", "NodeRole"])
    assert result.exit_code == 0 and result.stderr == ""
    assert list(yaml.safe_load_all(result.stdout))[1]["spec"]["role"] == "NodeRole"
    result = runner.invoke(app, ["convert", "-f", str(tmp_path), "--instance-profile", "Profile"])
    assert list(yaml.safe_load_all(result.stdout))[1]["spec"]["instanceProfile"] == "Profile"
    both = runner.invoke(app, ["convert", "-f", str(tmp_path), "--role", "a", "--instance-profile", "b"])
    assert both.exit_code == 2 and "not both" in both.stderr


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            PROVISIONER.replace("ttlSecondsAfterEmpty: 30", "ttlSecondsAfterEmpty: soon"),
            '(Provisioner "default"): spec.ttlSecondsAfterEmpty: expected a whole number',
        ),
        (
            PROVISIONER + "  requirements: [{key: kubernetes.io/arch, operator: Maybe}]\n",
            'old.yaml: document 0 (Provisioner "default"): spec.requirements[0].operator',
        ),
        (
            TEMPLATE.replace("  subnetSelector: {karpenter.sh/discovery: demo}\n", ""),
            "spec.subnetSelector: required",
        ),
        ("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x\n", "YAML syntax error"),
    ],
)
def test_bad_input_exits_2_naming_file_object_and_field(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "old.yaml").write_text(text + ("---\n" + TEMPLATE if "Provisioner" in text else ""))
    out = tmp_path / "out"
    result = runner.invoke(app, ["convert", "-f", str(tmp_path / "old.yaml"), "-o", str(out)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors and any(needle in line for line in errors), result.stderr
    assert not out.exists() and result.stdout == ""


def test_missing_files_and_clashing_outputs_exit_2(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["convert", "-f", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "nope.yaml: no such file or directory" in missing.stderr
    assert "document" not in missing.stderr
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "old.yaml").write_text(PROVISIONER + "---\n" + TEMPLATE)
    clash = runner.invoke(
        app, ["convert", "-f", str(tmp_path / "a"), "-f", str(tmp_path / "b"), "-o", str(tmp_path / "o")]
    )
    assert clash.exit_code == 2 and "would both be written" in clash.stderr
    over = runner.invoke(app, ["convert", "-f", str(tmp_path / "a"), "-o", str(tmp_path / "a")])
    assert over.exit_code == 2 and "would overwrite its input" in over.stderr
    assert (tmp_path / "a" / "old.yaml").read_text() == PROVISIONER + "---\n" + TEMPLATE


def test_other_documents_are_copied_and_a_file_without_legacy_objects_warns(tmp_path: Path) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    (tmp_path / "a.yaml").write_text(PROVISIONER + "---\n" + yaml.safe_dump(pod))
    (tmp_path / "b.yaml").write_text(TEMPLATE + "  userData: |\n    #!/bin/bash\n    echo hi\n")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(pod))
    result = runner.invoke(app, ["convert", "-f", str(tmp_path), "--role", "R"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["NodePool", "Pod", "EC2NodeClass", "Pod"]
    assert docs[1] == pod == docs[3]
    assert "  userData: |\n    #!/bin/bash\n    echo hi\n" in result.stdout  # multi-line strings stay blocks
    assert result.stderr.splitlines() == [
        f"warning: {tmp_path / 'c.yaml'}: no legacy object; copied unchanged"
    ]


def test_plan_on_legacy_files_warns_and_plans_the_converted_objects() -> None:
    result = runner.invoke(app, ["plan", "-f", str(LEGACY / "v1alpha5"), "-f", str(WORKLOADS)])
    assert result.exit_code == 0, result.output
    assert "New NodeClaims" in result.stdout and "Unschedulable" not in result.stdout
    assert "spec.kubeletConfiguration.containerRuntime: has no v1 equivalent" in result.stderr
    explain = runner.invoke(
        app, ["explain", "pod", "ml/trainer-0", "-f", str(LEGACY / "v1beta1"), "-f", str(WORKLOADS)]
    )
    assert explain.exit_code == 0, explain.output
    assert "written to a copy, EC2NodeClass 'default-gpu'" in explain.stderr


@pytest.mark.parametrize("version", ["v1alpha5", "v1beta1"])
def test_round_trip_plans_the_same_pods_the_same_way(tmp_path: Path, version: str) -> None:
    converted = tmp_path / "converted"
    result = runner.invoke(app, ["convert", "-f", str(LEGACY / version), "-o", str(converted)])
    assert result.exit_code == 0, result.output
    again = load.load_paths([converted])
    assert again.ok and again.warnings == [] and again.skipped == []
    from_legacy = _plan(LEGACY / version, WORKLOADS)
    from_converted = _plan(converted, WORKLOADS)
    by_hand = _plan(LEGACY / "expected-v1" / version, WORKLOADS)
    assert from_converted == from_legacy == by_hand
    summary = from_legacy["summary"]
    assert summary["pendingPods"] == 36 and summary["unschedulablePods"] == 0
    pools = {claim["nodePool"] for claim in from_legacy["nodeClaims"]}
    assert pools == {"default", "gpu"} and from_legacy["bindings"]["ml/trainer-0"].startswith("gpu-")
    # the kubelet (maxPods 20 on the default pool) shapes the plan: no default claim holds more
    assert max(len(c["pods"]) for c in from_legacy["nodeClaims"] if c["nodePool"] == "default") == 20
