"""The karpy.api package: reading files needs no schema, a schema is built when first used or by
common.build_all (the daemon's warm-up), and the package's names still resolve."""

from __future__ import annotations

import subprocess
import sys

import pytest

import karpy.api
from karpy.api import apps_v1, common, core_v1, karpenter_v1, load, nodeclasses, policy_v1, storage_v1


def test_reading_files_imports_no_schema() -> None:
    # karpy plan starts reading (forking the parse of a long stream) before the schemas load
    code = (
        "import sys, karpy.api.documents\n"
        "print(sorted(m for m in ('pydantic', 'karpy.api.load') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_build_all_builds_every_schema() -> None:
    common.build_all()
    schemas = [common.K8sModel]
    seen = 0
    while schemas:
        schema = schemas.pop()
        schemas.extend(schema.__subclasses__())
        if schema is not common.K8sModel:
            assert schema.__pydantic_complete__, schema.__name__
            seen += 1
    kinds = (
        core_v1.Pod,
        core_v1.Volume,
        apps_v1.DaemonSet,
        policy_v1.PodDisruptionBudget,
        storage_v1.CSINode,
    )
    assert all(issubclass(k, common.K8sModel) for k in kinds)
    assert (
        seen > 50
        and karpenter_v1.NodePool.__pydantic_complete__
        and nodeclasses.EC2NodeClass.__pydantic_complete__
    )


def test_the_package_names_resolve_when_used() -> None:
    assert karpy.api.Loaded is load.Loaded
    assert karpy.api.load_paths is load.load_paths
    assert set(karpy.api.__all__) <= set(dir(karpy.api)) | set(karpy.api._FROM)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        karpy.api.nothing  # noqa: B018
