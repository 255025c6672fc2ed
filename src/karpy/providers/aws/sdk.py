"""The boto3 clients of the AWS provider, from boto3's standard credential and region chain.

:func:`connect` builds one :class:`Clients` (EC2, SSM, IAM, SQS, Pricing, EKS) from a
``boto3.session.Session``: region and credentials come only from boto3's chain (environment,
``AWS_ENDPOINT_URL*``, IRSA web identity, EKS Pod Identity, instance metadata). karpy never
passes keys, never reads a credentials file itself and never writes one. Retries use botocore's
``standard`` mode; the user agent names karpy. The Pricing API lives in a few regions only: the
client goes to the one upstream picks for the cluster's region (:func:`pricing_region`).

Built by the operator (``--provider aws``) and by tests against a moto server (``endpoint_url``);
this module and :mod:`karpy.providers.aws.errors` are the only ones importing boto3/botocore.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import boto3
from botocore import config as botocore_config

from karpy.providers.aws import errors

__all__ = ["Clients", "connect", "pricing_region"]

USER_AGENT = "karpy"


@dataclass(frozen=True)
class Clients:
    """One boto3 client per AWS service the provider calls (typed loosely: botocore builds them)."""

    region: str
    ec2: Any
    ssm: Any
    iam: Any
    sqs: Any
    pricing: Any
    eks: Any


def pricing_region(region: str) -> str:
    """The region of the Pricing API endpoint serving ``region`` (upstream's choice)."""
    if region.startswith("ap-"):
        return "ap-south-1"
    if region.startswith("eu-"):
        return "eu-central-1"
    if region.startswith("cn-"):
        return "cn-northwest-1"
    return "us-east-1"


def connect(
    *, region: str | None = None, endpoint_url: str | None = None, session: Any = None, max_attempts: int = 3
) -> Clients:
    """Clients for ``region`` (default: boto3's chain). ``endpoint_url`` points every client at one
    endpoint (a moto server in tests); in production leave it None (``AWS_ENDPOINT_URL`` works too)."""
    boto = session if session is not None else boto3.session.Session()
    # botocore reads AWS_DEFAULT_REGION; AWS_REGION is what EKS (IRSA, Pod Identity) and the other
    # SDKs set, so it is honoured too
    name = region or boto.region_name or os.environ.get("AWS_REGION", "")
    if not name:
        raise errors.AWSError(
            "Connect", "NoRegion", "no AWS region: set AWS_REGION (IRSA and Pod Identity set it for you)"
        )
    cfg = botocore_config.Config(
        user_agent_extra=USER_AGENT,
        retries={"mode": "standard", "max_attempts": max_attempts},
        connect_timeout=10,
        read_timeout=30,
    )

    def client(service: str, service_region: str | None = None) -> Any:
        return boto.client(service, region_name=service_region or name, endpoint_url=endpoint_url, config=cfg)

    return Clients(
        region=name,
        ec2=client("ec2"),
        ssm=client("ssm"),
        iam=client("iam"),
        sqs=client("sqs"),
        pricing=client("pricing", pricing_region(name)),
        eks=client("eks"),
    )
