"""Cloud drift: the ``Drifted`` condition from ``CloudProvider.is_drifted`` (upstream's drift check).

Upstream's NodeClaim disruption controller asks the cloud provider whether a launched claim has
drifted from its NodeClass (the AWS provider: a changed NodeClass hash, AMI, security groups or
subnets) and keeps ``Drifted=True`` with that reason on the claim; the disruption controller
then replaces the node through the budgets (:mod:`karpy.core.disruption.drift` reads the
condition). This controller does the same: every 5 minutes, and at once when a NodeClass
changes or a claim is launched, each launched claim that is not being deleted is asked; a new
reason sets ``Drifted=True`` (reason = the cloud's), a claim no longer drifted loses the
condition it got from here. Drift of the NodePool itself (hash, requirements) is computed by
the core and is not written here.

Providers without cloud drift (kwok, fake) answer ``""`` for every claim: nothing is written.
Registered by :func:`karpy.runtime.wiring.build`.
"""

from __future__ import annotations

from karpy.controllers.context import Context
from karpy.controllers.lifecycle import set_conditions
from karpy.controllers.result import Result
from karpy.model import errors
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass
from karpy.model.objects import Condition, NodeClaim
from karpy.state.events import ObjectEvent

__all__ = ["DRIFTED", "INTERVAL", "CloudDrift"]

DRIFTED = "Drifted"
INTERVAL = 300.0
RETRY = 10.0


class CloudDrift:
    name = "nodeclaim.drift"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def on_event(self, event: ObjectEvent) -> bool:
        """A NodeClass change, or a claim whose Launched condition may just have turned True."""
        obj = event.obj
        if isinstance(obj, EC2NodeClass | KWOKNodeClass):
            return True
        return isinstance(obj, NodeClaim) and obj.is_true("Launched") and obj.condition(DRIFTED) is None

    def reconcile(self) -> Result:
        now = self.ctx.now()
        retry = False
        for name in self.ctx.cluster.claim_names():
            claim = self.ctx.cluster.claims.get(name)
            if claim is None or claim.deleting or not claim.is_true("Launched"):
                continue
            try:
                reason = self.ctx.cloud.is_drifted(claim)
            except errors.CloudError as exc:
                self.ctx.log.warning("drift check of NodeClaim %s failed: %s", name, exc)
                retry = True
                continue
            current = claim.condition(DRIFTED)
            if reason and (current is None or current.status != "True" or current.reason != reason):
                retry |= not self._write(claim, Condition(DRIFTED, "True", reason, f"drifted: {reason}"), now)
                if current is None or current.status != "True":
                    self.ctx.event("NodeClaim", name, "Drifted", f"NodeClaim drifted ({reason})")
            elif not reason and current is not None and current.status == "True":
                retry |= not self._write(claim, None, now)
        return Result(requeue_after=RETRY if retry else INTERVAL)

    def _write(self, claim: NodeClaim, condition: Condition | None, now: float) -> bool:
        """Set (or with None clear) the Drifted condition; False when the write failed."""
        if condition is None:
            kept = [c for c in claim.conditions if c.type != DRIFTED]
            conditions = set_conditions(kept, (), now=now)
        else:
            conditions = set_conditions(claim.conditions, (condition,), now=now)
        try:
            self.ctx.kube.patch("NodeClaim", claim.name, {"status": {"conditions": conditions}})
        except errors.NotFound:
            return True
        except errors.KubeError as exc:
            self.ctx.log.warning("writing Drifted on NodeClaim %s failed: %s", claim.name, exc)
            return False
        return True
