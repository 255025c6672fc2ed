"""``karpy explain node`` on the shipped disruption example (examples/disruption/).

Checked through typer: the table (the blocker of each blocked node, wrapped to the terminal's
width), the stable JSON document (every key, methods in the controller's order), a NodeClaim name
standing for its node, the budget window and the replacement a consolidation would make, and the
exit codes (2 for a node not found with where it looked, a bad --now or --output, neither input
source, and a broken object, which still leaves the node explained).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from karpy import cli

EXAMPLE = Path(__file__).parents[3] / "examples" / "disruption"
MONDAY_NOON = "2026-03-02T12:00:00Z"  # inside the Underutilized window 08:00-18:00 mon-fri
MONDAY_EVENING = "2026-03-02T19:00:00Z"
runner = CliRunner()

KEYS = [
    "apiVersion", "kind", "catalog", "now", "node", "nodeClaim", "nodePool", "instanceType", "zone",
    "capacityType", "pricePerHour", "pods", "state", "verdict", "summary", "reason", "blockers",
    "passReasons", "command", "nextChange", "methods",
]  # fmt: skip
METHOD_KEYS = ["method", "verdict", "reason", "message", "detail", "action"]
ORDER = ["expiration", "emptiness", "drift", "multi-node consolidation", "single-node consolidation"]


def _run(*args: str, columns: int = 120) -> Result:
    return runner.invoke(cli.app, ["explain", "node", *args], env={"COLUMNS": str(columns)})


def _flat(text: str) -> str:
    """The table's text with its borders dropped and wrapped lines joined (rich wraps at spaces)."""
    return " ".join(" ".join(re.sub("[│┃]", " ", line).split()) for line in text.splitlines())


