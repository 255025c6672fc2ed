"""What every ``karpy`` command shares: help without Python types, ``-o`` choices, ``-f`` =
``--filename``, one-line usage errors, ``--version`` / ``version``, shell completion, output
paths checked before the work starts, and progress only on a terminal."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

import pytest
import typer
import yaml
from rich.console import Console
from typer import _click
from typer.testing import CliRunner

from karpy import native
from karpy.cli import app, conventions, progress, simulate_cmd

ROOT = Path(__file__).resolve().parents[3]
PLAN = ROOT / "examples" / "plan"
DISRUPTION = ROOT / "examples" / "disruption"
EXPLAIN = ROOT / "examples" / "explain"
SMALL = ROOT / "examples" / "sim" / "small.yaml"
SUITE = ROOT / "tests" / "conformance"
AT = "2026-03-02T12:00:00Z"
runner = CliRunner()

# typer's own renderings of Python types; a metavar replaces each
PLACEHOLDERS = ("<bool>", "<list[", "<str>", "<float>", "<int>", "<path>", "<Path>", "{")
# commands whose -o is a folder to write into, not a format
OUTPUT_FOLDERS = {("snapshot",), ("convert",), ("record",)}  # -o names where files go


def _commands(command: _click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


def _command(path: tuple[str, ...]) -> _click.Command:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return command


ALL = list(_commands(typer.main.get_command(app)))


def invoke(*args: str) -> typer.testing.Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"}, prog_name="karpy")


def test_the_tree_has_every_command() -> None:
    names = {" ".join(p) for p in ALL if p}
    for expected in ("plan", "disrupt", "simulate", "version", "catalog list", "explain pod", "explain node"):
        assert expected in names


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "karpy")
def test_help_shows_no_python_types(path: tuple[str, ...]) -> None:
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage: karpy" in result.output
    found = [p for p in PLACEHOLDERS if p in result.output]
    assert not found, f"karpy {' '.join(path)} --help shows {found}:\n{result.output}"


def test_root_help_lists_every_command_with_its_help_text() -> None:
    out = invoke("--help").output
    for name in ("simulate", "plan", "disrupt", "conformance", "operator", "snapshot", "convert", "version"):
        assert re.search(rf"│ {name} +\S", out), name
    assert "Plan the NodeClaims karpy would launch" in out
    assert "--install-completion" in out and "--show-completion" in out and "--version" in out


@pytest.mark.parametrize("path", [p for p in ALL if p and p not in OUTPUT_FOLDERS], ids=" ".join)
def test_every_output_option_offers_table_json_and_yaml(path: tuple[str, ...]) -> None:
    command = _command(path)
    options = [p for p in command.params if "--output" in getattr(p, "opts", [])]
    if not options:
        # groups, and the commands that run or control a service (one line of what they did)
        services = {("operator",), ("daemon", "start"), ("daemon", "stop")}
        assert path in {("catalog",), ("explain",), ("daemon",), *services}, f"{path}: no -o"
        return
    (option,) = options
    assert "-o" in option.opts
    choices = {str(getattr(c, "value", c)) for c in option.type_descriptor.choices or ()}  # type: ignore[attr-defined]
    assert {"table", "json", "yaml"} <= choices
    assert choices <= {"table", "wide", "json", "yaml"}


@pytest.mark.parametrize("path", [p for p in ALL if p], ids=" ".join)
def test_dash_f_means_filename(path: tuple[str, ...]) -> None:
    for param in _command(path).params:
        if "-f" in getattr(param, "opts", []):
            assert "--filename" in param.opts, f"{path}: -f is {param.opts}"


def test_catalog_filter_has_no_short_option() -> None:
    result = invoke("catalog", "list", "-f", "family=m5")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: No such option: -f")
    assert invoke("catalog", "list", "--filter", "family=m5", "-o", "json").exit_code == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("pln",), "No such command 'pln'"),
        (("plan",), "Missing option '-f' / '--filename'"),
        (("disrupt", "-f", str(DISRUPTION), "-o", "xml"), "'xml' is not one of 'table', 'json', 'yaml'"),
        (("plan", "-f", str(PLAN), "--packing", "best"), "--packing"),
        (("catalog", "list", "--filter", "nope"), "expected key=value"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and says in line and "Value error" not in line
    assert line.endswith("--help')")


def test_no_arguments_still_prints_help() -> None:
    result = invoke()
    assert "Usage: karpy [OPTIONS] COMMAND [ARGS]..." in result.output


def test_version_flag_and_command_agree() -> None:
    flag, command = invoke("--version"), invoke("version")
    assert flag.exit_code == command.exit_code == 0
    assert flag.stdout == command.stdout
    lines = flag.stdout.splitlines()
    assert lines[0] == f"karpy {metadata.version('karpy')}"
    assert lines[1].startswith(f"Python {sys.version.split()[0]}")
    assert lines[2] == f"core: {native.status().describe()}"
    doc = json.loads(invoke("version", "-o", "json").stdout)
    assert doc["karpy"] == metadata.version("karpy") and doc["core"]["build"] == native.status().build
    assert yaml.safe_load(invoke("version", "-o", "yaml").stdout) == doc


def test_shell_completion_completes_commands_and_choices() -> None:
    def complete(words: str, cword: int) -> list[str]:
        env = {"_KARPY_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        result = runner.invoke(app, [], env=env, prog_name="karpy")
        assert result.exit_code == 0, result.output
        return result.output.split()

    assert complete("karpy pl", 1) == ["plan"]
    assert complete("karpy plan -o ", 3) == ["table", "wide", "json", "yaml"]
    script = runner.invoke(app, [], env={"_KARPY_COMPLETE": "source_bash"}, prog_name="karpy")
    assert "_karpy_completion" in script.output and "complete " in script.output


def test_every_result_command_prints_json_and_the_same_as_yaml(tmp_path: Path) -> None:
    commands = [
        ("plan", "-f", str(PLAN)),
        ("disrupt", "-f", str(DISRUPTION), "--now", AT),
        ("explain", "pod", "shop/report-0", "-f", str(EXPLAIN)),
        ("explain", "node", "ip-10-0-1-14", "-f", str(DISRUPTION), "--now", AT),
        ("catalog", "list", "--filter", "family=m5"),
        ("conformance", str(SUITE / "core-001-nodepool-template-label-applied.yaml")),
    ]
    for args in commands:
        as_json, as_yaml = invoke(*args, "-o", "json"), invoke(*args, "-o", "yaml")
        assert as_json.exit_code == as_yaml.exit_code == 0, (args, as_json.output)
        assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout), args


def test_conformance_document_counts_the_scenarios() -> None:
    result = invoke("conformance", str(SUITE / "core-001-nodepool-template-label-applied.yaml"), "-o", "json")
    doc = json.loads(result.stdout)
    assert doc["kind"] == "ConformanceResult"
    assert doc["summary"] == {"passed": 1, "failed": 0, "skipped": 0, "disputed": 0}
    assert doc["scenarios"][0]["name"] == "core-001-nodepool-template-label-applied"


def test_wide_tables_have_more_columns() -> None:
    table, wide = invoke("plan", "-f", str(PLAN)), invoke("plan", "-f", str(PLAN), "-o", "wide")
    assert table.exit_code == wide.exit_code == 0
    header = next(line for line in wide.stdout.splitlines() if "NodeClaim" in line and "Memory" in line)
    assert "CPU" in header and "Arch" in header
    assert not any("Memory" in line and "NodeClaim" in line for line in table.stdout.splitlines())
    catalog = invoke("catalog", "list", "--filter", "instance-type=m5.large", "-o", "wide")
    assert catalog.exit_code == 0
    assert "Family" in catalog.stdout and "Zones" in catalog.stdout
    row = next(line for line in catalog.stdout.splitlines() if "m5.large" in line)
    assert "│ m5 " in row and "a,b,c,d,f" in row


def test_simulate_prints_its_document_with_dash_o(tmp_path: Path) -> None:
    written = tmp_path / "run.json"
    args = ("simulate", str(SMALL), "--until", "10m", "--no-progress", "--json", str(written))
    result = invoke(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "SimulationResult" and doc["seed"] == 1 and "karpy" in doc["runs"]
    assert json.loads(written.read_text()) == doc
    as_yaml = invoke("simulate", str(SMALL), "--until", "10m", "--no-progress", "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == doc


def test_simulate_names_the_baseline_as_the_runner_does() -> None:
    from karpy.sim import runner as sim_runner

    assert simulate_cmd.CA == sim_runner.CLUSTER_AUTOSCALER


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "x"
    path.write_text("not a folder\n")
    return path


def _one_error(result: typer.testing.Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")
    return line


def test_simulate_checks_its_output_paths_before_it_reads_or_runs(a_file: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-scenario.yaml"  # never read: the output path is checked first
    line = _one_error(invoke("simulate", str(missing), "--report", str(a_file / "y.html")))
    assert line == f"error: --report {a_file / 'y.html'}: {a_file} is a file, not a folder"
    line = _one_error(invoke("simulate", str(SMALL), "--json", "/proc/karpy-test/run.json"))
    assert line.startswith("error: --json /proc/karpy-test/run.json: cannot write in /proc")
    line = _one_error(invoke("simulate", str(SMALL), "--report", str(tmp_path)))
    assert line == f"error: --report {tmp_path}: is a folder, not a file"


def test_snapshot_and_convert_check_their_folder_first(a_file: Path) -> None:
    line = _one_error(invoke("snapshot", "--kubeconfig", "/nonexistent", "-o", str(a_file)))
    assert line == f"error: -o {a_file}: is a file, not a folder"
    line = _one_error(invoke("convert", "-f", str(PLAN), "-o", str(a_file / "v1")))
    assert line == f"error: -o {a_file / 'v1'}: {a_file} is a file, not a folder"


def test_an_existing_output_file_is_checked_without_changing_it(tmp_path: Path) -> None:
    from karpy.cli import conventions

    existing = tmp_path / "keep.json"
    existing.write_text("old\n")
    conventions.check_file(existing, "--json")
    conventions.check_file(tmp_path / "new" / "deeper" / "x.json", "--json")
    assert existing.read_text() == "old\n" and not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]  # the probe file is gone


def test_progress_is_drawn_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    with progress.steps(Console(file=quiet, force_terminal=False)) as step:
        step("reading things")
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    with progress.steps(Console(file=shown, force_terminal=True, width=100)) as step:
        step("reading things")
        step("solving for 3 pods")
    assert "reading things" in shown.getvalue() or "solving for 3 pods" in shown.getvalue()


def test_plan_writes_nothing_on_stderr_when_it_is_not_a_terminal(tmp_path: Path) -> None:
    folder = tmp_path / "plan"
    shutil.copytree(PLAN, folder)
    result = invoke("plan", "-f", str(folder), "-o", "json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert json.loads(result.stdout)["kind"] == "Plan"


def test_the_image_build_is_pinned_and_locked() -> None:
    """The Dockerfile's base is a patch release and it installs only the lock's hashed pins, which
    cover every dependency pyproject names (and the build's setuptools)."""
    import tomllib

    dockerfile = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", base), base
    assert re.findall(r"^FROM (\S+)", dockerfile, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    assert "--require-hashes --no-deps -r /tmp/requirements.lock" in dockerfile
    assert "--no-deps --no-build-isolation ." in dockerfile
    lock = (ROOT / "requirements.lock").read_text()
    pins = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+) \\$", lock, re.M))
    assert lock.count("==") == len(pins) == len(re.findall(r"^\S+==\S+ \\\n    --hash=sha256:", lock, re.M))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0] for d in project["project"]["dependencies"]]

    def normalize(names: Iterable[str]) -> set[str]:
        return {re.sub(r"[-_.]+", "-", name).lower() for name in names}

    assert normalize(wanted) - normalize(pins) == set()
    assert "setuptools" in pins and "wheel" in pins
    assert "make lock" in lock.splitlines()[4]


