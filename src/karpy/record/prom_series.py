"""kube-state-metrics series -> a :class:`~karpy.record.model.Recording`: ``karpy record --from-prometheus``.

:data:`QUERIES` is what :mod:`karpy.record.prom_client` asks Prometheus for: range queries at the
step for what changes over time (a pod's or node's series is there while the object is: its first
and last sample bound its life; phases, Ready, replicas), instant queries at the end over the whole
window (``last_over_time(...[window])``) for what an object carries (owners, node, requests,
images, allow-listed labels and annotations, tolerations, node selectors, Jobs, ReplicaSets, node
labels and taints). :func:`rebuild` turns the answers (:class:`Series` per query) into the same
:class:`~karpy.record.model.Recording` a live recording gives, plus the DaemonSets its pods show
and one warning line per thing the metrics cannot say. Times come from the series' values where
kube-state-metrics exports them (creation, scheduling, deletion request: to the second), else from
the grid (running, finished, Ready, gone, replicas: known to the step, stamped at the first step
that shows the change). Pod templates are rebuilt from requests, images, tolerations, node
selectors and labels (:mod:`karpy.record.prom_labels` maps kube-state-metrics' label names back to
Kubernetes keys). :func:`trace` writes the trace (:mod:`karpy.record.writer`) with the step named in
its description and a comment. Pure: no I/O, no clock; used by :mod:`karpy.cli.record_cmd`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import encode
from karpy.model import labels as wk
from karpy.record import anonymize, model, prom_labels, recorder, templates, writer

__all__ = ["QUERIES", "Query", "Rebuilt", "Series", "dump", "promql", "rebuild", "trace"]


@dataclass(frozen=True, slots=True)
class Series:
    """One time series of an answer: its labels and its (time, value) samples, oldest first."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]

    @property
    def value(self) -> float:
        return self.samples[-1][1] if self.samples else math.nan


@dataclass(frozen=True, slots=True)
class Query:
    """A metric read: ``ranged`` at the step over the window, else once at the end (its last value
    over the window); ``needed``: an empty answer ends the command; ``gap``: the warning when empty."""

    metric: str
    ranged: bool = False
    selector: str = ""  # e.g. ``{condition="Ready",status="true"} == 1``
    needed: bool = False
    gap: str = ""


_NO_LABELS = "add them to kube-state-metrics' --metric-labels-allowlist"
QUERIES: tuple[Query, ...] = (
    Query("kube_pod_created", ranged=True, needed=True),
    Query("kube_pod_status_phase", ranged=True, selector=" == 1"),
    Query("kube_pod_deletion_timestamp"),
    Query("kube_pod_status_scheduled_time"),
    Query("kube_pod_owner", gap="pods have no owners: each is a bare pod"),
    Query("kube_pod_info", gap="pods have no node"),
    Query("kube_pod_container_resource_requests", gap="pods request nothing"),
    Query("kube_pod_container_info", gap="containers have no image"),
    Query("kube_pod_labels", gap=f"pods have no labels ({_NO_LABELS}=pods=[...])"),
    Query("kube_pod_annotations", gap="pods have no annotations (karpenter.sh/do-not-disrupt, ...)"),
    Query("kube_pod_tolerations", gap="pods have no tolerations"),
    Query("kube_pod_nodeselectors", gap="pods have no node selectors (an opt-in metric)"),
    Query("kube_replicaset_owner"),
    Query("kube_replicaset_created"),
    Query("kube_deployment_spec_replicas", ranged=True),
    Query("kube_statefulset_replicas", ranged=True),
    Query("kube_job_owner"),
    Query("kube_job_created"),
    Query("kube_job_spec_completions"),
    Query("kube_job_spec_parallelism"),
    Query("kube_node_created", ranged=True, needed=True),
    Query("kube_node_status_condition", ranged=True, selector='{condition="Ready",status="true"} == 1'),
    Query("kube_node_deletion_timestamp"),
    Query("kube_node_labels", gap=f"nodes have no labels ({_NO_LABELS}=nodes=[...])"),
    Query("kube_node_spec_taint"),
)

# what kube-state-metrics cannot say, whatever the answers: one warning line each
GAPS = (
    "affinity, topology spread constraints, init containers, limits and priorities are not in "
    "kube-state-metrics: the trace's pods have none",
    "Deployment strategies and StatefulSet pod management policies are not in kube-state-metrics: "
    "the replay uses the defaults",
    "node launches: NodeClaims are not in kube-state-metrics, so nodes count from their registration "
    "and the replay uses the simulator's launch latency",
    "no snapshot: the replay starts without the recorded nodes and launches nodes for the pods alive "
    "at the start",
)
_NONE = ("", "<none>")


