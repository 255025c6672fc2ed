"""The interruption queue: EventBridge messages parsed, acted on, deleted; the long-poll thread.

Parsing is pure. The controller runs against a real moto server (SQS Create/Send/Receive with
long polls/Delete work there) and an in-memory API server feeding the cluster state, as the
controller tests' harness builds it: a spot NodeClaim ``aws:///us-west-2a/i-0123456789abcdef0``
(with karpy's finalizer, so a delete sets its deletionTimestamp) and its Node.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import builders
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.controllers.context import Context, RecordingEvents
from karpy.metrics import Metrics
from karpy.model import errors as model_errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClassRef
from karpy.ports import WatchEvent
from karpy.providers.aws import errors, interruption, sdk
from karpy.providers.aws.interruption import InterruptionController, Message, parse
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.unavailable import UnavailableOfferings
from karpy.providers.fake import FakeCloudProvider
from karpy.runtime.loop import Loop, LoopClock
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

QUEUE = "test-cluster"
INSTANCE = "i-0123456789abcdef0"
OTHER = "i-0fedcba9876543210"
ZONE, TYPE = "us-west-2a", "m5.large"
CLAIM, NODE = "spot-a", "node-a"
FINALIZER = "karpenter.sh/termination"
SENT_AGO = 7.0  # the loop clock runs this far ahead of the wall clock moto stamps SentTimestamp with


def envelope(detail_type: str, detail: dict[str, Any], *, source: str = "aws.ec2", **extra: Any) -> str:
    body = {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "us-west-2",
        "resources": [f"arn:aws:ec2:us-west-2:123456789012:instance/{INSTANCE}"],
        "detail": detail,
    }
    body.update(extra)
    return json.dumps(body)


def spot(instance: str = INSTANCE) -> str:
    return envelope(
        "EC2 Spot Instance Interruption Warning", {"instance-id": instance, "instance-action": "terminate"}
    )


def rebalance(instance: str = INSTANCE) -> str:
    return envelope("EC2 Instance Rebalance Recommendation", {"instance-id": instance})


def state_change(state: str, instance: str = INSTANCE) -> str:
    return envelope("EC2 Instance State-change Notification", {"instance-id": instance, "state": state})


def scheduled_change(*instances: str, service: str = "EC2", category: str = "scheduledChange") -> str:
    detail = {
        "eventArn": "arn:aws:health:us-west-2::event/EC2/EC2_INSTANCE_RETIREMENT_SCHEDULED/1",
        "service": service,
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": category,
        "startTime": "Sat, 05 Jun 2026 15:10:09 GMT",
        "affectedEntities": [{"entityValue": i} for i in instances],
    }
    return envelope("AWS Health Event", detail, source="aws.health")


def reservation_interrupted(instance: str = INSTANCE) -> str:
    return envelope(
        "EC2 Capacity Reservation Instance Interruption Warning",
        {"instance-id": instance, "instance-action": "terminate"},
    )


# -- parse ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "kind", "ids"),
    [
        (spot(), "spot_interrupted", (INSTANCE,)),
        (rebalance(), "rebalance_recommendation", (INSTANCE,)),
        (scheduled_change(INSTANCE, OTHER, INSTANCE), "scheduled_change", (INSTANCE, OTHER)),
        (state_change("stopping"), "instance_stopped", (INSTANCE,)),
        (state_change("stopped"), "instance_stopped", (INSTANCE,)),
        (state_change("shutting-down"), "instance_terminated", (INSTANCE,)),
        (state_change("terminated"), "instance_terminated", (INSTANCE,)),
        (reservation_interrupted(), "capacity_reservation_interrupted", (INSTANCE,)),
    ],
)
def test_parse_reads_each_kind_with_its_instances_and_time(
    body: str, kind: str, ids: tuple[str, ...]
) -> None:
    assert parse(body) == Message(kind, ids, 1_767_225_600.0, "7bf73129-1428-4cd3-a780-95db273d1602")


def test_parse_time_takes_fractions_and_offsets() -> None:
    body = json.loads(spot())
    body["time"] = "2026-01-01T02:00:00.250+02:00"
    parsed = parse(json.dumps(body))
    assert parsed is not None and parsed.start_time == 1_767_225_600.25


@pytest.mark.parametrize(
    "body",
    [
        envelope("EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE}, version="1"),
        envelope("EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE}, source="aws.s3"),
        envelope("EC2 Fleet Spot Instance Request Fulfilled", {"instance-id": INSTANCE}),
        state_change("running"),
        state_change("pending"),
        scheduled_change(INSTANCE, service="RDS"),
        scheduled_change(INSTANCE, category="issue"),
        json.dumps({"version": "0", "source": "x", "detail-type": "y", "time": "2026-01-01T00:00:00Z"}),
    ],
)
def test_parse_unknown_events_are_no_ops(body: str) -> None:
    message = parse(body)
    assert message is not None and (message.kind, message.instance_ids) == ("no_op", ())


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "",
        "[1, 2]",
        '"text"',
        json.dumps({"source": "aws.ec2", "detail-type": "EC2 Instance Rebalance Recommendation"}),
        json.dumps(
            {"version": "0", "source": "aws.ec2", "detail-type": "EC2 Instance Rebalance Recommendation"}
        ),  # no time
        envelope("EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE}, time="yesterday"),
        envelope("EC2 Spot Instance Interruption Warning", {"instance-action": "terminate"}),
        envelope("EC2 Spot Instance Interruption Warning", {"instance-id": 12}),
        envelope("EC2 Instance State-change Notification", {"instance-id": INSTANCE}),
        envelope("EC2 Capacity Reservation Instance Interruption Warning", {}),
        json.dumps({**json.loads(spot()), "detail": "spot"}),
        json.dumps(
            {
                **json.loads(scheduled_change(INSTANCE)),
                "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange"},  # no entities
            }
        ),
        json.dumps(
            {
                **json.loads(scheduled_change(INSTANCE)),
                "detail": {
                    "service": "EC2",
                    "eventTypeCategory": "scheduledChange",
                    "affectedEntities": ["i-1"],
                },
            }
        ),
        json.dumps({**json.loads(spot()), "detail-type": 3}),
    ],
)
def test_parse_malformed_bodies_are_none(body: str) -> None:
    assert parse(body) is None


# -- the controller against moto -----------------------------------------------------------


class Gate:
    """The API server's watch into the cluster state, which a test can hold back (a real API
    server's watch echo lags behind the write)."""

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.held: list[WatchEvent] | None = None

    def __call__(self, event: WatchEvent) -> None:
        if self.held is None:
            self.feed(event)
        else:
            self.held.append(event)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        self.held = []
        try:
            yield
        finally:
            held, self.held = self.held, None
            for event in held:
                self.feed(event)


