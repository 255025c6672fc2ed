"""``karpy operator``: run karpy in a Kubernetes cluster (see ``docs/operator.md``).

Mounted by :mod:`karpy.cli` as ``app.command("operator")(operator_cmd.operator)``. SIGTERM and
SIGINT stop the operator gracefully (Lease released, watches closed) within 5 seconds.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from pathlib import Path
from types import FrameType

import typer

from karpy import settings as settings_mod
from karpy.model.errors import InputError, KarpyError
from karpy.providers.aws.config import ENV, AWSSettings

__all__ = ["operator"]


_AWS = "AWS provider (--provider aws)"


def operator(
    provider: str = typer.Option(
        "kwok", "--provider", help="Cloud provider: kwok (Node objects, no VM) or aws (EC2 instances)."
    ),
    catalog: str = typer.Option(
        "aws:us-east-1", "--catalog", help="Instance types: aws:<region> or the path of a catalog YAML."
    ),
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="Kubeconfig file (default: in-cluster, then ~/.kube/config)."
    ),
    metrics_port: int = typer.Option(8080, "--metrics-port", help="Port of /metrics (Prometheus)."),
    health_port: int = typer.Option(8081, "--health-port", help="Port of /healthz and /readyz."),
    leader_elect: bool = typer.Option(
        False, "--leader-elect/--no-leader-elect", help="Elect a leader on a Lease (run 2+ replicas)."
    ),
    lease_duration: float = typer.Option(
        15.0,
        "--leader-elect-lease-duration",
        min=1.0,
        help="Seconds a follower waits before taking an unrenewed Lease.",
    ),
    renew_deadline: float = typer.Option(
        10.0,
        "--leader-elect-renew-deadline",
        min=0.5,
        help="Seconds the leader keeps acting without a renewal.",
    ),
    retry_period: float = typer.Option(
        2.0,
        "--leader-elect-retry-period",
        min=0.1,
        help="Seconds between two reads or renewals of the Lease.",
    ),
    liveness_timeout: float = typer.Option(
        60.0,
        "--liveness-timeout",
        min=1.0,
        help="Seconds without progress of the operator's loop (a loop turn, a controller run, an API call "
        "answered) before /healthz answers 503.",
    ),
    kube_client_qps: float = typer.Option(
        200.0,
        "--kube-client-qps",
        envvar="KUBE_CLIENT_QPS",
        help="Kubernetes API requests per second the controllers may make (client-side limit, as "
        "client-go's; 0 or less: no limit). Lease renewals and watches never wait for it.",
    ),
    kube_client_burst: int = typer.Option(
        300,
        "--kube-client-burst",
        envvar="KUBE_CLIENT_BURST",
        min=1,
        help="Kubernetes API requests the controllers may make at once above --kube-client-qps.",
    ),
    measured_capacity: bool = typer.Option(
        False,
        "--measured-capacity/--no-measured-capacity",
        envvar="KARPY_MEASURED_CAPACITY",
        help="karpy's own, off as upstream: once a Node of an instance type registers (Ready, initialized), "
        "its real capacity and allocatable replace the catalog's estimate for that type under its "
        "NodeClass's AMI, kept in the ConfigMap karpy-measured-capacity of karpy's namespace.",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="A NodePool or NodeClass with a field karpy does not know fails validation "
        "(ValidationSucceeded=False, a Warning event; it is not used).",
    ),
    shadow: bool = typer.Option(
        False,
        "--shadow",
        help="Read-only beside an installed Karpenter or Cluster Autoscaler: compute what karpy would "
        "launch and disrupt, compare it with what the installed one does (karpy_shadow_* metrics, "
        "ShadowWould* Events); write nothing but Events and its Lease. Instance types and prices "
        "come from --catalog (no cloud call). See docs/shadow.md.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug | info | warning | error."),
    cluster_name: str = typer.Option(
        "",
        "--cluster-name",
        envvar=ENV["cluster_name"],
        help="The EKS cluster's name: resource discovery, tags, nodes' bootstrap (required with aws).",
        rich_help_panel=_AWS,
    ),
    cluster_endpoint: str = typer.Option(
        "",
        "--cluster-endpoint",
        envvar=ENV["cluster_endpoint"],
        help="The API server URL nodes join (default: from eks:DescribeCluster).",
        rich_help_panel=_AWS,
    ),
    cluster_ca_bundle: str = typer.Option(
        "",
        "--cluster-ca-bundle",
        envvar=ENV["cluster_ca_bundle"],
        help="Base64 CA bundle nodes trust the API server with (default: from eks:DescribeCluster).",
        rich_help_panel=_AWS,
    ),
    interruption_queue: str = typer.Option(
        "",
        "--interruption-queue",
        envvar=ENV["interruption_queue"],
        help="SQS queue of EventBridge spot, health and state-change events (empty: not handled).",
        rich_help_panel=_AWS,
    ),
    isolated_vpc: bool = typer.Option(
        False,
        "--isolated-vpc/--no-isolated-vpc",
        envvar=ENV["isolated_vpc"],
        help="No route to the Pricing API: keep the shipped on-demand prices.",
        rich_help_panel=_AWS,
    ),
    reserved_enis: int = typer.Option(
        0,
        "--reserved-enis",
        envvar=ENV["reserved_enis"],
        min=0,
        help="ENIs per node not used for pods (VPC CNI custom networking); lowers max pods.",
        rich_help_panel=_AWS,
    ),
    vm_memory_overhead_percent: float = typer.Option(
        0.075,
        "--vm-memory-overhead-percent",
        envvar=ENV["vm_memory_overhead_percent"],
        min=0.0,
        max=1.0,
        help="Share of an instance type's memory taken off as VM overhead when predicting capacity.",
        rich_help_panel=_AWS,
    ),
) -> None:
    """Run the karpy operator against a Kubernetes cluster.

    With --provider aws, region and credentials come only from boto3's standard chain
    (AWS_REGION, IRSA web identity, EKS Pod Identity, the instance profile); karpy reads and
    writes no credentials file. See docs/aws.md. With --shadow, karpy acts on nothing (docs/shadow.md).
    """
    from karpy import operator as operator_mod  # the operator and its clients: only when it runs
    from karpy.operator import runner

    operator_mod.configure_logging(log_level)
    if provider not in ("kwok", "aws"):
        typer.echo(f"error: --provider {provider!r}: one of kwok, aws", err=True)
        raise typer.Exit(2)
    if shadow and measured_capacity:
        typer.echo("error: --measured-capacity writes a ConfigMap; --shadow writes nothing", err=True)
        raise typer.Exit(2)
    if provider == "aws" and not cluster_name and not shadow:
        typer.echo("error: --provider aws needs --cluster-name (or CLUSTER_NAME)", err=True)
        raise typer.Exit(2)
    base = settings_mod.Settings()
    settings = dataclasses.replace(
        base,
        pricing=dataclasses.replace(
            base.pricing, vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis
        ),
        features=dataclasses.replace(base.features, measured_capacity=measured_capacity),
    )
    aws = AWSSettings(
        cluster_name=cluster_name,
        cluster_endpoint=cluster_endpoint,
        cluster_ca_bundle=cluster_ca_bundle,
        interruption_queue=interruption_queue,
        isolated_vpc=isolated_vpc,
        reserved_enis=reserved_enis,
        vm_memory_overhead_percent=vm_memory_overhead_percent,
    )
    config = operator_mod.OperatorConfig(
        provider=provider,
        catalog=catalog,
        kubeconfig=str(kubeconfig) if kubeconfig is not None else None,
        metrics_port=metrics_port,
        health_port=health_port,
        leader_elect=leader_elect,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        liveness_timeout=liveness_timeout,
        kube_client_qps=kube_client_qps,
        kube_client_burst=kube_client_burst,
        strict=strict,
        settings=settings,
        aws=aws if provider == "aws" and not shadow else None,
        shadow=shadow,
    )
    if shadow:
        config.lease_name = runner.SHADOW_LEASE_NAME
    try:
        op = operator_mod.Operator(config)
        op.start()
    except operator_mod.Refused as exc:
        typer.echo(f"error: refusing to start: {exc}", err=True)
        raise typer.Exit(3) from None
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except KarpyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        op.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    op.run()
