"""Abstract-base-class state for karpy's own mappings, correct when compiled by mypyc.

:class:`~karpy.model.resources.Resources` and :class:`~karpy.model.requirements.Requirements`
subclass ``collections.abc.Mapping``. Python gives every class made by ``ABCMeta`` its own
registry and isinstance cache; a class compiled by mypyc (``karpy.native``) inherits
``Mapping``'s instead. ``isinstance(x, Resources)`` then answers from ``Mapping``'s cache: once
anything asked whether a dict is a ``Mapping``, every dict passed as a ``Resources``. This gives
such a class the state of its own; for a class that has it already, nothing changes.
"""

from __future__ import annotations

import abc

__all__ = ["own_abc_state"]


def own_abc_state(cls: type) -> None:
    """Give ``cls`` its own ABC registry and caches when it shares its base's."""
    if "_abc_impl" not in cls.__dict__:
        getattr(abc, "_abc_init")(cls)  # noqa: B009 — not in the typeshed stubs; the call ABCMeta.__new__ makes
