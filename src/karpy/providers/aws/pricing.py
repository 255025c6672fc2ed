"""On-demand and spot prices of EC2 instance types, as Karpenter's pricing provider keeps them.

:class:`PricingProvider` starts from the static on-demand table shipped for the region
(``karpy.catalog.aws.on_demand_table``, which the operator passes in as ``shipped``: the region's
own table, else Karpenter's us-east-1 fallback) and refreshes it every 12 h from the Pricing API
(``GetProducts``, Linux, shared tenancy "Compute Instance" plus dedicated "Compute Instance (bare
metal)", merged over what it had; ``docs/upstream-aws.md`` §5). Spot prices come from
``DescribeSpotPriceHistory`` (``StartTime`` = now by the injected clock), the latest per
(instance type, zone), also every 12 h. Until the first successful spot refresh a spot price is
the on-demand price; after it a (type, zone) without a spot price has none, so its offering is
unavailable. A failed refresh logs one warning, counts ``karpy_aws_refresh_failures{kind}``, keeps
the last good prices and is retried 5 minutes later; ``ISOLATED_VPC`` and GovCloud regions never
call the Pricing API (it is unreachable there), as upstream.

Built by the operator (``--provider aws``); read by the instance-type provider
(:mod:`karpy.providers.aws.instancetypes`) for offering prices; :meth:`PricingProvider.reconcile`
runs on the controller loop.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from karpy.controllers.result import Result
from karpy.ports import Clock
from karpy.providers.aws import errors, sdk
from karpy.providers.aws.metrics import AWSMetrics

__all__ = ["REFRESH_SECONDS", "RETRY_SECONDS", "SPOT_PRODUCTS", "PricingProvider", "ShippedPrices", "brief"]

REFRESH_SECONDS = 12 * 3600.0  # upstream's pricing controller period
RETRY_SECONDS = 300.0  # after a failed refresh
SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
_ON_DEMAND = "on_demand"
_SPOT = "spot"
# (tenancy, productFamily) of the two GetProducts queries: shared instances, then bare metal
_PRODUCT_QUERIES = (("Shared", "Compute Instance"), ("Dedicated", "Compute Instance (bare metal)"))


def brief(exc: Exception, limit: int = 300) -> str:
    """``exc`` on one short line (an error body may be a whole HTML page): for warning logs."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ShippedPrices(Protocol):
    """What the provider uses of :mod:`karpy.catalog.aws`; the operator passes that module (the
    provider layer may not import the catalog layer)."""

    def on_demand_table(self, region: str) -> Mapping[str, float]: ...


def _term(field: str, value: str) -> dict[str, str]:
    return {"Type": "TERM_MATCH", "Field": field, "Value": value}


def _page_prices(price_list: list[Any], currency: str, log: logging.Logger) -> dict[str, float]:
    """instance type -> price of a GetProducts ``PriceList`` (JSON strings), as upstream's
    ``onDemandPage``: records without an instance type, unparsable or zero prices are skipped."""
    out: dict[str, float] = {}
    for raw in price_list:
        try:
            item = json.loads(raw) if isinstance(raw, str | bytes) else raw
            name = item["product"]["attributes"].get("instanceType", "")
            terms = item.get("terms", {}).get("OnDemand", {})
        except (ValueError, TypeError, KeyError, AttributeError):
            log.debug("skipping an unreadable price list entry")
            continue
        if not name:
            continue
        for term in terms.values():
            for dimension in term.get("priceDimensions", {}).values():
                try:
                    price = float(dimension.get("pricePerUnit", {})[currency])
                except (KeyError, TypeError, ValueError):
                    continue
                if price:
                    out[name] = price
    return out


