"""Capacity reservation discovery: request shapes and parsing with a Stubber, the gap over moto.

moto does not implement ``ec2.DescribeCapacityReservations`` (an HTML 500 in server mode), so
the request shapes and the parsing stub that call on ``clients.ec2``; one test runs against
the moto server to pin how that gap surfaces (``AWSError`` code ``NotImplemented``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import moto_world
import pytest
from botocore.stub import Stubber

from karpy.model.nodeclass import CapacityReservationSelectorTerm
from karpy.providers.aws import capacityreservations, errors, network, sdk

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
ACTIVE = {"Name": "state", "Values": ["active"]}


def _reservation(cr_id: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "CapacityReservationId": cr_id,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-west-2a",
        "OwnerId": moto_world.ACCOUNT,
        "InstanceMatchCriteria": "targeted",
        "State": "active",
    }
    out.update(fields)
    return out


def test_no_terms_no_call(aws: sdk.Clients) -> None:
    """Stubs ``ec2.DescribeCapacityReservations`` with no answer: any call would fail the test."""
    stub = Stubber(aws.ec2)
    stub.activate()
    assert capacityreservations.resolve_capacity_reservations(aws.ec2, [], now=NOW) == []
    stub.assert_no_pending_responses()


def test_request_shapes(aws: sdk.Clients) -> None:
    """Stubs ``ec2.DescribeCapacityReservations``: one call per tag term, ids batched last."""
    stub = Stubber(aws.ec2)
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [_reservation("cr-2"), _reservation("cr-1")]},
        expected_params={
            "Filters": [
                ACTIVE,
                {"Name": "owner-id", "Values": [moto_world.ACCOUNT]},
                {"Name": "instance-match-criteria", "Values": ["targeted"]},
                {"Name": "tag-key", "Values": ["ml"]},
                {"Name": "tag:team", "Values": ["research"]},
            ]
        },
    )
    stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [_reservation("cr-1"), _reservation("cr-0", InstanceMatchCriteria="open")]},
        expected_params={"CapacityReservationIds": ["cr-0", "cr-1"], "Filters": [ACTIVE]},
    )
    stub.activate()
    terms = [
        CapacityReservationSelectorTerm(id="cr-1"),
        CapacityReservationSelectorTerm(
            tags={"team": "research", "ml": "*"},
            owner_id=moto_world.ACCOUNT,
            instance_match_criteria="targeted",
        ),
        CapacityReservationSelectorTerm(id="cr-0"),
    ]
    found = capacityreservations.resolve_capacity_reservations(aws.ec2, terms, now=NOW)
    stub.assert_no_pending_responses()
    assert [c.id for c in found] == ["cr-0", "cr-1", "cr-2"]  # deduplicated, by id
    assert found[0].instance_match_criteria == "open"
    assert found[1].instance_type == "p5.48xlarge"
    assert found[1].availability_zone == "us-west-2a"
    assert found[1].owner_id == moto_world.ACCOUNT
    assert found[1].reservation_type == "default"
    assert found[1].state == "active"


def test_capacity_block_near_its_end_is_expiring(aws: sdk.Clients) -> None:
    """Stubs ``ec2.DescribeCapacityReservations`` (moto does not implement it)."""

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, UTC)

    stub = Stubber(aws.ec2)
    stub.add_response(
        "describe_capacity_reservations",
        {
            "CapacityReservations": [
                _reservation("cr-a", ReservationType="capacity-block", EndDate=at(NOW + 39 * 60)),
                _reservation("cr-b", ReservationType="capacity-block", EndDate=at(NOW + 41 * 60)),
                _reservation("cr-c", ReservationType="default", EndDate=at(NOW + 60)),
                _reservation("cr-d", InstanceMatchCriteria="some-future-kind"),
            ]
        },
    )
    stub.activate()
    found = capacityreservations.resolve_capacity_reservations(
        aws.ec2, [CapacityReservationSelectorTerm(tags={"team": "ml"})], now=NOW
    )
    assert [(c.id, c.reservation_type, c.state) for c in found] == [
        ("cr-a", "capacity-block", "expiring"),
        ("cr-b", "capacity-block", "active"),
        ("cr-c", "default", "active"),  # only capacity blocks expire this way
    ]
    assert found[0].end_time == NOW + 39 * 60


def test_a_term_without_tags_or_id_is_refused(aws: sdk.Clients) -> None:
    with pytest.raises(network.SelectorError) as caught:
        capacityreservations.resolve_capacity_reservations(
            aws.ec2, [CapacityReservationSelectorTerm(owner_id=moto_world.ACCOUNT)], now=NOW
        )
    assert caught.value.field == "spec.capacityReservationSelectorTerms[0]"


def test_moto_does_not_implement_the_call(world: moto_world.World) -> None:
    with pytest.raises(errors.AWSError) as caught:
        capacityreservations.resolve_capacity_reservations(
            world.clients.ec2, [CapacityReservationSelectorTerm(id="cr-0123456789abcdef0")], now=NOW
        )
    assert caught.value.not_implemented
    assert caught.value.operation == "DescribeCapacityReservations"
    assert "does not implement DescribeCapacityReservations" in str(caught.value)
