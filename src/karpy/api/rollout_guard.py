"""The warning about a NodePool's ``karpy.sh/rollout-guard`` value that karpy cannot read.

The value is the guard's settle time (``true`` for 5m, or a duration such as ``5m``, ``90s``,
``1h30m``; see :func:`karpy.model.objects.rollout_guard_settle`). Any other value leaves the
pool's rollout guard off, and :func:`check` logs one warning per NodePool and value (logger
``karpy.api``, the first 1024 pairs), as for ``karpy.sh/sizing``. Called by
:func:`karpy.api.convert.node_pool` for NodePools read from files and from the watch alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from karpy.model import objects

__all__ = ["check"]

log = logging.getLogger("karpy.api")
_WARNED: set[tuple[str, str]] = set()  # (NodePool, value) pairs already warned about


def check(name: str, annotations: Mapping[str, str]) -> None:
    """Warn (once per NodePool and value) about a ``karpy.sh/rollout-guard`` value that is
    neither ``true`` nor a duration: the pool's rollout guard stays off."""
    value = annotations.get(objects.ROLLOUT_GUARD_ANNOTATION)
    if value is None or objects.rollout_guard_settle(value) is not None or (name, value) in _WARNED:
        return
    if len(_WARNED) < 1024:
        _WARNED.add((name, value))
    log.warning(
        "NodePool %s: %s %r is neither true nor a duration such as 5m; the pool's rollout guard stays off",
        name,
        objects.ROLLOUT_GUARD_ANNOTATION,
        value,
    )