def promql(query: Query, *, window: float) -> str:
    """The PromQL of ``query``: the metric (and selector), or its last value over ``window`` seconds."""
    text = f"{query.metric}{query.selector}"
    return text if query.ranged else f"last_over_time({text}[{math.ceil(window)}s])"


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """What :func:`rebuild` gives: the recording, the DaemonSets its pods show, the warning lines
    (without ``warning:``) and the step its times are known to."""

    recording: model.Recording
    daemon_sets: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...]
    step: float


# -- helpers ---------------------------------------------------------------------------------


def _pod(labels: Mapping[str, str]) -> tuple[str, str]:
    return labels.get("namespace", ""), labels.get("pod", "")


def _owner(series: Sequence[Series]) -> tuple[str, str]:
    """(kind, name) of the controlling owner among owner series; ("", "") for none."""
    found = [s.labels for s in series if s.labels.get("owner_kind", "") not in _NONE]
    found.sort(key=lambda lb: (lb.get("owner_is_controller") != "true", lb.get("owner_name", "")))
    return (found[0]["owner_kind"], found[0].get("owner_name", "")) if found else ("", "")


def _values(series: Sequence[Series], key: str, *names: str) -> dict[tuple[str, ...], float]:
    """The last value of each series by the labels ``key`` (namespace) and ``names``."""
    return {(s.labels.get(key, ""), *(s.labels.get(n, "") for n in names)): s.value for s in series}


@dataclass
class _Clock:
    """The window, its grid and clamping of times into it."""

    start: float
    end: float
    step: float

    @property
    def last(self) -> float:
        """The last step of the grid (the last time a range query answers)."""
        return self.start + math.floor((self.end - self.start) / self.step) * self.step

    def at(self, t: float | None) -> float | None:
        return None if t is None else min(self.end, max(self.start, t))

    def gone(self, s: Series) -> float | None:
        """The first step at which a range series is absent after its last sample (None: there at the end)."""
        last = s.samples[-1][0]
        return None if last >= self.last - 1e-6 else min(self.end, last + self.step)


def _first(series: Sequence[Series], keep: Callable[[Mapping[str, str]], bool]) -> float | None:
    times = [s.samples[0][0] for s in series if s.samples and keep(s.labels)]
    return min(times) if times else None


def _stamp(value: float) -> float | None:
    """A kube-state-metrics timestamp value (0 or NaN: not set)."""
    return value if value > 0 else None


# -- pods -------------------------------------------------------------------------------------


_REPLICAS = (
    (model.DEPLOYMENT, "kube_deployment_spec_replicas"),
    (model.STATEFULSET, "kube_statefulset_replicas"),
)


@dataclass
class _Answers:
    """The answers indexed as the rebuild reads them."""

    raw: Mapping[str, Sequence[Series]]

    def __post_init__(self) -> None:
        self.by_pod: dict[str, dict[tuple[str, str], list[Series]]] = {}
        for query in QUERIES:
            if query.metric.startswith("kube_pod_"):
                index = self.by_pod[query.metric] = {}
                for s in self.raw.get(query.metric, ()):
                    index.setdefault(_pod(s.labels), []).append(s)
        self.rs_owner = {
            (s.labels.get("namespace", ""), s.labels.get("replicaset", "")): _owner([s])
            for s in self.raw.get("kube_replicaset_owner", ())
        }
        self.rs_created = _values(self.raw.get("kube_replicaset_created", ()), "namespace", "replicaset")
        self.job_owner = {
            (s.labels.get("namespace", ""), s.labels.get("job_name", "")): _owner([s])
            for s in self.raw.get("kube_job_owner", ())
        }
        self.replicas = {
            (kind, s.labels.get("namespace", ""), s.labels.get(kind.lower(), "")): s
            for kind, metric in _REPLICAS
            for s in self.raw.get(metric, ())
        }

    def about(self, created: Series) -> _PodSeries:
        """The series about the pod of one ``kube_pod_created`` series."""
        return _PodSeries(self, _pod(created.labels), created.labels.get("uid", ""))


@dataclass(frozen=True)
class _PodSeries:
    """One pod's view of the answers: the series of its namespace and name, and of its uid where they
    carry one (a StatefulSet's pod recreated under its name is another pod)."""

    answers: _Answers
    pod: tuple[str, str]
    uid: str

    def __call__(self, metric: str) -> list[Series]:
        found = self.answers.by_pod[metric].get(self.pod, [])
        return [s for s in found if s.labels.get("uid", self.uid) == self.uid] if self.uid else found


