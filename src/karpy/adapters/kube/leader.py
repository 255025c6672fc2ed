"""Leader election on a ``coordination.k8s.io/v1`` Lease, renewed from the edge thread.

client-go's algorithm, simplified: every ``retry_period`` the elector reads the Lease
(:meth:`LeaderElector.observe`) and then (:meth:`LeaderElector.act`) renews it when it holds
it, takes it over when the holder let it expire (``renewTime + leaseDurationSeconds`` in the
past, or no holder), or stays a follower. Every write carries the observed resourceVersion, so of
two replicas racing for the same Lease the API server lets exactly one win (409 for the other).
``is_leader()`` is true only while the last successful renewal is younger than
``renew_deadline`` (shorter than the lease duration), and turns false at once on a 409 or when
another holder is seen, so a replica that loses the Lease stops writing before anyone else can
take over. Renewal runs on the edge loop, so a long solve on the operator's thread cannot lose
the Lease. Used by :mod:`karpy.operator` as the kube client's ``write_guard``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from karpy.adapters.kube import client as client_mod
from karpy.model import errors

__all__ = ["LeaderElector", "micro_time", "parse_time"]

log = logging.getLogger("karpy.kube.leader")


def micro_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class LeaderElector:
    def __init__(
        self,
        kube: client_mod.KubeClient,
        *,
        identity: str,
        namespace: str = "karpy-system",
        name: str = "karpy-leader-election",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.kube = kube
        self.identity = identity
        self.namespace = namespace
        self.name = name
        self.lease_duration = lease_duration
        self.renew_deadline = min(renew_deadline, lease_duration)
        self.retry_period = retry_period
        self.on_change = on_change
        self._valid_until = 0.0  # monotonic deadline of the current leadership
        self._leading = False
        self.observed: dict[str, Any] | None = None  # the Lease as last read (None = absent)
        self.transitions = 0
        self._path = client_mod.RESOURCES["Lease"].path(namespace, name)
        self._list_path = client_mod.RESOURCES["Lease"].path(namespace)

    # -- state ---------------------------------------------------------------------------------
    def is_leader(self) -> bool:
        return self._leading and time.monotonic() < self._valid_until

    def _set(self, leading: bool) -> None:
        if leading:
            self._valid_until = time.monotonic() + self.renew_deadline
        was = self._leading
        self._leading = leading
        if not leading:
            self._valid_until = 0.0
        if was != leading:
            log.info(
                "%s %s leadership of Lease %s/%s",
                self.identity,
                "acquired" if leading else "lost",
                self.namespace,
                self.name,
            )
            if self.on_change is not None:
                self.on_change(leading)

    # -- one round -----------------------------------------------------------------------------
    async def observe(self) -> None:
        try:
            self.observed = await self.kube.request("GET", self._path)
        except errors.NotFound:
            self.observed = None

    def _spec(self, *, acquire: bool, now: float) -> dict[str, Any]:
        old = (self.observed or {}).get("spec") or {}
        transitions = int(old.get("leaseTransitions") or 0)
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": micro_time(now) if acquire else old.get("acquireTime") or micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions + (1 if acquire and old.get("holderIdentity") else 0),
        }
        return spec

    def _expired(self, spec: dict[str, Any], now: float) -> bool:
        if not spec.get("holderIdentity"):
            return True
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return parse_time(spec.get("renewTime")) + duration < now

    async def act(self) -> bool:
        """Create, renew or take over the Lease as the observation allows; True when leading."""
        now = time.time()
        try:
            if self.observed is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(acquire=True, now=now),
                }
                self.observed = await self.kube.request("POST", self._list_path, body=body)
                self._set(True)
                return True
            spec = self.observed.get("spec") or {}
            mine = spec.get("holderIdentity") == self.identity
            if not mine and not self._expired(spec, now):
                self._set(False)
                return False
            body = dict(self.observed)
            body["spec"] = self._spec(acquire=not mine, now=now)
            self.observed = await self.kube.request("PUT", self._path, body=body)
            self._set(True)
            return True
        except (errors.Conflict, errors.AlreadyExists):
            self.on_conflict()
            return self.is_leader()
        except errors.KubeError as exc:
            log.warning("%s: Lease %s/%s: %s", self.identity, self.namespace, self.name, exc)
            if self._leading and time.monotonic() >= self._valid_until:
                self._set(False)
            return self.is_leader()

    def on_conflict(self) -> None:
        """Someone else wrote the Lease since we read it: we are not (or no longer) the leader."""
        self._set(False)

    async def run(self) -> None:
        while True:
            await self.observe_safely()
            await self.act()
            await asyncio.sleep(self.retry_period)

    async def observe_safely(self) -> None:
        try:
            await self.observe()
        except errors.KubeError as exc:
            log.warning("%s: reading Lease %s/%s: %s", self.identity, self.namespace, self.name, exc)
            if self._leading and time.monotonic() >= self._valid_until:
                self._set(False)

    async def release(self) -> None:
        """Give the Lease up (shutdown) so another replica takes over without waiting."""
        if not self._leading or self.observed is None:
            return
        self._set(False)
        body = dict(self.observed)
        spec = dict(body.get("spec") or {})
        spec.update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": micro_time(time.time())})
        body["spec"] = spec
        try:
            self.observed = await self.kube.request("PUT", self._path, body=body)
        except errors.KubeError as exc:
            log.info("%s: releasing Lease: %s", self.identity, exc)

    def start(self) -> None:
        """Run the election on the kube client's edge loop."""

        async def spawn() -> None:
            asyncio.get_running_loop().create_task(self.run(), name="leader-election")

        self.kube.edge.call(spawn(), 5.0)
