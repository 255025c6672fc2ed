"""Resource lists as frozen integer mappings (karpy.model.resources)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.model import resources
from karpy.model.quantity import QuantityError
from karpy.model.resources import Resources

GI = 2**30


def r(**values: int) -> Resources:
    return Resources({k.replace("_", "-"): v for k, v in values.items()})


def test_parse_units() -> None:
    parsed = Resources.parse({"cpu": "500m", "memory": "1Gi", "pods": "110", "ephemeral-storage": "0.5Ki"})
    assert dict(parsed) == {"cpu": 500, "memory": GI, "pods": 110, "ephemeral-storage": 512}


def test_parse_rounds_cpu_to_millicores_and_rest_to_units() -> None:
    assert dict(Resources.parse({"cpu": "0.0001", "memory": "0.9Gi"})) == {"cpu": 1, "memory": 966_367_642}


def test_parse_rejects_bad_quantity() -> None:
    with pytest.raises(QuantityError):
        Resources.parse({"cpu": "1 core"})


@pytest.mark.parametrize(
    ("resource", "value", "expected"), [("cpu", "2", 2000), ("memory", "1Ki", 1024), ("nvidia.com/gpu", 1, 1)]
)
def test_amount(resource: str, value: str | int, expected: int) -> None:
    assert resources.amount(resource, value) == expected


def test_zeros_dropped() -> None:
    res = Resources({"cpu": 0, "memory": 5})
    assert "cpu" not in res
    assert len(res) == 1
    assert res.get("cpu") == 0
    assert res == r(memory=5)


def test_missing_is_zero_via_get_but_keyerror_via_index() -> None:
    res = r(cpu=1)
    assert res.get("memory") == 0
    with pytest.raises(KeyError):
        res["memory"]


def test_from_pairs() -> None:
    assert Resources([("cpu", 1), ("memory", 0)]) == r(cpu=1)


@pytest.mark.parametrize(
    ("a", "b", "total"),
    [
        (r(cpu=1000), r(cpu=500), r(cpu=1500)),
        (r(cpu=1000), r(memory=GI), r(cpu=1000, memory=GI)),
        (r(cpu=1000), r(cpu=-1000), r()),
        (r(), r(), r()),
    ],
)
def test_add(a: Resources, b: Resources, total: Resources) -> None:
    assert a + b == total
    assert b + a == total


@pytest.mark.parametrize(
    ("a", "b", "diff"),
    [
        (r(cpu=1000), r(cpu=500), r(cpu=500)),
        (r(cpu=1000), r(cpu=1000), r()),
        (r(cpu=1000), r(memory=GI), r(cpu=1000, memory=-GI)),
    ],
)
def test_sub(a: Resources, b: Resources, diff: Resources) -> None:
    assert a - b == diff


def test_sub_negative_detected() -> None:
    assert (r(cpu=1) - r(cpu=2)).any_negative()
    assert not (r(cpu=2) - r(cpu=1)).any_negative()


def test_add_accepts_plain_mapping() -> None:
    assert r(cpu=1) + {"cpu": 2} == r(cpu=3)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (r(cpu=1000, memory=GI), r(cpu=500, memory=2 * GI), r(cpu=1000, memory=2 * GI)),
        (r(cpu=1000), r(pods=3), r(cpu=1000, pods=3)),
        (r(cpu=1000), r(), r(cpu=1000)),
    ],
)
def test_max(a: Resources, b: Resources, expected: Resources) -> None:
    assert a.max(b) == expected
    assert b.max(a) == expected


@pytest.mark.parametrize(
    ("request_", "available", "fits", "exceeding"),
    [
        (r(cpu=1000), r(cpu=1000), True, []),
        (r(cpu=1001), r(cpu=1000), False, ["cpu"]),
        (r(cpu=1000, memory=GI), r(cpu=2000), False, ["memory"]),
        (r(), r(), True, []),
        (r(), r(cpu=1), True, []),
        (r(pods=2, cpu=3), r(pods=1, cpu=1), False, ["cpu", "pods"]),
        (r(nvidia_com_gpu=1), r(cpu=8), False, ["nvidia-com-gpu"]),
    ],
)
def test_fits_and_exceeding(
    request_: Resources, available: Resources, fits: bool, exceeding: list[str]
) -> None:
    assert request_.fits(available) is fits
    assert request_.exceeding(available) == exceeding


def test_fits_plain_mapping() -> None:
    assert r(cpu=1).fits({"cpu": 1})
    assert not r(cpu=1).fits({})


def test_equality_and_hash() -> None:
    a = Resources({"cpu": 1, "memory": 2})
    b = Resources({"memory": 2, "cpu": 1, "pods": 0})
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != r(cpu=1)


def test_not_equal_to_other_types() -> None:
    assert Resources().__eq__(object()) is NotImplemented


def test_immutable_results() -> None:
    a = r(cpu=1)
    _ = a + r(cpu=1)
    assert a == r(cpu=1)


def test_total() -> None:
    assert resources.total([r(cpu=1), r(cpu=2, memory=3), {"pods": 1}]) == r(cpu=3, memory=3, pods=1)
    assert resources.total([]) == resources.EMPTY


def test_format_and_as_dict() -> None:
    res = r(cpu=1500, memory=2 * GI, pods=3)
    assert res.format() == "cpu: 1500m, memory: 2Gi, pods: 3"
    assert res.as_dict() == {"cpu": "1500m", "memory": "2Gi", "pods": "3"}
    assert repr(res) == "Resources(cpu: 1500m, memory: 2Gi, pods: 3)"


_amounts = st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), st.integers(0, 50))


@given(_amounts, _amounts, st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), st.integers(-5, 60)))
def test_fits_with_is_the_fit_of_the_sum(
    a: dict[str, int], b: dict[str, int], available: dict[str, int]
) -> None:
    left, right = Resources(a), Resources(b)
    assert left.fits_with(right, available) == (left + right).fits(available)
    assert dict(left.items()) == {k: v for k, v in a.items() if v}
    assert all((k in left) == bool(a.get(k)) for k in ("cpu", "memory", "pods", "x"))


_signed = st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), st.integers(-3, 3))


@given(_signed, _signed)
def test_arithmetic_results_equal_the_constructed_ones(a: dict[str, int], b: dict[str, int]) -> None:
    """Sums, differences and maxima wrap their dict directly: zeros must still be dropped."""
    left, right = Resources(a), Resources(b)
    a, b = dict(left.items()), dict(right.items())
    keys = set(a) | set(b)
    expected = {
        "add": Resources({k: a.get(k, 0) + b.get(k, 0) for k in keys}),
        "sub": Resources({k: a.get(k, 0) - b.get(k, 0) for k in keys}),
        "max": Resources({**a, **{k: v for k, v in b.items() if v > a.get(k, 0)}}),
        "total": Resources({k: a.get(k, 0) + b.get(k, 0) for k in keys}),
    }
    got = {"add": left + right, "sub": left - right, "max": left.max(right), "total": resources.total([a, b])}
    for name, value in got.items():
        assert value == expected[name], name
        assert dict(value.items()) == dict(expected[name].items()), name  # no zero entries
        assert hash(value) == hash(expected[name]), name
    assert len(left - left) == 0


@given(_amounts, _amounts, _amounts)
def test_fits_reads_resources_and_plain_mappings_alike(
    a: dict[str, int], b: dict[str, int], available: dict[str, int]
) -> None:
    left, right, avail = Resources(a), Resources(b), Resources(available)
    assert left.fits(avail) == left.fits(available) == all(v <= available.get(k, 0) for k, v in a.items())
    assert left.fits_with(right, avail) == left.fits_with(right, available) == (left + right).fits(available)


def test_a_remembered_amount_depends_on_the_resource_too() -> None:
    resources._AMOUNTS.clear()
    assert resources.amount("cpu", "1.5") == 1500  # millicores
    assert resources.amount("memory", "1.5") == 2  # units, rounded up: not the cpu entry
    assert resources.amount("nvidia.com/gpu", "1.5") == 2
    assert resources.amount("cpu", "1.5") == 1500
    assert resources._AMOUNTS == {(True, "1.5"): 1500, (False, "1.5"): 2}
    with pytest.raises(QuantityError):
        resources.amount("cpu", "1.5x")
    assert len(resources._AMOUNTS) == 2