def _containers(of: _PodSeries) -> list[dict[str, Any]]:
    requests: dict[str, dict[str, str]] = {}
    for s in of("kube_pod_container_resource_requests"):
        name = prom_labels.resource(s.labels.get("resource", ""))
        if name is not None:
            requests.setdefault(s.labels.get("container", ""), {})[name] = prom_labels.quantity_of(
                name, s.value
            )
    images = {s.labels.get("container", ""): s.labels.get("image", "") for s in of("kube_pod_container_info")}
    out = []
    for name in sorted(set(requests) | set(images)):
        container: dict[str, Any] = {"name": name}
        if images.get(name):
            container["image"] = images[name]
        if requests.get(name):
            container["resources"] = {"requests": dict(sorted(requests[name].items()))}
        out.append(container)
    return out


def _template(of: _PodSeries) -> dict[str, Any]:
    """The pod's template as :func:`karpy.record.templates.pod_template` keeps it."""
    labels = prom_labels.merged(of("kube_pod_labels"), prefix="label_")
    annotations = prom_labels.merged(of("kube_pod_annotations"), prefix="annotation_")
    selectors = prom_labels.merged(of("kube_pod_nodeselectors"), prefix="nodeselector_")
    spec: dict[str, Any] = {"containers": _containers(of)}
    tolerations = sorted(
        (prom_labels.toleration(s.labels) for s in of("kube_pod_tolerations")),
        key=lambda t: sorted(t.items()),
    )
    if tolerations:
        spec["tolerations"] = tolerations
    if selectors:
        spec["nodeSelector"] = selectors
    return templates.pod_template({"metadata": {"labels": labels, "annotations": annotations}, "spec": spec})


def _top(answers: _Answers, namespace: str, pod: str, owner: tuple[str, str]) -> model.OwnerKey:
    """The top owner: a ReplicaSet's Deployment, a Job's CronJob, else the owner (or the pod itself)."""
    kind, name = owner
    if not kind:
        return model.OwnerKey(namespace, model.BARE, pod)
    if kind == "ReplicaSet":
        rs_kind, rs_owner = answers.rs_owner.get((namespace, name), ("", ""))
        if rs_kind == model.DEPLOYMENT:
            return model.OwnerKey(namespace, model.DEPLOYMENT, rs_owner)
        deployment = name.rpartition("-")[0]  # <deployment>-<pod-template-hash>, without its owner series
        if not rs_kind and (model.DEPLOYMENT, namespace, deployment) in answers.replicas:
            return model.OwnerKey(namespace, model.DEPLOYMENT, deployment)
    if kind == model.JOB:
        job_kind, job_owner = answers.job_owner.get((namespace, name), ("", ""))
        if job_kind == model.CRONJOB:
            return model.OwnerKey(namespace, model.CRONJOB, job_owner)
    return model.OwnerKey(namespace, kind, name)


def _pod_life(answers: _Answers, clock: _Clock, created: Series) -> model.PodLife:
    of = answers.about(created)
    (namespace, name), owner = of.pod, _owner(of("kube_pod_owner"))
    phases = of("kube_pod_status_phase")
    running = _first(phases, lambda lb: lb.get("phase") in ("Running", "Succeeded", "Failed"))
    finished = _first(phases, lambda lb: lb.get("phase") in ("Succeeded", "Failed"))
    asked = [_stamp(s.value) for s in of("kube_pod_deletion_timestamp")]
    gone = [t for t in (*asked, clock.gone(created)) if t is not None]
    scheduled = [t for t in (_stamp(s.value) for s in of("kube_pod_status_scheduled_time")) if t is not None]
    node = max((s.labels.get("node", "") for s in of("kube_pod_info")), default="")
    born = _stamp(created.value) or created.samples[0][0]
    bound = min(scheduled) if scheduled else (running if node else None)
    return model.PodLife(
        namespace=namespace,
        name=name,
        owner=_top(answers, namespace, name, owner),
        template=_template(of),
        created=min(clock.end, max(clock.start, born)),
        job=owner[1] if owner[0] == model.JOB else "",
        bound=clock.at(None if bound is None else max(bound, born)),
        running=clock.at(running),
        finished=clock.at(finished),
        deleted=clock.at(min(gone) if gone else None),
        node=node,
        daemonset=owner[0] in recorder.NOT_WORKLOAD,
    )


# -- owners, jobs, DaemonSets -----------------------------------------------------------------


