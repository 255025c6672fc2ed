"""``karpy sweep SWEEP.yaml``: what-if sweeps (scenarios x configurations x grid x seeds), on Ray or
on local processes.

Reads the ``kind: Sweep`` file and every file it names (:mod:`karpy.sweep.expand`; a problem is one
``error:`` line naming file and field, exit 2), checks the output paths before any run starts,
skips the runs already in ``--out DIR/runs/`` (saying how many), runs the others on the backend
(``ray``: a local Ray, or the cluster of ``--address``/``RAY_ADDRESS``; ``processes``: local
processes; the default is Ray when it is installed) under a progress bar when stderr is a
terminal, retries a failed run once, writes ``DIR/sweep.json`` and ``--report``, and prints the
merged statistics (``-o table``) or the document (``-o json|yaml``). Exit 0 when every run
succeeded, 1 when any failed (after writing everything), 2 for bad input. Light at import: the
simulator, ray and matplotlib load only when the command runs. See ``docs/sweep.md``.
"""

from __future__ import annotations

import enum
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.cli import conventions
from karpy.cli.conventions import Output

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from karpy.sweep import execute as execute_mod
    from karpy.sweep import expand as expand_mod

__all__ = ["Backend", "sweep"]


class Backend(enum.StrEnum):
    """``--backend``: where the runs execute."""

    ray = "ray"
    processes = "processes"


def _ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def _pool(
    backend: Backend, workers: int | None, address: str | None, plan: expand_mod.Plan
) -> execute_mod.Pool:
    from karpy.sweep import execute

    if backend is Backend.processes:
        if address is not None:
            raise conventions.fail("--address: only with --backend ray")
        return execute.ProcessPool(workers or os.cpu_count() or 1, str(plan.root))
    if not _ray_installed():
        raise conventions.fail("--backend ray: ray is not installed (pip install 'karpy[sweep]')")
    from karpy.sweep import ray_backend

    return ray_backend.RayPool(workers=workers, root=plan.root, address=address)


def _run(
    plan: expand_mod.Plan, pool: execute_mod.Pool, out: Path | None, show: bool, err: Console
) -> tuple[list[execute_mod.Outcome], int]:
    """Every run under a progress bar (runs done and failed, ETA), on stderr when it is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from karpy.sweep import execute

    already = len(execute.finished(out, plan.runs))
    total = len({r.key for r in plan.runs})
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("failed {task.fields[failed]}"),
        TimeRemainingColumn(),
        console=err,
        disable=not (show and err.is_terminal),
        transient=True,
    ) as bar:
        task = bar.add_task(plan.sweep.name, total=total, completed=already, failed=0)

        def tick(ok: int, failed: int) -> None:
            bar.update(task, completed=already + ok + failed, failed=failed)

        return execute.execute(plan, pool, out=out, progress=tick)


def _table(doc: dict[str, Any]) -> Table:
    from rich.table import Table

    from karpy.sweep import merge

    table = Table(
        title=f"karpy sweep — {doc['sweep']} (mean ± 95% interval over seeds {doc['seeds']})",
        title_justify="left",
    )
    for column in ("scenario", "configuration", "grid", "runs"):
        table.add_column(column)
    for label, _key, _digits in merge.COLUMNS:
        table.add_column(label, justify="right")
    for group in doc["groups"]:
        runs = f"{len(group['runs'])}" + (f" ({group['failed']} failed)" if group["failed"] else "")
        cells = [merge.cell(group["figures"][key], digits) for _label, key, digits in merge.COLUMNS]
        table.add_row(group["scenario"], group["configuration"], group["label"] or "-", runs, *cells)
    return table


def _print(doc: dict[str, Any], output: Output) -> None:
    from rich.console import Console

    from karpy.sweep import merge

    if output is Output.json:
        typer.echo(merge.dumps(doc), nl=False)
    elif output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=True), nl=False)
    else:
        console = Console(width=160)
        console.print(_table(doc))
        for failed in doc["failedRuns"]:
            console.print(f"failed: {failed['name']}: {failed['error']}", markup=False, highlight=False)


def sweep(
    file: Path = typer.Argument(..., metavar="SWEEP", help="A kind: Sweep YAML file."),
    backend: Backend | None = typer.Option(
        None, "--backend", help="ray (local or --address) or processes (default: ray when installed)."
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        metavar="N",
        min=1,
        help="Runs at once (default: every CPU; of the Ray cluster with --address).",
    ),
    address: str | None = typer.Option(
        None, "--address", metavar="ADDRESS", help="A Ray cluster, e.g. ray://HOST:10001 (or RAY_ADDRESS)."
    ),
    out: Path | None = typer.Option(
        None, "--out", metavar="DIR", help="Keep every run's JSON and sweep.json here; rerun to resume."
    ),
    report: Path | None = typer.Option(None, "--report", metavar="FILE", help="Write an HTML report."),
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="The table, or the merged document on stdout."
    ),
    show_progress: bool = typer.Option(
        True, "--progress/--no-progress", help="A progress bar on stderr (when it is a terminal)."
    ),
) -> None:
    """Run a what-if sweep of simulations and merge the figures across seeds."""
    from rich.console import Console

    from karpy.sweep import expand, merge, spec

    conventions.check_folder(out, "--out")
    conventions.check_file(report, "--report")
    try:
        plan = expand.expand(file)
    except spec.SweepError as exc:
        raise conventions.fail(*(str(p) for p in exc.problems)) from None
    err = Console(stderr=True)
    for warning in plan.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    from karpy.sweep import execute

    chosen = backend or (Backend.ray if _ray_installed() else Backend.processes)
    if len(execute.finished(out, plan.runs)) == len({r.key for r in plan.runs}):
        chosen = Backend.processes  # (nothing to run: no Ray to start; a process pool starts no process)
        address = None
    pool = _pool(chosen, workers, address, plan)
    outcomes, skipped = _run(plan, pool, out, show_progress, err)
    if skipped:
        err.print(f"skipped {skipped} finished runs (in {out}/runs)", markup=False, highlight=False)
    doc = merge.document(plan, outcomes)
    _print(doc, output)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.json").write_text(merge.dumps(doc), encoding="utf-8")
        err.print(f"wrote {out / 'sweep.json'}", markup=False, highlight=False)
    if report is not None:
        from karpy.sweep import report as report_mod

        report.parent.mkdir(parents=True, exist_ok=True)
        report_mod.write_html(doc, report)
        err.print(f"wrote {report}", markup=False, highlight=False)
    if doc["runs"]["failed"]:
        sys.stderr.flush()
        raise typer.Exit(1)
