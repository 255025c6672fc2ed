"""The sweep on a local Ray (one session for the module): the same merged document as local
processes, byte for byte, and a failing run retried once and reported with the others kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
import sweep_files

from karpy.sweep import execute, expand, merge
from karpy.sweep.ray_backend import RayPool


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_and_local_processes_give_the_same_merged_json(tmp_path: Path) -> None:
    plan = expand.expand(sweep_files.six_runs(tmp_path))
    on_ray, skipped = execute.execute(plan, RayPool(workers=2, root=plan.root), out=tmp_path / "ray")
    assert skipped == 0 and all(o.ok for o in on_ray)
    assert ray.is_initialized()  # the pool leaves a caller's session running
    local, _ = execute.execute(plan, execute.ProcessPool(2, str(plan.root)), out=tmp_path / "local")
    text = merge.dumps(merge.document(plan, on_ray))
    assert text == merge.dumps(merge.document(plan, local))
    assert len(merge.document(plan, on_ray)["groups"]) == 3
    for run in plan.runs:  # every run's file too
        assert execute.run_file(tmp_path / "ray", run.key).read_bytes() == (
            execute.run_file(tmp_path / "local", run.key).read_bytes()
        )


def test_a_failing_run_on_ray_is_retried_once_and_reported(tmp_path: Path) -> None:
    plan = expand.expand(sweep_files.six_runs(tmp_path, broken=True, seeds="[1]"))
    outcomes, _ = execute.execute(plan, RayPool(workers=2, root=plan.root))
    bad = [o for o in outcomes if not o.ok]
    assert [o.run.scenario for o in bad] == ["small-broken"] * 3
    assert all(o.attempts == 2 and (o.error or "").startswith("InputError: broken-catalog.yaml") for o in bad)
    assert [o.run.scenario for o in outcomes if o.ok] == ["small"] * 3
