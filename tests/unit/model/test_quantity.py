"""Kubernetes quantity parsing and formatting (karpy.model.quantity)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from karpy.model import quantity
from karpy.model.quantity import QuantityError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Fraction(1, 10)),
        ("1", Fraction(1)),
        ("1.5Gi", Fraction(3, 2) * 2**30),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("2k", Fraction(2000)),
        ("2M", Fraction(2_000_000)),
        ("3G", Fraction(3 * 10**9)),
        ("5n", Fraction(5, 10**9)),
        ("5u", Fraction(5, 10**6)),
        (".5", Fraction(1, 2)),
        ("+1", Fraction(1)),
        ("-1", Fraction(-1)),
        ("1.", Fraction(1)),
        ("0", Fraction(0)),
        (" 2 ", Fraction(2)),
    ],
)
def test_parse(text: str, expected: Fraction) -> None:
    assert quantity.parse(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(3, Fraction(3)), (0.5, Fraction(1, 2)), (0.1, Fraction(1, 10))]
)
def test_parse_numbers(value: int | float, expected: Fraction) -> None:
    assert quantity.parse(value) == expected


@pytest.mark.parametrize(
    "text", ["1.2.3", "abc", "1 Gi", "", " ", "Gi", "1Gii", "1gi", "1K", "1e", "1e3Gi", "--1", "1m2", "0x10"]
)
def test_bad_syntax(text: str) -> None:
    with pytest.raises(QuantityError):
        quantity.parse(text)


@pytest.mark.parametrize("value", [True, False, float("inf"), float("nan")])
def test_bad_values(value: object) -> None:
    with pytest.raises(QuantityError):
        quantity.parse(value)  # type: ignore[arg-type]


def test_quantity_error_is_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("text", "milli"),
    [("100m", 100), ("1", 1000), ("1.5", 1500), ("0.0001", 1), ("1u", 1), ("2k", 2_000_000), ("1e-3", 1)],
)
def test_to_milli_rounds_up(text: str, milli: int) -> None:
    assert quantity.to_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("0.9Gi", 966_367_642),  # 0.9 * 2**30 = 966367641.6 -> rounded up to whole bytes
        ("1Gi", 2**30),
        ("100m", 1),
        ("1.5", 2),
        ("1e3", 1000),
        ("0", 0),
    ],
)
def test_to_units_rounds_up(text: str, units: int) -> None:
    assert quantity.to_units(text) == units


def test_to_units_accepts_fraction() -> None:
    assert quantity.to_units(Fraction(3, 2)) == 2
    assert quantity.to_milli(Fraction(1, 3)) == 334


@pytest.mark.parametrize(
    ("millis", "text"), [(2000, "2"), (1500, "1500m"), (0, "0"), (1, "1m"), (100, "100m")]
)
def test_format_cpu(millis: int, text: str) -> None:
    assert quantity.format_cpu(millis) == text


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (2**30, "1Gi"),
        (1536 * 2**20, "1536Mi"),
        (100, "100"),
        (0, "0"),
        (1024, "1Ki"),
        (3 * 2**40, "3Ti"),
        (1000, "1000"),
    ],
)
def test_format_bytes(count: int, text: str) -> None:
    assert quantity.format_bytes(count) == text


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("memory", 2**30, "1Gi"),
        ("ephemeral-storage", 2**20, "1Mi"),
        ("pods", 110, "110"),
    ],
)
def test_format_quantity(resource: str, amount: int, text: str) -> None:
    assert quantity.format_quantity(resource, amount) == text


@pytest.mark.parametrize("text", ["1500m", "2", "1Gi", "1536Mi", "100"])
def test_format_round_trips(text: str) -> None:
    if text.endswith("m") or text == "2":
        assert quantity.format_cpu(quantity.to_milli(text)) == text
    else:
        assert quantity.format_bytes(quantity.to_units(text)) == text


@pytest.mark.parametrize("text", ["100m", "1.5Gi", "2k", "1e3", " 2 ", "0"])
def test_a_remembered_text_parses_to_the_same_value(text: str) -> None:
    quantity._PARSED.clear()
    first = quantity.parse(text)
    assert quantity._PARSED[text] == first  # remembered
    assert quantity.parse(text) == first == quantity._parse(text)


def test_a_bad_text_is_refused_every_time_and_never_remembered() -> None:
    quantity._PARSED.clear()
    for _ in range(2):
        with pytest.raises(QuantityError):
            quantity.parse("1Gii")
    assert "1Gii" not in quantity._PARSED


def test_the_remembered_texts_are_bounded() -> None:
    quantity._PARSED.clear()
    for i in range(quantity._MAX_PARSED + 5):
        assert quantity.parse(f"{i}m") == Fraction(i, 1000)
    assert len(quantity._PARSED) <= quantity._MAX_PARSED
