"""Which subnet of a zone a launch uses: the most free addresses, as upstream predicts them.

:class:`ZonalSubnets` keeps EC2's free-address count of the NodeClasses' subnets (DescribeSubnets,
refreshed every :data:`SUBNET_TTL` seconds) and what launches since then were charged: each launch
charges every zonal subnet of its request the fewest pods of its candidate types until CreateFleet
says which subnet was used (the others get the addresses back). As upstream's prediction, it only
orders the subnets; a subnet is left out only when EC2 counts no free address in it or reported it
full to a launch (InsufficientFreeAddressesInSubnet) in the last :data:`FULL_TTL` seconds.
Used by :class:`karpy.providers.aws.provider.AWSCloudProvider`.
"""

from __future__ import annotations

import logging
from typing import Any

from karpy.model.nodeclass import EC2NodeClass
from karpy.ports import Clock
from karpy.providers.aws import errors

__all__ = ["FULL_TTL", "SUBNET_TTL", "ZonalSubnets"]

SUBNET_TTL = 60.0
FULL_TTL = 180.0

log = logging.getLogger("karpy.aws.subnets")


class ZonalSubnets:
    def __init__(self, ec2: Any, *, clock: Clock) -> None:
        self._ec2 = ec2
        self._clock = clock
        self._free: dict[str, int] = {}  # EC2's free-address count at the last DescribeSubnets
        self._charged: dict[str, int] = {}  # addresses predicted for launches since then
        self._full_until: dict[str, float] = {}  # subnets EC2 reported full, until
        self._at = -SUBNET_TTL

    def _refresh(self, ids: list[str]) -> None:
        try:
            found = errors.pages(self._ec2, "describe_subnets", "Subnets", SubnetIds=ids)
        except errors.AWSError as exc:
            log.warning("DescribeSubnets failed (%s); using the last known free addresses", exc)
            for subnet_id in ids:
                self._free.setdefault(subnet_id, 1)
            return
        for subnet in found:
            self._free[str(subnet["SubnetId"])] = int(subnet.get("AvailableIpAddressCount") or 0)
        self._at = self._clock.now()
        self._charged = {}

    def choose(self, nc: EC2NodeClass) -> dict[str, str]:
        """zone -> the NodeClass subnet there with the most predicted free addresses (ties: the lower id)."""
        now = self._clock.now()
        ids = sorted({s.id for s in nc.status.subnets})
        if now - self._at >= SUBNET_TTL or any(i not in self._free for i in ids):
            self._refresh(ids)
        best: dict[str, tuple[int, str]] = {}
        for subnet in nc.status.subnets:
            free = self._free.get(subnet.id, 0)
            if free <= 0 or self._full_until.get(subnet.id, 0.0) > now:
                continue
            predicted = free - self._charged.get(subnet.id, 0)
            known = best.get(subnet.zone)
            if known is None or (-predicted, subnet.id) < (-known[0], known[1]):
                best[subnet.zone] = (predicted, subnet.id)
        return {zone: subnet_id for zone, (_, subnet_id) in best.items()}

    def charge(self, subnet_id: str, addresses: int) -> None:
        """Charge (or, negative, give back) ``addresses`` to launches in flight in ``subnet_id``."""
        self._charged[subnet_id] = self._charged.get(subnet_id, 0) + addresses

    def full(self, subnet_id: str) -> None:
        """EC2 answered InsufficientFreeAddressesInSubnet: the subnet is skipped for :data:`FULL_TTL` s."""
        self._full_until[subnet_id] = self._clock.now() + FULL_TTL
        log.info("subnet %s has no free addresses: not used for %.0f s", subnet_id, FULL_TTL)
