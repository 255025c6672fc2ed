"""The operator: karpy's controllers against a real API server (layer L5, composition root).

:mod:`.runner` holds :class:`Operator` (connect, watch, elect, serve health and metrics, drive
the loop), :mod:`.caches` the gate of required and optional caches, :mod:`.logs` the JSON log
format and :mod:`.aws` the wiring of ``--provider aws``. Called by :mod:`karpy.cli.operator_cmd`
and the integration tests, which import the names below from here.
"""

from karpy.operator.caches import NODE_CLASS_KINDS, REQUIRED_KINDS, CacheGate, optional_kinds, required_kinds
from karpy.operator.logs import JsonFormatter, configure_logging
from karpy.operator.runner import (
    MANAGED_BY_ANNOTATION,
    MANAGED_BY_VALUE,
    Operator,
    OperatorConfig,
    Refused,
    preflight,
)

__all__ = [
    "MANAGED_BY_ANNOTATION",
    "MANAGED_BY_VALUE",
    "NODE_CLASS_KINDS",
    "REQUIRED_KINDS",
    "CacheGate",
    "JsonFormatter",
    "Operator",
    "OperatorConfig",
    "Refused",
    "configure_logging",
    "optional_kinds",
    "preflight",
    "required_kinds",
]
