"""PricingProvider: static table first, Pricing API and spot price history refreshes, fallbacks.

moto does not implement the Pricing API's ``GetProducts`` ("Not yet implemented"), so every
on-demand refresh test puts a ``botocore.stub.Stubber`` on ``clients.pricing`` that answers with
realistic ``PriceList`` documents (JSON strings, as AWS sends them). moto's
``DescribeSpotPriceHistory`` answers a constant 0.00001 for every offering, so the parsing,
latest-per-zone and "no spot price after the first refresh" tests use a Stubber on
``clients.ec2`` for ``DescribeSpotPriceHistory`` only; one test refreshes spot prices against the
real moto server.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

import pytest
from botocore.stub import Stubber

from karpy.catalog import aws as catalog_aws
from karpy.providers.aws import pricing as pricing_mod
from karpy.providers.aws import sdk
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.pricing import PricingProvider

REGION = "us-west-2"
T0 = 1_760_000_000.0
UTC = datetime.UTC
M5_STATIC = catalog_aws.on_demand_table(REGION)["m5.large"]  # Karpenter's us-east-1 fallback figure


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def _filters(tenancy: str, family: str) -> list[dict[str, str]]:
    terms = [
        ("regionCode", REGION),
        ("serviceCode", "AmazonEC2"),
        ("preInstalledSw", "NA"),
        ("operatingSystem", "Linux"),
        ("capacitystatus", "Used"),
        ("marketoption", "OnDemand"),
        ("tenancy", tenancy),
        ("productFamily", family),
    ]
    return [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in terms]


SHARED = _filters("Shared", "Compute Instance")
METAL = _filters("Dedicated", "Compute Instance (bare metal)")


def _product(
    instance_type: str, usd: str, *, family: str = "Compute Instance", tenancy: str = "Shared"
) -> str:
    """One GetProducts PriceList entry, shaped like AWS's (trimmed to the usual keys)."""
    sku = f"SKU{abs(hash(instance_type)) % 10**8:08d}"
    doc = {
        "product": {
            "productFamily": family,
            "attributes": {
                "instanceType": instance_type,
                "regionCode": REGION,
                "location": "US West (Oregon)",
                "tenancy": tenancy,
                "operatingSystem": "Linux",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
                "marketoption": "OnDemand",
                "servicecode": "AmazonEC2",
                "usagetype": f"USW2-BoxUsage:{instance_type}",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                            "appliesTo": [],
                            "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-11-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z",
    }
    return json.dumps(doc)


def _products(stub: Stubber, filters: list[dict[str, str]], pages: list[list[str]]) -> None:
    for i, entries in enumerate(pages):
        response: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": entries}
        params: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": filters, "MaxResults": 100}
        if i + 1 < len(pages):
            response["NextToken"] = f"page-{i + 1}"
        if i:
            params["NextToken"] = f"page-{i}"
        stub.add_response("get_products", response, params)


def _provider(
    clients: sdk.Clients | None, clock: FakeClock, **kwargs: Any
) -> tuple[PricingProvider, AWSMetrics]:
    metrics = AWSMetrics()
    kwargs.setdefault("region", REGION)
    provider = PricingProvider(clients, clock=clock, metrics=metrics, shipped=catalog_aws, **kwargs)
    return provider, metrics


def _metric(metrics: AWSMetrics, name: str, kind: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"kind": kind})


def test_starts_from_the_shipped_table_and_spot_is_on_demand_until_refreshed(aws: sdk.Clients) -> None:
    provider, _ = _provider(aws, FakeClock())
    assert provider.on_demand("m5.large") == M5_STATIC
    assert provider.spot("m5.large", "us-west-2a") == M5_STATIC
    assert provider.on_demand("no-such.type") is None and provider.spot("no-such.type", "us-west-2a") is None
    frankfurt, _ = _provider(None, FakeClock(), region="eu-central-1")  # no table of its own
    assert frankfurt.on_demand("m5.large") == catalog_aws.on_demand_table("us-east-1")["m5.large"]


def test_on_demand_refresh_merges_both_queries_over_the_table(aws: sdk.Clients) -> None:
    """Stubbed GetProducts (moto lacks it): shared tenancy over two pages, then bare metal."""
    clock = FakeClock()
    provider, metrics = _provider(aws, clock)
    before = provider.version
    with Stubber(aws.pricing) as stub:
        _products(
            stub,
            SHARED,
            [
                [_product("m5.large", "0.1070000000"), _product("c5.large", "0.0850000000")],
                [_product("r5.large", "0.1330000000"), _product("m5.xlarge", "0.0000000000")],
            ],
        )
        _products(
            stub,
            METAL,
            [
                [
                    _product(
                        "m5.metal",
                        "5.1200000000",
                        family="Compute Instance (bare metal)",
                        tenancy="Dedicated",
                    )
                ]
            ],
        )
        assert provider.refresh_on_demand() is True
        stub.assert_no_pending_responses()
    assert provider.on_demand("m5.large") == 0.107
    assert provider.on_demand("c5.large") == 0.085 and provider.on_demand("r5.large") == 0.133
    assert provider.on_demand("m5.metal") == 5.12
    # a zero price is skipped: the static figure stays; types the API did not list stay too
    assert provider.on_demand("m5.xlarge") == catalog_aws.on_demand_table(REGION)["m5.xlarge"]
    assert provider.on_demand("t3.micro") == catalog_aws.on_demand_table(REGION)["t3.micro"]
    assert provider.version > before
    assert provider.spot("m5.large", "us-west-2a") == 0.107  # spot follows on-demand until refreshed
    assert _metric(metrics, "karpy_aws_refresh_last_success_timestamp_seconds", "on_demand") == T0


def test_an_empty_query_is_an_error_and_keeps_the_old_prices(
    aws: sdk.Clients, caplog: pytest.LogCaptureFixture
) -> None:
    """Stubbed GetProducts (moto lacks it): the bare-metal query returns nothing."""
    provider, metrics = _provider(aws, FakeClock())
    version = provider.version
    with Stubber(aws.pricing) as stub, caplog.at_level(logging.WARNING):
        _products(stub, SHARED, [[_product("m5.large", "0.5")]])
        _products(stub, METAL, [[]])
        assert provider.refresh_on_demand() is False
    assert provider.on_demand("m5.large") == M5_STATIC and provider.version == version
    assert _metric(metrics, "karpy_aws_refresh_failures_total", "on_demand") == 1.0
    assert [r.levelname for r in caplog.records] == ["WARNING"]


def test_an_api_error_keeps_the_old_prices_and_reconcile_retries_in_five_minutes(
    aws: sdk.Clients, caplog: pytest.LogCaptureFixture
) -> None:
    """Stubbed GetProducts error (moto lacks the call). Spot (moto) succeeds meanwhile."""
    clock = FakeClock()
    provider, metrics = _provider(aws, clock)
    with Stubber(aws.pricing) as stub, caplog.at_level(logging.WARNING, logger="karpy.aws.pricing"):
        stub.add_client_error("get_products", "ThrottlingException", "Rate exceeded\n<html>body</html>", 400)
        result = provider.reconcile()
    assert result.requeue_after == pricing_mod.RETRY_SECONDS
    assert provider.on_demand("m5.large") == M5_STATIC
    assert _metric(metrics, "karpy_aws_refresh_failures_total", "on_demand") == 1.0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "ThrottlingException" in warnings[0] and "\n" not in warnings[0]
    assert provider.spot_refreshed  # the spot refresh went to moto and succeeded
    # not due yet: no call (an unstubbed call would raise)
    clock.t += 299
    with Stubber(aws.pricing):
        assert provider.reconcile().requeue_after == pytest.approx(1.0)
    clock.t += 1
    with Stubber(aws.pricing) as stub:
        _products(stub, SHARED, [[_product("m5.large", "0.2")]])
        _products(stub, METAL, [[_product("m5.metal", "5.0")]])
        result = provider.reconcile()
        stub.assert_no_pending_responses()
    assert provider.on_demand("m5.large") == 0.2
    # on-demand due in 12 h now, spot (refreshed at T0) 12 h after T0
    assert result.requeue_after == pytest.approx(pricing_mod.REFRESH_SECONDS - 300)


def test_isolated_vpc_never_calls_the_pricing_api(aws: sdk.Clients, caplog: pytest.LogCaptureFixture) -> None:
    provider, metrics = _provider(aws, FakeClock(), isolated_vpc=True)
    with (
        Stubber(aws.pricing),
        caplog.at_level(logging.INFO, logger="karpy.aws.pricing"),
    ):  # any call would fail
        assert provider.refresh_on_demand() is False
        assert provider.refresh_on_demand() is False
    assert len([r for r in caplog.records if "isolated VPC" in r.getMessage()]) == 1
    assert _metric(metrics, "karpy_aws_refresh_failures_total", "on_demand") is None
    assert provider.on_demand("m5.large") == M5_STATIC


def _spot_row(
    instance_type: str, zone: str, price: str, minute: int, product: str = "Linux/UNIX"
) -> dict[str, Any]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": instance_type,
        "ProductDescription": product,
        "SpotPrice": price,
        "Timestamp": datetime.datetime(2026, 11, 1, 12, minute, tzinfo=UTC),
    }


