"""``karpy daemon start|stop|status``: a warm process that runs ``karpy`` commands (:mod:`karpy.daemon`).

``start`` runs ``python -m karpy daemon start --foreground`` in a new session, its output
appended to a log beside the socket, and waits until it answers (if it ends first: the log's
tail, exit 2 when it ended on bad input, else 1); a daemon already running is left alone, unless
it runs out-of-date code (it would refuse every command), which is stopped first.
``--foreground`` warms up and serves in this process (for a service manager). Warming up imports
what the commands run on and plans a small input on the shipped AWS catalog, so the catalog's
shared parts are built once. ``stop`` asks it to end; ``status`` prints it (``-o
table|json|yaml``), exit 3 when none runs. ``KARPY_DAEMON_SOCKET`` names another socket.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from karpy.cli import conventions
from karpy.cli.conventions import Output

__all__ = ["WARM_MODULES", "app", "run_command", "warm"]

app = typer.Typer(
    help="A warm process that runs karpy commands without start-up time.",
    no_args_is_help=True,
    cls=conventions.Group,
)

NOT_RUNNING = 3  # as `systemctl status` (LSB: program is not running)

# What the commands import in their bodies (karpy.cli imports only typer at start): a worker
# forked from the daemon finds them loaded. Not matplotlib and scipy (reports, --bound: slow
# commands anyway) nor the operator's clients (the operator never runs in the daemon).
WARM_MODULES = (
    "karpy.cli",
    "karpy.cli.inputs",
    "karpy.cli.progress",
    "karpy.api.load",
    "karpy.planning",
    "karpy.catalog",
    "karpy.core.disruption",
    "karpy.core.explain",
    "karpy.sim",
    "rich.console",
    "rich.table",
    "rich.progress",
    "yaml",
    "orjson",
)

_WARM_INPUT = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: warm}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: warm}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: warm}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: warm
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: warm}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: warm}}]
---
apiVersion: v1
kind: Pod
metadata: {name: warm, namespace: default}
spec:
  containers:
    - {name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}
"""


def warm(catalog: str = "aws:us-east-1") -> dict[str, float]:
    """Import :data:`WARM_MODULES` and plan a small input on ``catalog``; seconds per step."""
    from karpy import planning
    from karpy import settings as settings_mod
    from karpy.api import load as api_load

    took: dict[str, float] = {}
    began = time.perf_counter()
    for name in WARM_MODULES:
        importlib.import_module(name)
    from karpy.api import common

    common.build_all()  # (each schema is otherwise built by the first command that uses it)
    took["imports"] = time.perf_counter() - began
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="karpy-warm-") as folder:
        path = Path(folder, "warm.yaml")
        path.write_text(_WARM_INPUT)
        loaded = api_load.load_paths([path])
        if loaded.problems:
            raise RuntimeError(f"the warm-up input is invalid: {loaded.problems}")
        planning.make_plan(loaded, catalog_spec=catalog, settings=settings_mod.Settings())
    took["plan"] = time.perf_counter() - began
    return took


def _prog_name(argv0: str) -> str:
    """The program name click would show for ``argv0`` (``python -m karpy`` or the script's name)."""
    if os.path.basename(argv0) == "__main__.py":
        return "python -m karpy"
    return os.path.basename(argv0) or "karpy"


def run_command(args: Sequence[str]) -> None:
    """Run one ``karpy`` command line in this process (a daemon's worker; raises ``SystemExit``)."""
    from karpy.cli import app as root

    root(args=list(args), prog_name=_prog_name(sys.argv[0] if sys.argv else "karpy"))


def _socket() -> str:
    from karpy.daemon import wire

    try:
        return wire.socket_path()
    except wire.WireError as exc:
        raise conventions.fail(str(exc)) from None


def _log_path(path: str) -> str:
    return (path[: -len(".sock")] if path.endswith(".sock") else path) + ".log"


