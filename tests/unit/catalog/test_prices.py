"""User price files (karpy.catalog.prices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.catalog import aws, prices
from karpy.model.errors import InputError

HEADER = "region,instance_type,capacity_type,usd_per_hour\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_rows_extra_columns_and_blank_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "usd_per_hour,region,instance_type,capacity_type,note\n"
        "0.05,us-east-1,m5.large,spot,measured\n"
        "\n"
        " 0.09 ,us-east-1,m5.large,on-demand,\n",
    )
    assert prices.load_prices_csv(path) == {
        ("us-east-1", "m5.large", "spot"): 0.05,
        ("us-east-1", "m5.large", "on-demand"): 0.09,
    }


def test_empty_body_is_empty_mapping(tmp_path: Path) -> None:
    assert prices.load_prices_csv(write(tmp_path, HEADER)) == {}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("us-east-1,m5.large,spot,cheap\n", r"prices.csv:2: usd_per_hour 'cheap' is not a number"),
        ("us-east-1,m5.large,spot,-1\n", r"prices.csv:2: usd_per_hour '-1' must be a finite number"),
        ("us-east-1,m5.large,spot,nan\n", r"prices.csv:2: usd_per_hour 'nan' must be a finite number"),
        ("us-east-1,m5.large,preemptible,1\n", r"prices.csv:2: capacity_type 'preemptible' is not one of"),
        (",m5.large,spot,1\n", r"prices.csv:2: empty region"),
        ("us-east-1,m5.large,spot\n", r"prices.csv:2: expected 4 columns, got 3"),
        (
            "us-east-1,m5.large,spot,1\n\nus-east-1,m5.large,spot,2\n",
            r"prices.csv:4: duplicate price .*line 2",
        ),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        prices.load_prices_csv(write(tmp_path, HEADER + body))


def test_header_required(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"prices.csv:1: header must name .*missing region, .*usd_per_hour"):
        prices.load_prices_csv(write(tmp_path, "us-east-1,m5.large,spot,0.1\n"))
    with pytest.raises(InputError, match="empty price file"):
        prices.load_prices_csv(write(tmp_path, ""))
    with pytest.raises(InputError, match="cannot read price file"):
        prices.load_prices_csv(tmp_path / "missing.csv")


def test_loaded_prices_override_catalog(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "us-east-1,m5.large,spot,0.0123\n")
    types = aws.instance_types("us-east-1", prices_override=prices.load_prices_csv(path))
    m5 = next(t for t in types if t.name == "m5.large")
    assert {o.price for o in m5.offerings if o.capacity_type == "spot"} == {0.0123}
