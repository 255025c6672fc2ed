"""``karpy catalog list``: browse the AWS instance-type catalog.

Rows of instance types with raw vCPU/memory/pods, the allocatable karpy predicts (AL2023
defaults), arch, and the cheapest available on-demand and spot offering; ``-o wide`` adds the
family, generation and the zones with an available offering. ``--filter`` takes ``key=value``
(``key=a,b`` for any of several), ``key!=value``, ``key>N`` and ``key<N`` over the type's
labels and requirements, with pod node-affinity semantics; short keys such as
``instance-family`` or ``family`` mean ``karpenter.k8s.aws/instance-family`` (``-f`` is not an
alias: it means ``--filename`` in every karpy command). Output is a rich table, or JSON or YAML.
Mounted by :mod:`karpy.cli` as ``karpy catalog``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from karpy.cli import conventions
from karpy.cli.conventions import Command, Group, WideOutput
from karpy.model import labels as labels_mod
from karpy.model.errors import InputError
from karpy.model.requirements import Requirement, Requirements

if TYPE_CHECKING:
    from rich.table import Table

    from karpy.model.catalog import InstanceType

__all__ = ["OutputFormat", "app", "parse_filter"]

app = typer.Typer(help="Inspect instance-type catalogs.", no_args_is_help=True, cls=Group)

_FILTER = re.compile(r"^\s*(?P<key>[^=!<>\s]+)\s*(?P<op>!=|=|>|<)\s*(?P<value>.*?)\s*$")
_ALIASES = {
    "arch": labels_mod.ARCH,
    "os": labels_mod.OS,
    "zone": labels_mod.ZONE,
    "region": labels_mod.REGION,
    "capacity-type": labels_mod.CAPACITY_TYPE,
    "instance-type": labels_mod.INSTANCE_TYPE,
}
_OPERATORS = {"=": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}

OutputFormat = WideOutput  # (the name this module exported before -o had yaml and wide)


def _resolve_key(key: str) -> str:
    from karpy.catalog import aws

    if "/" in key:
        return labels_mod.normalize(key)
    if key in _ALIASES:
        return _ALIASES[key]
    if key == "zone-id":
        return aws.ZONE_ID
    for candidate in (f"karpenter.k8s.aws/{key}", f"karpenter.k8s.aws/instance-{key}"):
        if candidate in aws.AWS_LABELS:
            return candidate
    return key


def parse_filter(expression: str) -> Requirement:
    """``key=value`` / ``key!=value`` / ``key>N`` / ``key<N`` as a node-selector requirement."""
    match = _FILTER.match(expression)
    if match is None or not match.group("value"):
        raise typer.BadParameter(f"{expression!r}: expected key=value, key!=value, key>N or key<N")
    key, op, value = _resolve_key(match.group("key")), match.group("op"), match.group("value")
    values = [v.strip() for v in value.split(",")] if op in ("=", "!=") else [value]
    try:
        return Requirement.of(key, _OPERATORS[op], values)
    except ValueError as exc:
        raise typer.BadParameter(f"{expression!r}: {exc}") from None


def _cheapest(instance_type: InstanceType, capacity_type: str) -> float | None:
    found = [o.price for o in instance_type.offerings if o.available and o.capacity_type == capacity_type]
    return min(found) if found else None


def _row(instance_type: InstanceType) -> dict[str, Any]:
    from karpy.catalog import aws
    from karpy.model import quantity
    from karpy.model.resources import CPU, MEMORY, PODS

    alloc = instance_type.allocatable
    memory_mib = instance_type.labels.get(aws.MEMORY)
    return {
        "name": instance_type.name,
        "vcpu": instance_type.capacity.get(CPU) // 1000,
        "memory_mib": int(memory_mib) if memory_mib else instance_type.capacity.get(MEMORY) // 2**20,
        "pods": instance_type.capacity.get(PODS),
        "allocatable": {
            "cpu": quantity.format_cpu(alloc.get(CPU)),
            "memory": quantity.format_bytes(alloc.get(MEMORY)),
            "pods": alloc.get(PODS),
        },
        "arch": instance_type.labels.get(labels_mod.ARCH, ""),
        "on_demand_price": _cheapest(instance_type, labels_mod.CAPACITY_TYPE_ON_DEMAND),
        "spot_price": _cheapest(instance_type, labels_mod.CAPACITY_TYPE_SPOT),
    }


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _gib(mib: int) -> str:
    return f"{mib / 1024:g}"


def _wide(instance_type: InstanceType, region: str) -> list[str]:
    """``-o wide``'s extra cells: family, generation, the zones with an available offering (their
    letters after the region's name: ``a,b,c``)."""
    labels = instance_type.labels
    zones = sorted({o.zone for o in instance_type.offerings if o.available})
    return [
        labels.get("karpenter.k8s.aws/instance-family", "-"),
        labels.get("karpenter.k8s.aws/instance-generation", "-"),
        ",".join(z.removeprefix(region) for z in zones) or "-",
    ]


