"""Which caches gate the operator's controllers, and what ``/readyz``, the gauge and the log say.

:class:`CacheGate` follows every watched kind's :class:`~karpy.adapters.kube.watch.Watcher`:
the loop runs once the kinds :func:`required_kinds` names for the provider are listed
(:meth:`CacheGate.gate_open`; it stays open while a watch fails later); ``/readyz``
(:meth:`CacheGate.readiness`) is ready only while every required kind is listed *and* watching
(its list/watch works now); the others (:func:`optional_kinds`) degrade decisions while missing
but stall nothing and never make ``/readyz`` fail. Used by :class:`karpy.operator.runner.Operator`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from karpy.adapters.kube import watch as kube_watch
from karpy.metrics import Metrics
from karpy.model import errors
from karpy.state.feed import KINDS

__all__ = [
    "NODE_CLASS_KINDS",
    "REQUIRED_KINDS",
    "WAIT_REPORT_AFTER",
    "WAIT_REPORT_EVERY",
    "CacheGate",
    "optional_kinds",
    "required_kinds",
]

log = logging.getLogger("karpy.operator")


# -- which caches gate the controllers -------------------------------------------------------
# Upstream, each controller waits for the informers it watches and state.Cluster.Synced() checks
# Nodes and NodeClaims. karpy's controllers share one loop and one snapshot, so one gate: the
# loop runs once every REQUIRED kind has been listed. Provisioning packs pods onto Nodes and
# in-flight NodeClaims of the NodePools (with DaemonSet overhead), disruption and termination
# respect PodDisruptionBudgets, and the provider launches from its NodeClass: without any of
# these a decision would be wrong, not merely less informed. The other watched kinds are optional.
REQUIRED_KINDS = frozenset({"Pod", "Node", "NodeClaim", "NodePool", "DaemonSet", "PodDisruptionBudget"})
NODE_CLASS_KINDS: dict[str, str] = {"kwok": "KWOKNodeClass", "aws": "EC2NodeClass"}
# What an optional kind's missing cache means for the decisions (logged while it is missing).
_OPTIONAL_EFFECTS = {
    "Namespace": "pod-affinity namespaceSelector terms see only the pods' namespaces, each labelled with its "
    "name alone (a selector on another namespace label matches none)",
    "Deployment": "the rollout guard sees no Deployment rollouts",
    "StatefulSet": "the rollout guard sees no StatefulSet rollouts",
    "PersistentVolumeClaim": "pods' volumes are not read (no volume topology, no attach limits)",
    "PersistentVolume": "bound claims add no zone (a pod may be planned where its volume is not)",
    "StorageClass": "unbound claims add no allowedTopologies and no CSI driver",
    "CSINode": "existing nodes' attach limits come from their instance type (the catalog), if known",
}
WAIT_REPORT_AFTER = 10.0  # seconds after start before the log names the missing caches
WAIT_REPORT_EVERY = 60.0  # then at most this often while a required cache is missing


def required_kinds(provider: str) -> frozenset[str]:
    """The kinds whose caches must be listed before the controllers run with ``provider``."""
    try:
        return REQUIRED_KINDS | {NODE_CLASS_KINDS[provider]}
    except KeyError:
        raise errors.InputError(f"--provider {provider!r}: karpy knows no NodeClass kind for it") from None


def optional_kinds(provider: str) -> frozenset[str]:
    """The watched kinds the controllers do not wait for (e.g. Namespace, another provider's NodeClass)."""
    return KINDS - required_kinds(provider)


class CacheGate:
    """The watched caches' state for the operator: gate, ``/readyz`` text, gauge and log lines.

    :meth:`update` is called by each :class:`~karpy.adapters.kube.watch.Watcher` on the edge
    thread; the other methods from the operator's and the health server's threads. The loop's
    gate (:meth:`gate_open`, :meth:`unsynced`) uses *synced* (listed at least once, as an
    informer's HasSynced: it stays true while a watch later fails, so a short outage does not
    stop the controllers); :meth:`readiness` (``/readyz``) and ``karpy_cache_synced{kind}`` use
    *healthy* (listed and its list/watch working now): a required kind failing now makes
    ``/readyz`` 503 naming it (``not watching (list/watch failing): Pod``) and its gauge 0,
    until a request works again. A required kind whose resource is not served (404) is named
    as such; an optional one never gates.
    """

    def __init__(
        self, provider: str, *, metrics: Metrics | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.required = required_kinds(provider)
        self.optional = optional_kinds(provider)
        self.metrics = metrics
        self.clock = clock
        self.started_at = clock()
        self._lock = threading.Lock()
        self._synced: set[str] = set()
        self._healthy: set[str] = set()
        self._absent: set[str] = set()
        self._waiting_reported: float | None = None
        self._optional_reported: tuple[str, ...] = ()
        for kind in sorted(self.required | self.optional):
            self._gauge(kind, False)

    def start(self) -> None:
        """The watches start now: the report's ``WAIT_REPORT_AFTER`` counts from here."""
        self.started_at = self.clock()

    def _gauge(self, kind: str, healthy: bool) -> None:
        if self.metrics is not None:
            self.metrics.cache_synced.labels(kind=kind).set(1 if healthy else 0)

    def update(self, watcher: kube_watch.Watcher) -> None:
        kind = watcher.kind
        with self._lock:
            if watcher.synced:
                self._synced.add(kind)
            if watcher.healthy:
                self._healthy.add(kind)
            else:
                self._healthy.discard(kind)
            newly_absent = watcher.absent and kind not in self._absent
            if watcher.absent:
                self._absent.add(kind)
            else:
                self._absent.discard(kind)
        self._gauge(kind, watcher.healthy)
        if newly_absent and kind in self.required:
            log.warning(
                "required cache %s: its resource %s is not served (HTTP 404); %s",
                kind,
                watcher.path,
                "the controllers keep the last listed state"
                if watcher.synced
                else "the controllers wait until it is (install the CRD)",
            )

    def unsynced(self) -> list[str]:
        """The required kinds not listed yet (the controllers wait for them)."""
        with self._lock:
            return sorted(self.required - self._synced)

    def gate_open(self) -> bool:
        """The controllers may run: every required kind has been listed (see :meth:`unsynced`)."""
        return not self.unsynced()

    def not_watching(self) -> list[str]:
        """The required kinds listed once whose list/watch fails now (``/readyz`` names them)."""
        with self._lock:
            return sorted((self.required & self._synced) - self._healthy)

    def unsynced_optional(self) -> list[str]:
        with self._lock:
            return sorted(self.optional - self._synced)

    def _missing(self, missing: list[str]) -> str:
        """``Node,Pod`` (+ ``; not served (HTTP 404): ...`` for those whose list answers 404)."""
        with self._lock:
            absent = sorted(self._absent & set(missing))
        return ",".join(missing) + ("; not served (HTTP 404): " + ",".join(absent) if absent else "")

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: (ready, body) naming what is missing (required kinds not listed yet, or
        not watching now; optional kinds not listed)."""
        missing, failing, optional = self.unsynced(), self.not_watching(), self.unsynced_optional()
        if missing or failing:
            parts = [f"waiting for caches: {','.join(missing)}"] if missing else []
            if failing:
                parts.append(f"not watching (list/watch failing): {','.join(failing)}")
            with self._lock:
                absent = sorted(self._absent & {*missing, *failing})
            if absent:
                parts.append("not served (HTTP 404): " + ",".join(absent))
            return False, "; ".join(parts)
        if optional:
            return True, "ok; not synced (optional): " + ",".join(optional)
        return True, "ok"

    def report(self) -> None:
        """Log the missing caches: first after WAIT_REPORT_AFTER s, then (required ones) at most
        every WAIT_REPORT_EVERY s and (optional ones) when their set changes. Called every loop turn."""
        now = self.clock()
        waited = now - self.started_at
        if waited < WAIT_REPORT_AFTER:
            return
        missing = self.unsynced()
        if missing and (self._waiting_reported is None or now - self._waiting_reported >= WAIT_REPORT_EVERY):
            log.warning(
                "controllers waiting for caches: %s (%.0f s since start)", self._missing(missing), waited
            )
            self._waiting_reported = now
        elif not missing and self._waiting_reported is not None:
            log.info("required caches synced after %.0f s; controllers running", waited)
            self._waiting_reported = None
        optional = tuple(self.unsynced_optional())
        if optional != self._optional_reported:
            if optional:
                effects = "; ".join(
                    f"{kind}: {_OPTIONAL_EFFECTS.get(kind, f'the state holds no {kind} objects')}"
                    for kind in optional
                )
                log.warning(
                    "not synced (optional; not waited for): %s; until they sync: %s",
                    ",".join(optional),
                    effects,
                )
            else:
                log.info("optional caches synced: %s", ",".join(self._optional_reported))
            self._optional_reported = optional