def _replicas(
    clock: _Clock, series: Series
) -> tuple[tuple[tuple[float, int], ...], float | None, float | None]:
    """(changes, created in the window, deleted) of a replicas series."""
    changes: list[tuple[float, int]] = []
    for t, value in series.samples:
        n = round(value)
        if not changes or changes[-1][1] != n:
            changes.append((t, n))
    first = series.samples[0][0]
    created = first if first > clock.start + clock.step / 2 else None
    gone = clock.gone(series)
    if gone is not None:
        changes.append((gone, 0))
    return tuple(changes), created, gone


def _owners(answers: _Answers, clock: _Clock, pods: Sequence[model.PodLife]) -> tuple[model.Owner, ...]:
    first: dict[model.OwnerKey, model.PodLife] = {}
    for pod in pods:
        if not pod.daemonset:
            first.setdefault(pod.owner, pod)
    out = []
    for key in sorted(first):
        series = answers.replicas.get((key.kind, key.namespace, key.name))
        if series is None or not series.samples:
            out.append(model.Owner(key, first[key].template))
            continue
        changes, created, deleted = _replicas(clock, series)
        rollouts: tuple[float, ...] = ()
        if key.kind == model.DEPLOYMENT:
            made = sorted(
                t
                for (ns, rs), t in answers.rs_created.items()
                if ns == key.namespace and answers.rs_owner.get((ns, rs)) == (model.DEPLOYMENT, key.name)
            )
            made = made[1:] if created is not None else made  # a new Deployment's first ReplicaSet
            rollouts = tuple(t for t in made if clock.start < t < clock.end)
        out.append(
            model.Owner(
                key,
                first[key].template,
                replicas=changes,
                rollouts=rollouts,
                created=created,
                deleted=deleted,
            )
        )
    return tuple(out)


def _jobs(answers: _Answers, clock: _Clock, pods: Sequence[model.PodLife]) -> tuple[model.JobLife, ...]:
    first: dict[tuple[str, str], model.PodLife] = {}
    for pod in pods:
        if pod.job:
            first.setdefault((pod.namespace, pod.job), pod)
    created = _values(answers.raw.get("kube_job_created", ()), "namespace", "job_name")
    completions = _values(answers.raw.get("kube_job_spec_completions", ()), "namespace", "job_name")
    parallelism = _values(answers.raw.get("kube_job_spec_parallelism", ()), "namespace", "job_name")

    def count(table: Mapping[tuple[str, ...], float], key: tuple[str, str]) -> int | None:
        value = table.get(key)
        return None if value is None or math.isnan(value) else round(value)

    return tuple(
        model.JobLife(
            key[0],
            key[1],
            pod.owner,
            pod.template,
            completions=count(completions, key),
            parallelism=count(parallelism, key),
            created=clock.at(_stamp(created.get(key, math.nan))),
        )
        for key, pod in sorted(first.items())
    )


def _daemon_sets(pods: Sequence[model.PodLife]) -> tuple[dict[str, Any], ...]:
    """A DaemonSet per DaemonSet its pods name, with the template of its first pod."""
    first: dict[tuple[str, str], model.PodLife] = {}
    for pod in pods:
        if pod.owner.kind == "DaemonSet":
            first.setdefault((pod.namespace, pod.owner.name), pod)
    out = []
    for (namespace, name), pod in sorted(first.items()):
        template = {"metadata": dict(pod.template.get("metadata") or {}), "spec": dict(pod.template["spec"])}
        labels = dict(template["metadata"].get("labels") or {}) or {"karpy.dev/daemonset": name}
        template["metadata"]["labels"] = labels
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"selector": {"matchLabels": labels}, "template": template},
            }
        )
    return tuple(out)


# -- nodes ------------------------------------------------------------------------------------

# taints a node carries for a while (registration, drain, Cluster Autoscaler's scale-down), not its own
_PASSING_TAINTS = (
    "karpenter.sh/",
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
)


