"""Watch events -> a :class:`~karpy.record.model.Recording`: what ``karpy record`` keeps of a cluster.

A :class:`Recorder` is fed every watch event (:class:`karpy.ports.WatchEvent`) of Pods, Nodes,
NodeClaims, NodePools, EC2NodeClasses, KWOKNodeClasses, Deployments, ReplicaSets, StatefulSets and
Jobs, and stamps each change with its injected ``clock`` (the real one in the command, a virtual
one in tests), never with the objects' own timestamps: what was listed before :meth:`Recorder.begin`
was there when the window opened. It keeps, per object, only what a trace needs:

- pods: owner (controller reference), trimmed template (:mod:`karpy.record.templates`), and when
  they arrived, were bound (``spec.nodeName``), ran (phase Running), finished (Succeeded or
  Failed) and went (``deletionTimestamp`` or DELETED); a pod recreated under its name (a
  StatefulSet's) is a new pod (told apart by uid);
- Deployments and StatefulSets: template, ``spec.replicas`` at every change (an HPA's scaling
  shows here), strategy or pod management policy; ReplicaSets: their Deployment, and when they
  appeared (a new one during the window is a rollout); Jobs: their CronJob, template, completions
  and parallelism;
- Nodes: labels (instance type, zone, capacity type, NodePool, node group), taints, when they
  appeared, turned Ready and went; NodeClaims: when they were created (the launch) and went,
  and their Node; NodePools and NodeClasses as first seen.

:meth:`Recorder.finish` resolves top owners (a ReplicaSet's Deployment, by its owner reference or
else by its ``pod-template-hash`` suffix; a Job's CronJob) and joins NodeClaims to their Nodes.
Pure: no I/O, no clock of its own. Used by :mod:`karpy.record.live` and by tests that record a
simulated run (:mod:`karpy.sim.runner`'s ``observe``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.model import labels as wk
from karpy.ports import WatchEvent
from karpy.record import model, templates

__all__ = ["CAPACITY_LABEL", "KINDS", "NODE_GROUP_LABEL", "NOT_WORKLOAD", "Recorder", "node_life"]

KINDS = (
    "Pod",
    "Node",
    "NodeClaim",
    "NodePool",
    "EC2NodeClass",
    "KWOKNodeClass",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Job",
)
NODE_GROUP_LABEL = wk.EKS_NODE_GROUP
CAPACITY_LABEL = wk.EKS_CAPACITY_TYPE
_BEFORE = -math.inf  # "before the window": the times of what was listed before begin()
_FIRST_REPLICASET = 5.0  # a ReplicaSet this soon after its Deployment appeared is its first
_NODE_CLASSES = ("EC2NodeClass", "KWOKNodeClass")
NOT_WORKLOAD = ("DaemonSet", "Node")  # owners of non-workload pods: DaemonSets, static (mirror) pods


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _controller(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the object's controller reference; ("", "") without one."""
    refs = _meta(obj).get("ownerReferences") or []
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("kind") or ""), str(ref.get("name") or "")
    first = refs[0] if refs and isinstance(refs[0], Mapping) else None
    return (str(first.get("kind") or ""), str(first.get("name") or "")) if first else ("", "")


