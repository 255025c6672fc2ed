"""Interruption handling: EC2 and AWS Health events from an SQS queue, acted on before the instance goes.

Karpenter's ``pkg/controllers/interruption``, on when ``INTERRUPTION_QUEUE`` names an SQS queue
that EventBridge rules feed. :func:`parse` reads one message body (an EventBridge envelope: version
``0``, ``source``, ``detail-type``, ``time``, ``detail``) into a :class:`Message` of one kind:

- ``spot_interrupted`` (aws.ec2 "EC2 Spot Instance Interruption Warning"): the spot offering
  (instance type, zone) is marked unavailable for 3 minutes and the NodeClaim deleted;
- ``rebalance_recommendation`` (aws.ec2 "EC2 Instance Rebalance Recommendation"): an event only;
- ``scheduled_change`` (aws.health "AWS Health Event", service EC2, category scheduledChange,
  the instances in ``affectedEntities``): the NodeClaim is deleted;
- ``instance_stopped`` / ``instance_terminated`` (aws.ec2 "EC2 Instance State-change
  Notification" to stopping or stopped / shutting-down or terminated): the NodeClaim is deleted;
- ``capacity_reservation_interrupted`` (aws.ec2 "EC2 Capacity Reservation Instance Interruption
  Warning"): the NodeClaim is deleted;
- ``no_op``: any other version, source, detail type, Health event or state: nothing.

A body that is not a JSON object or lacks the envelope's fields is malformed (``None``): logged
and deleted. :class:`InterruptionController` long-polls the queue on a daemon thread of its own
(``ReceiveMessage`` of up to 10 messages, 20 s visibility, ``WaitTimeSeconds`` long poll), hands
each batch to the loop thread through a thread-safe queue and wakes the loop; its
:meth:`~InterruptionController.reconcile`, on the loop thread, finds the NodeClaims whose
providerID (``aws:///<zone>/<instance-id>``) names the instances, records events on them and
their Nodes, and deletes them through the API (termination then taints, drains before the
two-minute deadline, and provisioning replaces the pods). A message is deleted from the queue
once handled (or when malformed, or when no claim knows the instance); when acting failed (a
Kubernetes error) it stays, and SQS hands it out again after the visibility timeout.

Built and started by the operator (``--provider aws``) when ``INTERRUPTION_QUEUE`` is set; a
missing queue makes :meth:`~InterruptionController.start` raise, and the operator runs on without
interruption handling.
"""

from __future__ import annotations

import json
import logging
import queue as queue_mod
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model import errors as model_errors
from karpy.model import labels
from karpy.model.objects import Node, NodeClaim
from karpy.providers.aws import errors, instances, sdk
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.unavailable import UnavailableOfferings

__all__ = ["ACTING_KINDS", "KINDS", "InterruptionController", "Message", "parse"]

SPOT_INTERRUPTED = "spot_interrupted"
REBALANCE_RECOMMENDATION = "rebalance_recommendation"
SCHEDULED_CHANGE = "scheduled_change"
INSTANCE_STOPPED = "instance_stopped"
INSTANCE_TERMINATED = "instance_terminated"
CAPACITY_RESERVATION_INTERRUPTED = "capacity_reservation_interrupted"
NO_OP = "no_op"
# the kinds whose NodeClaims are deleted (upstream's CordonAndDrain action)
ACTING_KINDS = frozenset(
    (
        SPOT_INTERRUPTED,
        SCHEDULED_CHANGE,
        INSTANCE_STOPPED,
        INSTANCE_TERMINATED,
        CAPACITY_RESERVATION_INTERRUPTED,
    )
)
KINDS = (*sorted(ACTING_KINDS), REBALANCE_RECOMMENDATION, NO_OP)
CORDON_AND_DRAIN, NO_ACTION = "CordonAndDrain", "NoAction"

# ReceiveMessage as upstream's SQS provider sends it
MAX_MESSAGES, VISIBILITY_TIMEOUT, WAIT_SECONDS = 10, 20, 20
IDLE_REQUEUE = 60.0  # reconcile runs when woken; this is a safety net
BACKOFF_MIN, BACKOFF_MAX = 1.0, 30.0  # after a failed ReceiveMessage
STOP_JOIN = 1.5  # stop() waits this long for the poll thread (a long poll in flight is left to end)
THREAD_NAME = "karpy-aws-interruption"

