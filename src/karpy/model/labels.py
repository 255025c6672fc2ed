"""Well-known, normalized and restricted label keys (Karpenter's ``apis/v1/labels.go``).

Providers add their own well-known keys (the AWS catalog its ``karpenter.k8s.aws/*``
labels, a conformance catalog the custom labels its types carry); those travel in the
catalog, not here.
"""

from __future__ import annotations

__all__ = [
    "ARCH",
    "CAPACITY_TYPE",
    "CORE_WELL_KNOWN",
    "DO_NOT_DISRUPT",
    "HOSTNAME",
    "INITIALIZED",
    "INSTANCE_TYPE",
    "NODEPOOL",
    "NORMALIZED",
    "OS",
    "REGION",
    "REGISTERED",
    "TERMINATION_FINALIZER",
    "WINDOWS_BUILD",
    "ZONE",
    "is_restricted_for_pods",
    "is_restricted_node_label",
    "normalize",
]

NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
HOSTNAME = "kubernetes.io/hostname"
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
TERMINATION_FINALIZER = "karpenter.sh/termination"  # the finalizer on karpy's NodeClaims and Nodes

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"

# what the nodes of an EKS managed node group carry (read by the Cluster Autoscaler model, the
# recorder and shadow mode): the group's name, and ON_DEMAND | SPOT | CAPACITY_BLOCK
EKS_NODE_GROUP = "eks.amazonaws.com/nodegroup"
EKS_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"

CORE_WELL_KNOWN: frozenset[str] = frozenset(
    {NODEPOOL, CAPACITY_TYPE, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, WINDOWS_BUILD}
)

NORMALIZED: dict[str, str] = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}

_RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh")
_DOMAIN_EXCEPTIONS = ("kops.k8s.io", "node-restriction.kubernetes.io", "node.kubernetes.io")


def normalize(key: str) -> str:
    """Map deprecated beta keys to their stable names."""
    return NORMALIZED.get(key, key)


def _domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted_node_label(key: str, well_known: frozenset[str] = CORE_WELL_KNOWN) -> bool:
    """Labels Karpenter never writes from requirements (``IsRestrictedNodeLabel``)."""
    if key in well_known:
        return False
    if key == HOSTNAME:
        return True
    domain = _domain(key)
    if any(domain == d or domain.endswith("." + d) for d in _DOMAIN_EXCEPTIONS):
        return False
    return any(domain == d or domain.endswith("." + d) for d in _RESTRICTED_DOMAINS)


def is_restricted_for_pods(key: str, well_known: frozenset[str] = CORE_WELL_KNOWN) -> bool:
    """Keys a pod may not select on for Karpenter to provision for it.

    ``kubernetes.io/hostname`` and the ``karpenter.sh`` domain, except its well-known keys.
    """
    if key == HOSTNAME:
        return True
    if key in well_known:
        return False
    domain = _domain(key)
    return domain == "karpenter.sh" or domain.endswith(".karpenter.sh")
