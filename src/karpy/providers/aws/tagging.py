"""Instance tags known only after registration: ``Name`` (the node) and ``karpenter.sh/nodeclaim``.

Upstream's ``nodeclaim/tagging`` controller. A launch cannot tag the NodeClaim's name onto its
instance (identical launches share one CreateFleet request), so once a claim of this provider is
``Registered`` its instance gets ``Name=<node name>``, ``karpenter.sh/nodeclaim=<claim>`` and
``eks:eks-cluster-name`` with one CreateTags call, and the claim the annotation
``karpenter.k8s.aws/tagged=true``. At most :data:`PER_PASS` claims are tagged per pass (upstream
rate-limits CreateTags); the rest wait a second. A failed call is retried after a back-off; an
instance that is gone is left to garbage collection. Registered by the operator.
"""

from __future__ import annotations

from typing import Any

from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model import errors as model_errors
from karpy.providers.aws import errors, instances

__all__ = ["PER_PASS", "TAGGED_ANNOTATION", "Tagging"]

TAGGED_ANNOTATION = "karpenter.k8s.aws/tagged"
PER_PASS = 20
_RETRY = 30.0


class Tagging:
    name = "aws.tagging"

    def __init__(self, ctx: Context, ec2: Any, *, cluster: str) -> None:
        self.ctx = ctx
        self._ec2 = ec2
        self.cluster = cluster
        self._failed: dict[str, float] = {}  # claim -> retry at

    def _pending(self, now: float) -> list[str]:
        out: list[str] = []
        for name in self.ctx.cluster.claim_names():
            claim = self.ctx.cluster.claims.get(name)
            if (
                claim is None
                or claim.deleting
                or not claim.is_true("Registered")
                or claim.annotations.get(TAGGED_ANNOTATION) == "true"
                or instances.parse(claim.provider_id) is None
                or self._failed.get(name, 0.0) > now
            ):
                continue
            out.append(name)
        return out

    def reconcile(self) -> Result:
        now = self.ctx.now()
        pending = self._pending(now)
        for name in pending[:PER_PASS]:
            claim = self.ctx.cluster.claims[name]
            parsed = instances.parse(claim.provider_id)
            assert parsed is not None
            tags = {"karpenter.sh/nodeclaim": name, "eks:eks-cluster-name": self.cluster}
            if claim.node_name:
                tags["Name"] = claim.node_name
            try:
                instances.tag(self._ec2, [parsed[1]], tags)
            except errors.AWSError as exc:
                if not exc.not_found:
                    self.ctx.log.warning(
                        "tagging instance %s of NodeClaim %s failed: %s", parsed[1], name, exc
                    )
                    self._failed[name] = now + _RETRY
                    continue
            try:
                self.ctx.kube.patch(
                    "NodeClaim", name, {"metadata": {"annotations": {TAGGED_ANNOTATION: "true"}}}
                )
            except model_errors.KubeError as exc:
                self.ctx.log.warning("annotating NodeClaim %s failed: %s", name, exc)
                self._failed[name] = now + _RETRY
                continue
            self._failed.pop(name, None)
        known = set(self.ctx.cluster.claims)
        for name in [n for n in self._failed if n not in known]:
            del self._failed[name]
        if len(pending) > PER_PASS:
            return Result(requeue_after=1.0)
        waits = [at - now for at in self._failed.values()]
        return Result(requeue_after=max(1.0, min(waits)) if waits else None)
