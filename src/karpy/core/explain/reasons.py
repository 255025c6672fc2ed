"""The predicate behind a scheduling message: one stable word per rule a pod can fail.

The solver says why a place rejected a pod in a sentence built where the check failed
(:class:`~karpy.core.scheduling.nodeclaim.Unfit`); :func:`reason_class` maps that sentence to
the rule, so ``karpy explain pod -o json``, the ``karpy_pods_unschedulable{reason}`` metric and
the kube-scheduler consistency counters share one vocabulary. The classes, in the order a
place checks them:

===================== ==========================================================================
``validation``        the pod selects a restricted label (Karpenter never provisions for it)
``volume``            a volume cannot be used yet: its PersistentVolumeClaim, PersistentVolume or
                      StorageClass is missing or being deleted, or the claim waits to be bound
``consolidate-after`` an existing node still inside its consolidateAfter window (consolidation)
``taint``             a taint the pod does not tolerate
``host-port``         a host port already used on the node (or by a DaemonSet on every type)
``resources``         requests larger than what is left on the node, or than every instance type
``requirements``      node selector / required node affinity against the node's or NodePool's
                      labels and requirements (also: no instance type meets them)
``volume-topology``   the pod's volumes can only be used elsewhere (a bound volume's node
                      affinity, an unbound claim's StorageClass allowedTopologies)
``offering``          no instance type has an available offering in the allowed zones and
                      capacity types
``volume-limit``      the node, or every instance type left, would attach more volumes of a CSI
                      driver than its limit (CSINode allocatable, the EBS limit of the type)
``topology-spread``   a topologySpreadConstraint leaves no domain within maxSkew
``pod-affinity``      a required pod affinity term has no domain with a matching pod
``pod-anti-affinity`` a required pod anti-affinity term rules out every domain
``topology``          topology domains conflict with the pod's own requirements
``min-values``        the NodePool's minValues cannot be met
``nodepool-limit``    the NodePool's limits leave no room
``instance-types``    no single instance type passes every check at once
``no-nodepool``       there is no NodePool to launch from
``other``             a message this table does not know (a test keeps it unused)
===================== ==========================================================================
"""

from __future__ import annotations

__all__ = ["CLASSES", "reason_class"]

# (prefix of the solver's message, class): the first match wins, so longer prefixes come first
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("label ", "validation"),
    ("volume topology", "volume-topology"),
    ("volume attach limit", "volume-limit"),
    ('volume "', "volume"),
    ("node is still inside its consolidateAfter window", "consolidate-after"),
    ("did not tolerate taint", "taint"),
    ("host port", "host-port"),
    ("not enough ", "resources"),
    ("no instance type fits requests", "resources"),
    ("no instance type met the requirements", "requirements"),
    ("no instance type is compatible with the NodePool's requirements", "requirements"),
    ("no instance type has an available offering", "offering"),
    ("no instance type meets requirements, fits and is offered at once", "instance-types"),
    ("incompatible topology requirements", "topology"),
    ("incompatible requirements", "requirements"),
    ("topology spread", "topology-spread"),
    ("pod anti-affinity", "pod-anti-affinity"),
    ("pod affinity", "pod-affinity"),
    ("minValues not met", "min-values"),
    ("NodePool couldn't meet minValues", "min-values"),
    ("would exceed NodePool limit", "nodepool-limit"),
    ("no NodePool can launch nodes", "no-nodepool"),
)

CLASSES: tuple[str, ...] = (
    "validation",
    "volume",
    "consolidate-after",
    "taint",
    "host-port",
    "resources",
    "requirements",
    "volume-topology",
    "offering",
    "volume-limit",
    "topology-spread",
    "pod-affinity",
    "pod-anti-affinity",
    "topology",
    "min-values",
    "nodepool-limit",
    "instance-types",
    "no-nodepool",
    "other",
)


def reason_class(message: str) -> str:
    """The class of one solver message (see the module doc); ``other`` when none matches.

    The summary of existing nodes ("node-a: <why>", "3 nodes did not fit, e.g. node-a: <why>")
    is classed by the node's message."""
    marker = ", e.g. "
    if marker in message and message.split(marker, 1)[0].endswith("did not fit"):
        message = message.split(marker, 1)[1].split(": ", 1)[-1]
    for prefix, cls in _PREFIXES:
        if message.startswith(prefix):
            return cls
    if ": " in message:  # "node-a: <why>", one existing node named before its message
        return reason_class(message.split(": ", 1)[1])
    return "other"
