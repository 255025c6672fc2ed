"""Prometheus metrics of the AWS provider, on the operator's registry (``karpy_`` prefix).

Names follow Karpenter's where it has one (``karpenter_interruption_received_messages_total`` ->
``karpy_interruption_received_messages_total``). Built once by the operator (``--provider aws``)
and passed to the provider's parts; tests read the values from the registry.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["AWSMetrics"]

_QUEUE_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)


class AWSMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.interruption_received = Counter(
            "karpy_interruption_received_messages",
            "Interruption queue messages received, by kind",
            ["message_type"],
            registry=r,
        )
        self.interruption_deleted = Counter(
            "karpy_interruption_deleted_messages", "Interruption queue messages deleted", registry=r
        )
        self.interruption_queue_duration = Histogram(
            "karpy_interruption_message_queue_duration_seconds",
            "Time from a message being sent to the queue to karpy acting on it",
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.interruption_actions = Counter(
            "karpy_interruption_actions_performed",
            "Actions taken for interruption messages",
            ["action_type"],
            registry=r,
        )
        self.api_errors = Counter(
            "karpy_aws_api_errors",
            "AWS API calls that failed, by operation and AWS error code",
            ["operation", "code"],
            registry=r,
        )
        self.create_fleet_calls = Counter(
            "karpy_aws_create_fleet_calls",
            "CreateFleet requests sent (one may launch several NodeClaims)",
            ["capacity_type"],
            registry=r,
        )
        self.refresh_failures = Counter(
            "karpy_aws_refresh_failures",
            "Refreshes of cached AWS data that failed (the last good values stay in use)",
            ["kind"],
            registry=r,
        )
        self.refresh_last_success = Gauge(
            "karpy_aws_refresh_last_success_timestamp_seconds",
            "When each kind of cached AWS data was last refreshed successfully (loop time)",
            ["kind"],
            registry=r,
        )
        self.nodeclass_ready = Gauge(
            "karpy_ec2nodeclass_ready",
            "1 when the EC2NodeClass is Ready for its current generation, else 0",
            ["nodeclass"],
            registry=r,
        )
        self.launch_templates = Gauge(
            "karpy_aws_launch_templates", "Launch templates karpy holds for this cluster", registry=r
        )