# (source, detail-type) of the events naming one instance in ``detail.instance-id``
_INSTANCE_EVENTS = {
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"): SPOT_INTERRUPTED,
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"): REBALANCE_RECOMMENDATION,
    ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"): CAPACITY_RESERVATION_INTERRUPTED,
}
_STATE_CHANGE = ("aws.ec2", "EC2 Instance State-change Notification")
_HEALTH = ("aws.health", "AWS Health Event")
_STATES = {
    "stopping": INSTANCE_STOPPED,
    "stopped": INSTANCE_STOPPED,
    "shutting-down": INSTANCE_TERMINATED,
    "terminated": INSTANCE_TERMINATED,
}
# the (reason, message) of the event on the NodeClaim and its Node, upstream's; Warning but rebalance
_NOTICES = {
    SPOT_INTERRUPTED: ("SpotInterrupted", "Spot interruption warning was triggered"),
    REBALANCE_RECOMMENDATION: ("SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered"),
    SCHEDULED_CHANGE: ("InstanceUnhealthy", "An unhealthy warning was triggered for the instance"),
    INSTANCE_STOPPED: ("InstanceStopping", "Instance is stopping"),
    INSTANCE_TERMINATED: ("InstanceTerminating", "Instance is terminating"),
    CAPACITY_RESERVATION_INTERRUPTED: (
        "CapacityReservationInterrupted",
        "Capacity reservation interruption warning was triggered",
    ),
}
TERMINATING = "TerminatingOnInterruption"

log = logging.getLogger("karpy.aws.interruption")


@dataclass(frozen=True, slots=True)
class Message:
    """One parsed queue message: its kind, the instances it is about, the event's time, its id."""

    kind: str
    instance_ids: tuple[str, ...]
    start_time: float  # the envelope's ``time``, epoch seconds
    raw_id: str  # the EventBridge event id ("" when absent)


def _time(value: Any) -> float | None:
    """RFC 3339 (``2026-01-01T00:00:00Z``, fractions and offsets allowed) to epoch seconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def _detail(key: tuple[str, str], detail: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """(kind, instance ids) of a known event's ``detail``; None when the detail is malformed."""
    instance = detail.get("instance-id")
    ids = (instance,) if isinstance(instance, str) and instance else None
    if key in _INSTANCE_EVENTS:
        return None if ids is None else (_INSTANCE_EVENTS[key], ids)
    if key == _STATE_CHANGE:
        state = detail.get("state")
        if ids is None or not isinstance(state, str):
            return None
        return (_STATES[state], ids) if state in _STATES else (NO_OP, ())  # pending, running: nothing
    if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
        return NO_OP, ()  # another AWS Health event
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list) or not all(isinstance(e, Mapping) for e in entities):
        return None
    values = (e.get("entityValue") for e in entities)
    return SCHEDULED_CHANGE, tuple(dict.fromkeys(v for v in values if isinstance(v, str) and v))


def parse(body: str) -> Message | None:
    """The :class:`Message` of one SQS message body; None when it is malformed (not a JSON object,
    no ``version``/``source``/``detail-type``/``time``, or a known event without its detail).
    Another version, source or detail type is a ``no_op`` Message (upstream's parser key)."""
    try:
        envelope = json.loads(body)
    except (ValueError, TypeError):
        return None
    if not isinstance(envelope, dict):
        return None
    version, source, detail_type = (envelope.get(k) for k in ("version", "source", "detail-type"))
    start = _time(envelope.get("time"))
    if start is None or not all(isinstance(v, str) for v in (version, source, detail_type)):
        return None
    raw_id = envelope.get("id")
    raw_id = raw_id if isinstance(raw_id, str) else ""
    key = (str(source), str(detail_type))
    if version != "0" or (key not in _INSTANCE_EVENTS and key not in (_STATE_CHANGE, _HEALTH)):
        return Message(NO_OP, (), start, raw_id)
    detail = envelope.get("detail")
    parsed = _detail(key, detail) if isinstance(detail, Mapping) else None
    return None if parsed is None else Message(parsed[0], parsed[1], start, raw_id)


