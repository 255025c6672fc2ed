"""``karpy simulate SCENARIO.yaml``: replay a workload trace through karpy (and comparisons).

Runs :func:`karpy.sim.runner.run` for karpy, then each comparison (``--compare
cluster-autoscaler``, ``--compare-with OTHER.yaml`` = this trace with the other file's
NodePools and NodeClasses, ``--ablations`` = karpy without spot, without consolidation and
without both), every run from the ``--from-snapshot`` folder when given (each of its warnings
printed once), shows a progress bar, prints a side-by-side table with one scheduler consistency
line per karpy run under it, and writes ``--json``
(``{"scenario", "seed", "runs": {name: figures}}``, identical for the same scenario and seed)
and ``--report`` (an HTML page, when :mod:`karpy.sim.report` is installed); ``-o json|yaml``
prints that document on stdout instead of the table. Both output paths are checked before the
first run starts (a file where a folder must be, no permission: one line, exit 2). A malformed
scenario prints one line per problem (file and field path) and exits 2. See
``docs/simulation.md``.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.cli import conventions
from karpy.cli.conventions import Output
from karpy.model.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from karpy.sim import runner
    from karpy.sim import scenario as scenario_mod

__all__ = ["Baseline", "Scoring", "document", "simulate"]

CA = "cluster-autoscaler"  # karpy.sim.runner.CLUSTER_AUTOSCALER, named without loading the simulator
_ABLATIONS: dict[str, dict[str, bool]] = {  # runner.Overrides of each ablation run
    "karpy-no-spot": {"no_spot": True},
    "karpy-no-consolidation": {"no_consolidation": True},
    "karpy-no-spot-no-consolidation": {"no_spot": True, "no_consolidation": True},
}


class Baseline(enum.StrEnum):
    """``--compare``: the baselines a scenario can also run under."""

    cluster_autoscaler = CA


class Scoring(enum.StrEnum):
    """``--scoring``: kube-scheduler's NodeResourcesFit strategy."""

    LeastAllocated = "LeastAllocated"
    MostAllocated = "MostAllocated"


def document(
    scenario: scenario_mod.Scenario, seed: int, results: dict[str, runner.RunResult]
) -> dict[str, Any]:
    """The ``--json`` document (no wall-clock figures, so it is reproducible)."""
    from karpy.api import common, encode

    first = next(iter(results.values()), None)
    return {
        "apiVersion": common.KARPY_API_VERSION,
        "kind": "SimulationResult",
        "scenario": scenario.name,
        "seed": seed,
        "start": encode.time(scenario.start),
        "end": encode.time(first.end if first is not None else scenario.end),
        "runs": {name: result.to_dict() for name, result in results.items()},
    }


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}{unit}"
    return f"{value}{unit}"


def _table(doc: dict[str, Any], walls: dict[str, float]) -> Table:
    from rich.table import Table

    from karpy import native

    runs = doc["runs"]
    table = Table(
        title=f"karpy simulate — {doc['scenario']} (seed {doc['seed']})",
        title_justify="left",
        caption=f"core: {native.status().describe()}",
        caption_justify="left",
    )
    table.add_column("")
    for name in runs:
        table.add_column(name, justify="right")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("cost (USD)", lambda r: f"{r['cost_usd']:,.2f}"),
        (
            "pending p50 / p95 (s)",
            lambda r: f"{_fmt(r['pending_seconds']['p50'])} / {_fmt(r['pending_seconds']['p95'])}",
        ),
        (
            "pending p99 / max (s)",
            lambda r: f"{_fmt(r['pending_seconds']['p99'])} / {_fmt(r['pending_seconds']['max'])}",
        ),
        (
            "ready p50 / p95 (s)",
            lambda r: f"{_fmt(r['ready_seconds']['p50'])} / {_fmt(r['ready_seconds']['p95'])}",
        ),
        ("pods created", lambda r: _fmt(r["pods_created"])),
        ("pods never scheduled", lambda r: _fmt(r["pods_never_scheduled"])),
        ("nodes created / removed", lambda r: f"{r['nodes_created']} / {r['nodes_removed']}"),
        ("peak nodes", lambda r: _fmt(r["peak_nodes"])),
        (
            "node-hours (spot)",
            lambda r: f"{r['node_hours']:,.1f} ({r['node_hours_by_capacity_type'].get('spot', 0):,.1f})",
        ),
        (
            "cpu / memory utilisation",
            lambda r: f"{r['utilization']['cpu']:.0%} / {r['utilization']['memory']:.0%}",
        ),
        ("disruptions", lambda r: ", ".join(f"{k} {v}" for k, v in r["disruptions"].items()) or "-"),
        ("evictions", lambda r: _fmt(r["evictions"])),
    ]
    if any("volumes" in r for r in runs.values()):  # a scenario with claims (docs/simulation.md)
        rows += _volume_rows()
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in runs.values()))
    table.add_row("wall time (s)", *(f"{walls.get(name, 0.0):.1f}" for name in runs))
    return table


