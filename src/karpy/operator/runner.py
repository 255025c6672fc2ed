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
4. serve ``/metrics`` (prometheus-client, karpy's registry), ``/healthz`` (the loop is alive:
   :mod:`karpy.operator.liveness`) and ``/readyz``;
5. :meth:`Operator.run` drives the loop on the calling thread until :meth:`Operator.stop`
   (SIGTERM in the CLI): the pass under way ends at its next API call
   (:class:`~karpy.adapters.kube.errors.Interrupted`, caught by ``run``); shutdown releases the
   Lease first (the election stopped, so it cannot take the Lease back; bounded by
   :data:`RELEASE_TIMEOUT`) and stops within a few seconds.

The cache gate lives in :mod:`karpy.operator.caches`, the log format in :mod:`karpy.operator.logs`,
the liveness heartbeat in :mod:`karpy.operator.liveness`, the controllers' failure handling in
:mod:`karpy.operator.guard` and the AWS provider's wiring in :mod:`karpy.operator.aws`.

**Shadow mode** (``shadow``, ``karpy operator --shadow``): karpy runs read-only beside an installed
Karpenter or Cluster Autoscaler. The refusal of step 1 is skipped (the karpenter.sh CRDs must be
installed: :func:`preflight_shadow`); the kube client may write Events and Leases only (any other
write is refused before it is sent: :class:`~karpy.adapters.kube.client.ReadOnly`); the instance
types come from ``catalog`` whatever the provider (no cloud call; ``provider`` only names the
NodeClass kind the cache gate requires); and the loop runs the shadow controller
(:func:`karpy.runtime.wiring.build_shadow`) instead of the acting ones. Invalid objects are logged,
not marked. Its Events come from ``karpy-shadow``; its Lease is :data:`SHADOW_LEASE_NAME` by default.

A bad object (an invalid NodePool) never stops the operator: it gets a ``ValidationSucceeded``
False condition and a Warning event, and is skipped. A controller that raises is retried with
backoff (:func:`karpy.operator.guard.guarded`: an outage is one warning line per controller, a bug
a traceback). Called by :mod:`karpy.cli.operator_cmd` and the integration tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import logging
import os
import socket
import threading
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
from karpy.adapters.kube import measured_store
from karpy.adapters.kube import watch as kube_watch
from karpy.api import encode
from karpy.controllers import claims, nodepool_status
from karpy.controllers.context import Context
from karpy.metrics import Metrics
from karpy.model import errors
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import NodeClass
from karpy.model.objects import NodePool
from karpy.operator import aws as operator_aws
from karpy.operator import guard
from karpy.operator.caches import CacheGate
from karpy.operator.liveness import LIVENESS_TIMEOUT, Heartbeat
from karpy.ports import CloudProvider, Event, WatchEvent
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.stack import AWSStack
from karpy.providers.kwok import KwokCloudProvider
from karpy.runtime import wiring
from karpy.runtime.loop import LoopClock
from karpy.runtime.realtime import RealtimeLoop
from karpy.state.cluster import Cluster
from karpy.state.feed import KINDS, Feed

__all__ = [
    "MANAGED_BY_ANNOTATION",
    "MANAGED_BY_VALUE",
    "SHADOW_LEASE_NAME",
    "SHADOW_WRITES",
    "Operator",
    "OperatorConfig",
    "Refused",
    "preflight",
    "preflight_shadow",
]

PROVIDERS = ("kwok", "aws")
MANAGED_BY_ANNOTATION = claims.MANAGED_BY_ANNOTATION
MANAGED_BY_VALUE = claims.MANAGED_BY_VALUE
VALIDATION_CONDITION = "ValidationSucceeded"
_VALIDATED_KINDS = frozenset({"NodePool", "EC2NodeClass", "KWOKNodeClass"})
RELEASE_TIMEOUT = 3.5  # shutdown: the most the Lease release waits (SIGTERM to exit stays < 5 s)
ELECTION_TASK = "leader-election"  # the elector's task on the edge loop (LeaderElector.start)
SHADOW_WRITES = frozenset({"Event", "Lease"})  # all a shadow writes
SHADOW_LEASE_NAME = "karpy-shadow-leader-election"

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
    liveness_timeout: float = LIVENESS_TIMEOUT  # /healthz: 503 after this long without progress
    kube_client_qps: float = kube_client.DEFAULT_QPS  # client-side rate limit (<= 0: none)
    kube_client_burst: int = kube_client.DEFAULT_BURST
    kube_client_max_in_flight: int = kube_client.DEFAULT_MAX_IN_FLIGHT  # 1: the port's calls one by one
    identity: str = field(default_factory=lambda: os.environ.get("POD_NAME") or socket.gethostname())
    lease_namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE") or "karpy-system")
    lease_name: str = "karpy-leader-election"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    watch_read_timeout: float = 60.0
    registration_delay: float = 0.0
    disruption: bool = True
    strict: bool = False  # --strict: a NodePool or NodeClass with an unknown field fails validation
    settings: settings_mod.Settings = field(default_factory=settings_mod.Settings)
    aws: AWSSettings | None = None  # --provider aws
    aws_clients: Any = None  # tests: boto3 clients of their own (else boto3's standard chain)
    shadow: bool = False  # --shadow: read-only beside an installed autoscaler (module docstring)


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


