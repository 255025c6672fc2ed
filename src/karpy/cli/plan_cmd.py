"""``karpy plan -f FILE...``: what karpy would launch for the pending pods in some manifests.

Output formats: a readable table (default), or stable JSON/YAML documented in
``docs/plan-output.md`` (``apiVersion: karpy.dev/v1alpha1, kind: Plan``).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.cli import conventions, options
from karpy.cli.conventions import WideOutput
from karpy.model.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from karpy import planning
    from karpy.api import load as api_load

__all__ = ["bound_section", "plan", "plan_document"]


def plan_document(result: planning.Plan) -> dict[str, Any]:
    """The stable, documented JSON shape of a plan."""
    from karpy.api.common import KARPY_API_VERSION

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
    doc: dict[str, Any] = {
        "apiVersion": KARPY_API_VERSION,
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
        "skippedNodePools": [{"nodePool": name, "reason": why} for name, why in result.skipped_pools],
    }
    if result.packing != "faithful" and result.repacked is not None:
        done = result.repacked
        doc["packing"] = {
            "mode": result.packing,
            "faithfulHourlyCost": round(done.faithful_cost, 6),
            "hourlyCost": round(done.cost, 6),
            "replacedNodeClaims": done.claims_replaced,
            "nodeClaimsAfter": done.claims_created,
            "podsMoved": done.pods_moved,
            "note": done.note,
        }
    if result.bound is not None:
        doc["bound"] = bound_section(result)
    return doc


def _ratio(cost: float, lower: float) -> float | None:
    from karpy import planning

    ratio = planning.cost_ratio(cost, lower)
    return None if ratio is None else round(ratio, 6)


def bound_section(result: planning.Plan) -> dict[str, Any]:
    """``bound``: the plan's hourly cost against the LP lower bound for the pods it placed."""
    found = result.bound
    assert found is not None
    section: dict[str, Any] = {
        "lowerBoundPerHour": round(found.lower_bound, 6),
        "ratio": _ratio(result.hourly_cost, found.lower_bound),
        "method": found.method,
        "ignores": list(found.ignores),
        "lpPerHour": None if found.lp != found.lp else round(found.lp, 6),
        "perPodFloorPerHour": round(found.floor, 6),
        "solverStatus": found.status,
        "pods": found.pods,
        "podGroups": found.groups,
        "nodeKinds": found.kinds,
        "instanceTypeMix": [{"kind": name, "nodes": round(count, 4)} for name, count in found.mix],
        "packing": result.packing,
    }
    if result.faithful_cost is not None:
        section["faithfulHourlyCost"] = round(result.faithful_cost, 6)
        section["faithfulRatio"] = _ratio(result.faithful_cost, found.lower_bound)
    if found.uncovered:
        section["uncoveredPods"] = list(found.uncovered)
    return section


def _render_table(result: planning.Plan, console: Console, *, wide: bool = False) -> None:
    """The summary line and tables; ``wide`` adds each NodeClaim's requests and architecture,
    every option's count, and each placement's instance type and zone."""
    from rich.table import Table

    doc = plan_document(result)
    summary = doc["summary"]
    console.print(
        f"[bold]karpy plan[/bold] — catalog {doc['catalog']}: {summary['pendingPods']} pending pods, "
        f"{summary['newNodeClaims']} new NodeClaims (${summary['hourlyCost']:.4f}/h), "
        f"{summary['unschedulablePods']} unschedulable"
    )
    if doc["nodeClaims"]:
        table = Table(title="New NodeClaims", title_justify="left")
        columns = ["NodeClaim", "NodePool", "Type", "Zone", "Capacity", "$/h", "Pods"]
        columns += ["CPU", "Memory", "Arch", "Options"] if wide else ["Options"]
        numeric = ("$/h", "Pods", "CPU", "Memory")
        for column in columns:
            table.add_column(column, justify="right" if column in numeric else "left")
        for claim in doc["nodeClaims"]:
            options = claim["instanceTypeOptions"]
            shown = ", ".join(options[:3]) + (f" (+{len(options) - 3})" if len(options) > 3 else "")
            cells = [
                claim["name"],
                claim["nodePool"],
                claim.get("instanceType") or "-",
                claim.get("zone", "-"),
                claim.get("capacityType", "-"),
                f"{claim['pricePerHour']:.4f}" if "pricePerHour" in claim else "-",
                str(len(claim["pods"])),
            ]
            if wide:
                requests = claim.get("requests", {})
                arch = claim.get("labels", {}).get("kubernetes.io/arch", "-")
                cells += [requests.get("cpu", "-"), requests.get("memory", "-"), arch]
                cells.append(f"{len(options)}: {shown}")
            else:
                cells.append(shown)
            table.add_row(*cells)
        console.print(table)
    bound = {pod: node for pod, node in doc["bindings"].items()}
    if bound:
        table = Table(title="Pod placements", title_justify="left")
        table.add_column("Pod")
        table.add_column("Node / NodeClaim")
        claims = {claim["name"]: claim for claim in doc["nodeClaims"]}
        if wide:
            table.add_column("Type")
            table.add_column("Zone")
        for pod, node in bound.items():
            claim = claims.get(node, {})
            extra = [claim.get("instanceType") or "-", claim.get("zone", "-")] if wide else []
            table.add_row(pod, node, *extra)
        console.print(table)
    if doc["unschedulable"]:
        console.print("[bold red]Unschedulable pods[/bold red]")
        for item in doc["unschedulable"]:
            console.print(f"  {item['pod']}")
            for where, why in item["reasons"].items():
                console.print(f"    {where}: {why}", markup=False, highlight=False)
    if "packing" in doc:
        packing = doc["packing"]
        console.print(
            f"packing {packing['mode']}: ${packing['hourlyCost']:.4f}/h "
            f"(faithful ${packing['faithfulHourlyCost']:.4f}/h; {packing['podsMoved']} pods moved"
            + (f"; {packing['note']}" if packing["note"] else "")
            + ")",
            markup=False,
            highlight=False,
        )
    if "bound" in doc:
        section = doc["bound"]
        ratio = section["ratio"]
        shown = "n/a" if ratio is None else f"{ratio:.4f}"
        console.print(
            f"cost / lower bound: ${summary['hourlyCost']:.4f} / "
            f"${section['lowerBoundPerHour']:.4f} = {shown}"
            + (
                f" (faithful {section['faithfulRatio']:.4f})"
                if section.get("faithfulRatio") is not None
                else ""
            ),
            markup=False,
            highlight=False,
        )
        console.print(
            f"  {section['method']} over {section['pods']} placed pods; ignores: "
            + ", ".join(section["ignores"]),
            markup=False,
            highlight=False,
        )