@app.command("start", cls=conventions.Command)
def start(
    foreground: bool = typer.Option(
        False, "--foreground", help="Serve in this process, logging to stderr (for a service manager)."
    ),
    catalog: str = typer.Option(
        "aws:us-east-1", "--catalog", metavar="CATALOG", help="The catalog to warm up (aws:<region>)."
    ),
    timeout: float = typer.Option(
        120.0, "--timeout", min=1.0, metavar="SECONDS", help="How long to wait for it to answer (or stop)."
    ),
) -> None:
    """Start the daemon in the background (it warms up first; then `karpy` commands run in it)."""
    from karpy.daemon import client, server, wire

    if not sys.platform.startswith("linux"):
        raise conventions.fail(f"karpy daemon runs on Linux only (this is {sys.platform})")
    path = _socket()
    found = client.ask(path, {"op": "status"})
    if found is not None:
        refused = wire.mismatch(found["fingerprint"], wire.fingerprint())
        if refused is None or not refused[1]:
            typer.echo(f"a karpy daemon already runs: pid {found['pid']}, socket {path}")
            return
        _stop(path, timeout)  # out of date: it would refuse every command
        typer.echo(f"stopped an out-of-date karpy daemon (pid {found['pid']})")
    if foreground:
        from karpy.model.errors import InputError

        try:
            took = warm(catalog)
        except InputError as exc:
            raise conventions.fail(f"--catalog: {exc}") from None
        detail = ", ".join(f"{step} {secs:.2f} s" for step, secs in took.items())

        def ready(daemon: server.Daemon) -> None:
            typer.echo(
                f"karpy daemon ready: pid {os.getpid()}, socket {daemon.path} (warm-up: {detail})", err=True
            )

        try:
            server.serve(path, run_command, ready=ready)
        except (wire.WireError, OSError) as exc:
            raise conventions.fail(str(exc), code=1) from None
        return
    try:
        wire.private_folder(path)
    except (wire.WireError, OSError) as exc:
        raise conventions.fail(str(exc)) from None
    log = _log_path(path)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "karpy", "daemon", "start", "--foreground", "--catalog", catalog],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd="/",
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            typer.echo(f"error: the daemon ended (exit {child.returncode}) before answering:", err=True)
            typer.echo(_tail(log), err=True)
            raise typer.Exit(2 if child.returncode == 2 else 1)  # bad input stays exit 2
        found = client.ask(path, {"op": "status"})
        if found is not None:
            typer.echo(f"karpy daemon started: pid {found['pid']}, socket {path}, log {log}")
            return
        time.sleep(0.05)
    child.terminate()
    raise conventions.fail(f"the daemon did not answer within {timeout:g} s (log: {log})", code=1)


def _tail(log: str, lines: int = 20) -> str:
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError as exc:
        return f"(cannot read {log}: {exc})"


@app.command("stop", cls=conventions.Command)
def stop(
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, metavar="SECONDS", help="How long to wait."),
) -> None:
    """Stop the daemon (commands it is running go on to their end). No daemon: nothing to do."""
    path = _socket()
    pid = _stop(path, timeout)
    if pid is None:
        typer.echo(f"no karpy daemon runs (socket {path})")
    else:
        typer.echo(f"karpy daemon stopped (pid {pid})")


def _stop(path: str, timeout: float) -> int | None:
    """Ask the daemon on ``path`` to stop and wait until its socket is gone: its pid, or None when
    none answered (exit 1 when it does not stop in time)."""
    from karpy.daemon import client

    answer = client.ask(path, {"op": "stop"})
    if answer is None:
        return None
    deadline = time.monotonic() + timeout
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    if os.path.exists(path):
        raise conventions.fail(
            f"the daemon (pid {answer['stopping']}) still holds {path} after {timeout:g} s", code=1
        )
    return int(answer["stopping"])


@app.command("status", cls=conventions.Command)
def status(
    output: Output = typer.Option(Output.table, "--output", "-o", help="Lines, or a document."),
) -> None:
    """Whether a daemon runs, since when, how many commands it ran, and whether it runs this code.
    Exit 3 when none runs."""
    from karpy.daemon import client, wire

    path = _socket()
    found = client.ask(path, {"op": "status"})
    if found is None:
        typer.echo(f"no karpy daemon runs (socket {path})")
        raise typer.Exit(NOT_RUNNING)
    refused = wire.mismatch(found["fingerprint"], wire.fingerprint())
    doc: dict[str, Any] = {
        "pid": found["pid"],
        "socket": path,
        "log": _log_path(path),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found["started"])),
        "commands": found["commands"],
        "current": refused is None,
    }
    if refused is not None:
        doc["refuses"] = refused[0]
    if output is Output.json:
        conventions.print_json(doc)
    elif output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    else:
        typer.echo(f"karpy daemon: pid {doc['pid']}, socket {path}")
        typer.echo(f"started {doc['started']}, {doc['commands']} commands run, log {doc['log']}")
        typer.echo("runs this karpy's code" if refused is None else f"refuses commands: {refused[0]}")