@dataclass
class Rig:
    aws: sdk.Clients
    url: str
    kube: MemoryKube
    gate: Gate
    cluster: Cluster
    ctx: Context
    events: RecordingEvents
    unavailable: UnavailableOfferings
    metrics: AWSMetrics
    controller: InterruptionController
    wakes: threading.Event
    polls: int = 0  # ReceiveMessage calls sent (by anyone), counted by a botocore hook
    receipts: list[str] = field(default_factory=list)  # receipt handles received, in order

    def send(self, body: str) -> str:
        return str(errors.call(self.aws.sqs.send_message, QueueUrl=self.url, MessageBody=body)["MessageId"])

    def counts(self) -> tuple[int, int]:
        """(visible, in flight) messages of the queue."""
        attrs = self.aws.sqs.get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def handle(self, body: str) -> None:
        """Send ``body``, receive it (one poll) and reconcile."""
        self.send(body)
        assert self.controller.poll_once() == 1
        self.controller.reconcile()

    def deleting(self, name: str = CLAIM) -> bool:
        return bool(self.kube.get("NodeClaim", name)["metadata"].get("deletionTimestamp"))

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.metrics.registry.get_sample_value(name, labels or {}) or 0.0

    def disrupted(self) -> float:
        labels = {"reason": "interruption", "nodepool": "default", "capacity_type": "spot"}
        return self.ctx.metrics.registry.get_sample_value("karpy_nodeclaims_disrupted_total", labels) or 0.0

    def api_errors(self) -> dict[str, float]:
        """Failed AWS calls counted, by operation."""
        out: dict[str, float] = {}
        for metric in self.metrics.registry.collect():
            for sample in metric.samples:
                if sample.name == "karpy_aws_api_errors_total":
                    op = sample.labels["operation"]
                    out[op] = out.get(op, 0.0) + sample.value
        return out

    def reasons(self, kind: str, name: str) -> list[tuple[str, str]]:
        return [(e.reason, e.type) for e in self.events.events if e.kind == kind and e.name == name]


