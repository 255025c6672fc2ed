"""botocore's errors mapped to AWSError: codes, not-found, connection failures, HTML answers."""

from __future__ import annotations

import moto_world
import pytest
from botocore.stub import Stubber

from karpy.model import errors as model_errors
from karpy.providers.aws import errors, sdk


def test_client_errors_carry_operation_code_and_kind(aws: sdk.Clients) -> None:
    with pytest.raises(errors.AWSError) as caught:
        errors.call(aws.ec2.describe_instances, InstanceIds=["i-0000000000000dead"])
    err = caught.value
    assert isinstance(err, model_errors.CloudError)
    assert (err.operation, err.code) == ("DescribeInstances", "InvalidInstanceID.NotFound")
    assert err.not_found and not err.throttled


def test_pages_and_unimplemented_calls(aws: sdk.Clients) -> None:
    assert errors.pages(aws.ec2, "describe_subnets", "Subnets") != []  # moto's default VPC has subnets
    with pytest.raises(errors.AWSError) as caught:  # moto: NotImplemented, an HTML 500
        errors.pages(aws.ec2, "describe_capacity_reservations", "CapacityReservations")
    assert caught.value.not_implemented or caught.value.code == "500"
    assert "<" not in str(caught.value)  # no HTML in the message


def test_throttling_and_unauthorized_codes(aws: sdk.Clients) -> None:
    with Stubber(aws.ec2) as stub:  # these errors: moto never answers with them
        stub.add_client_error("describe_subnets", "RequestLimitExceeded", "slow down")
        stub.add_client_error("describe_subnets", "UnauthorizedOperation", "no")
        with pytest.raises(errors.AWSError) as throttled:
            errors.call(aws.ec2.describe_subnets)
        with pytest.raises(errors.AWSError) as denied:
            errors.call(aws.ec2.describe_subnets)
    assert throttled.value.throttled and denied.value.unauthorized


def test_an_unreachable_endpoint_is_an_aws_error_not_a_crash() -> None:
    clients = sdk.connect(endpoint_url="http://127.0.0.1:9", session=moto_world.session(), max_attempts=1)
    with pytest.raises(errors.AWSError) as caught:
        errors.call(clients.ec2.describe_subnets)
    assert caught.value.code == "EndpointConnectionError"


def test_no_region_is_refused_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(errors.AWSError, match="AWS_REGION"):
        sdk.connect(session=boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b"))
    assert (
        sdk.pricing_region("eu-west-1") == "eu-central-1" and sdk.pricing_region("ap-south-2") == "ap-south-1"
    )
    assert sdk.pricing_region("us-west-2") == "us-east-1"
