"""``karpy disrupt``: a dry-run decision for every node, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy.cli import app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "disruption"
AT = "2026-03-02T12:00:00Z"
NODES = {"ip-10-0-1-11", "ip-10-0-2-12", "ip-10-0-3-13", "ip-10-0-1-14"}
runner = CliRunner()

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: broken}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  disruption:
    budgets:
      - nodes: "10%"
      - {budget}
"""


def run_json(*extra: str) -> dict:
    result = runner.invoke(app, ["disrupt", "-f", str(EXAMPLE), "--now", AT, "-o", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_has_a_command_and_a_record_for_every_node() -> None:
    doc = run_json()
    assert (doc["apiVersion"], doc["kind"]) == ("karpy.dev/v1alpha1", "DisruptionDecision")
    assert doc["now"] == AT
    records = {n["name"]: n for n in doc["nodes"]}
    assert set(records) == NODES
    assert all(n["nodePool"] == "general-purpose" for n in doc["nodes"])
    assert all(n["reasons"] for n in doc["nodes"])

    command = doc["command"]
    assert command is not None
    assert (command["reason"], command["method"], command["decision"]) == ("Empty", "emptiness", "delete")
    assert command["nodes"] == ["ip-10-0-2-12"]  # the empty spot node
    assert command["replacements"] == []

    assert records["ip-10-0-2-12"]["verdict"] == "disrupted"
    dnd = records["ip-10-0-1-14"]
    assert dnd["verdict"] == "blocked"
    assert any("batch-report-x2" in r and "do-not-disrupt" in r for r in dnd["reasons"])
    pdb = records["ip-10-0-3-13"]
    assert pdb["verdict"] == "blocked"
    assert any("PDB shop/ledger" in r for r in pdb["reasons"])
    assert records["ip-10-0-1-11"]["verdict"] == "candidate"


def test_json_reports_the_allowed_disruptions() -> None:
    doc = run_json()
    # 20% of 4 nodes rounds up to 1
    assert doc["allowedDisruptions"]["general-purpose"]["Empty"] == 1


def test_json_is_stable() -> None:
    assert run_json() == run_json()


def test_table_mentions_every_node_and_the_command() -> None:
    result = runner.invoke(app, ["disrupt", "-f", str(EXAMPLE), "--now", AT])
    assert result.exit_code == 0, result.output
    for name in NODES:
        assert name in result.output
    assert "delete ip-10-0-2-12" in result.output
    assert "Empty" in result.output
    assert "shop/ledger" in result.output
    assert "do-not-disrupt" in result.output


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ('{nodes: "10%", schedule: "61 * * * *", duration: 1h}', "spec.disruption.budgets[1].schedule"),
        ('{nodes: "10%", schedule: "0 8 * *", duration: 1h}', "spec.disruption.budgets[1].schedule"),
        ('{nodes: "150%"}', "spec.disruption.budgets[1].nodes"),
        ('{nodes: "-1"}', "spec.disruption.budgets[1].nodes"),
        ("{nodes: -1}", "spec.disruption.budgets[1].nodes"),
        ('{nodes: "10%", schedule: "@daily"}', "spec.disruption.budgets[1].duration"),
    ],
)
def test_malformed_budget_is_a_one_line_error_naming_the_field(
    tmp_path: Path, budget: str, field: str
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(POOL.format(budget=budget))
    result = runner.invoke(app, ["disrupt", "-f", str(path), "--now", AT, "-o", "json"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert field in errors[0]
    assert "broken" in errors[0]


@pytest.mark.parametrize("now", ["yesterday", "2026-13-02T12:00:00Z", "12:00"])
def test_bad_now_is_exit_2(now: str) -> None:
    result = runner.invoke(app, ["disrupt", "-f", str(EXAMPLE), "--now", now])
    assert result.exit_code == 2
    assert "--now" in result.stderr


def test_bad_output_is_exit_2() -> None:
    result = runner.invoke(app, ["disrupt", "-f", str(EXAMPLE), "--now", AT, "-o", "xml"])
    assert result.exit_code == 2
    assert "--output" in result.stderr
