"""The sweep on local processes: every run's figures, one retry of a run that fails, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sweep_files

from karpy.sweep import execute, expand, merge


class Counting(execute.ProcessPool):
    """The process pool, counting the tasks it was given."""

    def __init__(self, workers: int, base: str) -> None:
        super().__init__(workers, base)
        self.submitted: list[str] = []

    def submit(self, key: str, payload: dict[str, Any]) -> None:
        self.submitted.append(key)
        super().submit(key, payload)


def test_six_runs_then_a_resumed_sweep_runs_nothing_and_merges_the_same(tmp_path: Path) -> None:
    plan = expand.expand(sweep_files.six_runs(tmp_path))
    out = tmp_path / "out"
    pool = Counting(2, str(plan.root))
    outcomes, skipped = execute.execute(plan, pool, out=out)
    assert skipped == 0 and sorted(pool.submitted) == sorted(r.key for r in plan.runs)
    assert all(o.ok and o.attempts == 1 for o in outcomes)
    for run in plan.runs:
        saved = json.loads(execute.run_file(out, run.key).read_text())
        assert saved["key"] == run.key and saved["name"] == run.name
        assert saved["description"] == {
            "scenario": "small",
            "configuration": "baseline",
            "grid": run.grid,
            "seed": run.seed,
            "mode": "karpy",
        }
        assert saved["figures"]["cost_usd"] > 0 and "series" in saved["figures"]
    doc = merge.document(plan, outcomes)
    assert [g["label"] for g in doc["groups"]] == [f"consolidateAfter={c}" for c in ("30s", "5m", "30m")]
    assert all(g["seeds"] == [1, 2] and g["figures"]["cost_usd"]["n"] == 2 for g in doc["groups"])

    # a crashed sweep: one run's file lost, one half written (another key inside)
    execute.run_file(out, plan.runs[0].key).unlink()
    execute.run_file(out, plan.runs[1].key).write_text('{"key": "other"}')
    again = Counting(2, str(plan.root))
    outcomes2, skipped2 = execute.execute(plan, again, out=out)
    assert skipped2 == 4 and sorted(again.submitted) == sorted([plan.runs[0].key, plan.runs[1].key])
    assert merge.dumps(merge.document(plan, outcomes2)) == merge.dumps(doc)

    done = Counting(2, str(plan.root))
    outcomes3, skipped3 = execute.execute(plan, done, out=out)
    assert (skipped3, done.submitted) == (6, [])
    assert merge.dumps(merge.document(plan, outcomes3)) == merge.dumps(doc)


def test_a_run_that_raises_is_retried_once_then_reported_and_the_others_are_kept(tmp_path: Path) -> None:
    path = sweep_files.six_runs(tmp_path, broken=True, seeds="[1]")
    plan = expand.expand(path)
    pool = Counting(2, str(plan.root))
    outcomes, _ = execute.execute(plan, pool, out=tmp_path / "out")
    good = [o for o in outcomes if o.run.scenario == "small"]
    bad = [o for o in outcomes if o.run.scenario == "small-broken"]
    assert len(good) == 3 and all(o.ok and o.attempts == 1 for o in good)
    assert len(bad) == 3 and all(not o.ok and o.attempts == 2 for o in bad)
    assert sorted(pool.submitted) == sorted([o.run.key for o in good] + [o.run.key for o in bad] * 2)
    assert all(
        o.error is not None and o.error.startswith("InputError: broken-catalog.yaml: invalid YAML")
        for o in bad
    ), bad[0].error
    doc = merge.document(plan, outcomes)
    assert doc["runs"] == {"total": 6, "succeeded": 3, "failed": 3}
    assert {f["name"] for f in doc["failedRuns"]} == {o.run.name for o in bad}
    assert not any(execute.run_file(tmp_path / "out", o.run.key).exists() for o in bad)
