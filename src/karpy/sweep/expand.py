"""A :class:`~karpy.sweep.spec.Sweep` -> the list of runs: scenario x configuration x grid point x seed.

:func:`expand` reads every file the sweep names (paths relative to the sweep file), validates the
scenarios and configurations with the simulator's reader (each problem one located line), and
lists the runs in a fixed order: per scenario, each configuration's grid points (the cross
product of the grid, in :data:`~karpy.sweep.spec.PARAMETERS` order) and seeds, then, when
``clusterAutoscaler: true``, one Cluster Autoscaler run per seed (karpy's parameters do not
apply to it). Each :class:`Run` carries the texts of its scenario and configuration (so a worker
needs no copy of the sweep's files besides those the scenario itself references), a readable
name and a stable key: a hash of the scenario text, the configuration text, the grid point, the
seed, the mode, ``until``, ``scoring`` and the karpy version.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import karpy
from karpy.api.problems import Problem
from karpy.sweep import spec

__all__ = ["KARPY", "Plan", "Run", "expand", "point_label"]

KARPY = "karpy"  # karpy.sim.runner.KARPY (the modes are named without loading the simulator)


def point_label(grid: dict[str, Any]) -> str:
    """``consolidateAfter=30s,spot=false`` (empty for no grid)."""
    return ",".join(f"{k}={_text(v)}" for k, v in grid.items())


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True, slots=True)
class Run:
    """One simulation of the sweep."""

    key: str
    name: str
    scenario: str  # the scenario's name
    configuration: str  # a configuration name, or "cluster-autoscaler"
    grid: dict[str, Any]
    seed: int
    mode: str  # "karpy" | "cluster-autoscaler"
    scenario_file: str  # relative to the plan's root
    scenario_text: str
    config_file: str | None = None
    config_text: str | None = None
    until: float | None = None
    scoring: str | None = None

    def description(self) -> dict[str, Any]:
        """What the run is, as written next to its figures (no paths of this machine)."""
        return {
            "scenario": self.scenario,
            "configuration": self.configuration,
            "grid": dict(self.grid),
            "seed": self.seed,
            "mode": self.mode,
        }

    def payload(self, base: str) -> dict[str, Any]:
        """What a worker needs (plain data): the texts, the files relative to ``base``."""
        return {
            "key": self.key,
            "base": base,
            "scenario_file": self.scenario_file,
            "scenario_text": self.scenario_text,
            "config_file": self.config_file,
            "config_text": self.config_text,
            "grid": dict(self.grid),
            "seed": self.seed,
            "mode": self.mode,
            "until": self.until,
            "scoring": self.scoring,
        }


@dataclass
class Plan:
    """The sweep's runs, with what the merged document groups them by."""

    sweep: spec.Sweep
    file: Path
    root: Path  # the folder holding every file the runs read (shipped to a Ray cluster)
    runs: list[Run]
    parameters: list[str]
    warnings: list[str] = field(default_factory=list)