def test_print_json_is_indented_json_with_utf8_text(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """Every -o json prints this way: what json.dumps(indent=2) prints for ASCII text and
    ordinary floats, non-ASCII text as UTF-8 whatever the terminal's encoding, keys sorted when asked."""
    doc = {"b": [1, 2.5, 0.0416, None, True], "a": {"empty": [], "none": {}, "n": 3}, "name": "plain"}
    conventions.print_json(doc)
    out = capsysbinary.readouterr().out
    assert out == (json.dumps(doc, indent=2) + "\n").encode()
    conventions.print_json({"z": 1, "é": "générique-池"}, sort_keys=True)
    out = capsysbinary.readouterr().out
    assert out == '{\n  "z": 1,\n  "é": "générique-池"\n}\n'.encode()
    assert json.loads(out) == {"z": 1, "é": "générique-池"}


BATCH = {("plan",), ("disrupt",), ("explain", "pod"), ("explain", "node"), ("simulate",), ("sweep",)}
LONG_LIVED = {("operator",), ("record",), ("daemon", "start")}


def test_one_shot_commands_collect_garbage_less_often_and_long_lived_ones_do_not() -> None:
    for path in BATCH:
        assert isinstance(_command(path), conventions.BatchCommand), path
    for path in LONG_LIVED:
        assert not isinstance(_command(path), conventions.BatchCommand), path


def test_a_batch_command_runs_with_the_batch_threshold_and_restores_the_caller_s() -> None:
    import gc

    seen: list[tuple[int, int, int]] = []
    probe = typer.Typer()

    @probe.command(cls=conventions.BatchCommand)
    def run(fail: bool = False) -> None:
        seen.append(gc.get_threshold())
        if fail:
            raise typer.Exit(3)

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 11, 12)
        assert runner.invoke(probe, []).exit_code == 0
        assert seen[-1] == (conventions.BATCH_GC_THRESHOLD, 11, 12)
        assert gc.get_threshold() == (700, 11, 12)
        assert runner.invoke(probe, ["--fail"]).exit_code == 3  # restored however it ends
        assert gc.get_threshold() == (700, 11, 12)
    finally:
        gc.set_threshold(*before)
