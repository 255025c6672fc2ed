"""One run of a sweep, as a worker executes it: plain data in, the run's figures out.

:func:`run` takes a :meth:`~karpy.sweep.expand.Run.payload` (the scenario and configuration
texts, their file names relative to ``base`` for the files they reference, the grid point, the
seed, the mode) and returns the figures ``karpy simulate --json`` writes for that run. The
scenario is parsed from the shipped text (files it references, such as a catalog or a replica
CSV, are resolved next to its file under ``base``); the configuration replaces its NodePools,
NodeClasses and settings (:meth:`~karpy.sim.scenario.Scenario.with_karpy_config`); the grid
point is written into every NodePool (:func:`apply_grid`), ``spot: false`` runs with
``Overrides(no_spot=True)``. A problem raises (the executor retries once, then reports it).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from karpy.sweep import spec

if TYPE_CHECKING:
    from karpy.sim.scenario import Scenario

__all__ = ["apply_grid", "attempt", "describe", "noop", "run"]


def apply_grid(pools: tuple[dict[str, Any], ...], grid: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """Every NodePool with the grid point's values (``spot`` is an override, not a field):
    ``consolidationPolicy`` and ``consolidateAfter`` under ``spec.disruption``, ``budgets.nodes``
    as the one budget ``spec.disruption.budgets: [{nodes: V}]``, ``expireAfter`` under
    ``spec.template.spec``."""
    out = []
    for raw in pools:
        pool = copy.deepcopy(raw)
        spec_ = pool.setdefault("spec", {})
        disruption = spec_.setdefault("disruption", {})
        if "consolidationPolicy" in grid:
            disruption["consolidationPolicy"] = grid["consolidationPolicy"]
        if "consolidateAfter" in grid:
            disruption["consolidateAfter"] = grid["consolidateAfter"]
        if "budgets.nodes" in grid:
            disruption["budgets"] = [{"nodes": str(grid["budgets.nodes"])}]
        if "expireAfter" in grid:
            spec_.setdefault("template", {}).setdefault("spec", {})["expireAfter"] = grid["expireAfter"]
        out.append(pool)
    return tuple(out)


def _scenario(text: str, path: Path) -> Scenario:
    from karpy.api.problems import Problem
    from karpy.sim import scenario as scenario_mod

    documents = spec.yaml_documents(text)
    if len(documents) != 1:
        raise scenario_mod.ScenarioError([Problem(str(path), -1, "", "", "", "not one Simulation document")])
    return scenario_mod.parse(documents[0], file=str(path), base_dir=path.parent)


def run(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one run (raises on any problem)."""
    from karpy.sim import runner

    base = Path(payload["base"])
    scenario = _scenario(payload["scenario_text"], base / payload["scenario_file"])
    grid = dict(payload["grid"])
    if payload["mode"] == runner.KARPY:
        if payload["config_text"] is not None:
            other = _scenario(payload["config_text"], base / payload["config_file"])
            scenario = scenario.with_karpy_config(other)
        scenario = dataclasses.replace(scenario, node_pools=apply_grid(scenario.node_pools, grid))
    result = runner.run(
        scenario,
        seed=int(payload["seed"]),
        until=payload["until"],
        mode=payload["mode"],
        karpy_overrides=runner.Overrides(no_spot=grid.get("spot") is False),
        scoring=payload["scoring"],
    )
    return result.to_dict()


def noop(payload: Any) -> Any:
    """Returns its argument: a task's round trip without work (the benchmark's overhead probe)."""
    return payload


def describe(exc: BaseException, base: str = "") -> str:
    """``Type: message`` of a run's failure (the first line; ``base``'s prefix cut from paths, so
    the text does not depend on where the files were)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text.replace(base.rstrip("/") + "/", "") if base and base != "." else text


def attempt(payload: Mapping[str, Any]) -> dict[str, Any]:
    """One attempt at a run: ``{"figures": ...}``, or ``{"error": "Type: message"}`` when it raised
    (the error travels as text: exceptions with their own constructors do not survive pickling)."""
    try:
        return {"figures": run(payload)}
    except Exception as exc:  # a failed run is reported, never lost
        return {"error": describe(exc, str(payload.get("base") or ""))}
