"""How long ``karpy`` takes to start: wall time and peak memory of short commands, and where
the import time goes.

Run by hand or by ``make bench`` (never by CI, never a timed test)::

    .venv/bin/python benchmarks/startup.py [--runs 5] [--top 15] [--json OUT]

For each command (``karpy --help``, ``karpy version``, ``karpy plan -f examples/plan/``) it
runs ``--runs`` fresh processes and reports the median wall time (``time.perf_counter`` around
the child), the median CPU time of the child (user + system, from ``os.wait4``, which other
load on a shared machine inflates less) and the largest peak RSS.
Each command is timed twice: alone (``KARPY_NO_DAEMON=1``), and handed to a warm daemon
(``karpy daemon start``, on a socket of its own, stopped at the end; ``--no-daemon`` skips it),
where the time is the client's: its start, the hand-over and the command in a forked worker.
Then it runs ``python -X importtime -c "import karpy.cli"`` once and lists the modules with the
most cumulative import time, and which heavy packages (matplotlib, scipy, highspy, the
Kubernetes and AWS clients, the simulator, the operator) ``import karpy.cli`` loaded (none,
when start-up is lazy). Commands run from the repository root with this interpreter's
``karpy`` entry point (``--src DIR``: from that source folder, to compare with an older checkout);
``KARPY_PURE`` passes through.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMANDS: list[list[str]] = [["--help"], ["version"], ["plan", "-f", "examples/plan/"]]
HEAVY = (
    "matplotlib",
    "scipy",
    "highspy",
    "kubernetes_asyncio",
    "boto3",
    "karpy.sim",
    "karpy.operator",
    "karpy.planning",
    "karpy.api",
)


SOURCE: list[Path] = []  # --src: run karpy from this source tree instead of the installed one


def _karpy() -> list[str]:
    if SOURCE:
        run = f"import sys; sys.path.insert(0, {str(SOURCE[0])!r}); from karpy.cli import main; main()"
        return [sys.executable, "-c", run]
    script = Path(sys.executable).with_name("karpy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "karpy"]


def _run_once(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one fresh ``karpy ARGS`` (``os.wait4``: that child's own usage)."""
    with tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        child = subprocess.Popen([*_karpy(), *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"karpy {' '.join(args)}: exit {child.returncode}\n{tail}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def time_command(args: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Median wall and CPU seconds of ``runs`` fresh ``karpy ARGS`` processes, peak RSS (MB);
    ``env``: theirs (default: this one's, without a daemon)."""
    env = env if env is not None else {**os.environ, "KARPY_NO_DAEMON": "1"}
    samples = [_run_once(args, env) for _ in range(runs)]
    return {
        "command": "karpy " + " ".join(args),
        "runs": runs,
        "wall_s": round(statistics.median(s[0] for s in samples), 3),
        "cpu_s": round(statistics.median(s[1] for s in samples), 3),
        "peak_rss_mb": round(max(s[2] for s in samples) / 1024, 1),
    }


@contextlib.contextmanager
def daemon() -> Iterator[dict[str, str]]:
    """A warm ``karpy daemon`` on a socket of its own: the environment that hands commands to it."""
    with tempfile.TemporaryDirectory(prefix="karpy-bench-") as folder:
        env = {k: v for k, v in os.environ.items() if k != "KARPY_NO_DAEMON"}
        env["KARPY_DAEMON_SOCKET"] = str(Path(folder, "d.sock"))
        subprocess.run(
            [*_karpy(), "daemon", "start"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
        )
        try:
            yield env
        finally:
            subprocess.run(
                [*_karpy(), "daemon", "stop"], cwd=ROOT, env=env, check=False, stdout=subprocess.DEVNULL
            )


_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$")


def import_profile(top: int) -> dict[str, Any]:
    """``python -X importtime -c "import karpy.cli"``: total, the slowest modules, heavy ones loaded."""
    first = f"import sys; sys.path.insert(0, {str(SOURCE[0])!r}); " if SOURCE else ""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", first + "import karpy.cli"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    rows: list[tuple[int, int, str]] = []
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match:
            rows.append((int(match.group(2)), len(match.group(3)) // 2, match.group(4)))
    total = next((cumulative for cumulative, _, name in rows if name == "karpy.cli"), 0)
    modules = {name for _, _, name in rows}
    heavy = sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules))
    slowest = sorted(rows, reverse=True)[:top]
    return {
        "import_karpy_cli_ms": round(total / 1000, 1),
        "heavy_loaded": heavy,
        "slowest": [{"module": name, "cumulative_ms": round(us / 1000, 1)} for us, _, name in slowest],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command (median)")
    parser.add_argument("--top", type=int, default=15, help="modules listed by cumulative import time")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    parser.add_argument("--no-daemon", action="store_true", help="skip the runs through a warm daemon")
    parser.add_argument(
        "--src", type=Path, default=None, help="run karpy from this src/ folder (e.g. an older checkout's)"
    )
    options = parser.parse_args()
    if options.src is not None:
        SOURCE.append(options.src.resolve())
    figures = []
    for args in COMMANDS:
        try:
            figures.append(time_command(args, options.runs))
        except SystemExit as failed:  # (an older checkout may not have the command)
            print(str(failed).splitlines()[0], file=sys.stderr)
    served = []
    if not options.no_daemon and not SOURCE:
        with daemon() as env:
            served = [{**time_command(args, options.runs, env), "daemon": True} for args in COMMANDS]
    profile = import_profile(options.top)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    pure = os.environ.get("KARPY_PURE", "") not in ("", "0")
    print(f"karpy start-up ({machine}; core: {'pure (KARPY_PURE)' if pure else 'as built'})")
    print()
    print("| command | wall (median) | CPU (median) | peak RSS |")
    print("|---|---:|---:|---:|")
    for row in [*figures, *served]:
        command = f"`{row['command']}`" + (" through the daemon" if row.get("daemon") else "")
        cells = [command, f"{row['wall_s']:.2f} s", f"{row['cpu_s']:.2f} s"]
        print("| " + " | ".join([*cells, f"{row['peak_rss_mb']:.0f} MB"]) + " |")
    print()
    print(f"`import karpy.cli`: {profile['import_karpy_cli_ms']:.0f} ms (-X importtime, cumulative)")
    print("heavy packages it loaded: " + (", ".join(profile["heavy_loaded"]) or "none"))
    print("slowest imports (cumulative ms):")
    for row in profile["slowest"]:
        print(f"  {row['cumulative_ms']:>8.1f}  {row['module']}")
    if options.json is not None:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        document = {"machine": machine, "commands": figures, "daemon": served, "imports": profile}
        options.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
