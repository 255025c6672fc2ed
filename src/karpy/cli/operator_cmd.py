"""``karpy operator``: run karpy in a Kubernetes cluster (see ``docs/operator.md``).

Mounted by :mod:`karpy.cli` as ``app.command("operator")(operator_cmd.operator)``. SIGTERM and
SIGINT stop the operator gracefully (Lease released, watches closed) within 5 seconds.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import typer

from karpy import operator as operator_mod
from karpy.model.errors import InputError, KarpyError

__all__ = ["operator"]


def operator(
    provider: str = typer.Option("kwok", "--provider", help="Cloud provider: kwok (Node objects, no VM)."),
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
    log_level: str = typer.Option("info", "--log-level", help="debug | info | warning | error."),
) -> None:
    """Run the karpy operator against a Kubernetes cluster."""
    operator_mod.configure_logging(log_level)
    if provider != "kwok":
        typer.echo(f"error: --provider {provider!r}: only kwok is available", err=True)
        raise typer.Exit(2)
    config = operator_mod.OperatorConfig(
        provider=provider,
        catalog=catalog,
        kubeconfig=str(kubeconfig) if kubeconfig is not None else None,
        metrics_port=metrics_port,
        health_port=health_port,
        leader_elect=leader_elect,
    )
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