def _table(rows: list[dict[str, Any]], title: str, wide: list[list[str]] | None = None) -> Table:
    """The instance types; with ``wide`` (per row: family, generation, zones) three more columns."""
    from rich.table import Table

    table = Table(title=title)
    columns = [("Type", "left")]
    columns += [("Family", "left"), ("Gen", "right")] if wide is not None else []
    columns += [
        ("vCPU", "right"),
        ("Memory GiB", "right"),
        ("Pods", "right"),
        ("Alloc CPU", "right"),
        ("Alloc memory", "right"),
        ("Alloc pods", "right"),
        ("Arch", "left"),
        ("On-demand $/h", "right"),
        ("Spot $/h", "right"),
    ]
    columns += [("Zones", "left")] if wide is not None else []
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for index, row in enumerate(rows):
        cells = wide[index] if wide is not None else []
        table.add_row(
            row["name"],
            *cells[:2],
            str(row["vcpu"]),
            _gib(row["memory_mib"]),
            str(row["pods"]),
            row["allocatable"]["cpu"],
            row["allocatable"]["memory"],
            str(row["allocatable"]["pods"]),
            row["arch"],
            _money(row["on_demand_price"]),
            _money(row["spot_price"]),
            *cells[2:],
        )
    return table


@app.callback()
def main() -> None:
    """Inspect instance-type catalogs."""


@app.command("list", cls=Command)
def list_(
    region: Annotated[
        str, typer.Option("--region", "-r", metavar="REGION", help="AWS region (see the data's zones).")
    ] = "us-east-1",
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            metavar="EXPR",
            help="key=value, key!=value, key>N or key<N; repeatable (AND).",
        ),
    ] = None,
    output: Annotated[
        WideOutput, typer.Option("--output", "-o", help="A table (wide: more columns), JSON or YAML.")
    ] = WideOutput.table,
    prices_file: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help="CSV region,instance_type,capacity_type,usd_per_hour overriding prices.",
        ),
    ] = None,
) -> None:
    """List the instance types of an AWS region with allocatable and prices."""
    from karpy import settings as settings_mod
    from karpy.catalog import aws, prices

    requirements = Requirements(parse_filter(f) for f in filters or [])
    pricing = settings_mod.PricingSettings()
    try:
        override = prices.load_prices_csv(prices_file) if prices_file is not None else None
        catalog = aws.catalog(region, pricing=pricing, prices_override=override)
        basis = aws.price_basis(region)
        fallback = aws.price_is_fallback(region)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    selected = [
        it
        for it in catalog.instance_types
        if it.requirements.is_compatible(requirements, allow_undefined=catalog.well_known)
    ]
    rows = [_row(it) for it in selected]
    notes = [f"spot prices are a model: on-demand table price x {pricing.spot_price_ratio:g}, not data"]
    if fallback:
        notes.insert(
            0,
            f"prices for {region} are Karpenter's static fallback ({basis}): us-east-1 prices, not regional",
        )
    if output in (WideOutput.json, WideOutput.yaml):
        document = {
            "region": region,
            "price_basis": basis,
            "price_fallback": fallback,
            "spot_price_ratio": pricing.spot_price_ratio,
            "instance_types": rows,
        }
        if output is WideOutput.json:
            conventions.print_json(document)
        else:
            import yaml

            typer.echo(yaml.safe_dump(document, sort_keys=False), nl=False)
        return
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    wide = [_wide(it, region) for it in selected] if output is WideOutput.wide else None
    console.print(_table(rows, f"{catalog.name}: {len(rows)} instance types", wide))
    for note in notes:
        console.print(f"note: {note}", highlight=False)