def _spot_params(clock: FakeClock) -> dict[str, Any]:
    return {
        "ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
        "StartTime": datetime.datetime.fromtimestamp(clock.now(), UTC),
    }


def test_spot_refresh_takes_the_latest_price_per_type_and_zone(aws: sdk.Clients) -> None:
    """Stubbed DescribeSpotPriceHistory on ec2 (moto's prices are a constant 0.00001)."""
    clock = FakeClock()
    provider, metrics = _provider(aws, clock)
    rows = [
        _spot_row("m5.large", "us-west-2a", "0.0400", 10),
        _spot_row("m5.large", "us-west-2a", "0.0350", 30, "Linux/UNIX (Amazon VPC)"),  # latest
        _spot_row("m5.large", "us-west-2a", "0.0500", 20),
        _spot_row("m5.large", "us-west-2b", "0.0420", 5),
        _spot_row("c5.large", "us-west-2a", "not-a-number", 40),
        _spot_row("c5.large", "us-west-2b", "0.0310", 40),
    ]
    with Stubber(aws.ec2) as stub:
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": rows[:3], "NextToken": "n"},
            _spot_params(clock),
        )
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": rows[3:]},
            {**_spot_params(clock), "NextToken": "n"},
        )
        assert provider.refresh_spot() is True
        stub.assert_no_pending_responses()
    assert provider.spot("m5.large", "us-west-2a") == 0.035
    assert provider.spot("m5.large", "us-west-2b") == 0.042
    assert provider.spot("c5.large", "us-west-2b") == 0.031
    # after the first refresh, no spot price means none (the offering becomes unavailable)
    assert provider.spot("c5.large", "us-west-2a") is None
    assert provider.spot("m5.large", "us-west-2c") is None
    assert provider.spot("r5.large", "us-west-2a") is None
    assert provider.on_demand("r5.large") is not None
    assert _metric(metrics, "karpy_aws_refresh_last_success_timestamp_seconds", "spot") == T0
    # a later refresh merges over the previous prices
    clock.t += 3600
    version = provider.version
    with Stubber(aws.ec2) as stub:
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": [_spot_row("m5.large", "us-west-2a", "0.0600", 50)]},
            _spot_params(clock),
        )
        assert provider.refresh_spot() is True
    assert provider.spot("m5.large", "us-west-2a") == 0.06
    assert provider.spot("m5.large", "us-west-2b") == 0.042 and provider.version > version


