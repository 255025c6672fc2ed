"""The Ray pool of ``karpy sweep`` (the only module of karpy that imports ray).

Without an address (and no ``RAY_ADDRESS``), :class:`RayPool` starts Ray on this machine
(``ray.init(num_cpus=workers)``, all CPUs by default) and the workers read the sweep's files
where they are. With ``--address ray://HOST:10001`` (or ``RAY_ADDRESS``) it connects to that
cluster and ships the plan's root folder as the job's ``runtime_env={"working_dir": ROOT}``
(without ``.git``, virtual environments and caches): the tasks carry the scenario and
configuration texts and name the files relative to that folder, which Ray unpacks as each
worker's current directory. When Ray is already initialised (a caller's session), the pool uses
it and leaves it running. Each run is one task (``max_retries=0``:
:func:`karpy.sweep.execute.execute` does the one retry, for Ray and for local processes alike);
a task whose worker died is reported as lost. At most ``workers`` runs are in flight, by default
as many as the cluster has CPUs when the sweep starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import ray

from karpy.sweep import task

__all__ = ["EXCLUDES", "RayPool", "address_of"]

EXCLUDES = [".git", ".venv", "venv", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", "out", "build"]


def address_of(address: str | None) -> str | None:
    """``--address``, else ``RAY_ADDRESS``, else None (a local Ray)."""
    return address or os.environ.get("RAY_ADDRESS") or None


class RayPool:
    """Runs on Ray: local (``workers`` CPUs) or on the cluster at ``address``."""

    def __init__(self, *, workers: int | None, root: Path, address: str | None = None) -> None:
        self._own = False
        address = address_of(address)
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        if ray.is_initialized():
            self.base = str(root)
        elif address is None:
            ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, **quiet)
            self._own = True
            self.base = str(root)
        else:
            runtime_env = {"working_dir": str(root), "excludes": EXCLUDES}
            ray.init(address=address, runtime_env=runtime_env, **quiet)
            self._own = True
            self.base = "."
        # runs in flight: --workers, else every CPU of the cluster (of this machine for a local Ray)
        cpus = ray.cluster_resources().get("CPU", 1)  # type: ignore[no-untyped-call]
        self.capacity = workers or max(1, int(cpus))
        self._remote = ray.remote(num_cpus=1, max_retries=0)(task.attempt)
        self._refs: dict[Any, str] = {}

    def submit(self, key: str, payload: dict[str, Any]) -> None:
        self._refs[self._remote.remote(payload)] = key

    def next_done(self) -> tuple[str, dict[str, Any] | None, str | None]:
        ready, _ = ray.wait(list(self._refs), num_returns=1)
        ref = ready[0]
        key = self._refs.pop(ref)
        try:
            return key, ray.get(ref), None
        except ray.exceptions.RayTaskError as exc:
            return key, None, task.describe(exc.cause if exc.cause is not None else exc)
        except ray.exceptions.RayError as exc:  # a worker or node that died, an object lost
            return key, None, f"lost: {task.describe(exc)}"

    def close(self) -> None:
        for ref in list(self._refs):  # (only after an interruption: runs still in flight)
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        self._refs.clear()
        if self._own:
            ray.shutdown()
