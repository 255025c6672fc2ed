"""NodePool status: ``status.resources`` (capacity of its nodes, plus ``nodes``) and ``status.nodes``.

Upstream's ``nodepool.counter``: every 5 s, for each NodePool, the summed capacity of the
nodes it owns (cpu, memory, pods, ephemeral-storage, and every other resource they report)
and their count, written with a merge patch only when it changed.
"""

from __future__ import annotations

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model import errors
from karpy.model.resources import Resources, total

__all__ = ["NodePoolStatus"]


class NodePoolStatus:
    name = "nodepool.status"

    def __init__(self, ctx: Context, *, interval: float = 5.0) -> None:
        self.ctx = ctx
        self.interval = interval
        self._written: dict[str, tuple[Resources, int]] = {}

    def reconcile(self) -> Result:
        cluster = self.ctx.cluster
        for pool_name in sorted(cluster.node_pools):
            members = [n for n in cluster.state_nodes(self.ctx.now()) if n.node_pool == pool_name and n.claim]
            capacity = total(
                (n.node.capacity if n.node is not None and n.node.capacity else n.claim.capacity)  # type: ignore[union-attr]
                for n in members
            )
            current = (capacity, len(members))
            if self._written.get(pool_name) == current:
                continue
            status = {
                "resources": {**encode.resources(capacity), "nodes": str(len(members))},
                "nodes": len(members),
            }
            try:
                self.ctx.kube.patch("NodePool", pool_name, {"status": status})
            except errors.NotFound:
                continue
            self._written[pool_name] = current
        return Result(requeue_after=self.interval)
