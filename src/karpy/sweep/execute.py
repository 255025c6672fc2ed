"""Run a sweep's runs on a pool of workers: one retry, nothing dropped, resume from ``--out``.

A pool (:class:`ProcessPool`: local processes; :class:`karpy.sweep.ray_backend.RayPool`: Ray) takes
payloads (:meth:`~karpy.sweep.expand.Run.payload`) and hands back, one at a time as they finish,
``(key, result, error)``: ``result`` is :func:`karpy.sweep.task.attempt`'s answer, ``error`` the
text of a run that was lost (a worker that died, a pool that broke). :func:`execute` keeps at most
``capacity`` runs in flight, submits a run that raised or was lost once more, then records it as
failed with its error; the others are kept. Runs with the same key run once. With an output
folder every finished run is written to ``runs/<key>.json`` (its key, name, description and
figures; written to a temporary name first, so a crash leaves no half file) and
:func:`finished` reads those back, so a rerun skips them.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import karpy
from karpy.sweep import task
from karpy.sweep.expand import Plan, Run

__all__ = ["ATTEMPTS", "Outcome", "Pool", "ProcessPool", "execute", "finished", "run_file"]

ATTEMPTS = 2  # a run that raises or is lost is tried once more
Done = tuple[str, dict[str, Any] | None, str | None]  # key, attempt's answer, error of a lost run


class Pool(Protocol):
    """Where the runs execute."""

    base: str  # the folder the payloads' file names are relative to, as the workers see it
    capacity: int  # runs in flight at most

    def submit(self, key: str, payload: dict[str, Any]) -> None: ...

    def next_done(self) -> Done: ...

    def close(self) -> None: ...


class ProcessPool:
    """Local processes (``concurrent.futures.ProcessPoolExecutor``, spawned workers); a pool that
    breaks (a worker killed) is replaced for the runs submitted after it."""

    def __init__(self, workers: int, base: str) -> None:
        self.base = base
        self.capacity = workers
        self._executor: cf.ProcessPoolExecutor | None = None
        self._futures: dict[cf.Future[dict[str, Any]], str] = {}

    def submit(self, key: str, payload: dict[str, Any]) -> None:
        if self._executor is None:
            self._executor = cf.ProcessPoolExecutor(
                max_workers=self.capacity, mp_context=multiprocessing.get_context("spawn")
            )
        self._futures[self._executor.submit(task.attempt, payload)] = key

    def next_done(self) -> Done:
        done, _ = cf.wait(list(self._futures), return_when=cf.FIRST_COMPLETED)
        future = min(done, key=lambda f: self._futures[f])  # (any order would do: the key is stable)
        key = self._futures.pop(future)
        try:
            return key, future.result(), None
        except cf.process.BrokenProcessPool as exc:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            return key, None, f"lost: {task.describe(exc)}"
        except Exception as exc:  # (e.g. an answer that did not unpickle)
            return key, None, f"lost: {task.describe(exc)}"

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one run."""

    run: Run
    figures: dict[str, Any] | None
    error: str | None
    attempts: int  # 0: skipped (finished by an earlier sweep)

    @property
    def ok(self) -> bool:
        return self.figures is not None


def run_file(out: Path, key: str) -> Path:
    return out / "runs" / f"{key}.json"


def _write_run(out: Path, run: Run, figures: dict[str, Any]) -> None:
    path = run_file(out, run.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "key": run.key,
        "name": run.name,
        "description": run.description(),
        "karpyVersion": karpy.__version__,
        "figures": figures,
    }
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(path)


def finished(out: Path | None, runs: Iterable[Run]) -> dict[str, dict[str, Any]]:
    """The figures of the runs whose ``runs/<key>.json`` is in ``out`` and holds that key."""
    found: dict[str, dict[str, Any]] = {}
    if out is None:
        return found
    for run in runs:
        path = run_file(out, run.key)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("key") == run.key and isinstance(doc.get("figures"), dict):
            found[run.key] = doc["figures"]
    return found


Progress = Callable[[int, int], object]  # (runs succeeded so far, runs failed so far)


def _answer(result: dict[str, Any] | None, lost: str | None) -> tuple[dict[str, Any] | None, str | None]:
    if lost is not None:
        return None, lost
    if result is None or not isinstance(result.get("figures"), dict):
        return None, str((result or {}).get("error") or "no figures")
    return result["figures"], None


def execute(
    plan: Plan,
    pool: Pool,
    *,
    out: Path | None = None,
    progress: Progress | None = None,
) -> tuple[list[Outcome], int]:
    """Every run's outcome (in the plan's order) and how many were skipped as already finished."""
    done = finished(out, plan.runs)
    unique: dict[str, Run] = {}
    for run in plan.runs:
        if run.key not in done:
            unique.setdefault(run.key, run)
    queue = list(unique)
    tries: dict[str, int] = dict.fromkeys(queue, 0)
    errors: dict[str, str] = {}
    in_flight = 0
    ok = failed = 0
    try:
        while queue or in_flight:
            while queue and in_flight < max(1, pool.capacity):
                key = queue.pop(0)
                tries[key] += 1
                pool.submit(key, unique[key].payload(pool.base))
                in_flight += 1
            key, result, lost = pool.next_done()
            in_flight -= 1
            figures, error = _answer(result, lost)
            if figures is not None:
                done[key] = figures
                errors.pop(key, None)
                if out is not None:
                    _write_run(out, unique[key], figures)
                ok += 1
            else:
                errors[key] = error or "failed"
                if tries[key] < ATTEMPTS:
                    queue.append(key)
                else:
                    failed += 1
            if progress is not None:
                progress(ok, failed)
    finally:
        pool.close()
    skipped = len({r.key for r in plan.runs} - set(unique))
    outcomes = [
        Outcome(
            run, done.get(run.key), None if run.key in done else errors.get(run.key), tries.get(run.key, 0)
        )
        for run in plan.runs
    ]
    return outcomes, skipped
