"""The reference scheduling algorithm: every place tried one by one, nothing remembered.

:class:`ReferenceSolver` is :class:`~karpy.core.scheduling.scheduler.Solver` without its fast
paths: every existing node is built up front and tried in order, every open claim is tried
(upstream's list, sorted by pod count before every pod), no rejection, topology verdict or
failure is remembered, templates are built afresh and claims narrow their options with the
straightforward :func:`~karpy.core.scheduling.nodeclaim.filter_instance_types`. Its results
are the definition the fast paths must reproduce exactly; only the equivalence tests
(``tests/unit/core``) call it.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.core.scheduling import topocounts
from karpy.core.scheduling.claimorder import ClaimOrder
from karpy.core.scheduling.existing import ExistingNode, pod_kind
from karpy.core.scheduling.nodeclaim import ClaimInProgress, Template, Unfit
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.results import Results, StopWhen
from karpy.core.scheduling.scheduler import Failure, Solver
from karpy.core.scheduling.templates import build_template
from karpy.core.snapshot import Snapshot
from karpy.model.objects import NodePool, Pod

__all__ = ["ReferenceSolver", "solve"]


class ReferenceSolver(Solver):
    """A :class:`Solver` that takes no shortcut (see the module doc)."""

    def _whole(self) -> topocounts.Whole | None:
        return None

    def _existing_nodes(self) -> list[ExistingNode | None]:
        built = ExistingNode.build_all(
            self.states, self.topology, self.snapshot.daemonsets, unders=self.unders, bases=self.bases
        )
        nodes: list[ExistingNode | None] = []
        nodes.extend(built)
        return nodes

    def _template(self, pool: NodePool) -> Template:
        return build_template(self.snapshot, pool, exact_filter=True)

    def _claim_order(self) -> ClaimOrder[ClaimInProgress]:
        return ClaimOrder(lambda c: len(c.pods), reference=True)

    def _on_existing(self, pod: Pod, data: PodData, reasons: dict[str, str]) -> bool:
        """First fit: every existing node in order."""
        for node in self.existing:
            assert node is not None  # every node is built up front
            try:
                reqs = node.can_add(pod, data)
            except Unfit:
                continue
            node.add(pod, data, reqs)
            return True
        self._existing_reason(pod, data, pod_kind(pod, data), reasons)
        return False

    def _on_claims(self, pod: Pod, data: PodData) -> bool:
        """First fit: every claim opened in this solve, fewest pods first."""
        for claim in self.order.ordered():
            try:
                reqs, options = claim.can_add(pod, data)
            except Unfit:
                continue
            before = len(claim.pods)
            claim.add(pod, data, reqs, options)
            self.order.grew(claim, before)
            return True
        return False

    def _known_failure(self, memo: object) -> Failure | None:
        return None


def solve(
    snapshot: Snapshot,
    pods: Sequence[Pod] | None = None,
    *,
    consolidation: bool = False,
    stop: StopWhen | None = None,
    without: frozenset[str] = frozenset(),
) -> Results:
    """:func:`karpy.core.scheduling.scheduler.solve` by the reference algorithm."""
    chosen = snapshot.pending_pods() if pods is None else tuple(pods)
    solver = ReferenceSolver(snapshot, chosen, consolidation=consolidation, stop=stop, without=without)
    return solver.solve(chosen)