def add_claim(kube: MemoryKube, name: str, instance: str, *, node: str | None = None) -> None:
    provider_id = f"aws:///{ZONE}/{instance}"
    model = builders.node_claim(
        name,
        labels={wk.INSTANCE_TYPE: TYPE, wk.ZONE: ZONE, wk.CAPACITY_TYPE: "spot"},
        provider_id=provider_id,
        node_name=node or "",
        node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"),
    )
    kube.create(encode.node_claim(model, finalizers=(FINALIZER,)))
    if node:
        kube.create(encode.node(builders.node(node, provider_id=provider_id), finalizers=(FINALIZER,)))


@pytest.fixture
def rig(aws: sdk.Clients) -> Iterator[Rig]:
    loop = Loop(start=time.time() + SENT_AGO)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cloud = FakeCloudProvider([])
    cluster = Cluster(lambda pool, _nc: cloud.instance_types(pool))
    gate = Gate(Feed(cluster))
    kube.watch(gate)
    events = RecordingEvents()
    ctx = Context(cluster, kube, cloud, clock, events, metrics=Metrics())
    add_claim(kube, CLAIM, INSTANCE, node=NODE)
    url = aws.sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    unavailable, metrics, wakes = UnavailableOfferings(clock), AWSMetrics(), threading.Event()
    controller = InterruptionController(
        ctx, aws, queue=QUEUE, unavailable=unavailable, metrics=metrics, wake=wakes.set, wait_seconds=0
    )
    made = Rig(aws, url, kube, gate, cluster, ctx, events, unavailable, metrics, controller, wakes)

    def sent(**_: Any) -> None:
        made.polls += 1

    def received(parsed: dict[str, Any], **_: Any) -> None:
        made.receipts.extend(m["ReceiptHandle"] for m in parsed.get("Messages") or [])

    aws.sqs.meta.events.register("before-call.sqs.ReceiveMessage", sent)
    aws.sqs.meta.events.register("after-call.sqs.ReceiveMessage", received)
    yield made
    controller.stop()


