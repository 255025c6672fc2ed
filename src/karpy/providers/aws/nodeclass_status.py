"""EC2NodeClass status: what the selector terms resolve to, the readiness conditions, the finalizer.

Upstream's ``pkg/controllers/nodeclass`` (status, hash and termination) as one loop task,
``aws.nodeclass``. Every pass walks the EC2NodeClasses of the cluster state by name:

- **resolution**, each part on its own (a failure never stops another part or NodeClass):
  subnets and security groups (:mod:`.network`), AMIs for the cluster's Kubernetes version
  (:mod:`.amis`), the instance profile (:mod:`.instanceprofile`; existence re-checked every
  15 min) and, when the spec has terms, capacity reservations (:mod:`.capacityreservations`);
- **status** (a merge patch): ``subnets``, ``securityGroups``, ``amis``, ``instanceProfile``,
  ``capacityReservations`` and the conditions ``SubnetsReady``, ``SecurityGroupsReady``,
  ``AMIsReady``, ``InstanceProfileReady``, (``CapacityReservationsReady``) and ``Ready`` (all of
  them True), each with ``observedGeneration``; a condition's ``lastTransitionTime`` moves only
  when its status flips; conditions other controllers own are kept. A part that failed on an
  AWS error keeps what it resolved before (the condition says it is stale); a part that
  resolved to nothing is written empty. Each failure is a Warning event naming the spec field
  (e.g. ``spec.amiSelectorTerms[0].ssmParameter: parameter /golden/ami not found``), once per
  distinct message while it lasts; ``karpy_ec2nodeclass_ready`` says 1 or 0;
- **metadata**: the drift hash annotations (:func:`.drift.static_hash`) and the finalizer
  ``karpenter.k8s.aws/termination``.

Nothing is written when nothing changed (the pass compares with the object's current status and
annotations). Requeue: 5 min (subnets too; upstream refreshes those every minute), 1 min while
any NodeClass is not Ready. **Deletion**: while NodeClaims use the class it waits (an event
every 10 min); then it deletes the managed instance profile (``spec.role`` only), calls
``on_deleted`` (the provider deletes the class's launch templates) and drops the finalizer.
Built by the operator wiring (``--provider aws``), woken by :meth:`on_event`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model import errors as model_errors
from karpy.model.nodeclass import CapacityReservation, EC2NodeClass, EC2NodeClassStatus
from karpy.model.objects import Condition, NodeClaim
from karpy.providers.aws import amis as amis_mod
from karpy.providers.aws import capacityreservations, drift, errors, instanceprofile, network, sdk
from karpy.providers.aws.cluster import ClusterInfo
from karpy.providers.aws.metrics import AWSMetrics
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["CONDITIONS", "FINALIZER", "READY", "REQUEUE", "NodeClassStatusController", "status_json"]

KIND = "EC2NodeClass"
FINALIZER = "karpenter.k8s.aws/termination"
REQUEUE = 300.0
RETRY = 60.0  # while a NodeClass is not Ready, or a write failed
WAIT_POLL = 30.0  # while a deleting NodeClass waits on its NodeClaims (their deletion wakes us too)
WAIT_EVENT_EVERY = 600.0
PROFILE_TTL = 15 * 60.0

SUBNETS_READY = "SubnetsReady"
SECURITY_GROUPS_READY = "SecurityGroupsReady"
AMIS_READY = "AMIsReady"
INSTANCE_PROFILE_READY = "InstanceProfileReady"
CAPACITY_RESERVATIONS_READY = "CapacityReservationsReady"
READY = "Ready"
CONDITIONS = (
    SUBNETS_READY,
    SECURITY_GROUPS_READY,
    AMIS_READY,
    INSTANCE_PROFILE_READY,
    CAPACITY_RESERVATIONS_READY,
    READY,
)
_STATUS_KEYS = ("subnets", "securityGroups", "amis", "instanceProfile", "capacityReservations", "conditions")
# AMI and instance-profile failures that say nothing about what the spec selects: the part
# keeps its last resolution (the selector parts keep theirs on any AWS error, see _discover)
_STALE = frozenset(
    {
        "AMIDiscoveryFailed",
        "SSMParameterError",
        "KubernetesVersionUnknown",
        "InstanceProfileCreationFailed",
        "InstanceProfileCheckFailed",
    }
)
T = TypeVar("T")


def _compact(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v not in ("", None, False)}


def status_json(status: EC2NodeClassStatus) -> dict[str, Any]:
    """The ``status`` of an EC2NodeClass as written (empty fields left out)."""
    out = {
        "subnets": [_compact({"id": s.id, "zone": s.zone, "zoneID": s.zone_id}) for s in status.subnets],
        "securityGroups": [_compact({"id": g.id, "name": g.name}) for g in status.security_groups],
        "amis": [
            _compact(
                {
                    "id": a.id,
                    "name": a.name,
                    "deprecated": a.deprecated,
                    "requirements": encode.requirements(a.requirements),
                }
            )
            for a in status.amis
        ],
        "instanceProfile": status.instance_profile,
        "capacityReservations": [
            _compact(
                {
                    "id": c.id,
                    "instanceType": c.instance_type,
                    "availabilityZone": c.availability_zone,
                    "ownerID": c.owner_id,
                    "instanceMatchCriteria": c.instance_match_criteria,
                    "reservationType": c.reservation_type,
                    "state": c.state,
                    "endTime": None if c.end_time is None else encode.time(c.end_time),
                }
            )
            for c in status.capacity_reservations
        ],
        "conditions": [encode.condition(c) for c in status.conditions],
    }
    return {k: v for k, v in out.items() if v}


@dataclasses.dataclass(frozen=True, slots=True)
class _Failure:
    condition: str
    reason: str
    message: str  # names the spec field


@dataclasses.dataclass(frozen=True, slots=True)
class _Selector:
    """A selector part: its condition, terms field, reasons, and what it selects (None: nothing
    found is fine)."""

    condition: str
    terms: str
    missing: str
    failed: str
    what: str | None


_SUBNETS = _Selector(
    SUBNETS_READY, network.SUBNET_TERMS, "SubnetsNotFound", "SubnetDiscoveryFailed", "subnet"
)
_GROUPS = _Selector(
    SECURITY_GROUPS_READY,
    network.SECURITY_GROUP_TERMS,
    "SecurityGroupsNotFound",
    "SecurityGroupDiscoveryFailed",
    "security group",
)
# reservations come and go: none found is no failure
_RESERVATIONS = _Selector(
    CAPACITY_RESERVATIONS_READY,
    capacityreservations.TERMS,
    "CapacityReservationsNotFound",
    "CapacityReservationDiscoveryFailed",
    None,
)


def _discover(
    part: _Selector, fetch: Callable[[], Iterable[T]], previous: tuple[T, ...], failures: list[_Failure]
) -> tuple[T, ...]:
    """What ``fetch`` found. A bad term, or nothing found (when the part names what it selects),
    is a ``missing`` failure; an AWS error a ``failed`` one keeping ``previous``."""
    try:
        found = tuple(fetch())
    except network.SelectorError as exc:
        failures.append(_Failure(part.condition, part.missing, str(exc)))
        return ()
    except errors.AWSError as exc:
        failures.append(_Failure(part.condition, part.failed, f"{part.terms}: {exc}"))
        return previous
    if not found and part.what is not None:
        failures.append(
            _Failure(part.condition, part.missing, f"{part.terms}: no {part.what} matches the terms")
        )
    return found


class NodeClassStatusController:
    name = "aws.nodeclass"

    def __init__(
        self,
        ctx: Context,
        clients: sdk.Clients,
        *,
        cluster: Callable[[], ClusterInfo],
        metrics: AWSMetrics,
        on_deleted: Callable[[EC2NodeClass], object] | None = None,
        ami_cache: amis_mod.AMICache | None = None,
    ) -> None:
        self.ctx = ctx
        self.clients = clients
        self.cluster = cluster
        self.metrics = metrics
        self.on_deleted = on_deleted
        self.ami_cache = ami_cache if ami_cache is not None else amis_mod.AMICache(ctx.clock)
        self._seen: dict[str, EC2NodeClass] = {}  # name -> the spec view last reconciled
        self._finalized: dict[str, str] = {}  # name -> uid known to carry the finalizer
        self._warned: dict[str, set[tuple[str, str]]] = {}  # name -> the failures evented
        self._written: dict[str, tuple[EC2NodeClass, dict[str, Any]]] = {}  # name -> (seen, patch sent)
        self._profiles: dict[str, tuple[tuple[object, ...], str, float]] = {}  # name -> (inputs, profile, at)
        self._waiting_since: dict[str, float] = {}  # name -> last "waiting on NodeClaims" event
        self._due: dict[str, float] = {}  # name -> when its next pass is due
        self._dirty: set[str] = set()  # names an event asked to look at now

    # -- wake-ups ------------------------------------------------------------------------
    @staticmethod
    def _view(nc: EC2NodeClass) -> EC2NodeClass:
        """What a pass reads of a NodeClass (its status and annotations are what it writes)."""
        return dataclasses.replace(nc, status=EC2NodeClassStatus(), annotations={})

    def on_event(self, event: ObjectEvent) -> bool:
        """True when an EC2NodeClass's spec, generation or deletion changed since the last pass,
        or when a NodeClaim of a deleting EC2NodeClass went away."""
        obj = event.obj
        name = ""
        if isinstance(obj, EC2NodeClass):
            if event.type == DELETED or self._seen.get(obj.name) != self._view(obj):
                name = obj.name
        elif isinstance(obj, NodeClaim) and event.type == DELETED:
            ref = obj.node_class_ref
            nc = self.ctx.cluster.node_classes.get((KIND, ref.name)) if ref and ref.kind == KIND else None
            if isinstance(nc, EC2NodeClass) and nc.deleting:
                name = nc.name
        if name:
            self._dirty.add(name)
        return bool(name)

    # -- the pass ------------------------------------------------------------------------
    def reconcile(self) -> Result:
        now = self.ctx.now()
        classes = {
            key[1]: nc
            for key, nc in self.ctx.cluster.node_classes.items()
            if key[0] == KIND and isinstance(nc, EC2NodeClass)
        }
        for name in sorted(classes):
            if name not in self._dirty and now < self._due.get(name, now):
                continue  # not due, nothing changed: each class keeps its own pace
            self._dirty.discard(name)
            nc = classes[name]
            wait = self._finalize(nc, now) if nc.deleting else self._reconcile(nc, now)
            self._due[name] = now + wait
        for name in [n for n in set(self._seen) | set(self._due) if n not in classes]:
            self._forget(name)
        due = [self._due[n] for n in classes if n in self._due]
        return Result(requeue_after=max(0.0, min(due, default=now + REQUEUE) - now))

    def _reconcile(self, nc: EC2NodeClass, now: float) -> float:
        self._seen[nc.name] = self._view(nc)
        info = self.cluster()
        status, failures = self._resolve(nc, info, now)
        body: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        if self._finalized.get(nc.name) != nc.uid:
            try:
                raw = self.ctx.kube.get(KIND, nc.name)
            except model_errors.NotFound:
                return REQUEUE
            finalizers = list(raw.get("metadata", {}).get("finalizers") or [])
            if FINALIZER not in finalizers:
                meta["finalizers"] = [*finalizers, FINALIZER]
            else:
                self._finalized[nc.name] = nc.uid
        want_hash = drift.static_hash(nc)
        if (
            nc.annotations.get(drift.HASH_ANNOTATION) != want_hash
            or nc.annotations.get(drift.HASH_VERSION_ANNOTATION) != drift.HASH_VERSION
        ):
            meta["annotations"] = {
                drift.HASH_ANNOTATION: want_hash,
                drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION,
            }
        if meta:
            body["metadata"] = meta
        written = status_json(status)
        if written != status_json(nc.status):
            body["status"] = {**dict.fromkeys(_STATUS_KEYS), **written}
        last = self._written.get(nc.name)
        if body and not (
            last is not None and last[0] is nc and last[1] == body
        ):  # else: our write, not seen yet
            try:
                self.ctx.kube.patch(KIND, nc.name, body)
            except model_errors.NotFound:
                return REQUEUE
            except model_errors.KubeError as exc:
                self.ctx.log.warning("writing the status of EC2NodeClass %s failed: %s", nc.name, exc)
                return RETRY
            self._written[nc.name] = (nc, body)
            if "finalizers" in meta:
                self._finalized[nc.name] = nc.uid
        self._report(nc.name, failures)
        wait = RETRY if failures else REQUEUE
        expiry = self.ami_cache.next_custom_expiry()
        if expiry is not None and any(t.ssm_parameter for t in nc.ami_selector_terms):
            wait = min(wait, expiry - now)  # a changed ssmParameter is seen within its TTL
        return wait

    def _report(self, name: str, failures: list[_Failure]) -> None:
        current = {(f.reason, f.message) for f in failures}
        for reason, message in sorted(current - self._warned.get(name, set())):
            self.ctx.event(KIND, name, reason, message, warning=True)
        self._warned[name] = current
        self.metrics.nodeclass_ready.labels(nodeclass=name).set(0 if failures else 1)

    # -- resolution ----------------------------------------------------------------------
    def _resolve(
        self, nc: EC2NodeClass, info: ClusterInfo, now: float
    ) -> tuple[EC2NodeClassStatus, list[_Failure]]:
        old = nc.status
        ec2 = self.clients.ec2
        failures: list[_Failure] = []

        def failed(condition: str, reason: str, message: str) -> bool:
            """Record a failure; True when the part keeps its last resolution."""
            failures.append(_Failure(condition, reason, message))
            return reason in _STALE

        subnets = _discover(
            _SUBNETS,
            lambda: [s.status() for s in network.resolve_subnets(ec2, nc.subnet_selector_terms)],
            old.subnets,
            failures,
        )
        groups = _discover(
            _GROUPS,
            lambda: network.resolve_security_groups(ec2, nc.security_group_selector_terms),
            old.security_groups,
            failures,
        )
        amis = old.amis
        try:
            amis = tuple(
                amis_mod.resolve_amis(
                    self.clients, nc, kubernetes_version=info.kubernetes_version, cache=self.ami_cache
                )
            )
        except amis_mod.AMIError as exc:
            if not failed(AMIS_READY, exc.reason, str(exc)):
                amis = ()
        else:
            if not amis:
                failed(AMIS_READY, "AMINotFound", f"{amis_mod.TERMS}: no AMI matches the terms")
        profile = old.instance_profile
        try:
            profile = self._instance_profile(nc, info, now)
        except instanceprofile.InstanceProfileError as exc:
            if not failed(INSTANCE_PROFILE_READY, exc.reason, str(exc)):
                profile = ""
        terms = nc.capacity_reservation_selector_terms
        reservations: tuple[CapacityReservation, ...] = ()
        if terms:
            reservations = _discover(
                _RESERVATIONS,
                lambda: capacityreservations.resolve_capacity_reservations(ec2, terms, now=now),
                old.capacity_reservations,
                failures,
            )
        conditions = self._conditions(nc, failures, now)
        status = EC2NodeClassStatus(subnets, groups, amis, profile, reservations, conditions)
        return status, failures

    def _instance_profile(self, nc: EC2NodeClass, info: ClusterInfo, now: float) -> str:
        inputs = (nc.uid, nc.role, nc.instance_profile, tuple(sorted(nc.tags.items())), info.name)
        held = self._profiles.get(nc.name)
        if held is not None and held[0] == inputs and now - held[2] < PROFILE_TTL:
            return held[1]
        self._profiles.pop(nc.name, None)
        name = instanceprofile.ensure_instance_profile(
            self.clients.iam, nc, cluster=info.name, region=self.clients.region
        )
        self._profiles[nc.name] = (inputs, name, now)
        return name

    def _conditions(self, nc: EC2NodeClass, failures: list[_Failure], now: float) -> tuple[Condition, ...]:
        by_type = {f.condition: f for f in failures}
        managed = [c for c in CONDITIONS if c != READY]
        if not nc.capacity_reservation_selector_terms:
            managed.remove(CAPACITY_RESERVATIONS_READY)
        new: list[Condition] = []
        for kind in managed:
            failure = by_type.get(kind)
            if failure is None:
                new.append(Condition(kind, "True", kind, observed_generation=nc.generation))
            else:
                new.append(Condition(kind, "False", failure.reason, failure.message, None, nc.generation))
        failing = [c.type for c in new if c.status != "True"]
        if failing:
            message = ", ".join(f"{kind}=False" for kind in failing)
            new.append(Condition(READY, "False", "NotReady", message, None, nc.generation))
        else:
            new.append(Condition(READY, "True", READY, observed_generation=nc.generation))
        out: list[Condition] = []
        for cond in new:
            prior = nc.status.condition(cond.type)
            keep = prior is not None and prior.status == cond.status and prior.last_transition is not None
            since = prior.last_transition if keep and prior is not None else now
            out.append(dataclasses.replace(cond, last_transition=since))
        out += [c for c in nc.status.conditions if c.type not in CONDITIONS]  # owned by others
        return tuple(out)

    # -- deletion ------------------------------------------------------------------------
    def _finalize(self, nc: EC2NodeClass, now: float) -> float:
        try:
            raw = self.ctx.kube.get(KIND, nc.name)
        except model_errors.NotFound:
            self._forget(nc.name)
            return REQUEUE
        finalizers = list(raw.get("metadata", {}).get("finalizers") or [])
        if FINALIZER not in finalizers:
            return REQUEUE
        self._seen[nc.name] = self._view(nc)
        using = sorted(
            c.name
            for c in self.ctx.cluster.claims.values()
            if c.node_class_ref is not None
            and c.node_class_ref.kind == KIND
            and c.node_class_ref.name == nc.name
        )
        if using:
            since = self._waiting_since.get(nc.name)
            if since is None or now - since >= WAIT_EVENT_EVERY:
                shown = ", ".join(using[:5]) + (f" and {len(using) - 5} more" if len(using) > 5 else "")
                self.ctx.event(
                    KIND, nc.name, "WaitingOnNodeClaimTermination", f"waiting on NodeClaims {shown}"
                )
                self._waiting_since[nc.name] = now
            return WAIT_POLL
        info = self.cluster()
        try:
            if nc.role:
                instanceprofile.delete_instance_profile(
                    self.clients.iam, nc, cluster=info.name, region=self.clients.region
                )
            if self.on_deleted is not None:
                self.on_deleted(nc)
        except model_errors.CloudError as exc:
            self._report(nc.name, [_Failure(READY, "TerminationFailed", f"cleaning up: {exc}")])
            return RETRY
        try:
            self.ctx.kube.patch(
                KIND, nc.name, {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER]}}
            )
        except model_errors.NotFound:
            pass
        except model_errors.KubeError as exc:
            self.ctx.log.warning("removing the finalizer of EC2NodeClass %s failed: %s", nc.name, exc)
            return RETRY
        self._forget(nc.name)
        return REQUEUE

    def _forget(self, name: str) -> None:
        for store in (
            self._seen,
            self._finalized,
            self._warned,
            self._written,
            self._profiles,
            self._waiting_since,
            self._due,
        ):
            store.pop(name, None)
        self._dirty.discard(name)
        with contextlib.suppress(KeyError):
            self.metrics.nodeclass_ready.remove(name)
