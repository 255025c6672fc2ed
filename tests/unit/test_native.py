"""karpy.native: the compiled core runs only while it matches its sources; both builds agree."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import karpy.model.resources
from karpy import native

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "sim" / "small.yaml"
SAME = {"karpy/core/a.py": "1", "karpy/model/b.py": "2"}


def test_compiled_only_when_built_on_and_every_source_matches() -> None:
    ok = native.decide(built=True, manifest=SAME, current=dict(SAME), environ={})
    assert ok == native.Status(native.COMPILED, "")
    zero = native.decide(built=True, manifest=SAME, current=dict(SAME), environ={"KARPY_PURE": "0"})
    assert zero.build == native.COMPILED


def test_pure_when_not_built_turned_off_or_without_manifest() -> None:
    assert "not compiled" in native.decide(built=False, manifest=SAME, current=SAME, environ={}).reason
    for built in (True, False):
        off = native.decide(built=built, manifest=SAME, current=SAME, environ={"KARPY_PURE": "1"})
        assert off == native.Status(native.PURE, "KARPY_PURE is set")
    missing = native.decide(built=True, manifest=None, current=SAME, environ={})
    assert missing.build == native.PURE and "native.json" in missing.reason


def test_pure_when_a_source_changed_came_or_went_naming_it() -> None:
    changed = native.decide(built=True, manifest=SAME, current={**SAME, "karpy/core/a.py": "9"}, environ={})
    assert changed.build == native.PURE and "karpy/core/a.py changed" in changed.reason
    added = native.decide(built=True, manifest=SAME, current={**SAME, "karpy/core/c.py": "3"}, environ={})
    assert added.build == native.PURE and "karpy/core/c.py" in added.reason
    gone = native.decide(built=True, manifest=SAME, current={"karpy/core/a.py": "1"}, environ={})
    assert gone.build == native.PURE and "karpy/model/b.py" in gone.reason
    other = {"karpy/core/a.py": "8", "karpy/model/b.py": "9"}
    both = native.decide(built=True, manifest=SAME, current=other, environ={})
    assert "and 1 more" in both.reason


def test_digests_cover_every_source_of_both_packages() -> None:
    found = native.digests()
    assert "model/resources.py" in found and "core/scheduling/scheduler.py" in found
    assert "model/errors.py" not in found  # native.INTERPRETED
    assert not any(name.startswith(("sim/", "controllers/")) or name == "native.py" for name in found)
    assert all(len(value) == 64 for value in found.values())


def _loaded_from_extension(module: object) -> bool:
    return str(getattr(module, "__file__", "")).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def test_the_status_says_which_build_this_process_loaded() -> None:
    status = native.status()
    assert _loaded_from_extension(karpy.model.resources) == (status.build == native.COMPILED)
    manifest = native.MANIFEST
    if status.build == native.COMPILED:  # what make test runs: the manifest matches the tree
        assert json.loads(manifest.read_text())["sources"] == native.digests()


def _probe(env: dict[str, str]) -> list[str]:
    code = (
        "import json, karpy.native as n, karpy.model.resources as r, karpy.core.scheduling.scheduler as s;"
        "print(json.dumps([n.status().build, r.__file__, s.__file__]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return list(json.loads(out.stdout))


def test_karpy_pure_loads_every_module_of_both_packages_from_source() -> None:
    build, resources, scheduler = _probe({"KARPY_PURE": "1"})
    assert build == native.PURE
    assert resources.endswith("resources.py") and scheduler.endswith("scheduler.py")


def test_the_compiled_and_the_pure_core_give_identical_json(tmp_path: Path) -> None:
    """The small scenario with the cluster-autoscaler comparison, once per build, byte for byte."""
    outputs, captions = [], []
    for pure in ("0", "1"):
        out = tmp_path / f"pure-{pure}.json"
        done = subprocess.run(
            [sys.executable, "-m", "karpy", "simulate", str(SMALL), "--until", "1h", "--no-progress",
             "--compare", "cluster-autoscaler", "--json", str(out)],
            env={**os.environ, "KARPY_PURE": pure}, capture_output=True, text=True, check=True,
        )  # fmt: skip
        outputs.append(out.read_text())
        captions.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert f"core: {native.evaluate({}).describe()}" in captions[0]
    assert "core: pure Python (KARPY_PURE is set)" in captions[1]
    assert json.loads(outputs[0])["runs"]["karpy"]["pods_created"] > 0


_WEAKREF_PROBE = """
import gc, weakref
from karpy.core.scheduling.cache import IdentityCache, ObjectMemo
from karpy.core.scheduling.nodeclaim import Unfit
from karpy.model.quantity import QuantityError
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources

makers = {
    "Requirements": lambda: Requirements([Requirement.in_("k", "v")]),
    "Resources": lambda: Resources.parse({"cpu": "1"}),
    "IdentityCache": IdentityCache,
    "ObjectMemo": lambda: ObjectMemo(8),
    "Unfit": lambda: Unfit("no room"),
    "QuantityError": lambda: QuantityError("bad"),
}
weak = set()
for name, make in makers.items():
    for i in range(3000):
        obj = make()
        try:
            ref = weakref.ref(obj, lambda r: None)
        except TypeError:
            break  # not weakly referenceable: nothing can dangle
        weak.add(name)
        assert ref() is obj
        del obj
        assert ref() is None, name  # the object died and its weakref knows it
        if i % 500 == 0:
            gc.collect()
print(",".join(sorted(weak)))
"""


def test_weak_references_to_core_objects_die_with_them() -> None:
    """A weakref to a core object (hypothesis takes one of every value it draws) is cleared when the
    object dies, and the garbage collector survives it, compiled or not."""
    for pure in ("0", "1"):
        done = subprocess.run(
            [sys.executable, "-c", _WEAKREF_PROBE],
            env={**os.environ, "KARPY_PURE": pure}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"KARPY_PURE={pure}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "IdentityCache" in done.stdout and "Unfit" in done.stdout  # weakly referenceable in both
