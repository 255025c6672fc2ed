"""``karpy explain pod`` on the shipped example cluster (examples/explain/): one pod per answer.

Checked through typer: the status and reason class of each example pod, the stable JSON
document, the table naming the rejecting check and the suggestion, a bare name meaning the
``default`` namespace, and the exit codes (2 for a pod not found, a bad option, neither or both
input sources, and a broken object, which still leaves the rest explained).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from karpy import cli

EXAMPLE = Path(__file__).parents[3] / "examples" / "explain"
runner = CliRunner()


def _run(*args: str) -> Result:
    return runner.invoke(cli.app, ["explain", "pod", *args], env={"COLUMNS": "120"})


def _json(pod: str, folder: Path = EXAMPLE) -> dict[str, Any]:
    result = _run(pod, "-f", str(folder), "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.parametrize(
    ("pod", "status", "reason"),
    [
        ("shop/web-0", "existing", None),
        ("shop/report-0", "unschedulable", "requirements"),
        ("shop/warehouse-0", "unschedulable", "nodepool-limit"),
        ("shop/etl-0", "unschedulable", "resources"),
        ("ml/trainer-0", "new-nodeclaim", None),
        ("shop/api-0", "bound", None),
    ],
)
def test_each_example_pod_gets_its_status_and_reason(pod: str, status: str, reason: str | None) -> None:
    doc = _json(pod)
    assert (doc["status"], doc["reason"]) == (status, reason)
    assert doc["apiVersion"] == "karpy.dev/v1alpha1" and doc["kind"] == "PodExplanation"
    assert doc["pod"] == pod


def test_the_json_document_has_every_key_and_the_pools_in_the_solves_order() -> None:
    doc = _json("shop/report-0")
    assert sorted(doc) == sorted(
        [
            "apiVersion", "kind", "pod", "catalog", "status", "summary", "node", "reason",
            "message", "suggestion", "relaxations", "reasons", "nodeClaim", "nodePools", "nodes",
            "events",
        ]
    )  # fmt: skip
    assert [(p["name"], p["verdict"], p["reason"]) for p in doc["nodePools"]] == [
        ("gpu", "rejected", "taint"),
        ("general", "rejected", "requirements"),
    ]
    assert "us-east-1a, us-east-1b" in doc["nodePools"][1]["suggestion"]
    assert [(n["name"], n["verdict"], n["reason"]) for n in doc["nodes"]] == [
        ("ip-10-0-1-21", "rejected", "requirements")
    ]
    assert doc["events"] == []


def test_a_new_nodeclaim_names_its_pool_type_and_families() -> None:
    claim = _json("ml/trainer-0")["nodeClaim"]
    assert claim["nodePool"] == "gpu"
    assert claim["instanceType"] == claim["instanceTypeOptions"][0]
    assert {f.split(":")[0] for f in claim["families"]} == {"g5", "g6"}
    assert claim["pricePerHour"] > 0


def test_the_table_names_the_rejecting_check_and_what_to_do() -> None:
    result = _run("shop/warehouse-0", "-f", str(EXAMPLE))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("karpy explain pod shop/warehouse-0: unschedulable")
    assert "nodepool-limit" in result.stdout
    assert "raise NodePool general spec.limits.cpu" in result.stdout
    assert "add toleration nvidia.com/gpu=true:NoSchedule" in result.stdout


def test_a_bare_name_is_in_the_default_namespace_and_not_found_exits_2() -> None:
    result = _run("web-0", "-f", str(EXAMPLE))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: pod default/web-0 not found in {EXAMPLE}; pods there: ")
    assert "shop/web-0" in line


@pytest.mark.parametrize(
    "args",
    [
        ("shop/web-0", "-f", str(EXAMPLE), "-o", "xml"),
        ("shop/web-0",),
        ("shop/web-0", "-f", str(EXAMPLE), "--kubeconfig", "/nonexistent"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: tuple[str, ...]) -> None:
    result = _run(*args)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")


def test_a_broken_nodepool_is_named_and_the_rest_still_explained(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    shutil.copytree(EXAMPLE, folder)
    (folder / "broken.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\n"
        "spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass,"
        " name: default}, requirements: [{key: a, operator: Bogus}]}}}\n"
    )
    result = _run("shop/report-0", "-f", str(folder), "-o", "json")
    assert result.exit_code == 2
    assert "broken.yaml" in result.stderr and "broken" in result.stderr and "operator" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["reason"] == "requirements"
    assert [p["name"] for p in doc["nodePools"]] == ["gpu", "general"]