class InterruptionController:
    """Long-polls the interruption queue (:meth:`start`) and acts on its messages (:meth:`reconcile`)."""

    name = "aws.interruption"

    def __init__(
        self,
        ctx: Context,
        clients: sdk.Clients,
        *,
        queue: str,
        unavailable: UnavailableOfferings,
        metrics: AWSMetrics,
        wake: Callable[[], None] = lambda: None,
        wait_seconds: int = WAIT_SECONDS,
        active: Callable[[], bool] = lambda: True,
    ) -> None:
        if not queue:
            raise ValueError("InterruptionController needs a queue name (INTERRUPTION_QUEUE)")
        self.ctx = ctx
        self.queue = queue
        self.wait_seconds = wait_seconds
        self._sqs = clients.sqs
        self._unavailable = unavailable
        self._metrics = metrics
        self._wake = wake
        self._active = active  # False on a replica that is not the leader: it leaves the queue alone
        self._url: str | None = None
        self._inbox: queue_mod.Queue[dict[str, Any]] = queue_mod.Queue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # claims deleted here (marked for deletion in the cluster state until they are gone:
        # the watch echo of the delete may lag behind a second message for the same instance)
        self._deleted: set[str] = set()
        self._index: dict[str, list[str]] = {}  # instance id -> claim names (sorted)
        self._index_version: int | None = None

    # -- the queue -----------------------------------------------------------------------
    def _aws(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        try:
            return errors.call(fn, **kwargs)
        except errors.AWSError as exc:
            self._metrics.api_errors.labels(operation=exc.operation, code=exc.code).inc()
            raise

    @property
    def queue_url(self) -> str:
        """The queue's URL (``GetQueueUrl`` once); AWSError naming ``INTERRUPTION_QUEUE`` if it fails."""
        if self._url is None:
            try:
                found = self._aws(self._sqs.get_queue_url, QueueName=self.queue)
            except errors.AWSError as exc:
                what = "does not exist" if exc.not_found else "cannot be resolved"
                text = f"interruption queue {self.queue!r} (INTERRUPTION_QUEUE) {what}"
                raise errors.AWSError(exc.operation, exc.code, f"{text}: {exc.aws_message or exc}") from None
            self._url = str(found["QueueUrl"])
        return self._url

    def start(self) -> None:
        """Resolve the queue (raising AWSError when that fails) and start the long-poll thread."""
        url = self.queue_url
        if self._thread is not None and self._thread.is_alive() and not self._stopping.is_set():
            return
        self._stopping = threading.Event()  # a thread left in a long poll by stop() keeps its own
        self._thread = threading.Thread(
            target=self._run, args=(self._stopping,), name=THREAD_NAME, daemon=True
        )
        self._thread.start()
        log.info("watching interruption queue %s (%s)", self.queue, url)

    def stop(self) -> None:
        """Stop the long-poll thread; returns within :data:`STOP_JOIN` s even with a poll in flight
        (the daemon thread ends when it returns; messages it received then reappear in the queue)."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=STOP_JOIN)

    def _receive(self) -> list[dict[str, Any]]:
        out = self._aws(
            self._sqs.receive_message,
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=MAX_MESSAGES,
            VisibilityTimeout=VISIBILITY_TIMEOUT,
            WaitTimeSeconds=self.wait_seconds,
            AttributeNames=["SentTimestamp"],
            MessageAttributeNames=["All"],
        )
        return list(out.get("Messages") or [])

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        for raw in batch:
            self._inbox.put(raw)
        if batch:
            self._wake()

    def poll_once(self) -> int:
        """One ReceiveMessage on the caller's thread; the messages go to :meth:`reconcile` (woken).
        Returns how many came; raises AWSError when the call fails."""
        batch = self._receive()
        self._deliver(batch)
        return len(batch)

    def _run(self, stopping: threading.Event) -> None:
        failures = 0
        while not stopping.is_set():
            if not self._active():
                stopping.wait(1.0)  # a follower must not take messages only the leader acts on
                continue
            try:
                batch = self._receive()
            except Exception as exc:  # the thread must not die: nothing else would poll
                delay = min(BACKOFF_MAX, BACKOFF_MIN * 2.0**failures)
                failures += 1
                if isinstance(exc, errors.AWSError):
                    log.warning("interruption queue %s: %s; retrying in %.0f s", self.queue, exc, delay)
                else:
                    log.exception(
                        "interruption queue %s: receiving failed; retrying in %.0f s", self.queue, delay
                    )
                stopping.wait(delay)
                continue
            failures = 0
            if stopping.is_set():
                return  # stopped while polling: the batch reappears after the visibility timeout
            self._deliver(batch)
            if not batch and self.wait_seconds < 1:
                stopping.wait(1.0)  # a short poll (wait_seconds 0) must not spin on an empty queue

    def _delete_message(self, raw: Mapping[str, Any]) -> None:
        try:
            self._aws(
                self._sqs.delete_message, QueueUrl=self.queue_url, ReceiptHandle=raw.get("ReceiptHandle", "")
            )
        except errors.AWSError as exc:
            log.warning(
                "interruption queue %s: deleting message %s failed: %s", self.queue, raw.get("MessageId"), exc
            )
            return
        self._metrics.interruption_deleted.inc()

    # -- the loop thread -----------------------------------------------------------------
    def reconcile(self) -> Result:
        """Handle every message received so far; delete each from the queue once handled."""
        cluster = self.ctx.cluster
        gone = {name for name in self._deleted if name not in cluster.claims}
        if gone:
            cluster.unmark_for_deletion(*gone)
            self._deleted -= gone
        while True:
            try:
                raw = self._inbox.get_nowait()
            except queue_mod.Empty:
                break
            if self._handle(raw):
                self._delete_message(raw)
        return Result(requeue_after=IDLE_REQUEUE)

    def _handle(self, raw: Mapping[str, Any]) -> bool:
        """Act on one SQS message; True when it may be deleted from the queue."""
        body = raw.get("Body")
        message = parse(body) if isinstance(body, str) else None
        if message is None:
            log.warning(
                "interruption queue %s: malformed message %s, deleting it", self.queue, raw.get("MessageId")
            )
            return True
        self._metrics.interruption_received.labels(message_type=message.kind).inc()
        sent = (raw.get("Attributes") or {}).get("SentTimestamp")
        if isinstance(sent, str) and sent.isdigit():
            self._metrics.interruption_queue_duration.observe(max(0.0, self.ctx.now() - int(sent) / 1000.0))
        if message.kind == NO_OP:
            return True
        done = True
        for instance_id in message.instance_ids:
            for name in self._claims_of(instance_id):
                claim = self.ctx.cluster.claims.get(name)
                if claim is not None and not self._act(message, claim):
                    done = False
        return done

    def _claims_of(self, instance_id: str) -> list[str]:
        """The names of the NodeClaims whose providerID names ``instance_id``."""
        cluster = self.ctx.cluster
        version = cluster.store_version("claims")
        if version != self._index_version:
            index: dict[str, list[str]] = {}
            for name in cluster.claim_names():
                parsed = instances.parse(cluster.claims[name].provider_id)
                if parsed is not None:
                    index.setdefault(parsed[1], []).append(name)
            self._index, self._index_version = index, version
        return self._index.get(instance_id, [])

    def _node_of(self, claim: NodeClaim) -> Node | None:
        node = self.ctx.cluster.node_for_provider(claim.provider_id)
        if node is None and claim.node_name:
            node = self.ctx.cluster.nodes.get(claim.node_name)
        return node

    def _notify(self, claim: NodeClaim, node: Node | None, reason: str, text: str, *, warning: bool) -> None:
        self.ctx.event("NodeClaim", claim.name, reason, text, warning=warning)
        if node is not None:
            self.ctx.event("Node", node.name, reason, text.replace("NodeClaim", "Node"), warning=warning)

    def _act(self, message: Message, claim: NodeClaim) -> bool:
        """Events, metrics and the action for one claim; False when deleting it failed (retry)."""
        ctx = self.ctx
        node = self._node_of(claim)
        reason, text = _NOTICES[message.kind]
        self._notify(claim, node, reason, text, warning=message.kind != REBALANCE_RECOMMENDATION)
        acting = message.kind in ACTING_KINDS
        self._metrics.interruption_actions.labels(action_type=CORDON_AND_DRAIN if acting else NO_ACTION).inc()
        if message.kind == SPOT_INTERRUPTED:
            instance_type, zone = claim.labels.get(labels.INSTANCE_TYPE), claim.labels.get(labels.ZONE)
            if instance_type and zone:
                self._unavailable.mark("spot", instance_type, zone, reason="spot interruption")
        if not acting or claim.deleting or claim.name in self._deleted:
            return True
        try:
            ctx.kube.delete("NodeClaim", claim.name)
        except model_errors.NotFound:
            return True
        except model_errors.KubeError as exc:
            log.warning(
                "deleting NodeClaim %s on %s failed (the message is kept): %s", claim.name, message.kind, exc
            )
            return False
        self._deleted.add(claim.name)
        ctx.cluster.mark_for_deletion(claim.name)
        log.info(
            "deleting NodeClaim %s%s on interruption message %s (%s)",
            claim.name,
            f" (Node {node.name})" if node is not None else "",
            message.raw_id,
            message.kind,
        )
        self._notify(
            claim, node, TERMINATING, "Interruption triggered termination for the NodeClaim", warning=True
        )
        ctx.metrics.nodeclaims_disrupted.labels(
            reason="interruption",
            nodepool=claim.node_pool,
            capacity_type=claim.labels.get(labels.CAPACITY_TYPE, ""),
        ).inc()
        return True
