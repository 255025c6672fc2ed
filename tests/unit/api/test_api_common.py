"""Scalar types of karpy.api.common: quantities, durations, times, field paths."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import BaseModel, ValidationError

from karpy.api import common, karpenter_v1


class _Q(common.K8sModel):
    resources: common.ResourceList = {}  # noqa: RUF012 (pydantic copies defaults)


class _D(common.K8sModel):
    nillable: common.NillableDuration | None = None
    plain: common.Duration | None = None
    budget: common.BudgetDuration | None = None
    go: common.GoDuration | None = None


class _T(common.K8sModel):
    at: common.Time | None = None


@pytest.mark.parametrize("value", ["100m", "1.5Gi", "2k", "1e3", 4, 0.5, "0"])
def test_quantity_accepts_kubernetes_syntax(value: object) -> None:
    assert _Q.model_validate({"resources": {"cpu": value}}).resources["cpu"] == str(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1x", '"1x" is not a quantity (expected e.g. 100m, 1.5Gi, 2k or 1e3)'),
        ("1Gb", '"1Gb" is not a quantity (expected e.g. 100m, 1.5Gi, 2k or 1e3)'),
        ("-1", '"-1" must not be negative'),
        (True, "expected a quantity such as 100m or 1Gi, got True"),
    ],
)
def test_quantity_rejects_bad_syntax(value: object, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        _Q.model_validate({"resources": {"memory": value}})
    (err,) = info.value.errors()
    assert str(err["ctx"]["error"]) == message


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("720h", 2592000.0), ("1h30m", 5400.0), ("30s", 30.0), ("0s", 0.0), ("500ms", 0.5), ("Never", None)],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert common.parse_duration(text) == seconds


def test_parse_duration_rejects_days() -> None:
    with pytest.raises(ValueError, match='"1d" is not a duration'):
        common.parse_duration("1d")


def test_duration_flavours_follow_the_crd_patterns() -> None:
    ok = _D.model_validate({"nillable": "Never", "plain": "1h30m", "budget": "1h30m", "go": "1.5s"})
    assert (ok.nillable, ok.plain, ok.budget, ok.go) == ("Never", "1h30m", "1h30m", "1.5s")
    for field, value in [("plain", "Never"), ("budget", "30s"), ("nillable", "1.5h"), ("go", "soon")]:
        with pytest.raises(ValidationError):
            _D.model_validate({field: value})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-01T12:00:00Z", 1767268800.0),
        ("2026-01-01T13:00:00+01:00", 1767268800.0),
        ("2026-01-01T12:00:00.5Z", 1767268800.5),
        (dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC), 1767268800.0),
        (1767268800, 1767268800.0),
    ],
)
def test_times_become_posix_seconds(value: object, expected: float) -> None:
    assert _T.model_validate({"at": value}).at == expected


def test_bad_time_is_a_field_error() -> None:
    with pytest.raises(ValidationError) as info:
        _T.model_validate({"at": "yesterday"})
    assert "is not an RFC3339 time" in str(info.value.errors()[0]["ctx"]["error"])


def test_nulls_count_as_unset() -> None:
    meta = common.ObjectMeta.model_validate({"name": "a", "labels": None, "annotations": None})
    assert meta.labels == {} and meta.annotations == {}


def test_unknown_fields_are_ignored() -> None:
    meta = common.ObjectMeta.model_validate(
        {"name": "a", "managedFields": [{"x": 1}], "resourceVersion": "7"}
    )
    assert meta.name == "a"


def test_format_loc_brackets_map_keys_and_indexes() -> None:
    loc: list[str | int] = ["spec", "template", "spec", "requirements", 0, "operator"]
    assert common.format_loc(karpenter_v1.NodePool, loc) == "spec.template.spec.requirements[0].operator"
    assert common.format_loc(karpenter_v1.NodePool, ["spec", "limits", "nvidia.com/gpu"]) == (
        "spec.limits[nvidia.com/gpu]"
    )
    loc = ["spec", "template", "metadata", "labels", "karpenter.sh/nodepool"]
    assert common.format_loc(karpenter_v1.NodePool, loc) == (
        "spec.template.metadata.labels[karpenter.sh/nodepool]"
    )


def test_format_loc_tolerates_unknown_parts() -> None:
    assert common.format_loc(BaseModel, ["a", 1, "b"]) == "a[1].b"
