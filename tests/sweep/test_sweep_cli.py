"""``karpy sweep``: exit codes, the merged document on stdout and in --out, resume, output checks,
and a command module that loads neither ray, the simulator nor matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sweep_files
import typer
from typer.testing import CliRunner

from karpy.cli import conventions
from karpy.cli.sweep_cmd import sweep

app = typer.Typer()
app.command(cls=conventions.Command)(sweep)
cli = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = cli.invoke(app, [*args, "--no-progress"])
    return result.exit_code, result.stdout, result.stderr


def test_a_malformed_sweep_is_exit_2_naming_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("kind: Sweep\nname: s\nscenarios: [a.yaml]\ngrid: {consolidateAfter: [5x]}\nsed: [1]\n")
    code, out, err = run(str(path))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f'error: {path}: document 0 (Sweep "s"): grid.consolidateAfter[0]: "5x" is not a duration '
        "(expected e.g. 30s, 1h30m or 720h)",
        f'error: {path}: document 0 (Sweep "s"): sed: unknown field',
    ]
    code, _, err = run(str(tmp_path / "sweep.yaml"), "--backend", "threads")
    assert code == 2 and err.startswith("error: ")


def test_output_paths_are_checked_before_any_run(tmp_path: Path) -> None:
    path = sweep_files.six_runs(tmp_path)
    (tmp_path / "x").write_text("a file")
    code, _, err = run(str(path), "--report", str(tmp_path / "x" / "r.html"))
    assert code == 2 and "--report" in err and "is a file, not a folder" in err
    code, _, err = run(str(path), "--out", str(tmp_path / "x"))
    assert code == 2 and err.strip() == f"error: --out {tmp_path / 'x'}: is a file, not a folder"
    assert not (tmp_path / "runs").exists()


def test_json_on_stdout_equals_sweep_json_and_a_rerun_skips_every_run(tmp_path: Path) -> None:
    path = sweep_files.six_runs(tmp_path)
    out = tmp_path / "out"
    args = [str(path), "--backend", "processes", "--workers", "2", "--out", str(out), "-o", "json"]
    code, stdout, err = run(*args, "--report", str(tmp_path / "r.html"))
    assert code == 0, err
    assert stdout == (out / "sweep.json").read_text()
    doc = json.loads(stdout)
    assert doc["runs"] == {"total": 6, "succeeded": 6, "failed": 0}
    assert len(list((out / "runs").glob("*.json"))) == 6
    assert "data:image/png;base64," in (tmp_path / "r.html").read_text()
    code, again, err = run(*args)
    assert code == 0 and again == stdout
    assert "skipped 6 finished runs" in err
    code, table, _ = run(*args[:-2])
    assert code == 0 and "consolidateAfter=5m" in table and "cost (USD)" in table


def test_a_failed_run_is_exit_1_after_writing_everything(tmp_path: Path) -> None:
    path = sweep_files.six_runs(tmp_path, broken=True, seeds="[1]")
    out = tmp_path / "out"
    code, stdout, _ = run(str(path), "--backend", "processes", "--workers", "2", "--out", str(out))
    assert code == 1
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["runs"] == {"total": 6, "succeeded": 3, "failed": 3}
    assert (
        "failed: small-broken/baseline/consolidateAfter=30s/seed=1: InputError: broken-catalog.yaml" in stdout
    )


def test_importing_the_command_loads_no_ray_simulator_or_matplotlib() -> None:
    code = (
        "import sys, karpy.cli.sweep_cmd; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'matplotlib') "
        "or m.startswith(('karpy.sim', 'karpy.sweep'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
