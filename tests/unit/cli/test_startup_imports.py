"""Starting ``karpy`` loads none of the heavy parts: each command imports what it runs on.

Checked in a fresh interpreter (``sys.modules`` after ``import karpy.cli``, after ``karpy
--help`` and after ``karpy version``); the start-up time itself is a benchmark
(``benchmarks/startup.py``), not a test. pydantic is not in the list: typer itself validates
option values with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PLAN = Path(__file__).resolve().parents[3] / "examples" / "plan"

HEAVY = (
    "matplotlib",
    "scipy",
    "highspy",
    "kubernetes_asyncio",
    "boto3",
    "botocore",
    "karpy.sim",
    "karpy.operator",
    "karpy.planning",
    "karpy.api",
    "karpy.adapters.kube",
    "karpy.core.disruption",
    "karpy.core.optimize.bound",
)

_PROBE = """
import json, sys
argv = {argv!r}
if argv is None:
    import karpy.cli
else:
    sys.argv = ["karpy", *argv]
    from karpy.cli import main
    try:
        main()
    except SystemExit:
        pass
heavy = {heavy!r}
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print("LOADED " + json.dumps(loaded))
"""


def _loaded(argv: list[str] | None) -> list[str]:
    code = _PROBE.format(argv=argv, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    marker = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert marker, done.stdout + done.stderr
    return list(json.loads(marker[-1].removeprefix("LOADED ")))


@pytest.mark.parametrize("argv", [None, ["--help"], ["version"], ["plan", "--help"]], ids=str)
def test_start_imports_no_heavy_module(argv: list[str] | None) -> None:
    assert _loaded(argv) == []


def test_a_command_loads_what_it_runs_on_and_no_more() -> None:
    loaded = _loaded(["plan", "-f", str(PLAN), "-o", "json"])
    assert "karpy.planning" in loaded and "karpy.api" in loaded  # (the probe sees what is loaded)
    assert not [m for m in loaded if m.split(".")[0] in ("matplotlib", "kubernetes_asyncio", "boto3")]
    assert "karpy.sim" not in loaded and "karpy.operator" not in loaded
    # the LP bound (scipy) and the disruption core load only for --bound and disrupt
    assert not [
        m for m in loaded if m.startswith(("scipy", "karpy.core.optimize.bound", "karpy.core.disruption"))
    ]
    with_bound = _loaded(["plan", "-f", str(PLAN), "--bound", "-o", "json"])
    assert "karpy.core.optimize.bound" in with_bound and "scipy" in with_bound