def _json(node: str, now: str = MONDAY_NOON, folder: Path = EXAMPLE) -> dict[str, Any]:
    result = _run(node, "-f", str(folder), "--now", now, "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _methods(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["method"]: m for m in doc["methods"]}


@pytest.mark.parametrize(
    ("node", "verdict", "reason"),
    [
        ("ip-10-0-1-14", "blocked", "do-not-disrupt"),
        ("ip-10-0-3-13", "blocked", "pdb"),
        ("ip-10-0-1-11", "candidate", "budget"),
        ("ip-10-0-2-12", "disrupted", "empty"),
    ],
)
def test_each_example_node_gets_its_verdict_and_reason(node: str, verdict: str, reason: str) -> None:
    doc = _json(node)
    assert (doc["node"], doc["verdict"], doc["reason"]) == (node, verdict, reason)


def test_the_json_document_has_every_key_sorted_and_the_methods_in_order() -> None:
    result = _run("ip-10-0-1-14", "-f", str(EXAMPLE), "--now", MONDAY_NOON, "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert sorted(doc) == sorted(KEYS) and list(doc) == sorted(doc)
    assert (doc["apiVersion"], doc["kind"]) == ("karpy.dev/v1alpha1", "NodeExplanation")
    assert [m["method"] for m in doc["methods"]] == ORDER
    assert all(sorted(m) == sorted(METHOD_KEYS) for m in doc["methods"])
    assert (doc["nodeClaim"], doc["nodePool"], doc["instanceType"]) == (
        "general-purpose-14",
        "general-purpose",
        "m5.4xlarge",
    )
    assert doc["now"] == MONDAY_NOON and doc["pods"] == ["shop/batch-report-x2"]
    assert doc["blockers"] == ["do-not-disrupt"]
    assert doc["command"] == {
        "method": "emptiness",
        "reason": "Empty",
        "decision": "delete",
        "nodes": ["ip-10-0-2-12"],
        "detail": "no reschedulable pods",
    }
    single = _methods(doc)["single-node consolidation"]
    assert single["detail"]["doNotDisruptPods"] == [
        {"pod": "shop/batch-report-x2", "value": "true", "until": None}
    ]


def test_the_pdb_blocking_a_node_is_named() -> None:
    multi = _methods(_json("ip-10-0-3-13"))["multi-node consolidation"]
    assert multi["message"] == "PDB shop/ledger allows no disruption of pod shop/ledger-0"
    assert multi["detail"]["pdbs"] == [{"pdb": "shop/ledger", "pods": ["shop/ledger-0"]}]


def test_the_budget_window_in_force_is_named_with_what_it_leaves() -> None:
    single = _methods(_json("ip-10-0-1-11"))["single-node consolidation"]
    assert (single["verdict"], single["reason"]) == ("blocked", "budget")
    budget = single["detail"]["budget"]
    assert budget["allowedNow"] == 0 and budget["reason"] == "Underutilized"
    window = next(b for b in budget["budgets"] if b["schedule"])
    assert window["schedule"] == "0 8 * * mon-fri" and window["durationSeconds"] == 36000
    assert (window["active"], window["windowStart"], window["windowEnd"]) == (
        True,
        "2026-03-02T08:00:00Z",
        "2026-03-02T18:00:00Z",
    )


def test_after_the_window_single_node_consolidation_would_delete_the_node_and_save_its_price() -> None:
    doc = _json("ip-10-0-1-11", now=MONDAY_EVENING)
    single = _methods(doc)["single-node consolidation"]
    assert (single["verdict"], single["reason"]) == ("candidate", "underutilized")
    action = single["action"]
    assert action["decision"] == "delete" and action["replacements"] == []
    assert action["savingsPerHour"] == doc["pricePerHour"] > 0
    assert single["detail"]["preemptedBy"]["nodes"] == ["ip-10-0-2-12"]
    assert "emptiness acts first" in doc["summary"]


def test_a_node_claim_name_stands_for_its_node() -> None:
    assert _json("general-purpose-13")["node"] == "ip-10-0-3-13"


def test_the_table_names_the_blocker_and_wraps_to_the_terminal() -> None:
    result = _run("ip-10-0-1-14", "-f", str(EXAMPLE), "--now", MONDAY_NOON, columns=90)
    assert result.exit_code == 0, result.stderr
    out = _flat(result.stdout)
    assert out.startswith("karpy explain node ip-10-0-1-14 at 2026-03-02T12:00:00Z: blocked")
    assert "do-not-disrupt pod shop/batch-report-x2 (true)" in out
    assert "this pass (karpy disrupt): delete ip-10-0-2-12 (Empty, emptiness)" in out
    for method in ORDER:
        assert method in out
    assert max(len(line) for line in result.stdout.splitlines()) <= 90


def test_the_table_shows_the_budget_window_and_the_expiry() -> None:
    result = _run("ip-10-0-1-11", "-f", str(EXAMPLE), "--now", MONDAY_NOON, columns=100)
    assert result.exit_code == 0, result.stderr
    out = _flat(result.stdout)
    assert "in force now 2026-03-02T08:00:00Z - 2026-03-02T18:00:00Z" in out
    assert "expires at 2026-04-01T06:00:00Z (in 29d 18h)" in out


def test_a_node_not_found_exits_2_naming_where_it_looked() -> None:
    result = _run("ip-10-0-9-99", "-f", str(EXAMPLE), "--now", MONDAY_NOON)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: node ip-10-0-9-99 not found in {EXAMPLE}; nodes there (4): ")
    assert "ip-10-0-1-11" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("ip-10-0-1-14", "-f", str(EXAMPLE), "--now", "yesterday"), "--now"),
        (("ip-10-0-1-14", "-f", str(EXAMPLE), "-o", "xml"), "--output"),
        (("ip-10-0-1-14",), "-f"),
        (("ip-10-0-1-14", "-f", str(EXAMPLE), "--kubeconfig", "/nonexistent"), "--kubeconfig"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: tuple[str, ...], says: str) -> None:
    result = _run(*args)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and says in line


def test_a_broken_object_is_named_and_the_node_still_explained(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    shutil.copytree(EXAMPLE, folder)
    (folder / "broken.yaml").write_text(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: broken, namespace: shop}\n"
        "spec: {minAvailable: [1]}\n"
    )
    result = _run("ip-10-0-3-13", "-f", str(folder), "--now", MONDAY_NOON, "-o", "json")
    assert result.exit_code == 2
    assert "broken.yaml" in result.stderr and "broken" in result.stderr
    assert json.loads(result.stdout)["reason"] == "pdb"


def test_spot_to_spot_and_catalog_options_are_taken() -> None:
    args = ("ip-10-0-2-12", "-f", str(EXAMPLE), "--now", MONDAY_NOON, "-o", "json")
    result = _run(*args, "--spot-to-spot", "--catalog", "aws:us-east-1")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["catalog"].startswith("aws") and doc["capacityType"] == "spot"
    assert _methods(doc)["emptiness"]["verdict"] == "disrupted"
