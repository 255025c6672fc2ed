"""The disruption pass keeps a NodePool's headroom (``karpy.sh/headroom``, :mod:`karpy.core.headroom`).

While a pool's headroom window is open, graceful disruption must not take away the free room
the headroom asks for. Two parts, both within the pass:

- **Empty nodes** (emptiness deletes them without a solve): :func:`keep` takes the empty
  graceful candidates of the pool (in the zone, for ``perZone``) out of the candidates when the
  pieces would no longer fit without them. The nodes that stay (not empty, or not candidates)
  hold what their free room holds; if that is less than the pieces asked, the empty candidates
  that hold the most pieces (then by name) are kept until the pieces fit. Each kept node's
  record says why, starting with ``headroom:`` (the reason class ``karpy explain node`` shows).
  Pieces are identical, so what a set of nodes holds does not depend on the order the scheduler
  tries them in: once the other empty nodes are gone, the provisioner's solve still places
  every piece on the nodes that stay and launches nothing.
- **Consolidation** (a solve of the snapshot minus the candidates): the simulation places the
  headroom's virtual pods too (:func:`pods`), on initialized nodes (a piece that would land on a
  NodeClaim still launching strands the move, as a moved pod would), so moved pods never take the
  room kept for them; a move that would need a new node for the pieces is a replacement (allowed
  when cheaper) or refused. The simulation packs the moved pods where the solver would, but
  kube-scheduler's default scoring (LeastAllocated) sends them to the emptiest nodes, which are
  the ones holding the pieces: a delete is also refused (:func:`explain`) unless the pieces still
  fit once the moved pods went there. A refusal's reason starts with ``headroom:`` when headroom
  is why.

Without an open headroom window every function here changes nothing. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from karpy.core import headroom
from karpy.core.disruption.types import Candidate, Command
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod
from karpy.model.resources import CPU, MEMORY, PODS, Resources

__all__ = ["explain", "keep", "key", "pods"]


def _any_annotated(pools: Mapping[str, NodePool] | Sequence[NodePool]) -> bool:
    values = pools.values() if isinstance(pools, Mapping) else pools
    return any(headroom.ANNOTATION in p.meta_annotations for p in values)


def keep(
    nodes: Sequence[StateNode],
    graceful: list[Candidate],
    why: dict[str, str],
    pools: Mapping[str, NodePool],
    instance_types: Mapping[str, Mapping[str, InstanceType]],
    now: float,
) -> list[Candidate]:
    """``graceful`` without the empty candidates that hold headroom (their reason goes in ``why``)."""
    if not graceful or not _any_annotated(pools):
        return graceful
    needs = headroom.needs(pools.values(), instance_types, now)
    if not needs:
        return graceful
    removable = {c.name for c in graceful if c.empty}
    kept: dict[str, str] = {}
    for need in needs:
        members = headroom.members(nodes, need)
        staying = sum(headroom.held(n, need) for n in members if n.name not in removable)
        wanted = len(need.pods)
        if staying >= wanted:
            continue
        empties = sorted(
            ((headroom.held(n, need), n.name) for n in members if n.name in removable and n.name not in kept),
            key=lambda item: (-item[0], item[1]),
        )
        covered = staying
        for count, name in empties:
            if covered >= wanted or count == 0:
                break
            covered += count
            kept[name] = (
                f"headroom: holds {count} of the {wanted} pieces ({need.piece.format()} each) that "
                f"{need.where} keeps free; the nodes that stay hold {staying}"
            )
    if not kept:
        return graceful
    why.update(kept)
    return [c for c in graceful if c.name not in kept]


def pods(snapshot: Snapshot) -> list[Pod]:
    """The virtual pods a consolidation simulation of ``snapshot`` places with the moved pods."""
    if not _any_annotated(snapshot.node_pools):
        return []
    return headroom.virtual_pods(headroom.needs(snapshot.node_pools, snapshot.instance_types, snapshot.now))


def key(snapshot: Snapshot) -> str:
    """What a consolidation verdict also depends on: the pools whose window is open ("" : none)."""
    if not _any_annotated(snapshot.node_pools):
        return ""
    return "|headroom:" + ",".join(headroom.open_pools(snapshot.node_pools, snapshot.now))


def _spread(members: Sequence[StateNode], moved: Sequence[Pod], need: headroom.Need) -> int:
    """The pieces ``members`` hold once ``moved`` went, one by one (largest first), to the member
    with the most free room after it (kube-scheduler's default LeastAllocated score: the mean
    share of CPU and memory left free), ties by name; a pod that fits no member goes elsewhere."""
    rooms = {n.name: dict(headroom.room(n)) for n in members}
    alloc = {n.name: n.allocatable for n in members}
    for pod in sorted(moved, key=lambda p: (-p.requests.get(CPU), -p.requests.get(MEMORY), p.key)):
        wants = {**pod.requests, PODS: 1}
        best: tuple[float, str] | None = None
        for name, room in rooms.items():
            if any(room.get(r, 0) < v for r, v in wants.items() if v > 0):
                continue
            shares = [
                (room.get(r, 0) - wants.get(r, 0)) / alloc[name].get(r)
                for r in (CPU, MEMORY)
                if alloc[name].get(r)
            ]
            score = sum(shares) / len(shares) if shares else 0.0
            if best is None or score > best[0] or (score == best[0] and name < best[1]):
                best = (score, name)
        if best is not None:
            room = rooms[best[1]]
            for r, v in wants.items():
                room[r] = room.get(r, 0) - v
    return sum(headroom.count(Resources(room), alloc[name], need) for name, room in rooms.items())


def _kept(snapshot: Snapshot, chosen: Sequence[Candidate]) -> str:
    """Why deleting ``chosen`` would break an open headroom ("" : it would not): the pool's other
    nodes must still hold every piece after the candidates' pods moved onto the emptiest of them."""
    names = {c.name for c in chosen}
    pools = {c.pool.name for c in chosen}
    moved = [p for c in chosen for p in c.moved]
    for need in headroom.needs(snapshot.node_pools, snapshot.instance_types, snapshot.now):
        if need.pool not in pools or (need.zone and all(c.zone != need.zone for c in chosen)):
            continue
        members = [n for n in headroom.members(snapshot.nodes, need) if n.name not in names]
        wanted = len(need.pods)
        left = _spread(members, moved, need)
        if left < wanted:
            return (
                f"headroom: {need.where} keeps {wanted} pieces ({need.piece.format()} each) free; once the "
                f"node's pods moved onto the emptiest other nodes, those would hold {left}"
            )
    return ""


