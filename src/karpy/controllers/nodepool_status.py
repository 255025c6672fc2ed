"""NodePool status: ``status.resources`` (capacity of its nodes, plus ``nodes``) and ``status.nodes``.

Upstream's ``nodepool.counter``: every 5 s, for each NodePool, the summed capacity of the
nodes it owns (cpu, memory, pods, ephemeral-storage, and every other resource they report)
and their count, written with a merge patch only when it changed.

The sums read only the Nodes and NodeClaims (how they join, their capacity), so they are kept
while neither store changed (``Cluster.store_version``), and summed again only when the
(NodePool, capacity) of the managed nodes differ: pods binding and claim status writes do not
redo them.
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
        self._versions: tuple[int, int] | None = None  # (nodes, claims) store versions of ``_usage``
        self._usage: dict[str, tuple[Resources, int]] = {}
        self._parts: list[tuple[str, Resources]] | None = None  # (NodePool, capacity) summed in ``_usage``

    def _pool_usage(self) -> dict[str, tuple[Resources, int]]:
        """NodePool name -> (summed capacity, count) of the managed nodes it owns."""
        cluster = self.ctx.cluster
        versions = (cluster.store_version("nodes"), cluster.store_version("claims"))
        if versions != self._versions:
            parts = [
                (n.node_pool, n.node.capacity if n.node is not None and n.node.capacity else n.claim.capacity)
                for n in cluster.state_nodes(self.ctx.now())
                if n.claim
            ]
            if parts != self._parts:  # (a claim's status write alone leaves them equal: no new sums)
                members: dict[str, list[Resources]] = {}
                for pool, capacity in parts:
                    members.setdefault(pool, []).append(capacity)
                self._usage = {pool: (total(owned), len(owned)) for pool, owned in members.items()}
                self._parts = parts
            self._versions = versions
        return self._usage

    def reconcile(self) -> Result:
        cluster = self.ctx.cluster
        usage = self._pool_usage()
        for pool_name in sorted(cluster.node_pools):
            current = usage.get(pool_name) or (total(()), 0)
            if self._written.get(pool_name) == current:
                continue
            capacity, count = current
            status = {
                "resources": {**encode.resources(capacity), "nodes": str(count)},
                "nodes": count,
            }
            try:
                self.ctx.kube.patch("NodePool", pool_name, {"status": status})
            except errors.NotFound:
                continue
            self._written[pool_name] = current
        return Result(requeue_after=self.interval)
