"""The AWS provider's settings, as Karpenter users know them (flag and environment names).

:class:`AWSSettings` is filled by ``karpy operator --provider aws`` from its flags, each of which
also reads the environment variable upstream's Helm chart sets (:data:`ENV`). Region and
credentials are never settings: boto3's standard chain finds them (environment, IRSA web
identity, EKS Pod Identity, instance metadata) and karpy neither reads nor writes a file for
them (:mod:`karpy.providers.aws.sdk`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENV", "AWSSettings"]

# flag attribute -> environment variable (upstream's names)
ENV: dict[str, str] = {
    "cluster_name": "CLUSTER_NAME",
    "cluster_endpoint": "CLUSTER_ENDPOINT",
    "cluster_ca_bundle": "CLUSTER_CA_BUNDLE",
    "interruption_queue": "INTERRUPTION_QUEUE",
    "isolated_vpc": "ISOLATED_VPC",
    "reserved_enis": "RESERVED_ENIS",
    "vm_memory_overhead_percent": "VM_MEMORY_OVERHEAD_PERCENT",
}


@dataclass(frozen=True, slots=True)
class AWSSettings:
    cluster_name: str
    cluster_endpoint: str = ""  # "" = eks:DescribeCluster
    cluster_ca_bundle: str = ""  # base64 PEM; "" = eks:DescribeCluster
    interruption_queue: str = ""  # SQS queue name; "" = interruption handling off
    isolated_vpc: bool = False  # no Pricing API (no internet path to it): the shipped prices stay
    reserved_enis: int = 0
    vm_memory_overhead_percent: float = 0.075
    kubernetes_version: str = ""  # "" = the API server's /version, else eks:DescribeCluster