def _latest_spot(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """instance type -> zone -> the price of the latest row (by ``Timestamp``; a later row wins ties)."""
    latest: dict[tuple[str, str], tuple[datetime.datetime, float]] = {}
    for row in rows:
        name, zone, stamp = row.get("InstanceType"), row.get("AvailabilityZone"), row.get("Timestamp")
        if not name or not zone or stamp is None:
            continue
        try:
            price = float(row["SpotPrice"])
        except (KeyError, TypeError, ValueError):
            continue
        key = (name, zone)
        seen = latest.get(key)
        if seen is None or stamp >= seen[0]:
            latest[key] = (stamp, price)
    out: dict[str, dict[str, float]] = {}
    for (name, zone), (_, price) in latest.items():
        out.setdefault(name, {})[zone] = price
    return out


class PricingProvider:
    """The prices offerings carry: static on-demand table first, refreshed from AWS every 12 h."""

    name = "aws.pricing"

    def __init__(
        self,
        clients: sdk.Clients | None,
        *,
        region: str,
        clock: Clock,
        metrics: AWSMetrics,
        shipped: ShippedPrices,
        isolated_vpc: bool = False,
        log: logging.Logger | None = None,
    ) -> None:
        """``shipped`` is :mod:`karpy.catalog.aws`: prices start from its ``on_demand_table(region)``
        (the region's static table, else Karpenter's us-east-1 one). ``clients=None``: static only."""
        self._clients = clients
        self.region = region
        self._clock = clock
        self._metrics = metrics
        self._log = log if log is not None else logging.getLogger("karpy.aws.pricing")
        self._on_demand: dict[str, float] = dict(shipped.on_demand_table(region))
        self._spot: dict[str, dict[str, float]] = {}
        self._spot_refreshed = False
        self._version = 0
        self._currency = "CNY" if region.startswith("cn-") else "USD"
        self._skip_reason = ""
        if isolated_vpc:
            self._skip_reason = "running in an isolated VPC"
        elif region.startswith("us-gov"):
            self._skip_reason = "the Pricing API is not available in AWS GovCloud regions"
        self._skip_logged = False
        now = clock.now()
        self._due = {_ON_DEMAND: now, _SPOT: now}

    # -- reads ---------------------------------------------------------------------------------
    def on_demand(self, instance_type: str) -> float | None:
        """The on-demand USD/h of ``instance_type``; None when no price is known."""
        return self._on_demand.get(instance_type)

    def spot(self, instance_type: str, zone: str) -> float | None:
        """The spot USD/h in ``zone``: the on-demand price until the first successful spot
        refresh; after it, None (unavailable) unless DescribeSpotPriceHistory gave one."""
        if not self._spot_refreshed:
            return self._on_demand.get(instance_type)
        return self._spot.get(instance_type, {}).get(zone)

    @property
    def version(self) -> int:
        """Moves whenever any price (or the spot fallback rule) changes."""
        return self._version

    @property
    def spot_refreshed(self) -> bool:
        """Whether a spot refresh has succeeded (spot prices are then EC2's, not on-demand's)."""
        return self._spot_refreshed

    # -- refreshes -----------------------------------------------------------------------------
    def refresh_on_demand(self) -> bool:
        """Refresh on-demand prices from Pricing ``GetProducts``; True when they were refreshed.

        Either query coming back empty is an error; on any error the previous prices stay. Skipped
        (False, no failure counted) in an isolated VPC, in GovCloud and without clients.
        """
        if self._clients is None or self._skip_reason:
            if not self._skip_logged:
                why = self._skip_reason or "no AWS clients"
                self._log.info("%s: on-demand prices stay the shipped table for %s", why, self.region)
                self._skip_logged = True
            return False
        found: dict[str, float] = {}
        try:
            for tenancy, family in _PRODUCT_QUERIES:
                filters = [
                    _term("regionCode", self.region),
                    _term("serviceCode", "AmazonEC2"),
                    _term("preInstalledSw", "NA"),
                    _term("operatingSystem", "Linux"),
                    _term("capacitystatus", "Used"),
                    _term("marketoption", "OnDemand"),
                    _term("tenancy", tenancy),
                    _term("productFamily", family),
                ]
                items = errors.pages(
                    self._clients.pricing,
                    "get_products",
                    "PriceList",
                    ServiceCode="AmazonEC2",
                    Filters=filters,
                    MaxResults=100,
                )
                prices = _page_prices(items, self._currency, self._log)
                if not prices:
                    raise errors.AWSError("GetProducts", "NoPrices", f"no on-demand prices for {family!r}")
                found.update(prices)
        except errors.AWSError as exc:
            return self._failed(_ON_DEMAND, exc)
        merged = {**self._on_demand, **found}
        if merged != self._on_demand:
            self._on_demand = merged
            self._version += 1
            self._log.info("updated on-demand prices: %d instance types", len(merged))
        self._succeeded(_ON_DEMAND)
        return True

    def refresh_spot(self) -> bool:
        """Refresh spot prices from ``DescribeSpotPriceHistory`` (latest per type and zone, merged
        over the previous ones); True on success. No rows at all is an error."""
        if self._clients is None:
            return False
        start = datetime.datetime.fromtimestamp(self._clock.now(), datetime.UTC)
        try:
            rows = errors.pages(
                self._clients.ec2,
                "describe_spot_price_history",
                "SpotPriceHistory",
                ProductDescriptions=list(SPOT_PRODUCTS),
                StartTime=start,
            )
            latest = _latest_spot(rows)
            if not latest:
                raise errors.AWSError("DescribeSpotPriceHistory", "NoPrices", "no spot prices found")
        except errors.AWSError as exc:
            return self._failed(_SPOT, exc)
        changed = not self._spot_refreshed
        for name, zones in latest.items():
            current = self._spot.setdefault(name, {})
            if any(current.get(zone) != price for zone, price in zones.items()):
                current.update(zones)
                changed = True
        self._spot_refreshed = True
        if changed:
            self._version += 1
            offerings = sum(len(z) for z in self._spot.values())
            self._log.info("updated spot prices: %d instance types, %d offerings", len(self._spot), offerings)
        self._succeeded(_SPOT)
        return True

    def _failed(self, kind: str, exc: errors.AWSError) -> bool:
        self._log.warning(
            "%s price refresh failed, keeping the last good prices (retry in %.0f s): %s",
            kind.replace("_", "-"),
            RETRY_SECONDS,
            brief(exc),
        )
        self._metrics.refresh_failures.labels(kind=kind).inc()
        return False

    def _succeeded(self, kind: str) -> None:
        self._metrics.refresh_last_success.labels(kind=kind).set(self._clock.now())

    # -- controller ----------------------------------------------------------------------------
    def reconcile(self) -> Result:
        """Refresh whichever of on-demand and spot is due (every 12 h; 5 min after a failure) and
        requeue for the next due time. Never raises for AWS errors."""
        if self._clients is None:
            return Result()
        now = self._clock.now()
        if now >= self._due[_ON_DEMAND]:
            ok = self.refresh_on_demand()
            retry = not ok and not self._skip_reason
            self._due[_ON_DEMAND] = now + (RETRY_SECONDS if retry else REFRESH_SECONDS)
        if now >= self._due[_SPOT]:
            ok = self.refresh_spot()
            self._due[_SPOT] = now + (REFRESH_SECONDS if ok else RETRY_SECONDS)
        return Result(requeue_after=max(min(self._due.values()) - now, 1.0))
