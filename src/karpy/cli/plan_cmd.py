"""``karpy plan -f FILE...``: what karpy would launch for the pending pods in some manifests.

Output formats: a readable table (default), or stable JSON/YAML documented in
``docs/plan-output.md`` (``apiVersion: karpy.dev/v1alpha1, kind: Plan``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from karpy import planning
from karpy import settings as settings_mod
from karpy.api import load as api_load
from karpy.catalog import prices as prices_mod
from karpy.model.errors import InputError

__all__ = ["plan", "plan_document"]

PLAN_API_VERSION = "karpy.dev/v1alpha1"


def plan_document(result: planning.Plan) -> dict[str, Any]:
    """The stable, documented JSON shape of a plan."""
    claims = []
    for node in result.launched:
        claim = node.claim
        claims.append(
            {
                "name": claim.name,
                "nodePool": claim.node_pool,
                "instanceType": node.instance_type.name,
                "zone": node.offering.zone,
                "capacityType": node.offering.capacity_type,
                "pricePerHour": round(node.price, 6),
                "instanceTypeOptions": [it.name for it in claim.instance_types],
                "requests": claim.requests.as_dict(),
                "labels": dict(sorted(node.labels.items())),
                "pods": [p.key for p in claim.pods],
            }
        )
    for claim in result.unlaunchable:
        claims.append(
            {
                "name": claim.name,
                "nodePool": claim.node_pool,
                "instanceType": None,
                "instanceTypeOptions": [it.name for it in claim.instance_types],
                "pods": [p.key for p in claim.pods],
                "error": "no instance-type option has an available offering",
            }
        )
    bindings = dict(sorted(result.results.placement().items()))
    unschedulable = [
        {
            "pod": err.pod.key,
            "reasons": dict(sorted(err.reasons.items())),
            "relaxed": list(err.relaxations),
        }
        for err in result.results.errors
    ]
    return {
        "apiVersion": PLAN_API_VERSION,
        "kind": "Plan",
        "catalog": result.catalog,
        "summary": {
            "pendingPods": result.pending,
            "newNodeClaims": len(result.launched),
            "scheduledPods": len(bindings),
            "unschedulablePods": len(unschedulable),
            "hourlyCost": round(result.hourly_cost, 6),
        },
        "nodeClaims": claims,
        "bindings": bindings,
        "unschedulable": unschedulable,
        "relaxed": {k: list(v) for k, v in sorted(result.results.relaxations.items())},
    }


def _render_table(result: planning.Plan, console: Console) -> None:
    doc = plan_document(result)
    summary = doc["summary"]
    console.print(
        f"[bold]karpy plan[/bold] — catalog {doc['catalog']}: {summary['pendingPods']} pending pods, "
        f"{summary['newNodeClaims']} new NodeClaims (${summary['hourlyCost']:.4f}/h), "
        f"{summary['unschedulablePods']} unschedulable"
    )
    if doc["nodeClaims"]:
        table = Table(title="New NodeClaims", title_justify="left")
        for column in ("NodeClaim", "NodePool", "Type", "Zone", "Capacity", "$/h", "Pods", "Options"):
            table.add_column(column, justify="right" if column in ("$/h", "Pods") else "left")
        for claim in doc["nodeClaims"]:
            options = claim["instanceTypeOptions"]
            shown = ", ".join(options[:3]) + (f" (+{len(options) - 3})" if len(options) > 3 else "")
            table.add_row(
                claim["name"],
                claim["nodePool"],
                claim.get("instanceType") or "-",
                claim.get("zone", "-"),
                claim.get("capacityType", "-"),
                f"{claim['pricePerHour']:.4f}" if "pricePerHour" in claim else "-",
                str(len(claim["pods"])),
                shown,
            )
        console.print(table)
    bound = {pod: node for pod, node in doc["bindings"].items()}
    if bound:
        table = Table(title="Pod placements", title_justify="left")
        table.add_column("Pod")
        table.add_column("Node / NodeClaim")
        for pod, node in bound.items():
            table.add_row(pod, node)
        console.print(table)
    if doc["unschedulable"]:
        console.print("[bold red]Unschedulable pods[/bold red]")
        for item in doc["unschedulable"]:
            console.print(f"  {item['pod']}")
            for where, why in item["reasons"].items():
                console.print(f"    {where}: {why}", markup=False, highlight=False)


def plan(
    files: list[Path] = typer.Option(..., "-f", "--filename", help="YAML files or folders to read."),
    catalog: str = typer.Option("aws:us-east-1", "--catalog", help="aws:<region> or a catalog file."),
    output: str = typer.Option("table", "--output", "-o", help="table | json | yaml"),
    prices: Path | None = typer.Option(
        None, "--prices", help="CSV: region,instance_type,capacity_type,usd_per_hour"
    ),
    spot_price_ratio: float = typer.Option(
        0.4, "--spot-price-ratio", help="Spot price = on-demand x ratio (a model)."
    ),
    on_demand_discount: float = typer.Option(
        0.0, "--on-demand-discount", help="Savings Plans / RIs, e.g. 0.28."
    ),
) -> None:
    """Plan the NodeClaims karpy would launch for the pending pods in FILES."""
    if output not in ("table", "json", "yaml"):
        typer.echo(f"error: --output must be table, json or yaml, not {output!r}", err=True)
        raise typer.Exit(2)
    loaded = api_load.load_paths(files)
    for problem in loaded.problems:
        typer.echo(f"error: {problem}", err=True)
    for skipped in loaded.skipped:
        typer.echo(f"warning: {skipped}", err=True)
    settings = settings_mod.Settings(
        pricing=settings_mod.PricingSettings(
            spot_price_ratio=spot_price_ratio, on_demand_discount=on_demand_discount
        )
    )
    try:
        overrides = prices_mod.load_prices_csv(prices) if prices is not None else None
        result = planning.make_plan(loaded, catalog_spec=catalog, settings=settings, prices=overrides)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if output == "json":
        sys.stdout.write(json.dumps(plan_document(result), indent=2) + "\n")
    elif output == "yaml":
        sys.stdout.write(yaml.safe_dump(plan_document(result), sort_keys=False))
    else:
        _render_table(result, Console(width=160))
    if loaded.problems:
        raise typer.Exit(2)