def _volume_rows() -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """The rows of a run's ``volumes`` block: pods pinned by their volumes, and who waited."""

    def pinned(r: dict[str, Any]) -> str:
        v = r.get("volumes") or {}
        seconds = v.get("pinned_pending_seconds") or {}
        return f"{v.get('pinned_pods_bound', 0)} ({_fmt(seconds.get('p95'))} / {_fmt(seconds.get('max'))})"

    def waited(r: dict[str, Any]) -> str:
        v = r.get("volumes") or {}
        return f"{v.get('pods_waited_for_volume_zone', 0)} / {v.get('pods_waited_for_attach_limit', 0)}"

    def cross(r: dict[str, Any]) -> str:
        v = r.get("volumes") or {}
        return f"{v.get('volumes_provisioned', 0)} / {v.get('cross_zone_bindings', 0)}"

    return [
        ("volume-pinned pods (pending p95 / max s)", pinned),
        ("waited for volume zone / attach limit", waited),
        ("volumes provisioned / cross-zone binds", cross),
    ]


def _until(text: str | None) -> float | None:
    from karpy.api import common

    if text is None:
        return None
    try:
        seconds = common.parse_duration(text)
    except ValueError as exc:
        raise InputError(f"--until: {exc}") from None
    if not seconds:
        raise InputError("--until: must be longer than 0s")
    return seconds


def simulate(
    scenario: Path = typer.Argument(..., metavar="SCENARIO", help="A kind: Simulation YAML file."),
    seed: int = typer.Option(
        1, "--seed", metavar="N", help="Seed of the run's randomness (launch latency, interruptions)."
    ),
    until: str | None = typer.Option(
        None, "--until", metavar="DURATION", help="Simulate this long instead of the duration, e.g. 24h."
    ),
    json_out: Path | None = typer.Option(None, "--json", metavar="FILE", help="Write every figure as JSON."),
    report: Path | None = typer.Option(
        None, "--report", metavar="FILE", help="Write an HTML report with plots."
    ),
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="The table, or the SimulationResult document on stdout."
    ),
    compare: list[Baseline] = typer.Option([], "--compare", help="Also run a baseline (repeatable)."),
    compare_with: list[Path] = typer.Option(
        [],
        "--compare-with",
        metavar="FILE",
        help="Also run karpy with this file's NodePools/NodeClasses on the same trace.",
    ),
    ablations: bool = typer.Option(False, "--ablations", help="Also run karpy without spot / consolidation."),
    scoring: Scoring | None = typer.Option(None, "--scoring", help="Scheduler scoring strategy."),
    show_progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    from_snapshot: Path | None = typer.Option(
        None,
        "--from-snapshot",
        metavar="DIR",
        help="Start from this `karpy snapshot` folder (replaces the scenario's initialState.snapshot).",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="An unknown field of an embedded Kubernetes object is an error (exit 2)."
    ),
    max_pods: int = typer.Option(
        100_000,
        "--max-pods",
        metavar="N",
        min=1,
        help="The most pods one workload, or all workloads' peaks added up, may reach.",
    ),
) -> None:
    """Simulate SCENARIO on a virtual clock with karpy's controllers and compare."""
    from rich.console import Console

    conventions.check_file(json_out, "--json")
    conventions.check_file(report, "--report")
    loaded, others, duration = _load(
        scenario, compare_with, until, from_snapshot, strict=strict, max_pods=max_pods
    )
    if CA in compare and loaded.baseline is None:
        raise conventions.fail(f"{scenario}: baseline.clusterAutoscaler: required by --compare {CA}")
    plan = _plan(loaded, others, compare=[str(c) for c in compare], ablations=ablations)
    err = Console(stderr=True)
    results, walls = _run_all(
        plan,
        seed=seed,
        duration=duration,
        scoring=None if scoring is None else scoring.value,
        show_progress=show_progress,
        err=err,
    )
    doc = document(loaded, seed, results)
    if output is Output.json:
        conventions.print_json(doc)
    elif output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    else:
        _print(Console(width=160), doc, walls)
    _write(doc, json_out=json_out, report=report, err=err)


_Run = tuple[str, "scenario_mod.Scenario", str, "runner.Overrides"]  # name, scenario, mode, overrides