def test_spot_interruption_marks_the_offering_deletes_the_claim_and_the_message(rig: Rig) -> None:
    rig.send(spot())
    assert rig.controller.poll_once() == 1
    assert rig.wakes.is_set()
    assert rig.counts() == (0, 1)  # received, in flight until handled
    assert not rig.deleting()
    result = rig.controller.reconcile()
    assert result.requeue_after == interruption.IDLE_REQUEUE
    assert rig.deleting()
    assert CLAIM in rig.cluster.marked_for_deletion
    assert rig.unavailable.is_unavailable("spot", TYPE, ZONE)
    assert not rig.unavailable.is_unavailable("on-demand", TYPE, ZONE)
    assert not rig.unavailable.is_unavailable("spot", TYPE, "us-west-2b")
    assert rig.counts() == (0, 0)
    assert rig.aws.sqs.receive_message(QueueUrl=rig.url, WaitTimeSeconds=0).get("Messages") is None
    claim_events = rig.reasons("NodeClaim", CLAIM)
    assert claim_events == [("SpotInterrupted", "Warning"), ("TerminatingOnInterruption", "Warning")]
    assert rig.reasons("Node", NODE) == claim_events
    assert rig.sample("karpy_interruption_received_messages_total", {"message_type": "spot_interrupted"}) == 1
    assert rig.sample("karpy_interruption_actions_performed_total", {"action_type": "CordonAndDrain"}) == 1
    assert rig.sample("karpy_interruption_deleted_messages_total") == 1
    disrupted = {"reason": "interruption", "nodepool": "default", "capacity_type": "spot"}
    assert rig.ctx.metrics.registry.get_sample_value("karpy_nodeclaims_disrupted_total", disrupted) == 1
    # queued for about SENT_AGO seconds by the loop clock (SentTimestamp, not the event's time)
    assert rig.sample("karpy_interruption_message_queue_duration_seconds_count") == 1
    assert SENT_AGO - 2 < rig.sample("karpy_interruption_message_queue_duration_seconds_sum") < SENT_AGO + 30


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (scheduled_change(INSTANCE), "InstanceUnhealthy"),
        (state_change("stopping"), "InstanceStopping"),
        (state_change("stopped"), "InstanceStopping"),
        (state_change("shutting-down"), "InstanceTerminating"),
        (state_change("terminated"), "InstanceTerminating"),
        (reservation_interrupted(), "CapacityReservationInterrupted"),
    ],
)
def test_other_interruptions_delete_the_claim_without_marking_offerings(
    rig: Rig, body: str, reason: str
) -> None:
    rig.handle(body)
    assert rig.deleting()
    assert not rig.unavailable.is_unavailable("spot", TYPE, ZONE)
    assert rig.unavailable.version() == 0
    assert rig.counts() == (0, 0)
    assert rig.reasons("NodeClaim", CLAIM) == [(reason, "Warning"), ("TerminatingOnInterruption", "Warning")]
    assert rig.reasons("Node", NODE) == [(reason, "Warning"), ("TerminatingOnInterruption", "Warning")]
    assert rig.sample("karpy_interruption_actions_performed_total", {"action_type": "CordonAndDrain"}) == 1


def test_scheduled_change_deletes_every_affected_claim(rig: Rig) -> None:
    add_claim(rig.kube, "spot-b", OTHER)
    add_claim(rig.kube, "bystander", "i-0aaaaaaaaaaaaaaaa")
    rig.handle(scheduled_change(INSTANCE, OTHER))
    assert rig.deleting(CLAIM) and rig.deleting("spot-b")
    assert not rig.deleting("bystander")
    assert rig.reasons("NodeClaim", "spot-b") == [
        ("InstanceUnhealthy", "Warning"),
        ("TerminatingOnInterruption", "Warning"),
    ]
    assert rig.reasons("NodeClaim", "bystander") == []
    assert rig.sample("karpy_interruption_actions_performed_total", {"action_type": "CordonAndDrain"}) == 2


def test_rebalance_recommendation_is_an_event_only(rig: Rig) -> None:
    rig.handle(rebalance())
    assert not rig.deleting()
    assert CLAIM not in rig.cluster.marked_for_deletion
    assert rig.unavailable.version() == 0
    assert rig.counts() == (0, 0)
    assert rig.reasons("NodeClaim", CLAIM) == [("SpotRebalanceRecommendation", "Normal")]
    assert rig.reasons("Node", NODE) == [("SpotRebalanceRecommendation", "Normal")]
    assert rig.sample("karpy_interruption_actions_performed_total", {"action_type": "NoAction"}) == 1
    assert rig.sample("karpy_interruption_actions_performed_total", {"action_type": "CordonAndDrain"}) == 0
    assert ("delete", "NodeClaim", CLAIM) not in rig.kube.calls


