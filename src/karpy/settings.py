"""karpy settings: one tree of small frozen dataclasses, passed explicitly.

Settings travel inside the core Snapshot so that every core call is a function of the
snapshot (and ``now``) alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BatchSettings", "FeatureGates", "PricingSettings", "SchedulingSettings", "Settings"]


@dataclass(frozen=True, slots=True)
class SchedulingSettings:
    max_instance_types: int = 600  # upstream MaxInstanceTypes since v1.7
    preference_policy: str = "Respect"  # Respect | Ignore
    min_values_policy: str = "Strict"  # Strict | BestEffort
    packing: str = "faithful"  # faithful (upstream's packing) | optimized (karpy plan: core/optimize/)


@dataclass(frozen=True, slots=True)
class PricingSettings:
    spot_price_ratio: float = 0.4  # a model, not data: spot = on-demand x ratio
    on_demand_discount: float = 0.0  # Savings Plans / RIs, e.g. 0.28
    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0


@dataclass(frozen=True, slots=True)
class FeatureGates:
    spot_to_spot_consolidation: bool = False
    # karpy's own (upstream has none): registered Nodes' capacity replaces the catalog's estimate
    # per instance type and NodeClass AMI (controllers/measured_capacity.py, docs/seed-features.md)
    measured_capacity: bool = False


@dataclass(frozen=True, slots=True)
class BatchSettings:
    idle_seconds: float = 1.0
    max_seconds: float = 10.0


@dataclass(frozen=True, slots=True)
class Settings:
    scheduling: SchedulingSettings = field(default_factory=SchedulingSettings)
    pricing: PricingSettings = field(default_factory=PricingSettings)
    features: FeatureGates = field(default_factory=FeatureGates)
    batch: BatchSettings = field(default_factory=BatchSettings)
