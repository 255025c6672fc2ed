"""Subnet and security-group discovery from selector terms, against the moto server.

The requests each resolution sends are read with botocore's ``before-parameter-build`` hook
(the calls still go to moto): one call per tag term, every id batched into one filter.
"""

from __future__ import annotations

import copy
from typing import Any

import moto_world
import pytest

from karpy.model.nodeclass import SelectorTerm
from karpy.providers.aws import errors, network, sdk


def _record(client: Any, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        calls.append(copy.deepcopy(params))

    client.meta.events.register(
        f"before-parameter-build.{client.meta.service_model.service_name}.{operation}", hook
    )
    return calls


def test_tagged_subnets_sorted_by_free_addresses(world: moto_world.World) -> None:
    found = network.resolve_subnets(world.clients.ec2, [SelectorTerm(tags=dict(moto_world.DISCOVERY))])
    # /20 (us-west-2a) > /22 (c) > /24 (b)
    assert [s.id for s in found] == [world.subnets[z] for z in ("us-west-2a", "us-west-2c", "us-west-2b")]
    assert [s.available_ips for s in found] == sorted((s.available_ips for s in found), reverse=True)
    assert found[0].zone == "us-west-2a"
    assert all(s.zone_id.startswith("usw2-az") for s in found)
    assert found[0].status().zone_id == found[0].zone_id


def test_each_tag_term_is_one_call_and_ids_are_batched(world: moto_world.World) -> None:
    calls = _record(world.clients.ec2, "DescribeSubnets")
    a, b = world.subnets["us-west-2a"], world.subnets["us-west-2b"]
    terms = [
        SelectorTerm(tags={"Name": "private-us-west-2c", **moto_world.DISCOVERY}),
        SelectorTerm(id=b),
        SelectorTerm(id=a),
        SelectorTerm(id=a),
    ]
    found = network.resolve_subnets(world.clients.ec2, terms)
    assert {s.id for s in found} == set(world.subnets.values())
    assert [c["Filters"] for c in calls] == [
        [
            {"Name": "tag:Name", "Values": ["private-us-west-2c"]},
            {"Name": "tag:karpenter.sh/discovery", "Values": [moto_world.CLUSTER]},
        ],
        [{"Name": "subnet-id", "Values": sorted({a, b})}],
    ]


def test_tags_of_a_term_are_anded(world: moto_world.World) -> None:
    term = SelectorTerm(tags={**moto_world.DISCOVERY, "Name": "private-us-west-2b"})
    found = network.resolve_subnets(world.clients.ec2, [term])
    assert [s.id for s in found] == [world.subnets["us-west-2b"]]


def test_wildcard_value_is_a_tag_key_filter(world: moto_world.World) -> None:
    calls = _record(world.clients.ec2, "DescribeSubnets")
    found = network.resolve_subnets(world.clients.ec2, [SelectorTerm(tags={"karpenter.sh/discovery": "*"})])
    assert len(found) == 3
    assert calls[0]["Filters"] == [{"Name": "tag-key", "Values": ["karpenter.sh/discovery"]}]


def test_overlapping_terms_are_deduplicated(world: moto_world.World) -> None:
    terms = [SelectorTerm(tags=dict(moto_world.DISCOVERY)), SelectorTerm(id=world.subnets["us-west-2b"])]
    found = network.resolve_subnets(world.clients.ec2, terms)
    assert sorted(s.id for s in found) == sorted(world.subnets.values())


def test_nothing_matched_is_empty(world: moto_world.World) -> None:
    assert network.resolve_subnets(world.clients.ec2, [SelectorTerm(tags={"team": "nobody"})]) == []


def test_subnets_cannot_be_selected_by_name(world: moto_world.World) -> None:
    calls = _record(world.clients.ec2, "DescribeSubnets")
    with pytest.raises(network.SelectorError) as caught:
        network.resolve_subnets(
            world.clients.ec2, [SelectorTerm(id="subnet-1"), SelectorTerm(name="private")]
        )
    assert caught.value.field == "spec.subnetSelectorTerms[1].name"
    assert calls == []  # nothing asked before the terms are all understood


def test_an_unknown_subnet_id_matches_nothing(world: moto_world.World) -> None:
    """Ids go in a ``subnet-id`` filter (as upstream), so an unknown one selects nothing, no error."""
    assert network.resolve_subnets(world.clients.ec2, [SelectorTerm(id="subnet-0123456789abcdef0")]) == []


def test_an_unreachable_endpoint_is_an_aws_error() -> None:
    dead = sdk.connect(endpoint_url="http://127.0.0.1:9", session=moto_world.session(), max_attempts=1)
    with pytest.raises(errors.AWSError) as caught:
        network.resolve_subnets(dead.ec2, [SelectorTerm(tags=dict(moto_world.DISCOVERY))])
    assert caught.value.code == "EndpointConnectionError"
    assert caught.value.operation == "DescribeSubnets"


def test_security_groups_by_tag_id_and_name(world: moto_world.World) -> None:
    ec2 = world.clients.ec2
    by_tag = network.resolve_security_groups(ec2, [SelectorTerm(tags=dict(moto_world.DISCOVERY))])
    assert [(g.id, g.name) for g in by_tag] == [
        (world.security_group, f"eks-cluster-sg-{moto_world.CLUSTER}")
    ]
    by_name = network.resolve_security_groups(ec2, [SelectorTerm(name="nodes-extra")])
    assert [g.id for g in by_name] == [world.named_security_group]
    both = network.resolve_security_groups(
        ec2, [SelectorTerm(id=world.security_group), SelectorTerm(name="nodes-extra")]
    )
    assert [g.id for g in both] == sorted([world.security_group, world.named_security_group])


def test_security_group_filters(world: moto_world.World) -> None:
    calls = _record(world.clients.ec2, "DescribeSecurityGroups")
    terms = [
        SelectorTerm(tags={"karpenter.sh/discovery": "*"}),
        SelectorTerm(id=world.named_security_group),
        SelectorTerm(name="nodes-extra"),
        SelectorTerm(name=f"eks-cluster-sg-{moto_world.CLUSTER}"),
        SelectorTerm(name="nodes-extra", tags={"team": "a"}),  # name and tags: both must hold
    ]
    found = network.resolve_security_groups(world.clients.ec2, terms)
    assert [g.id for g in found] == sorted([world.security_group, world.named_security_group])
    assert [c["Filters"] for c in calls] == [
        [{"Name": "tag-key", "Values": ["karpenter.sh/discovery"]}],
        [{"Name": "group-name", "Values": ["nodes-extra"]}, {"Name": "tag:team", "Values": ["a"]}],
        [{"Name": "group-id", "Values": [world.named_security_group]}],
        [{"Name": "group-name", "Values": sorted(["nodes-extra", f"eks-cluster-sg-{moto_world.CLUSTER}"])}],
    ]


def test_security_groups_nothing_matched(world: moto_world.World) -> None:
    assert network.resolve_security_groups(world.clients.ec2, [SelectorTerm(name="no-such-group")]) == []