def _nodes(answers: _Answers, clock: _Clock) -> tuple[model.NodeLife, ...]:
    def by_node(metric: str) -> dict[str, list[Series]]:
        out: dict[str, list[Series]] = {}
        for s in answers.raw.get(metric, ()):
            out.setdefault(s.labels.get("node", ""), []).append(s)
        return out

    ready, asked = by_node("kube_node_status_condition"), by_node("kube_node_deletion_timestamp")
    labels, taints = by_node("kube_node_labels"), by_node("kube_node_spec_taint")
    out = []
    for created in answers.raw.get("kube_node_created", ()):
        name = created.labels.get("node", "")
        born = _stamp(created.value) or created.samples[0][0]
        gone = [t for t in (*(_stamp(s.value) for s in asked.get(name, [])), clock.gone(created)) if t]
        life = recorder.node_life(
            name,
            prom_labels.merged(labels.get(name, []), prefix="label_"),
            launched=born,
            deleted=min(gone) if gone else None,
            at=clock.at,
        )
        if life is None:
            continue
        up = _first(ready.get(name, []), lambda _: True)
        kept = sorted(
            {
                tuple(sorted(t.items()))
                for t in (prom_labels.taint(s.labels) for s in taints.get(name, []))
                if not t["key"].startswith(_PASSING_TAINTS)
            }
        )
        out.append(
            dataclasses.replace(
                life,
                registered=life.launched,
                ready=clock.at(None if up is None else max(up, born)),
                taints=tuple(dict(t) for t in kept),
            )
        )
    return tuple(sorted(out, key=lambda n: (n.launched, n.name)))


# -- the recording ----------------------------------------------------------------------------


def rebuild(
    answers: Mapping[str, Sequence[Series]],
    *,
    start: float,
    end: float,
    step: float,
    server: str = "",
    node_pools: Sequence[Mapping[str, Any]] = (),
    node_classes: Sequence[Mapping[str, Any]] = (),
) -> Rebuilt:
    """The recording of the window from the answers to :data:`QUERIES` (by metric), its
    DaemonSets and the warnings (see the module docstring)."""
    indexed = _Answers(answers)
    clock = _Clock(start, end, step)
    lives = [_pod_life(indexed, clock, s) for s in answers.get("kube_pod_created", ()) if s.samples]
    pods = tuple(sorted(lives, key=lambda p: (p.created, p.namespace, p.name)))
    nodes = _nodes(indexed, clock)
    karpenter = sum(1 for n in nodes if n.node_pool)
    recording = model.Recording(
        start=start,
        end=end,
        pods=pods,
        owners=_owners(indexed, clock, pods),
        jobs=_jobs(indexed, clock, pods),
        nodes=nodes,
        node_pools=tuple(node_pools),
        node_classes=tuple(node_classes),
        node_claims=karpenter or (1 if node_pools else 0),
        source="prometheus",
        server=server,
    )
    warnings = [f"{q.metric}: no series: {q.gap}" for q in QUERIES if q.gap and not answers.get(q.metric)]
    warnings += list(GAPS)
    unlabelled = len(answers.get("kube_node_created", ())) - len(nodes)
    if unlabelled:
        warnings.append(
            f"kube_node_labels: {unlabelled} nodes without {wk.INSTANCE_TYPE} left out "
            f"({_NO_LABELS}=nodes=[...])"
        )
    if nodes and not karpenter:
        warnings.append(
            f"no node has a {wk.NODEPOOL} label: recorded as a Cluster Autoscaler cluster "
            f"(if Karpenter ran, {_NO_LABELS}=nodes=[{wk.NODEPOOL}])"
        )
    if recording.node_claims and not node_pools:
        warnings.append("NodePools and NodeClasses are not in kube-state-metrics: give --nodepools FILE")
    return Rebuilt(recording, _daemon_sets(pods), tuple(warnings), step)


def trace(
    rebuilt: Rebuilt, *, name: str, catalog: str, hasher: anonymize.Hasher | None = None
) -> dict[str, Any]:
    """The trace document (:func:`karpy.record.writer.trace`) with the DaemonSets the pods showed,
    no launch latency (not recorded), and the step in its description; hashed under ``hasher``."""
    recording, daemon_sets = rebuilt.recording, list(rebuilt.daemon_sets)
    if hasher is not None:
        recording = anonymize.recording(recording, hasher)
        daemon_sets = anonymize.objects(daemon_sets, hasher)
    where = f" from {recording.server}" if recording.server else ""
    description = (
        f"rebuilt by karpy record --from-prometheus{where}: pod and node times known to "
        f"{encode.duration(rebuilt.step)} (the step)"
    )
    doc = writer.trace(recording, name=name, catalog=catalog, description=description)
    doc.pop("cloud", None)  # node launches were not seen: no launch latency to fit
    if not daemon_sets:
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "workloads":
            out["daemonSets"] = daemon_sets
        out[key] = value
    return out


def dump(document: Mapping[str, Any], *, step: float) -> str:
    """The trace as YAML, with a comment saying how fine its times are."""
    note = (
        f"# Rebuilt from kube-state-metrics series through Prometheus: times are known to "
        f"{encode.duration(step)} (the step).\n"
    )
    return note + writer.dump(document)