def test_spot_failure_and_empty_history_keep_the_last_good_prices(aws: sdk.Clients) -> None:
    """Stubbed DescribeSpotPriceHistory on ec2: an error, then an empty history."""
    clock = FakeClock()
    provider, metrics = _provider(aws, clock)
    with Stubber(aws.ec2) as stub:
        stub.add_client_error("describe_spot_price_history", "RequestLimitExceeded", "slow down", 503)
        stub.add_response("describe_spot_price_history", {"SpotPriceHistory": []}, _spot_params(clock))
        assert provider.refresh_spot() is False
        assert provider.refresh_spot() is False
    assert not provider.spot_refreshed
    assert provider.spot("m5.large", "us-west-2a") == M5_STATIC  # still the on-demand fallback
    assert _metric(metrics, "karpy_aws_refresh_failures_total", "spot") == 2.0
    assert _metric(metrics, "karpy_aws_refresh_last_success_timestamp_seconds", "spot") is None


def test_spot_refresh_against_moto(aws: sdk.Clients) -> None:
    """The real moto server: the call shape is accepted and moto's constant 0.00001 comes back."""
    provider, metrics = _provider(aws, FakeClock())
    assert provider.refresh_spot() is True
    assert provider.spot("m5.large", "us-west-2a") == pytest.approx(0.00001)
    assert provider.spot("m5.large", "us-west-2-no-such-zone") is None
    assert _metric(metrics, "karpy_aws_refresh_last_success_timestamp_seconds", "spot") == T0


def test_without_clients_prices_stay_static() -> None:
    provider, _ = _provider(None, FakeClock())
    assert provider.reconcile().requeue_after is None
    assert provider.refresh_on_demand() is False and provider.refresh_spot() is False
    assert provider.on_demand("m5.large") == M5_STATIC


def test_govcloud_skips_the_pricing_api(aws: sdk.Clients) -> None:
    provider, metrics = _provider(aws, FakeClock(), region="us-gov-west-1")
    with Stubber(aws.pricing):
        assert provider.refresh_on_demand() is False
    assert _metric(metrics, "karpy_aws_refresh_failures_total", "on_demand") is None