def _key(
    *, scenario: str, config: str | None, grid: dict[str, Any], seed: int, mode: str, **more: Any
) -> str:
    blob = json.dumps(
        {
            "scenario": scenario,
            "config": config,
            "grid": grid,
            "seed": seed,
            "mode": mode,
            "version": karpy.__version__,
            **more,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:20]


@dataclass
class _Source:
    path: Path
    text: str
    name: str  # the Simulation's name
    extra: list[Path]  # files it references (catalog, prices), to keep under the root
    has_baseline: bool


@dataclass
class _Reader:
    """Reads the scenario and configuration files, collecting problems and warnings."""

    file: Path  # the sweep file
    sweep: spec.Sweep
    found: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def problem(self, path: str, message: str) -> None:
        self.found.append(Problem(str(self.file), 0, "Sweep", self.sweep.name, path, message))

    def read(self, given: str, where: str) -> _Source | None:
        """The file ``given`` (relative to the sweep file), validated as a Simulation."""
        path = self.file.parent / given
        if not path.is_file():
            self.problem(where, f"{given}: no such file")
            return None
        return _read(path, self.found, self.warnings)


def _read(path: Path, found: list[Problem], warnings: list[str]) -> _Source | None:
    from karpy.sim import scenario as scenario_mod

    try:
        loaded = scenario_mod.load(path)
    except scenario_mod.ScenarioError as exc:
        found.extend(exc.problems)
        return None
    warnings.extend(str(w) for w in loaded.warnings)
    extra = [Path(loaded.catalog)] if not loaded.catalog.startswith("aws:") else []
    if loaded.pricing.prices_file:
        extra.append(path.parent / loaded.pricing.prices_file)
    text = path.read_text(encoding="utf-8-sig")
    return _Source(
        path.resolve(), text, loaded.name, [p.resolve() for p in extra], loaded.baseline is not None
    )


def _grid_points(sweep: spec.Sweep) -> list[dict[str, Any]]:
    axes = sweep.grid.axes()
    return [
        dict(zip([k for k, _ in axes], combo, strict=True))
        for combo in itertools.product(*(v for _, v in axes))
    ]


def _root(sweep: spec.Sweep, file: Path, sources: list[_Source], found: list[Problem]) -> Path:
    paths = [file.resolve().parent, *(s.path for s in sources), *(p for s in sources for p in s.extra)]
    common = Path(os.path.commonpath([str(p) for p in paths]))
    if sweep.root is None:
        return common
    root = (file.parent / sweep.root).resolve()
    outside = [p for p in paths if not p.is_relative_to(root)]
    if not root.is_dir():
        found.append(Problem(str(file), 0, "Sweep", sweep.name, "root", f"{sweep.root}: no such folder"))
    elif outside:
        found.append(Problem(str(file), 0, "Sweep", sweep.name, "root", f"{outside[0]} is not under {root}"))
    return root


def _make_run(
    sc: _Source,
    conf: str,
    source: _Source | None,
    point: dict[str, Any],
    seed: int,
    mode: str,
    *,
    root: Path,
    until: float | None,
    scoring: str | None,
) -> Run:
    text = None if source is None else source.text
    label = point_label(point)
    key = _key(scenario=sc.text, config=text, grid=point, seed=seed, mode=mode, until=until, scoring=scoring)
    return Run(
        key=key,
        name=f"{sc.name}/{conf}" + (f"/{label}" if label else "") + f"/seed={seed}",
        scenario=sc.name,
        configuration=conf,
        grid=point,
        seed=seed,
        mode=mode,
        scenario_file=sc.path.relative_to(root).as_posix(),
        scenario_text=sc.text,
        config_file=None if source is None else source.path.relative_to(root).as_posix(),
        config_text=text,
        until=until,
        scoring=scoring,
    )


def _check_scenarios(sweep: spec.Sweep, scenarios: list[_Source | None], reader: _Reader) -> None:
    names = [s.name for s in scenarios if s is not None]
    for i, s in enumerate(scenarios):
        if s is None:
            continue
        if names.count(s.name) > 1:
            reader.problem(f"scenarios[{i}]", f'two scenarios are named "{s.name}"')
        if sweep.cluster_autoscaler and not s.has_baseline:
            reader.problem(
                f"scenarios[{i}]", "baseline.clusterAutoscaler: required by clusterAutoscaler: true"
            )


def expand(file: Path) -> Plan:
    """The runs of the sweep file ``file``; raises :class:`~karpy.sweep.spec.SweepError` (every
    problem of the sweep, its scenarios and configurations)."""
    from karpy.api import common

    sweep = spec.load(file)
    reader = _Reader(file, sweep)
    scenarios = [reader.read(s, f"scenarios[{i}]") for i, s in enumerate(sweep.scenarios)]
    configs = [
        None if c.file is None else reader.read(c.file, f"configurations[{i}].file")
        for i, c in enumerate(sweep.configurations)
    ]
    _check_scenarios(sweep, scenarios, reader)
    root = _root(sweep, file, [s for s in [*scenarios, *configs] if s is not None], reader.found)
    if reader.found:
        raise spec.SweepError(reader.found)
    until = None if sweep.until is None else common.parse_duration(sweep.until)
    common_args: dict[str, Any] = {"root": root, "until": until, "scoring": sweep.scoring}
    runs: list[Run] = []
    for sc in [s for s in scenarios if s is not None]:
        for conf, source in zip(sweep.configurations, configs, strict=True):
            for point, seed in itertools.product(_grid_points(sweep), sweep.seeds):
                runs.append(_make_run(sc, conf.name, source, point, seed, KARPY, **common_args))
        if sweep.cluster_autoscaler:
            ca = spec.CLUSTER_AUTOSCALER
            runs += [_make_run(sc, ca, None, {}, seed, ca, **common_args) for seed in sweep.seeds]
    return Plan(sweep, file, root, runs, [k for k, _ in sweep.grid.axes()], sorted(set(reader.warnings)))
