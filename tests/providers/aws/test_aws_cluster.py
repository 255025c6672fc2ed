"""Cluster discovery: settings first, then eks:DescribeCluster; a failed call is a problem, not a crash."""

from __future__ import annotations

import moto_world

from karpy.providers.aws import cluster, sdk
from karpy.providers.aws.config import AWSSettings


def test_describe_cluster_fills_what_the_settings_leave_empty(world: moto_world.World) -> None:
    found = cluster.discover(
        world.clients, AWSSettings(cluster_name=moto_world.CLUSTER), server_version="v1.32.1-eks-4"
    )
    assert found.endpoint == world.endpoint and found.ca_bundle == world.ca
    assert found.service_cidr == "172.20.0.0/16"
    assert found.kubernetes_version == "1.32"  # the API server's own version wins over EKS's 1.31
    assert found.problems == ()
    given = AWSSettings(
        cluster_name=moto_world.CLUSTER, cluster_endpoint="https://k8s.example", cluster_ca_bundle="Q0E="
    )
    mine = cluster.discover(world.clients, given)
    assert (mine.endpoint, mine.ca_bundle, mine.kubernetes_version) == ("https://k8s.example", "Q0E=", "1.31")


def test_an_unknown_cluster_is_reported_and_the_settings_kept(aws: sdk.Clients) -> None:
    settings = AWSSettings(
        cluster_name="nope", cluster_endpoint="https://k8s.example", kubernetes_version="1.30"
    )
    found = cluster.discover(aws, settings)
    assert found.endpoint == "https://k8s.example" and found.service_cidr == ""
    assert found.kubernetes_version == "1.30"
    assert len(found.problems) == 1 and "DescribeCluster nope" in found.problems[0]