def _load(
    scenario: Path,
    compare_with: list[Path],
    until: str | None,
    snapshot: Path | None = None,
    *,
    strict: bool = False,
    max_pods: int = 100_000,
) -> tuple[scenario_mod.Scenario, list[scenario_mod.Scenario], float | None]:
    """The scenario (from ``snapshot`` when given), the ``--compare-with`` files and the ``--until``
    duration (exit 2 on a problem); each file's warnings (unknown fields) on stderr."""
    from karpy.sim import scenario as scenario_mod

    try:
        loaded = scenario_mod.load(scenario, snapshot=snapshot, strict=strict, max_pods=max_pods)
        others = [scenario_mod.load(p, strict=strict, max_pods=max_pods) for p in compare_with]
        duration = _until(until)
    except scenario_mod.ScenarioError as exc:
        raise conventions.fail(*(str(p) for p in exc.problems)) from None
    except InputError as exc:
        raise conventions.fail(str(exc)) from None
    for warning in [w for sc in (loaded, *others) for w in sc.warnings]:
        typer.echo(f"warning: {warning}", err=True)
    return loaded, others, duration


def _plan(
    loaded: scenario_mod.Scenario,
    others: list[scenario_mod.Scenario],
    *,
    compare: list[str],
    ablations: bool,
) -> list[_Run]:
    """The runs, in the order of the table: karpy, its ablations, the baseline, the other configs."""
    from karpy.sim import runner

    plan: list[_Run] = [("karpy", loaded, runner.KARPY, runner.Overrides())]
    if ablations:
        plan += [(name, loaded, runner.KARPY, runner.Overrides(**o)) for name, o in _ABLATIONS.items()]
    if CA in compare:
        plan.append((CA, loaded, CA, runner.Overrides()))
    for other in others:
        plan.append(
            (f"karpy:{other.name}", loaded.with_karpy_config(other), runner.KARPY, runner.Overrides())
        )
    return plan


def _run_all(
    plan: list[_Run],
    *,
    seed: int,
    duration: float | None,
    scoring: str | None,
    show_progress: bool,
    err: Console,
) -> tuple[dict[str, runner.RunResult], dict[str, float]]:
    """Run every entry of ``plan`` under a progress bar: the results and wall times by name."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from karpy.sim import runner

    results: dict[str, runner.RunResult] = {}
    walls: dict[str, float] = {}
    warned: set[str] = set()  # the snapshot's warnings, each printed once for all runs
    with Progress(
        TextColumn("{task.description:<32}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err,
        disable=not show_progress,
        transient=True,
    ) as bar:
        for name, sc, mode, overrides in plan:
            task = bar.add_task(name, total=1.0)

            def tick(done: float, total: float, task: Any = task) -> None:
                bar.update(task, completed=done / total if total else 1.0)

            began = time.perf_counter()
            try:
                results[name] = runner.run(
                    sc,
                    seed=seed,
                    until=duration,
                    mode=mode,
                    karpy_overrides=overrides,
                    scoring=scoring,
                    progress=tick,
                )
            except NotImplementedError as exc:
                err.print(f"warning: {name} skipped: {exc}", markup=False, highlight=False)
                continue
            except InputError as exc:
                raise conventions.fail(str(exc)) from None
            walls[name] = time.perf_counter() - began
            for line in results[name].warnings:
                if line not in warned:
                    warned.add(line)
                    err.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
            for problem in results[name].problems:
                err.print(f"warning: {name}: {problem}", markup=False, highlight=False)
    return results, walls


def _print(console: Console, doc: dict[str, Any], walls: dict[str, float]) -> None:
    """The side-by-side table, one scheduler consistency line per karpy run and, with a Cluster
    Autoscaler run, where the savings come from."""
    from karpy.sim import consistency
    from karpy.sim import report as report_mod

    console.print(_table(doc, walls))
    for name, figures in doc["runs"].items():
        block = figures.get(consistency.KEY)
        if block is not None:
            console.print(consistency.line(name, block), markup=False, highlight=False)
    split = report_mod.savings_breakdown(doc["runs"])
    if split:
        console.print(
            f"Cost difference to Cluster Autoscaler: ${split['total']:,.2f} = instance choice and packing "
            f"${split['instance_choice_and_packing']:,.2f} + consolidation ${split['consolidation']:,.2f} "
            f"+ spot ${split['spot']:,.2f}",
            markup=False,
            highlight=False,
        )


def _write(doc: dict[str, Any], *, json_out: Path | None, report: Path | None, err: Console) -> None:
    """Write ``--json`` and ``--report`` when asked for (their paths were checked before the run)."""
    from karpy.sim import report as report_mod

    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        err.print(f"wrote {json_out}", markup=False, highlight=False)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report_mod.write_html(doc, report)
        err.print(f"wrote {report}", markup=False, highlight=False)