def test_malformed_message_is_logged_and_deleted(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    message_id = rig.send("this is not an EventBridge event")
    rig.controller.poll_once()
    with caplog.at_level(logging.WARNING, logger="karpy.aws.interruption"):
        rig.controller.reconcile()
    assert any("malformed" in r.getMessage() and message_id in r.getMessage() for r in caplog.records)
    assert rig.counts() == (0, 0)
    assert rig.sample("karpy_interruption_deleted_messages_total") == 1
    assert rig.sample("karpy_interruption_received_messages_total", {"message_type": "no_op"}) == 0
    assert not rig.deleting() and rig.events.events == []


def test_unknown_message_is_a_counted_no_op_and_deleted(rig: Rig) -> None:
    rig.handle(
        envelope("EC2 Instance Launch Successful", {"instance-id": INSTANCE}, source="aws.autoscaling")
    )
    assert rig.sample("karpy_interruption_received_messages_total", {"message_type": "no_op"}) == 1
    assert rig.sample("karpy_interruption_deleted_messages_total") == 1
    assert rig.counts() == (0, 0)
    assert not rig.deleting() and rig.events.events == []


def test_message_for_an_unknown_instance_is_deleted_and_nothing_happens(rig: Rig) -> None:
    rig.handle(spot(OTHER))
    assert rig.counts() == (0, 0)
    assert not rig.deleting()
    assert rig.unavailable.version() == 0  # no claim, so no instance type and zone to mark
    assert rig.events.events == []
    assert rig.sample("karpy_interruption_received_messages_total", {"message_type": "spot_interrupted"}) == 1


def test_kube_failure_keeps_the_message_until_it_comes_back(rig: Rig) -> None:
    rig.kube.fail_next("delete", "NodeClaim", model_errors.KubeError("apiserver unavailable"))
    rig.handle(spot())
    assert not rig.deleting()
    assert rig.counts() == (0, 1)  # not deleted: in flight, visible again after the visibility timeout
    assert rig.sample("karpy_interruption_deleted_messages_total") == 0
    assert rig.disrupted() == 0
    # the visibility timeout, shortened to now: SQS hands the message out again, and this time it works
    rig.aws.sqs.change_message_visibility(
        QueueUrl=rig.url, ReceiptHandle=rig.receipts[-1], VisibilityTimeout=0
    )
    assert rig.controller.poll_once() == 1
    rig.controller.reconcile()
    assert rig.deleting()
    assert rig.counts() == (0, 0)
    assert rig.sample("karpy_interruption_deleted_messages_total") == 1
    assert rig.disrupted() == 1


def test_claim_already_deleting_is_not_deleted_again(rig: Rig) -> None:
    rig.kube.delete("NodeClaim", CLAIM)
    assert rig.cluster.claims[CLAIM].deleting
    calls = len(rig.kube.calls)
    rig.handle(state_change("terminated"))
    assert ("delete", "NodeClaim", CLAIM) not in rig.kube.calls[calls:]
    assert rig.disrupted() == 0
    assert rig.reasons("NodeClaim", CLAIM) == [("InstanceTerminating", "Warning")]
    assert rig.counts() == (0, 0)


def test_second_message_for_a_claim_just_deleted_deletes_nothing_more(rig: Rig) -> None:
    """A real API server's watch echo lags: the claim deleted for the first message is not yet
    seen deleting when the second one of the batch names it."""
    rig.send(spot())
    rig.send(state_change("shutting-down"))
    assert rig.controller.poll_once() == 2
    with rig.gate.hold():
        rig.controller.reconcile()
        assert not rig.cluster.claims[CLAIM].deleting  # the state has not seen the delete yet
    assert rig.kube.calls.count(("delete", "NodeClaim", CLAIM)) == 1
    assert rig.disrupted() == 1
    assert rig.counts() == (0, 0)
    assert rig.cluster.claims[CLAIM].deleting


def test_claim_gone_is_unmarked_for_deletion(rig: Rig) -> None:
    rig.handle(spot())
    assert CLAIM in rig.cluster.marked_for_deletion
    rig.kube.patch("NodeClaim", CLAIM, {"metadata": {"finalizers": []}})
    assert CLAIM not in rig.cluster.claims
    rig.controller.reconcile()
    assert CLAIM not in rig.cluster.marked_for_deletion


def test_delete_message_failure_is_logged_not_raised(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    rig.send(spot())
    rig.controller.poll_once()
    rig.aws.sqs.delete_queue(QueueUrl=rig.url)
    with caplog.at_level(logging.WARNING, logger="karpy.aws.interruption"):
        rig.controller.reconcile()
    assert rig.deleting()
    assert any("deleting message" in r.getMessage() for r in caplog.records)
    assert rig.sample("karpy_interruption_deleted_messages_total") == 0
    assert rig.api_errors() == {"DeleteMessage": 1}


def test_start_without_the_queue_raises_naming_the_setting(rig: Rig) -> None:
    missing = InterruptionController(
        rig.ctx, rig.aws, queue="no-such-queue", unavailable=rig.unavailable, metrics=rig.metrics
    )
    with pytest.raises(errors.AWSError) as raised:
        missing.start()
    assert "INTERRUPTION_QUEUE" in str(raised.value) and "no-such-queue" in str(raised.value)
    assert raised.value.not_found
    assert (
        rig.sample("karpy_aws_api_errors_total", {"operation": "GetQueueUrl", "code": raised.value.code}) == 1
    )
    with pytest.raises(ValueError, match="INTERRUPTION_QUEUE"):
        InterruptionController(rig.ctx, rig.aws, queue="", unavailable=rig.unavailable, metrics=rig.metrics)


# -- the long-poll thread ------------------------------------------------------------------


def poller(rig: Rig, wait_seconds: int) -> InterruptionController:
    return InterruptionController(
        rig.ctx,
        rig.aws,
        queue=QUEUE,
        unavailable=rig.unavailable,
        metrics=rig.metrics,
        wake=rig.wakes.set,
        wait_seconds=wait_seconds,
    )


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def test_thread_delivers_a_message_sent_after_start_and_wakes_the_loop(rig: Rig) -> None:
    controller = poller(rig, 5)
    before = set(threading.enumerate())
    controller.start()
    # (the in-process moto server starts a thread per request too: look at ours only)
    started = [t for t in threading.enumerate() if t not in before and t.name == interruption.THREAD_NAME]
    assert [t.daemon for t in started] == [True]
    try:
        assert wait_for(lambda: rig.polls > 0)  # the first long poll is out
        assert not rig.wakes.is_set()
        rig.send(spot())
        assert rig.wakes.wait(10)
        controller.reconcile()
    finally:
        controller.stop()
    assert rig.deleting()
    assert rig.counts() == (0, 0)


def test_stop_returns_promptly_with_a_long_poll_in_flight_and_drops_its_batch(rig: Rig) -> None:
    controller = poller(rig, 20)
    controller.start()
    assert wait_for(lambda: rig.polls > 0)
    time.sleep(0.2)  # the 20 s ReceiveMessage is in flight
    began = time.monotonic()
    controller.stop()
    assert time.monotonic() - began < 2.0
    rig.send(spot())  # the poll still in flight takes it and, stopped, hands it to nobody
    assert wait_for(lambda: rig.counts() == (0, 1), timeout=5)
    time.sleep(0.2)
    assert not rig.wakes.is_set()
    controller.reconcile()
    assert not rig.deleting()


def test_receive_failures_back_off_exponentially_and_stop_interrupts_the_wait(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    controller = poller(rig, 1)
    with caplog.at_level(logging.WARNING, logger="karpy.aws.interruption"):
        controller.start()  # resolves the URL
        rig.aws.sqs.delete_queue(QueueUrl=rig.url)

        def warnings() -> list[str]:
            return [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]

        assert wait_for(lambda: len(warnings()) >= 2)
        began = time.monotonic()
        controller.stop()  # in the 2 s wait after the second failure
        assert time.monotonic() - began < 1.0
    first, second = warnings()[:2]
    assert "ReceiveMessage" in first and "retrying in 1 s" in first
    assert "retrying in 2 s" in second
    assert rig.api_errors()["ReceiveMessage"] >= 2


def test_a_replica_that_is_not_the_leader_leaves_the_queue_alone(rig: Rig) -> None:
    leading = threading.Event()
    controller = InterruptionController(
        rig.ctx,
        rig.aws,
        queue=QUEUE,
        unavailable=rig.unavailable,
        metrics=rig.metrics,
        wake=rig.wakes.set,
        wait_seconds=1,
        active=leading.is_set,
    )
    rig.send(spot())
    controller.start()
    try:
        time.sleep(1.5)
        assert rig.polls == 0 and not rig.wakes.is_set()  # a follower never receives
        leading.set()  # it becomes the leader
        assert rig.wakes.wait(10)
    finally:
        controller.stop()
