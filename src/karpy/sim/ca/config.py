"""The Cluster Autoscaler model's configuration: the scenario's ``baseline.clusterAutoscaler`` block.

:class:`CAConfig` holds CA's flags with their documented defaults (durations in seconds), its
node groups (:class:`NodeGroupConfig`: an ASG's mixed-instances list, capacity type, size
limits, expander priority, labels, taints and zones) and optional overprovisioning
(:class:`OverprovisioningConfig`: pause pods kept as headroom). :func:`parse_config` builds it
from the raw block; unknown fields and wrong types raise :class:`~karpy.model.errors.InputError`
naming the field. Read by :mod:`karpy.sim.scenario`, used by the rest of :mod:`karpy.sim.ca`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api.common import parse_duration
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.taints import EFFECTS, Taint

__all__ = ["EXPANDERS", "CAConfig", "NodeGroupConfig", "OverprovisioningConfig", "parse_config"]

EXPANDERS = ("least-waste", "random", "most-pods", "price", "priority", "least-nodes")


@dataclass(frozen=True)
class NodeGroupConfig:
    name: str
    instance_types: tuple[str, ...]
    capacity_type: str = wk.CAPACITY_TYPE_ON_DEMAND
    min: int = 0
    max: int = 1000
    priority: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    zones: tuple[str, ...] = ()  # empty: every zone of the region offering the first type


@dataclass(frozen=True)
class OverprovisioningConfig:
    pods: int = 0
    requests: Mapping[str, str] = field(default_factory=lambda: {"cpu": "1", "memory": "2Gi"})
    priority: int = -10
    namespace: str = "overprovisioning"
    name: str = "overprovisioning"


@dataclass(frozen=True)
class CAConfig:
    """The scenario's ``baseline.clusterAutoscaler`` block; durations in seconds, CA's defaults."""

    node_groups: tuple[NodeGroupConfig, ...] = ()
    overprovisioning: OverprovisioningConfig | None = None
    scan_interval: float = 10.0
    asg_launch_overhead: float = 30.0  # the scenario format's default
    expander: str = "least-waste"
    new_pod_scale_up_delay: float = 0.0
    max_node_provision_time: float = 900.0
    max_nodes_per_scaleup: int = 1000
    max_nodes_total: int = 0  # 0 = unlimited
    expendable_pods_priority_cutoff: int = -10
    initial_node_group_backoff: float = 300.0
    max_node_group_backoff: float = 1800.0
    node_group_backoff_reset: float = 10800.0
    scale_down_enabled: bool = True
    scale_down_unneeded_time: float = 600.0
    scale_down_unready_time: float = 1200.0
    scale_down_utilization_threshold: float = 0.5
    scale_down_delay_after_add: float = 600.0
    scale_down_delay_after_delete: float = 0.0
    scale_down_delay_after_failure: float = 180.0
    max_scale_down_parallelism: int = 10
    max_drain_parallelism: int = 1
    node_delete_delay_after_taint: float = 5.0
    max_pod_eviction_time: float = 120.0
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_local_storage: bool = True


# -- the scenario block --------------------------------------------------------------------

_DURATIONS = {
    "scanInterval": "scan_interval",
    "asgLaunchOverhead": "asg_launch_overhead",
    "newPodScaleUpDelay": "new_pod_scale_up_delay",
    "maxNodeProvisionTime": "max_node_provision_time",
    "scaleDownUnneededTime": "scale_down_unneeded_time",
    "scaleDownUnreadyTime": "scale_down_unready_time",
    "scaleDownDelayAfterAdd": "scale_down_delay_after_add",
    "scaleDownDelayAfterDelete": "scale_down_delay_after_delete",
    "scaleDownDelayAfterFailure": "scale_down_delay_after_failure",
    "maxPodEvictionTime": "max_pod_eviction_time",
    "nodeDeleteDelayAfterTaint": "node_delete_delay_after_taint",
}
_SCALARS = {
    "expander": ("expander", str),
    "scaleDownUtilizationThreshold": ("scale_down_utilization_threshold", float),
    "scaleDownEnabled": ("scale_down_enabled", bool),
    "maxNodesTotal": ("max_nodes_total", int),
    "maxNodesPerScaleUp": ("max_nodes_per_scaleup", int),
    "expendablePodsPriorityCutoff": ("expendable_pods_priority_cutoff", int),
    "maxScaleDownParallelism": ("max_scale_down_parallelism", int),
    "maxDrainParallelism": ("max_drain_parallelism", int),
    "skipNodesWithSystemPods": ("skip_nodes_with_system_pods", bool),
    "skipNodesWithLocalStorage": ("skip_nodes_with_local_storage", bool),
}
_GROUP_KEYS = ("name", "instanceTypes", "capacityType", "min", "max", "priority", "labels", "taints", "zones")


def _duration(value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    try:
        seconds = parse_duration(str(value))
    except ValueError as exc:
        raise errors.InputError(f"{where}: {exc}") from None
    if seconds is None:
        raise errors.InputError(f"{where}: Never is not allowed here")
    return seconds


def _typed(value: Any, kind: type, where: str) -> Any:
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise errors.InputError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def _strict(raw: Any, allowed: Sequence[str], where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise errors.InputError(f"{where}: expected a mapping, got {raw!r}")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise errors.InputError(f"{where}.{unknown[0]}: unknown field (expected one of {', '.join(allowed)})")
    return raw


def parse_config(raw: Any, *, where: str = "baseline.clusterAutoscaler") -> CAConfig:
    """Build a :class:`CAConfig` from the scenario block; errors name the field."""
    top = _strict(raw, ["nodeGroups", "overprovisioning", *_DURATIONS, *_SCALARS], where)
    kwargs: dict[str, Any] = {}
    for key, attr in _DURATIONS.items():
        if key in top:
            kwargs[attr] = _duration(top[key], f"{where}.{key}")
    for key, (attr, kind) in _SCALARS.items():
        if key in top:
            kwargs[attr] = _typed(top[key], kind, f"{where}.{key}")
    groups = []
    for i, g in enumerate(top.get("nodeGroups") or []):
        at = f"{where}.nodeGroups[{i}]"
        g = _strict(g, _GROUP_KEYS, at)
        if "name" not in g or "instanceTypes" not in g:
            raise errors.InputError(f"{at}: name and instanceTypes are required")
        taints = []
        for j, t in enumerate(g.get("taints") or []):
            t = _strict(t, ["key", "value", "effect"], f"{at}.taints[{j}]")
            if t.get("effect") not in EFFECTS or not t.get("key"):
                raise errors.InputError(f"{at}.taints[{j}]: need a key and an effect in {sorted(EFFECTS)}")
            taints.append(Taint(str(t["key"]), str(t["effect"]), str(t.get("value", ""))))
        groups.append(
            NodeGroupConfig(
                name=_typed(g["name"], str, f"{at}.name"),
                instance_types=tuple(_typed(x, str, f"{at}.instanceTypes") for x in g["instanceTypes"]),
                capacity_type=_typed(
                    g.get("capacityType", wk.CAPACITY_TYPE_ON_DEMAND), str, f"{at}.capacityType"
                ),
                min=_typed(g.get("min", 0), int, f"{at}.min"),
                max=_typed(g.get("max", 1000), int, f"{at}.max"),
                priority=_typed(g.get("priority", 0), int, f"{at}.priority"),
                labels={str(k): str(v) for k, v in (g.get("labels") or {}).items()},
                taints=tuple(taints),
                zones=tuple(str(z) for z in g.get("zones") or ()),
            )
        )
    if "overprovisioning" in top:
        at = f"{where}.overprovisioning"
        op = _strict(top["overprovisioning"], ["pods", "requests", "priority", "namespace", "name"], at)
        kwargs["overprovisioning"] = OverprovisioningConfig(
            pods=_typed(op.get("pods", 0), int, f"{at}.pods"),
            requests={
                str(k): str(v) for k, v in (op.get("requests") or {"cpu": "1", "memory": "2Gi"}).items()
            },
            priority=_typed(op.get("priority", -10), int, f"{at}.priority"),
            namespace=_typed(op.get("namespace", "overprovisioning"), str, f"{at}.namespace"),
            name=_typed(op.get("name", "overprovisioning"), str, f"{at}.name"),
        )
    return CAConfig(node_groups=tuple(groups), **kwargs)
