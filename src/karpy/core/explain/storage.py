"""Detail and suggestion for the volume rejections: ``volume``, ``volume-topology``, ``volume-limit``.

Read from the solver's own sentences (:mod:`karpy.core.scheduling.volumes` writes them):
``volume "data": PersistentVolumeClaim shop/data-0 not found``, ``volume topology
(PersistentVolume pv-1) conflicts: key topology.kubernetes.io/zone, ...`` and ``volume attach
limit: 26 volumes of ebs.csi.aws.com would be attached; node ip-10-0-1-21 allows 25``. Used by
:mod:`karpy.core.explain.suggest` for NodePools, existing nodes and pods refused outright.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["pod_problem", "volume_limit", "volume_topology"]

Detail = Mapping[str, object]

_LIMIT = re.compile(r"volume attach limit: (\d+) volumes of (\S+) would be attached; (.+) allows (\d+)")
_CONFLICT = re.compile(r"key ([^,]+), (.*) not in (.*)$")


def volume_topology(message: str, where: str) -> tuple[Detail, str]:
    """A place whose labels or requirements rule out where the pod's volumes can be used."""
    sources = message[message.find("(") + 1 : message.find(")")] if "(" in message else ""
    body = message.split(": ", 1)[1] if ": " in message else ""
    found = _CONFLICT.match(body.split("; ")[0])
    if found is None:
        return {"volumes": sources}, ""
    key, volume_side, place_side = found.groups()
    detail = {"volumes": sources, "key": key, "volume": volume_side, "place": place_side}
    return detail, (
        f"the pod's volumes ({sources}) need {volume_side}; {where} has {place_side}: let it "
        f"reach the volumes' {key}, or move the pod's storage"
    )


def volume_limit(message: str, where: str) -> tuple[Detail, str]:
    """A place that would attach more volumes of a CSI driver than it can."""
    found = _LIMIT.match(message)
    if found is None:
        return {}, ""
    count, driver, limiter, limit = found.groups()
    detail = {"driver": driver, "volumes": int(count), "limit": int(limit)}
    limited = "its limit" if limiter == where else f"the limit of {limiter}"
    return detail, (
        f"{where} would attach {count} volumes of {driver} with this pod, over {limited} of {limit}: "
        "the pod needs another node (fewer volumes per pod, or pods spread over more nodes)"
    )


_FIXES = (
    ("Immediately", "use a WaitForFirstConsumer StorageClass, or let the claim be bound first"),
    ("names no StorageClass", "give the claim a storageClassName (or mark a StorageClass as the default)"),
    ("not bound yet", "wait until the PersistentVolume controller binds the claim"),
    ("is being deleted", "the pod waits for a claim that is not being deleted"),
    ("is Lost", "recreate the claim: its PersistentVolume is gone"),
)


def pod_problem(message: str) -> tuple[Detail, str]:
    """A pod whose volumes cannot be used yet (refused before any place is tried)."""
    found = re.match(r'volume "([^"]+)": (.*)$', message)
    if found is None:
        return {}, ""
    volume, why = found.groups()
    detail = {"volume": volume, "problem": why}
    missing = re.match(
        r"(PersistentVolumeClaim|PersistentVolume|StorageClass) (\S+)(?: of .*)? not found", why
    )
    if missing is not None:
        return detail, f"create {missing.group(1)} {missing.group(2)}: the pod's volume {volume} needs it"
    for marker, fix in _FIXES:
        if marker in why:
            return detail, fix
    return detail, ""