def explain(
    snapshot: Snapshot, chosen: Sequence[Candidate], verdict: tuple[Command | None, str]
) -> tuple[Command | None, str]:
    """A consolidation's verdict under an open headroom: a delete is refused when the pieces would
    not all fit once the moved pods took the emptiest nodes' room (kube-scheduler's default
    scoring, whatever the simulation placed them on); a refusal's reason is prefixed with
    ``headroom:`` when the candidates' room holds pieces the pool's other nodes cannot hold."""
    command, reason = verdict
    if not _any_annotated(snapshot.node_pools):
        return verdict
    if command is not None:
        if command.replacements:
            return verdict
        why = _kept(snapshot, chosen)
        return (None, why) if why else verdict
    if not reason:
        return verdict
    names = {c.name for c in chosen}
    pools = {c.pool.name for c in chosen}
    for need in headroom.needs(snapshot.node_pools, snapshot.instance_types, snapshot.now):
        if need.pool not in pools:
            continue
        members = headroom.members(snapshot.nodes, need)
        own = sum(headroom.held(n, need) for n in members if n.name in names)
        others = sum(headroom.held(n, need) for n in members if n.name not in names)
        if own and others < len(need.pods):
            return None, (
                f"headroom: {need.where} keeps {len(need.pods)} pieces ({need.piece.format()} each) free "
                f"and the other nodes hold {others}; {reason}"
            )
    return verdict