class Packing(enum.StrEnum):
    """``--packing``: upstream's packing, or a re-packing onto the LP's instance-type mix."""

    faithful = "faithful"
    optimized = "optimized"


def plan(
    files: list[Path] = typer.Option(
        ..., "-f", "--filename", metavar="PATH", help="YAML files or folders to read (repeatable)."
    ),
    catalog: str = options.CATALOG,
    output: WideOutput = typer.Option(
        WideOutput.table, "--output", "-o", help="A table (wide: more columns), or the Plan document."
    ),
    prices: Path | None = typer.Option(
        None, "--prices", metavar="FILE", help="CSV: region,instance_type,capacity_type,usd_per_hour"
    ),
    spot_price_ratio: float = typer.Option(
        0.4, "--spot-price-ratio", metavar="RATIO", help="Spot price = on-demand x ratio (a model)."
    ),
    on_demand_discount: float = typer.Option(
        0.0, "--on-demand-discount", metavar="FRACTION", help="Savings Plans / RIs, e.g. 0.28."
    ),
    bound: bool = typer.Option(
        False, "--bound", help="Also print cost / an LP lower bound on any node set that fits the pods."
    ),
    packing: Packing = typer.Option(
        Packing.faithful,
        "--packing",
        help="faithful (upstream's packing) or optimized (re-pack onto the LP's mix).",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="An unknown field is an error (exit 2; that object is not used)."
    ),
    assume_node_classes: bool = typer.Option(
        False,
        "--assume-nodeclasses",
        help="Plan a NodePool whose NodeClass is not in FILES as if it were (default: it launches nothing).",
    ),
) -> None:
    """Plan the NodeClaims karpy would launch for the pending pods in FILES."""
    from karpy.cli import progress

    with progress.steps() as step:
        step("reading " + ", ".join(str(f) for f in files))
        result, loaded = _run(
            files,
            catalog,
            prices,
            spot_price_ratio,
            on_demand_discount,
            bound,
            packing.value,
            step,
            strict=strict,
            assume_node_classes=assume_node_classes,
        )
    if output is WideOutput.json:
        conventions.print_json(plan_document(result))
    elif output is WideOutput.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(plan_document(result), sort_keys=False))
    else:
        from rich.console import Console

        _render_table(result, Console(width=160), wide=output is WideOutput.wide)
    if loaded.problems:
        raise typer.Exit(2)


def _run(
    files: list[Path],
    catalog: str,
    prices: Path | None,
    spot_price_ratio: float,
    on_demand_discount: float,
    bound: bool,
    packing: str,
    step: Callable[[str], None],
    *,
    strict: bool = False,
    assume_node_classes: bool = False,
) -> tuple[planning.Plan, api_load.Loaded]:
    """Read FILES and solve: the plan and what was loaded (exit 2 on bad input)."""
    from karpy.cli import inputs

    loaded = inputs.read_files(files, strict=strict)  # (parsing while the schemas are imported)
    from karpy import planning
    from karpy import settings as settings_mod
    from karpy.catalog import prices as prices_mod

    inputs.echo(loaded)
    step(f"solving for {len(loaded.pods)} pods")
    settings = settings_mod.Settings(
        scheduling=settings_mod.SchedulingSettings(packing=packing),
        pricing=settings_mod.PricingSettings(
            spot_price_ratio=spot_price_ratio, on_demand_discount=on_demand_discount
        ),
    )
    try:
        overrides = prices_mod.load_prices_csv(prices) if prices is not None else None
        result = planning.make_plan(
            loaded,
            catalog_spec=catalog,
            settings=settings,
            prices=overrides,
            bound=bound,
            assume_node_classes=assume_node_classes,
        )
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    inputs.echo_skipped_pools(result.skipped_pools)
    return result, loaded