def _ready(obj: Mapping[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass
class _Pod:
    namespace: str
    name: str
    generate_name: str
    owner: tuple[str, str]
    template: dict[str, Any]
    created: float
    hash: str = ""  # pod-template-hash
    priority: int = 0
    bound: float | None = None
    running: float | None = None
    finished: float | None = None
    deleted: float | None = None
    node: str = ""


@dataclass
class _Workload:
    """A Deployment, StatefulSet, ReplicaSet or Job."""

    template: dict[str, Any]
    created: float
    owner: tuple[str, str] = ("", "")
    replicas: list[tuple[float, int]] = field(default_factory=list)
    strategy: Mapping[str, Any] | None = None
    parallel: bool = False
    completions: int | None = None
    parallelism: int | None = None
    deleted: float | None = None


@dataclass
class _Node:
    created: float
    labels: dict[str, str]
    taints: tuple[Mapping[str, str], ...]
    provider_id: str = ""
    ready: float | None = None
    deleted: float | None = None


@dataclass
class _Claim:
    created: float
    labels: dict[str, str]
    node: str = ""
    provider_id: str = ""
    deleted: float | None = None


class Recorder:
    """Turns watch events into a :class:`~karpy.record.model.Recording` (see the module docstring)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.start: float | None = None
        self.versions: dict[str, int] = {}  # the highest resourceVersion observed per kind
        self._pods: dict[str, _Pod] = {}
        self._workloads: dict[tuple[str, str, str], _Workload] = {}
        self._nodes: dict[str, _Node] = {}
        self._old_nodes: list[tuple[str, _Node]] = []  # deleted nodes whose name came back
        self._claims: dict[str, _Claim] = {}
        self._config: dict[tuple[str, str], Mapping[str, Any]] = {}  # NodePools, NodeClasses

    def begin(self) -> float:
        """The window opens now: everything observed so far was there before it."""
        self.start = self._clock()
        return self.start

    def _now(self) -> float:
        return self._clock() if self.start is not None else _BEFORE

    # -- events ----------------------------------------------------------------------------
    def observe(self, event: WatchEvent) -> None:
        """Take one watch event (other kinds are ignored)."""
        obj = event.obj
        version = str(_meta(obj).get("resourceVersion") or "")
        if version.isdigit():
            self.versions[event.kind] = max(self.versions.get(event.kind, 0), int(version))
        handler = self._HANDLERS.get(event.kind)
        if handler is None or not isinstance(obj, Mapping):
            return
        handler(self, event.kind, obj, deleted=event.type == "DELETED")

    def _pod(self, _kind: str, obj: Mapping[str, Any], *, deleted: bool) -> None:
        meta = _meta(obj)
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        key = str(meta.get("uid") or f"{namespace}/{name}")
        now = self._now()
        pod = self._pods.get(key)
        spec = obj.get("spec") or {}
        if pod is None:
            if deleted:
                return
            pod = _Pod(
                namespace,
                name,
                str(meta.get("generateName") or ""),
                _controller(obj),
                templates.pod_template(obj),
                now,
                hash=str((meta.get("labels") or {}).get("pod-template-hash") or ""),
                priority=_int(spec.get("priority"), 0),
            )
            self._pods[key] = pod
        node = str(spec.get("nodeName") or "")
        if node and pod.bound is None:
            pod.bound, pod.node = now, node
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded", "Failed") and pod.running is None:
            pod.running = now
        if phase in ("Succeeded", "Failed") and pod.finished is None:
            pod.finished = now
        if (deleted or meta.get("deletionTimestamp")) and pod.deleted is None:
            pod.deleted = now

    def _workload(self, kind: str, obj: Mapping[str, Any], *, deleted: bool) -> None:
        meta = _meta(obj)
        key = (kind, str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        now = self._now()
        spec = obj.get("spec") or {}
        found = self._workloads.get(key)
        if found is None:
            if deleted:
                return
            found = self._workloads[key] = _Workload(
                templates.pod_template(spec.get("template") or {}), now, owner=_controller(obj)
            )
            found.strategy = spec.get("strategy") if kind == model.DEPLOYMENT else None
            found.parallel = spec.get("podManagementPolicy") == "Parallel"
            if kind == model.JOB:
                found.completions = _int(spec.get("completions"), 1)
                found.parallelism = _int(spec.get("parallelism"), 1)
        replicas = 0 if deleted else _int(spec.get("replicas"), 1)
        if not found.replicas or found.replicas[-1][1] != replicas:
            found.replicas.append((now, replicas))
        if deleted and found.deleted is None:
            found.deleted = now

    def _node(self, _kind: str, obj: Mapping[str, Any], *, deleted: bool) -> None:
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        now = self._now()
        node = self._nodes.get(name)
        if node is None or (node.deleted is not None and not deleted):
            if deleted:
                return
            if node is not None:  # a name used again: a new node
                self._old_nodes.append((name, node))
            taints = tuple(
                dict(t) for t in (obj.get("spec") or {}).get("taints") or [] if isinstance(t, Mapping)
            )
            node = self._nodes[name] = _Node(now, dict(meta.get("labels") or {}), taints)
        node.provider_id = str((obj.get("spec") or {}).get("providerID") or node.provider_id)
        if node.ready is None and _ready(obj):
            node.ready = now
        if deleted:
            node.deleted = now

    def _claim(self, _kind: str, obj: Mapping[str, Any], *, deleted: bool) -> None:
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        now = self._now()
        claim = self._claims.get(name)
        if claim is None:
            if deleted:
                return
            claim = self._claims[name] = _Claim(now, {})
        claim.labels.update({str(k): str(v) for k, v in (meta.get("labels") or {}).items()})
        status = obj.get("status") or {}
        claim.node = str(status.get("nodeName") or claim.node)
        claim.provider_id = str(status.get("providerID") or claim.provider_id)
        if deleted:
            claim.deleted = now

    def _configuration(self, kind: str, obj: Mapping[str, Any], *, deleted: bool) -> None:
        key = (kind, str(_meta(obj).get("name") or ""))
        if not deleted and key not in self._config:
            self._config[key] = obj

    _HANDLERS: Mapping[str, Callable[..., None]] = {  # (self, kind, object, *, deleted)
        "Pod": _pod,
        "Deployment": _workload,
        "StatefulSet": _workload,
        "ReplicaSet": _workload,
        "Job": _workload,
        "Node": _node,
        "NodeClaim": _claim,
        "NodePool": _configuration,
        "EC2NodeClass": _configuration,
        "KWOKNodeClass": _configuration,
    }

    # -- the recording -----------------------------------------------------------------------
    def finish(self, *, interrupted: bool = False, server: str = "") -> model.Recording:
        """The recording of the window from :meth:`begin` until now."""
        start = self.start if self.start is not None else self._clock()
        end = max(start, self._clock())

        def at(t: float | None) -> float | None:
            return None if t is None else min(end, max(start, t))

        pods = tuple(
            sorted(
                (self._pod_life(p, at) for p in self._pods.values()),
                key=lambda p: (p.created, p.namespace, p.name),
            )
        )
        owners = self._owners(pods, at)
        jobs = tuple(
            model.JobLife(
                namespace,
                name,
                self._job_owner(namespace, name),
                w.template,
                w.completions,
                w.parallelism,
                at(w.created),
            )
            for (kind, namespace, name), w in sorted(self._workloads.items())
            if kind == model.JOB
        )
        pools = tuple(obj for (kind, _), obj in sorted(self._config.items()) if kind == "NodePool")
        classes = tuple(obj for (kind, _), obj in sorted(self._config.items()) if kind in _NODE_CLASSES)
        return model.Recording(
            start=start,
            end=end,
            pods=pods,
            owners=owners,
            jobs=jobs,
            nodes=self._node_lives(at),
            node_pools=pools,
            node_classes=classes,
            node_claims=len(self._claims),
            server=server,
            interrupted=interrupted,
        )

    def _job_owner(self, namespace: str, job: str) -> model.OwnerKey:
        found = self._workloads.get((model.JOB, namespace, job))
        if found is not None and found.owner[0] == model.CRONJOB:
            return model.OwnerKey(namespace, model.CRONJOB, found.owner[1])
        return model.OwnerKey(namespace, model.JOB, job)

    def _top(self, pod: _Pod) -> model.OwnerKey:
        kind, name = pod.owner
        ns = pod.namespace
        if not kind:
            return model.OwnerKey(ns, model.BARE, pod.generate_name or pod.name)
        if kind == "ReplicaSet":
            rs = self._workloads.get(("ReplicaSet", ns, name))
            if rs is not None and rs.owner[0] == model.DEPLOYMENT:
                return model.OwnerKey(ns, model.DEPLOYMENT, rs.owner[1])
            suffix = f"-{pod.hash}"
            if pod.hash and name.endswith(suffix):
                deployment = name[: -len(suffix)]
                if (model.DEPLOYMENT, ns, deployment) in self._workloads:
                    return model.OwnerKey(ns, model.DEPLOYMENT, deployment)
        if kind == model.JOB:
            return self._job_owner(ns, name)
        return model.OwnerKey(ns, kind, name)

    def _pod_life(self, p: _Pod, at: Callable[[float | None], float | None]) -> model.PodLife:
        created = at(p.created)
        assert created is not None
        return model.PodLife(
            namespace=p.namespace,
            name=p.name,
            owner=self._top(p),
            template=p.template,
            created=created,
            generate_name=p.generate_name,
            job=p.owner[1] if p.owner[0] == model.JOB else "",
            bound=at(p.bound),
            running=at(p.running),
            finished=at(p.finished),
            deleted=at(p.deleted),
            node=p.node,
            priority=p.priority,
            daemonset=p.owner[0] in NOT_WORKLOAD,
        )

    def _owners(
        self, pods: tuple[model.PodLife, ...], at: Callable[[float | None], float | None]
    ) -> tuple[model.Owner, ...]:
        """The top owners of the workload pods, with what their objects say."""
        first: dict[model.OwnerKey, model.PodLife] = {}
        for pod in pods:
            if not pod.daemonset:
                first.setdefault(pod.owner, pod)
        out: list[model.Owner] = []
        for key in sorted(first):
            kind = key.kind if key.kind in (model.DEPLOYMENT, model.STATEFULSET, "ReplicaSet") else ""
            found = self._workloads.get((kind, key.namespace, key.name)) if kind else None
            if found is None:  # a Job, CronJob, bare pod or a controller not watched
                out.append(model.Owner(key, first[key].template))
                continue
            rollouts: tuple[float, ...] = ()
            if key.kind == model.DEPLOYMENT:  # its ReplicaSets that appeared during the window
                owned = (model.DEPLOYMENT, key.name)
                after = found.created + _FIRST_REPLICASET  # (a Deployment's own first one is no rollout)
                rollouts = tuple(
                    sorted(
                        {
                            w.created
                            for (k, ns, _), w in self._workloads.items()
                            if k == "ReplicaSet"
                            and ns == key.namespace
                            and w.owner == owned
                            and w.created != _BEFORE
                            and w.created > after
                        }
                    )
                )
            replicas: dict[float, int] = {}
            for t, n in found.replicas:
                when = at(t)
                assert when is not None
                replicas[when] = n  # the last change at an instant wins
            # (an object without a template, as a simulated Deployment's: its first pod's)
            template = found.template if found.template.get("spec") else first[key].template
            out.append(
                model.Owner(
                    key,
                    template,
                    replicas=tuple(sorted(replicas.items())),
                    strategy=found.strategy,
                    parallel=found.parallel,
                    rollouts=rollouts,
                    created=None if found.created == _BEFORE else at(found.created),
                    deleted=at(found.deleted),
                )
            )
        return tuple(out)

    def _node_lives(self, at: Callable[[float | None], float | None]) -> tuple[model.NodeLife, ...]:
        """Nodes joined to their NodeClaims (by node name or providerID), and claims of no Node."""
        by_node = {c.node: name for name, c in self._claims.items() if c.node}
        by_provider = {c.provider_id: name for name, c in self._claims.items() if c.provider_id}
        used: set[str] = set()
        out: list[model.NodeLife] = []
        for name, node in [*self._old_nodes, *sorted(self._nodes.items())]:
            claim_name = by_node.get(name) or by_provider.get(node.provider_id, "")
            claim = self._claims.get(claim_name)
            if claim is not None:
                used.add(claim_name)
            labels = {**(claim.labels if claim is not None else {}), **node.labels}
            launched = claim.created if claim is not None else node.created
            deleted = (
                node.deleted
                if claim is None
                else (claim.deleted if claim.deleted is not None else node.deleted)
            )
            life = node_life(name, labels, launched=launched, deleted=deleted, at=at)
            if life is not None:
                out.append(
                    dataclasses.replace(
                        life, registered=at(node.created), ready=at(node.ready), taints=node.taints
                    )
                )
        for name, claim in sorted(self._claims.items()):
            if name not in used:
                life = node_life(name, claim.labels, launched=claim.created, deleted=claim.deleted, at=at)
                if life is not None:
                    out.append(life)
        return tuple(sorted(out, key=lambda n: (n.launched, n.name)))


def node_life(
    name: str,
    labels: Mapping[str, str],
    *,
    launched: float,
    deleted: float | None,
    at: Callable[[float | None], float | None],
) -> model.NodeLife | None:
    """A node's life from its (and its NodeClaim's) labels; None without an instance type.
    Also used by :mod:`karpy.record.prom_series`."""
    instance_type = labels.get(wk.INSTANCE_TYPE, "")
    if not instance_type:
        return None  # a claim that never launched
    capacity = labels.get(wk.CAPACITY_TYPE) or (
        "spot" if labels.get(CAPACITY_LABEL) == "SPOT" else "on-demand"
    )
    when = at(launched)
    assert when is not None
    return model.NodeLife(
        name=name,
        launched=when,
        instance_type=instance_type,
        zone=labels.get(wk.ZONE, ""),
        capacity_type=capacity,
        deleted=at(deleted),
        node_pool=labels.get(wk.NODEPOOL, ""),
        node_group=labels.get(NODE_GROUP_LABEL, ""),
        region=labels.get(wk.REGION, ""),
        labels=dict(sorted(labels.items())),
    )
