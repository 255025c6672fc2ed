"""What nodes need to know of the cluster: name, endpoint, CA bundle, service CIDR, DNS, version.

:func:`discover` fills a :class:`ClusterInfo` from the settings first (``CLUSTER_ENDPOINT``,
``CLUSTER_CA_BUNDLE``), then from ``eks:DescribeCluster`` (endpoint, CA, service CIDR, version),
as upstream does; the Kubernetes version prefers the API server's own ``/version`` (passed in by
the operator). A failed DescribeCluster leaves the fields it would have filled empty and says so
in :attr:`ClusterInfo.problems`: an AL2023 launch then fails with NodeClassNotReady (nodeadm needs
the CIDR), never the operator. Called by the operator at start and every 5 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.providers.aws import errors, sdk
from karpy.providers.aws.config import AWSSettings

__all__ = ["ClusterInfo", "discover"]


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    endpoint: str = ""
    ca_bundle: str = ""  # base64 PEM, as EKS returns certificateAuthority.data
    service_cidr: str = ""
    dns_ip: str = ""  # the kube-dns Service's ClusterIP when known
    kubernetes_version: str = ""  # "1.31"
    ip_family: str = "ipv4"
    problems: tuple[str, ...] = ()


def _minor(version: str) -> str:
    """``v1.31.2-eks-1234`` -> ``1.31``."""
    text = version.strip().lstrip("v")
    parts = text.split(".")
    if len(parts) >= 2 and parts[0].isdigit():
        minor = "".join(ch for ch in parts[1] if ch.isdigit())
        return f"{parts[0]}.{minor}"
    return text


def discover(
    clients: sdk.Clients | None, settings: AWSSettings, *, server_version: str = "", dns_ip: str = ""
) -> ClusterInfo:
    """The cluster as nodes see it; see the module docstring for where each field comes from."""
    endpoint, ca, cidr, version = settings.cluster_endpoint, settings.cluster_ca_bundle, "", ""
    ip_family = "ipv4"
    problems: list[str] = []
    if clients is not None:
        try:
            found = errors.call(clients.eks.describe_cluster, name=settings.cluster_name)["cluster"]
        except errors.AWSError as exc:
            problems.append(f"eks:DescribeCluster {settings.cluster_name}: {exc}")
        else:
            endpoint = endpoint or str(found.get("endpoint") or "")
            ca = ca or str((found.get("certificateAuthority") or {}).get("data") or "")
            network = found.get("kubernetesNetworkConfig") or {}
            cidr = str(network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr") or "")
            ip_family = str(network.get("ipFamily") or "ipv4")
            version = str(found.get("version") or "")
    chosen = settings.kubernetes_version or server_version or version
    return ClusterInfo(
        name=settings.cluster_name,
        endpoint=endpoint,
        ca_bundle=ca,
        service_cidr=cidr,
        dns_ip=dns_ip,
        kubernetes_version=_minor(chosen) if chosen else "",
        ip_family=ip_family,
        problems=tuple(problems),
    )
