"""User-facing YAML → model objects (layer L1): pydantic schemas of the objects karpy reads.

Schemas: :mod:`~karpy.api.core_v1` (Pod, Node, Namespace), :mod:`~karpy.api.apps_v1`
(DaemonSet, Deployment, ReplicaSet), :mod:`~karpy.api.policy_v1` (PodDisruptionBudget),
:mod:`~karpy.api.karpenter_v1` (NodePool, NodeClaim), :mod:`~karpy.api.nodeclasses`
(EC2NodeClass, KWOKNodeClass), sharing :mod:`~karpy.api.common`. :mod:`~karpy.api.convert`
turns validated objects into :mod:`karpy.model` values; :mod:`~karpy.api.load` reads
files (:mod:`~karpy.api.documents`) and reports problems (:mod:`~karpy.api.problems`), checking
names (:mod:`~karpy.api.names`) and unknown fields (:mod:`~karpy.api.fields`) as kubectl would.
Used by the CLI, the conformance runner and the watch codec.

The names below are loaded when first used, so that importing a light module of this package
(:mod:`~karpy.api.documents`, to start reading files) imports no schema.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from karpy.api.convert import Namespace, Workload, expand, pod_requests
    from karpy.api.load import (
        Loaded,
        ObjectError,
        Problem,
        convert_daemonset,
        convert_node,
        convert_node_claim,
        convert_node_pool,
        convert_pdb,
        convert_pod,
        load_paths,
        load_text,
        parse_object,
    )

__all__ = [
    "Loaded",
    "Namespace",
    "ObjectError",
    "Problem",
    "Workload",
    "convert_daemonset",
    "convert_node",
    "convert_node_claim",
    "convert_node_pool",
    "convert_pdb",
    "convert_pod",
    "expand",
    "load_paths",
    "load_text",
    "parse_object",
    "pod_requests",
]


_CONVERT = frozenset({"Namespace", "Workload", "expand", "pod_requests"})
_FROM = {name: "karpy.api.convert" if name in _CONVERT else "karpy.api.load" for name in __all__}


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module 'karpy.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
