"""``karpy catalog list`` through typer's CliRunner on catalog_cmd.app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from karpy.cli import catalog_cmd

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(catalog_cmd.app, ["list", *args])
    return result.exit_code, result.output


def test_table_with_filters_and_no_fallback_note() -> None:
    code, out = invoke(
        "--filter", "karpenter.k8s.aws/instance-family=m5", "--filter", "karpenter.k8s.aws/instance-cpu>8"
    )
    assert code == 0, out
    assert "m5.4xlarge" in out and "m5.24xlarge" in out
    assert "m5.large" not in out and "m5.2xlarge " not in out and "c5.4xlarge" not in out
    assert "aws:us-east-1: 6 instance types" in out
    assert "fallback" not in out
    assert "spot prices are a model" in out


def test_json_rows_and_short_keys() -> None:
    code, out = invoke("--filter", "family=m5", "--filter", "cpu<4", "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["region"] == "us-east-1" and doc["price_fallback"] is False
    assert [r["name"] for r in doc["instance_types"]] == ["m5.large"]
    row = doc["instance_types"][0]
    assert row["vcpu"] == 2 and row["memory_mib"] == 8192 and row["pods"] == 29
    assert row["allocatable"] == {"cpu": "1930m", "memory": "6903Mi", "pods": 29}
    assert row["arch"] == "amd64"
    assert row["on_demand_price"] == pytest.approx(0.096)
    assert row["spot_price"] == pytest.approx(0.096 * 0.4)


def test_not_equal_and_multi_value_filters() -> None:
    code, out = invoke(
        "--filter",
        "instance-family=m5,c5",
        "--filter",
        "instance-size=large",
        "--filter",
        "arch!=arm64",
        "-o",
        "json",
    )
    assert code == 0, out
    assert [r["name"] for r in json.loads(out)["instance_types"]] == ["c5.large", "m5.large"]
    code, out = invoke(
        "--filter",
        "karpenter.k8s.aws/instance-gpu-count>4",
        "--filter",
        "gpu-manufacturer=nvidia",
        "-o",
        "json",
    )
    assert code == 0, out
    rows = json.loads(out)["instance_types"]
    assert rows and "p4d.24xlarge" in {r["name"] for r in rows}


def test_fallback_region_footer() -> None:
    code, out = invoke("--region", "eu-west-1", "--filter", "instance-type=m5.large")
    assert code == 0, out
    assert "karpenter-static-fallback-us-east-1" in out
    code, out = invoke("--region", "eu-west-1", "--filter", "instance-type=m5.large", "-o", "json")
    assert json.loads(out)["price_fallback"] is True


def test_prices_file_override(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("region,instance_type,capacity_type,usd_per_hour\nus-east-1,m5.large,spot,0.001\n")
    code, out = invoke("--prices", str(path), "--filter", "instance-type=m5.large", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["instance_types"][0]["spot_price"] == 0.001


def test_errors_exit_2() -> None:
    code, out = invoke("--region", "mars-1")
    assert code == 2 and "unknown AWS region 'mars-1'" in out
    code, _ = invoke("--filter", "karpenter.k8s.aws/instance-cpu>many")
    assert code == 2
    code, _ = invoke("--filter", "no-operator")
    assert code == 2


def test_parse_filter() -> None:
    req = catalog_cmd.parse_filter("cpu>8")
    assert req.key == "karpenter.k8s.aws/instance-cpu" and req.gte == 9
    assert catalog_cmd.parse_filter("zone!=us-east-1a").operator == "NotIn"
    assert catalog_cmd.parse_filter("example.com/team=a").key == "example.com/team"
    with pytest.raises(typer.BadParameter):
        catalog_cmd.parse_filter("=x")