def preflight_shadow(kube: kube_client.KubeClient) -> None:
    """Shadow mode needs the karpenter.sh CRDs (NodePools say what karpy may launch)."""
    for kind in ("NodePool", "NodeClaim"):
        try:
            kube.list(kind)
        except errors.NotFound:
            raise Refused(
                f"the karpenter.sh/v1 {kind} CRD is not installed: shadow mode reads NodePools and "
                "NodeClaims (beside Cluster Autoscaler: kubectl apply -f deploy/crds/, then a NodePool)"
            ) from None


class _HealthHandler(http.server.BaseHTTPRequestHandler):
    operator: Operator

    def do_GET(self) -> None:
        if self.path.startswith("/healthz"):
            ok, text = self.operator.liveness()
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
        if (
            config.provider == "aws"
            and not config.shadow
            and (config.aws is None or not config.aws.cluster_name)
        ):
            raise errors.InputError("--provider aws needs --cluster-name (or CLUSTER_NAME)")
        self.config = config
        self.aws: AWSStack | None = None
        self._stop = threading.Event()
        self._idle = threading.Event()
        self.heartbeat = Heartbeat(config.liveness_timeout)
        self._servers: list[http.server.HTTPServer] = []
        self._elector_factory = elector_factory or kube_leader.LeaderElector
        self.elector: kube_leader.LeaderElector | None = None
        self.metrics = Metrics()
        self.caches = CacheGate(config.provider, metrics=self.metrics)
        self.loop = RealtimeLoop(max_wait=1.0)
        self.kube = kube_client.KubeClient(
            on_answer=self.heartbeat.beat,  # every request of a port call answered is progress
            kubeconfig=config.kubeconfig,
            host=config.host,
            on_event=self._wake,
            identity=config.identity,
            qps=config.kube_client_qps,
            burst=config.kube_client_burst,
            max_in_flight=config.kube_client_max_in_flight,
            writable=SHADOW_WRITES if config.shadow else None,
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
        """The controllers may run: started, and every required cache listed once (a watch that
        fails later keeps the gate open: the controllers work on from the cache they have)."""
        return self.started and self.caches.gate_open()

    def readiness(self) -> tuple[bool, str]:
        """``/readyz``: 200 while every required cache is listed and watching (the body names what
        is missing or failing, and optional caches not synced)."""
        if not self.started:
            return False, "starting"
        return self.caches.readiness()

    def liveness(self) -> tuple[bool, str]:
        """``/healthz``: the loop is alive (see :mod:`karpy.operator.liveness`); the text says why not."""
        return self.heartbeat.check() if self.started else (True, "ok")

    def healthy(self) -> bool:
        return self.liveness()[0]

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.kube.start()
        try:
            (preflight_shadow if cfg.shadow else preflight)(self.kube)
        except BaseException:
            self.kube.close()
            raise
        clock = LoopClock(self.loop)
        try:
            provider = self._shadow_provider(clock) if cfg.shadow else self._provider(clock)
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
        self.events = kube_events.KubeEvents(
            self.kube,
            controller="karpy-shadow" if cfg.shadow else "karpy",
            instance=cfg.identity,
            may_write=self.is_leader,
        )
        self.feed = Feed(self.cluster, on_problem=self._on_problem, strict=cfg.strict)
        self.kube.watch(self.feed)
        self.ctx = Context(
            self.cluster, self.kube, provider, clock, self.events, cfg.settings, self.metrics, log
        )
        if cfg.shadow:
            self.shadow = wiring.build_shadow(self.ctx, self.loop, self.feed, catalog=self.catalog)
        else:
            self.controllers = wiring.build(self.ctx, self.loop, self.feed, disruption_enabled=cfg.disruption)
            measured = self.controllers.measured_capacity
            if measured is not None:  # --measured-capacity: kept in a ConfigMap in karpy's namespace
                measured.store = measured_store.ConfigMapStore(self.kube, cfg.lease_namespace)
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
        self.heartbeat.beat()
        log.info(
            "karpy operator %s started%s (provider %s, catalog %s, leader election %s)",
            cfg.identity,
            " in shadow mode (read-only)" if cfg.shadow else "",
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

    def _shadow_provider(self, clock: LoopClock) -> CloudProvider:
        """Shadow mode's state and (inert) provider: the catalog's instance types for every
        NodePool whose NodeClass is in the cluster (as upstream launches only from those), no cloud."""
        cfg = self.config
        types = catalog_mod.load(cfg.catalog, pricing=cfg.settings.pricing)
        self.catalog = types.instance_types

        def source(pool: NodePool, node_class: NodeClass | None) -> tuple[InstanceType, ...]:
            return types.instance_types if node_class is not None or pool.node_class_ref is None else ()

        self.cluster = Cluster(source, settings=cfg.settings, well_known=types.well_known)
        # never asked to launch (the shadow decides only; the client refuses the writes anyway)
        return KwokCloudProvider(
            self.kube, clock, types_for=source, node_class_for=self.cluster.node_class_for
        )

    def _on_cache_change(self, watcher: kube_watch.Watcher) -> None:  # edge thread
        self.caches.update(watcher)
        self._wake()

    def _guarded(self, name: str, fn: Callable[[], float | None]) -> Callable[[], float | None]:
        return guard.guarded(name, fn, beat=self.heartbeat.beat)

    def _on_problem(self, text: str, event: WatchEvent) -> None:
        """An object that does not validate: condition + Warning event, then skipped."""
        self.problems.append(text)
        log.warning("skipping invalid %s: %s", event.kind, text)
        if self.config.shadow:  # read-only: the installed autoscaler reports it (if it shares the API)
            return
        if event.type == "DELETED" or event.kind not in _VALIDATED_KINDS or not self.is_leader():
            return
        meta = event.obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        self.events.record(Event(self.loop.now, event.kind, name, "", "FailedValidation", text, "Warning"))
        existing = list((event.obj.get("status") or {}).get("conditions") or [])
        generation = int(meta.get("generation") or 0)
        if event.kind == "NodePool":  # ValidationSucceeded and Ready False, NodeClassReady kept
            conditions = nodepool_status.failed_validation_conditions(
                existing, text, generation=generation, now=self.loop.now
            )
        else:
            conditions = [c for c in existing if c.get("type") != VALIDATION_CONDITION]
            before: dict[str, Any] = next((c for c in existing if c.get("type") == VALIDATION_CONDITION), {})
            since = before.get("lastTransitionTime") if before.get("status") == "False" else None
            conditions.append(
                {
                    "type": VALIDATION_CONDITION,
                    "status": "False",
                    "reason": "FailedValidation",
                    "message": text[:1024],
                    "lastTransitionTime": since or encode.time(self.loop.now),
                    "observedGeneration": generation,
                }
            )
        if [dict(c) for c in conditions] == [dict(c) for c in existing if isinstance(c, dict)]:
            return  # written already (the same problem)
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
        self.heartbeat.thread = threading.current_thread()
        try:
            while not self._stop.is_set():
                self.heartbeat.beat()
                ready = self.ready()  # before dispatch: a list that made a kind synced is delivered first
                self.kube.dispatch()
                self.caches.report()
                if ready and self.is_leader():
                    self.loop.step()
                else:
                    self._idle.wait(0.5)
                    self._idle.clear()
        except kube_errors.Interrupted:  # stop(): a pass (or an invalid object's patch) cut short
            log.info("stopping: the controllers' pass was interrupted at an API call")
        finally:
            self.shutdown()

    def stop(self) -> None:
        """Ask :meth:`run` to return (thread-safe; the SIGTERM handler calls this): the pass under
        way ends at its next API call (:class:`~karpy.adapters.kube.errors.Interrupted`)."""
        self._stop.set()
        self.kube.stopping.set()
        self._wake()

    def shutdown(self) -> None:
        """The Lease first (the other replica takes over at once), then the rest; every step is
        bounded, so this returns within a few seconds even on a slow API server. The HTTP servers
        stop meanwhile (each ``shutdown()`` waits up to half a second for its serving loop)."""
        servers, self._servers = self._servers, []
        closing = [
            threading.Thread(target=_close_server, args=(server,), name="karpy-close", daemon=True)
            for server in servers
        ]
        for thread in closing:
            thread.start()
        if self.elector is not None and self.kube.edge.loop.is_running():
            try:
                self.kube.edge.call(release_lease(self.elector), RELEASE_TIMEOUT)
            except Exception as exc:  # Unavailable: the server did not answer in time
                log.warning("releasing the Lease: %s (it expires on its own)", exc)
        if self.aws is not None:
            self.aws.stop()
        for thread in closing:
            thread.join(1.0)
        self.kube.close()
        log.info("karpy operator %s stopped", self.config.identity)


def _close_server(server: http.server.HTTPServer) -> None:
    with contextlib.suppress(Exception):
        server.shutdown()
        server.server_close()


async def release_lease(elector: kube_leader.LeaderElector) -> None:
    """Stop the election (else its next round takes the released Lease back), read the Lease
    fresh (a renewal cut short may have changed its resourceVersion) and release it if ours."""
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is not current and task.get_name() == ELECTION_TASK:
            task.cancel()
            await asyncio.wait([task])  # its end, whatever it raised (our own cancellation raises)
    try:
        await elector.observe()
    except errors.KubeError as exc:
        log.info("%s: reading the Lease before releasing it: %s", elector.identity, exc)
    if ((elector.observed or {}).get("spec") or {}).get("holderIdentity") == elector.identity:
        await elector.release()
