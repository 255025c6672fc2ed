"""A NodePool's scheduling :class:`~karpy.core.scheduling.nodeclaim.Template`.

The template is what every NodeClaim opened from the NodePool starts from: the NodePool's
requirements with its labels (and the NodePool name), the instance types compatible with
them, their DaemonSet overhead and a :class:`~karpy.core.scheduling.typeindex.TypeIndex`
over them. It is a pure function of the NodePool, its instance types, the DaemonSets and the
well-known labels, so :func:`template` shares one per distinct input through the caller's
cache. Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from karpy.core.scheduling import daemons
from karpy.core.scheduling.cache import IdentityCache, template_key_of
from karpy.core.scheduling.nodeclaim import Template, filter_instance_types
from karpy.core.scheduling.typeindex import TypeIndex
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.objects import NodePool
from karpy.model.requirements import Requirements
from karpy.model.resources import Resources

__all__ = ["build_template", "template"]


def template(cache: IdentityCache[Template], snapshot: Snapshot, pool: NodePool) -> Template:
    """The template of ``pool`` in ``snapshot``, built once per distinct input."""
    its = snapshot.instance_types.get(pool.name, ())
    key = template_key_of(pool, its, snapshot.daemonsets, snapshot.well_known)
    return cache.get(key, lambda: build_template(snapshot, pool))


def build_template(snapshot: Snapshot, pool: NodePool, *, exact_filter: bool = False) -> Template:
    """A new template of ``pool``; ``exact_filter``: its claims narrow their options with
    :func:`~karpy.core.scheduling.nodeclaim.filter_instance_types` (the reference path)."""
    template_labels = {**pool.labels, labels.NODEPOOL: pool.name}
    reqs = Requirements(pool.requirements).union_with(Requirements.from_labels(template_labels))
    filter_reqs = reqs.union_with(
        Requirements.from_labels({labels.REGISTERED: "true", labels.INITIALIZED: "true"})
    )
    its = snapshot.instance_types.get(pool.name, ())
    overhead = daemons.template_overhead(
        snapshot.daemonsets,
        taints=pool.taints,
        requirements=filter_reqs,
        instance_types=its,
        well_known=snapshot.well_known,
    )
    kept, _ = filter_instance_types(its, reqs, requests=Resources(), daemon={})
    index = TypeIndex(kept, overhead)
    return Template(
        pool,
        reqs,
        kept,
        overhead,
        template_labels,
        pool.taints,
        pool.startup_taints,
        index,
        exact_filter=exact_filter,
    )
