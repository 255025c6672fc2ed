"""The operator: karpy's controllers against a real API server (layer L5, composition root).

:class:`Operator` wires the kube adapter (:mod:`karpy.adapters.kube`), the kwok provider, a
:class:`~karpy.runtime.realtime.RealtimeLoop` and :func:`karpy.runtime.wiring.build`:

1. connect, and refuse to start (:class:`Refused`) when another controller manages NodeClaims:
   a NodeClaim without ``karpy.sh/managed-by: karpy`` or a Deployment named ``karpenter``;
2. list+watch every kind the state needs; the controllers run once the kinds *required* for the
   provider are listed (:func:`required_kinds`; the others are optional: missing, they degrade
   the decisions but stall nothing); :class:`CacheGate` answers ``/readyz``, sets the
   ``karpy_cache_synced`` gauge and logs the caches still missing;
3. with ``leader_elect``, run a Lease election on the edge thread; only the leader runs the
   controllers and writes (the kube client refuses writes otherwise); followers keep warm caches;
4. serve ``/metrics`` (prometheus-client, karpy's registry) and ``/healthz`` ``/readyz``;
5. :meth:`Operator.run` drives the loop on the calling thread until :meth:`Operator.stop`
   (SIGTERM in the CLI); shutdown releases the Lease and stops within a few seconds.

The cache gate lives in :mod:`karpy.operator.caches`, the log format in :mod:`karpy.operator.logs`
and the AWS provider's wiring in :mod:`karpy.operator.aws`.

A bad object (an invalid NodePool) never stops the operator: it gets a ``ValidationSucceeded``
False condition and a Warning event, and is skipped. A controller that raises is logged and
retried with backoff. Called by :mod:`karpy.cli.operator_cmd` and the integration tests.
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import prometheus_client

from karpy import catalog as catalog_mod
from karpy import settings as settings_mod
from karpy.adapters.kube import client as kube_client
from karpy.adapters.kube import errors as kube_errors
from karpy.adapters.kube import events as kube_events
from karpy.adapters.kube import leader as kube_leader
from karpy.adapters.kube import watch as kube_watch
from karpy.controllers import claims
from karpy.controllers.context import Context
from karpy.controllers.result import PermanentError, TemporaryError
from karpy.metrics import Metrics
from karpy.model import errors
from karpy.operator import aws as operator_aws
from karpy.operator.caches import CacheGate
from karpy.ports import CloudProvider, Event, WatchEvent
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.stack import AWSStack
from karpy.providers.kwok import KwokCloudProvider
from karpy.runtime import wiring
from karpy.runtime.loop import LoopClock
from karpy.runtime.realtime import RealtimeLoop
from karpy.state.cluster import Cluster
from karpy.state.feed import KINDS, Feed

__all__ = ["MANAGED_BY_ANNOTATION", "MANAGED_BY_VALUE", "Operator", "OperatorConfig", "Refused", "preflight"]

PROVIDERS = ("kwok", "aws")
MANAGED_BY_ANNOTATION = claims.MANAGED_BY_ANNOTATION
MANAGED_BY_VALUE = claims.MANAGED_BY_VALUE
VALIDATION_CONDITION = "ValidationSucceeded"
_VALIDATED_KINDS = frozenset({"NodePool", "EC2NodeClass", "KWOKNodeClass"})

log = logging.getLogger("karpy.operator")


class Refused(errors.KarpyError):
    """The operator will not start here (another controller manages NodeClaims, CRDs missing)."""


@dataclass
class OperatorConfig:
    provider: str = "kwok"
    catalog: str = "aws:us-east-1"
    kubeconfig: str | None = None
    host: str | None = None  # an API server URL without credentials (tests)
    metrics_port: int | None = 8080  # None: no server; 0: any free port
    health_port: int | None = 8081
    bind_address: str = "0.0.0.0"
    leader_elect: bool = False
    identity: str = field(default_factory=lambda: os.environ.get("POD_NAME") or socket.gethostname())
    lease_namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE") or "karpy-system")
    lease_name: str = "karpy-leader-election"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    watch_read_timeout: float = 60.0
    registration_delay: float = 0.0
    disruption: bool = True
    settings: settings_mod.Settings = field(default_factory=settings_mod.Settings)
    aws: AWSSettings | None = None  # --provider aws
    aws_clients: Any = None  # tests: boto3 clients of their own (else boto3's standard chain)


def preflight(kube: kube_client.KubeClient) -> None:
    """Refuse to run beside another controller of ``karpenter.sh`` NodeClaims."""
    try:
        claims = kube.list("NodeClaim")
    except errors.NotFound:
        raise Refused(
            "the karpenter.sh/v1 NodeClaim CRD is not installed (kubectl apply -k deploy/)"
        ) from None
    foreign = sorted(
        c["metadata"]["name"]
        for c in claims
        if ((c.get("metadata") or {}).get("annotations") or {}).get(MANAGED_BY_ANNOTATION) != MANAGED_BY_VALUE
    )
    if foreign:
        shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise Refused(
            f"another controller manages NodeClaims ({len(foreign)} without "
            f"{MANAGED_BY_ANNOTATION}={MANAGED_BY_VALUE}: {shown}); karpy serves Karpenter's API group "
            "and must not run beside it"
        )
    try:
        deployments = kube.list("Deployment")
    except errors.NotFound:
        deployments = []
    karpenters = sorted(
        f"{d['metadata'].get('namespace', '')}/{d['metadata']['name']}"
        for d in deployments
        if d["metadata"].get("name") == "karpenter"
    )
    if karpenters:
        raise Refused(
            f"a Karpenter Deployment is installed ({', '.join(karpenters)}); karpy must not run beside it"
        )


class _HealthHandler(http.server.BaseHTTPRequestHandler):
    operator: Operator

    def do_GET(self) -> None:
        if self.path.startswith("/healthz"):
            ok, text = self.operator.healthy(), "ok"
        elif self.path.startswith("/readyz"):
            ok, text = self.operator.readiness()
        else:
            self.send_error(404)
            return
        body = (text if ok else text or "not ok").encode()
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Operator:
    def __init__(self, config: OperatorConfig, *, elector_factory: Callable[..., Any] | None = None) -> None:
        if config.provider not in PROVIDERS:
            raise errors.InputError(f"--provider {config.provider!r}: one of {', '.join(PROVIDERS)}")
        if config.provider == "aws" and (config.aws is None or not config.aws.cluster_name):
            raise errors.InputError("--provider aws needs --cluster-name (or CLUSTER_NAME)")
        self.config = config
        self.aws: AWSStack | None = None
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._heartbeat = time.monotonic()
        self._servers: list[http.server.HTTPServer] = []
        self._elector_factory = elector_factory or kube_leader.LeaderElector
        self.elector: kube_leader.LeaderElector | None = None
        self.metrics = Metrics()
        self.caches = CacheGate(config.provider, metrics=self.metrics)
        self.loop = RealtimeLoop(max_wait=1.0)
        self.kube = kube_client.KubeClient(
            kubeconfig=config.kubeconfig, host=config.host, on_event=self._wake, identity=config.identity
        )
        self.watchers: list[kube_watch.Watcher] = []
        self.problems: list[str] = []
        self.metrics_port: int | None = None
        self.health_port: int | None = None
        self.started = False

    # -- state queries -------------------------------------------------------------------------
    def _wake(self) -> None:
        self.loop.notify()
        self._idle.set()

    def is_leader(self) -> bool:
        return self.elector.is_leader() if self.elector is not None else True

    def unsynced(self) -> list[str]:
        """The required caches not synced yet (see :class:`CacheGate`)."""
        return self.caches.unsynced()

    def ready(self) -> bool:
        return self.started and not self.unsynced()

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: 200 once the required caches synced (the body names optional ones not synced)."""
        if not self.started:
            return False, "starting"
        return self.caches.readiness()

    def healthy(self) -> bool:
        return not self.started or time.monotonic() - self._heartbeat < 60.0

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.kube.start()
        try:
            preflight(self.kube)
        except BaseException:
            self.kube.close()
            raise
        clock = LoopClock(self.loop)
        try:
            provider = self._provider(clock)
        except BaseException:
            self.kube.close()
            raise
        self.provider = provider
        if cfg.leader_elect:
            self.elector = self._elector_factory(
                self.kube,
                identity=cfg.identity,
                namespace=cfg.lease_namespace,
                name=cfg.lease_name,
                lease_duration=cfg.lease_duration,
                renew_deadline=cfg.renew_deadline,
                retry_period=cfg.retry_period,
                on_change=lambda _leading: self._wake(),
            )
            self.kube.write_guard = self.is_leader
        self.events = kube_events.KubeEvents(self.kube, instance=cfg.identity, may_write=self.is_leader)
        self.feed = Feed(self.cluster, on_problem=self._on_problem)
        self.kube.watch(self.feed)
        self.ctx = Context(
            self.cluster, self.kube, provider, clock, self.events, cfg.settings, self.metrics, log
        )
        self.controllers = wiring.build(self.ctx, self.loop, self.feed, disruption_enabled=cfg.disruption)
        for task in self.loop.tasks.values():
            task.fn = self._guarded(task.name, task.fn)
        if self.aws is not None:
            operator_aws.register(
                self.aws,
                ctx=self.ctx,
                loop=self.loop,
                feed=self.feed,
                leading=self.is_leader,
                guard=self._guarded,
            )
        self._start_servers()
        self.caches.start()
        self.watchers = kube_watch.start_watches(
            self.kube, sorted(KINDS), on_change=self._on_cache_change, read_timeout=cfg.watch_read_timeout
        )
        if self.elector is not None:
            self.elector.start()
        if self.aws is not None:
            self.aws.start()
        self.started = True
        log.info(
            "karpy operator %s started (provider %s, catalog %s, leader election %s)",
            cfg.identity,
            cfg.provider,
            cfg.catalog,
            "on" if cfg.leader_elect else "off",
        )

    def _provider(self, clock: LoopClock) -> CloudProvider:
        """The cluster state and the cloud provider of ``config.provider`` (kwok or aws)."""
        cfg = self.config
        box: list[CloudProvider] = []
        if cfg.provider == "aws":
            assert cfg.aws is not None
            self.cluster = Cluster(
                lambda pool, _nc: box[0].instance_types(pool),
                settings=cfg.settings,
                well_known=catalog_mod.aws.well_known_labels(),
            )
            self.aws = operator_aws.build(
                cfg.aws,
                kube=self.kube,
                cluster=self.cluster,
                clock=clock,
                metrics=self.metrics,
                pricing=cfg.settings.pricing,
                clients=cfg.aws_clients,
            )
            box.append(self.aws.provider)
            return self.aws.provider
        types = catalog_mod.load(cfg.catalog, pricing=cfg.settings.pricing)
        self.cluster = Cluster(
            lambda pool, _nc: box[0].instance_types(pool),
            settings=cfg.settings,
            well_known=types.well_known,
        )
        kwok = KwokCloudProvider(
            self.kube,
            clock,
            types_for=lambda _pool, _nc: types.instance_types,
            node_class_for=self.cluster.node_class_for,
            registration_delay=cfg.registration_delay,
            loop=self.loop,
        )
        box.append(kwok)
        return kwok

    def _on_cache_change(self, watcher: kube_watch.Watcher) -> None:  # edge thread
        self.caches.update(watcher)
        self._wake()

    def _guarded(self, name: str, fn: Callable[[], float | None]) -> Callable[[], float | None]:
        failures = [0]

        def run() -> float | None:
            try:
                again = fn()
            except kube_errors.NotLeader:
                return 1.0
            except TemporaryError as exc:
                log.warning("controller %s: %s (retry in %.1f s)", name, exc, exc.delay)
                return exc.delay
            except PermanentError as exc:
                log.error("controller %s: %s", name, exc)
                return None
            except Exception:
                failures[0] += 1
                delay = float(min(60.0, 0.5 * 2.0 ** min(failures[0], 7)))
                log.exception("controller %s failed; retrying in %.1f s", name, delay)
                return delay
            failures[0] = 0
            return again

        return run

    def _on_problem(self, text: str, event: WatchEvent) -> None:
        """An object that does not validate: condition + Warning event, then skipped."""
        self.problems.append(text)
        log.warning("skipping invalid %s: %s", event.kind, text)
        if event.type == "DELETED" or event.kind not in _VALIDATED_KINDS or not self.is_leader():
            return
        meta = event.obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        self.events.record(Event(self.loop.now, event.kind, name, "", "FailedValidation", text, "Warning"))
        conditions = list((event.obj.get("status") or {}).get("conditions") or [])
        for cond in conditions:
            if (
                cond.get("type") == VALIDATION_CONDITION
                and cond.get("status") == "False"
                and (cond.get("message") == text[:1024])
            ):
                return
        conditions = [c for c in conditions if c.get("type") != VALIDATION_CONDITION]
        conditions.append(
            {
                "type": VALIDATION_CONDITION,
                "status": "False",
                "reason": "FailedValidation",
                "message": text[:1024],
                "lastTransitionTime": kube_leader.micro_time(time.time())[:19] + "Z",
                "observedGeneration": int(meta.get("generation") or 0),
            }
        )
        with contextlib.suppress(errors.KubeError):
            self.kube.patch(event.kind, name, {"status": {"conditions": conditions}})

    def _start_servers(self) -> None:
        cfg = self.config
        if cfg.metrics_port is not None:
            server, _thread = prometheus_client.start_http_server(
                cfg.metrics_port, addr=cfg.bind_address, registry=self.metrics.registry
            )
            self._servers.append(server)
            self.metrics_port = int(server.server_address[1])
        if cfg.health_port is not None:
            handler = type("Health", (_HealthHandler,), {"operator": self})
            health = http.server.ThreadingHTTPServer((cfg.bind_address, cfg.health_port), handler)
            health.daemon_threads = True
            threading.Thread(target=health.serve_forever, name="karpy-health", daemon=True).start()
            self._servers.append(health)
            self.health_port = int(health.server_address[1])

    # -- run / stop ----------------------------------------------------------------------------
    def run(self) -> None:
        """Drive the loop on this thread until :meth:`stop`; then shut down."""
        try:
            while not self._stop.is_set():
                self._heartbeat = time.monotonic()
                ready = self.ready()  # before dispatch: a list that made a kind synced is delivered first
                self.kube.dispatch()
                self.caches.report()
                if ready and self.is_leader():
                    try:
                        self.loop.step()
                    except kube_errors.Interrupted:
                        log.info("stopping: the controllers' pass was interrupted at an API call")
                        break
                else:
                    self._idle.wait(0.5)
                    self._idle.clear()
        finally:
            self.shutdown()

    def stop(self) -> None:
        """Ask :meth:`run` to return (thread-safe; the SIGTERM handler calls this): the pass under
        way ends at its next API call (:class:`~karpy.adapters.kube.errors.Interrupted`)."""
        self._stop.set()
        self.kube.stopping.set()
        self._wake()

    def shutdown(self) -> None:
        if self.aws is not None:
            self.aws.stop()
        if self.elector is not None and self.kube.edge.loop.is_running():
            with contextlib.suppress(Exception):
                self.kube.edge.call(self.elector.release(), 1.5)
        for server in self._servers:
            with contextlib.suppress(Exception):
                server.shutdown()
                server.server_close()
        self._servers.clear()
        self.kube.close()
        log.info("karpy operator %s stopped", self.config.identity)
