"""``karpy disrupt -f FILE...``: a dry-run of one disruption pass, explained node by node."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.cli import conventions, options
from karpy.cli.conventions import Output
from karpy.model.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from karpy import planning

__all__ = ["disrupt", "dry_run_document"]


def dry_run_document(result: planning.DryRun) -> dict[str, Any]:
    """The stable document of a dry run (``kind: DisruptionDecision``)."""
    from karpy.api.common import KARPY_API_VERSION

    command = result.decision.command
    doc: dict[str, Any] = {
        "apiVersion": KARPY_API_VERSION,
        "kind": "DisruptionDecision",
        "catalog": result.catalog,
        "now": datetime.fromtimestamp(result.now, UTC).isoformat().replace("+00:00", "Z"),
        "command": None,
        "nodes": [
            {"name": r.node, "nodePool": r.node_pool, "verdict": r.verdict, "reasons": list(r.reasons)}
            for r in sorted(result.decision.records.values(), key=lambda r: r.node)
        ],
        "allowedDisruptions": {
            pool: dict(sorted(allowed.items())) for pool, allowed in sorted(result.decision.budgets.items())
        },
    }
    if command is not None:
        replacements = []
        for claim, node in zip(command.replacements, result.replacements, strict=True):
            replacements.append(
                {
                    "nodePool": claim.node_pool,
                    "instanceType": node.instance_type.name if node else None,
                    "zone": node.offering.zone if node else None,
                    "capacityType": node.offering.capacity_type if node else None,
                    "pricePerHour": round(node.price, 6) if node else None,
                    "instanceTypeOptions": [it.name for it in claim.instance_types],
                    "pods": [p.key for p in claim.pods],
                }
            )
        doc["command"] = {
            "reason": command.reason,
            "method": command.method,
            "decision": command.decision,
            "nodes": list(command.candidates),
            "replacements": replacements,
            "savingsPerHour": (
                None if command.savings_per_hour is None else round(command.savings_per_hour, 6)
            ),
            "detail": command.detail,
        }
    return doc


def _render(doc: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    command = doc["command"]
    if command is None:
        console.print(f"[bold]karpy disrupt[/bold] at {doc['now']}: no disruption this pass")
    else:
        savings = "" if command["savingsPerHour"] is None else f", saves ${command['savingsPerHour']:.4f}/h"
        nodes = ", ".join(command["nodes"])
        console.print(
            f"[bold]karpy disrupt[/bold] at {doc['now']}: {command['decision']} {nodes} "
            f"({command['reason']}, {command['method']}{savings})"
        )
        for r in command["replacements"]:
            console.print(
                f"  replacement: {r['instanceType']} {r['capacityType']} in {r['zone']} "
                f"(${r['pricePerHour']}/h, {len(r['instanceTypeOptions'])} options, {len(r['pods'])} pods)"
            )
    table = Table(title="Nodes", title_justify="left")
    for column in ("Node", "NodePool", "Verdict", "Why"):
        table.add_column(column)
    for node in doc["nodes"]:
        table.add_row(node["name"], node["nodePool"], node["verdict"], "\n".join(node["reasons"]))
    console.print(table)


def disrupt(
    files: list[Path] = typer.Option(
        ..., "-f", "--filename", metavar="PATH", help="YAML files or folders to read (repeatable)."
    ),
    now: str | None = options.NOW,
    catalog: str = options.CATALOG,
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="A table, or the DisruptionDecision document."
    ),
    spot_to_spot: bool = options.SPOT_TO_SPOT,
    strict: bool = typer.Option(
        False, "--strict", help="An unknown field is an error (exit 2; that object is not used)."
    ),
) -> None:
    """Dry-run one disruption pass: what would be disrupted, and why each node is or is not."""
    from karpy.cli import inputs

    at = options.pass_time(now)
    loaded = inputs.read_files(files, strict=strict)
    from karpy import planning
    from karpy import settings as settings_mod

    inputs.echo(loaded)
    gates = settings_mod.FeatureGates(spot_to_spot_consolidation=spot_to_spot)
    settings = settings_mod.Settings(features=gates)
    try:
        result = planning.disrupt(loaded, now=at, catalog_spec=catalog, settings=settings)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    doc = dry_run_document(result)
    if output is Output.json:
        conventions.print_json(doc)
    elif output is Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    else:
        from rich.console import Console

        _render(doc, Console(width=160))
    if loaded.problems:
        raise typer.Exit(2)
