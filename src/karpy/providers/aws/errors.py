"""botocore's errors, mapped at the edge into :class:`AWSError` (a :class:`~karpy.model.errors.CloudError`).

Every AWS call of the provider goes through :func:`call` (or :func:`pages` for paginated
reads), so nothing above this module sees a botocore exception: a ``ClientError`` becomes an
:class:`AWSError` carrying the operation and the AWS error code, a connection or credentials
failure one with a code of karpy's (``EndpointConnectionError``, ``NoCredentials``...). The code
sets name what the provider does with an error (httpx's ``map_exceptions`` pattern; Karpenter's
``pkg/errors``): :data:`UNAVAILABLE_OFFERING_CODES` mark an offering unavailable for a while,
:data:`NOT_FOUND_CODES` mean the thing is gone. Imported by every module of the AWS provider
that calls AWS; only this module and :mod:`karpy.providers.aws.sdk` import botocore.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from botocore import exceptions as botocore_exceptions
from botocore import parsers as botocore_parsers

from karpy.model import errors

__all__ = [
    "NOT_FOUND_CODES",
    "THROTTLING_CODES",
    "UNAVAILABLE_OFFERING_CODES",
    "AWSError",
    "call",
    "pages",
]

T = TypeVar("T")

# CreateFleet error codes that mean "no capacity for this offering now" (upstream's
# unfulfillableCapacityErrorCodes): the offering goes to the unavailable-offerings cache.
UNAVAILABLE_OFFERING_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
NOT_FOUND_CODES = frozenset(
    {
        "InvalidInstanceID.NotFound",
        "InvalidInstanceID.Malformed",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.NotFoundException",
        "InvalidAMIID.NotFound",
        "InvalidSubnetID.NotFound",
        "InvalidGroup.NotFound",
        "NoSuchEntity",
        "ParameterNotFound",
        "ResourceNotFoundException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "InvalidCapacityReservationId.NotFound",
    }
)
THROTTLING_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException"}
)
_UNAUTHORIZED_CODES = frozenset(
    {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure"}
)


class AWSError(errors.CloudError):
    """An AWS call failed: ``operation`` (e.g. ``CreateFleet``), the AWS ``code`` and its message."""

    def __init__(self, operation: str, code: str, message: str) -> None:
        super().__init__(f"{operation}: {code}: {message}" if message else f"{operation}: {code}")
        self.operation = operation
        self.code = code
        self.aws_message = message

    @property
    def not_found(self) -> bool:
        return self.code in NOT_FOUND_CODES or self.code.endswith(".NotFound")

    @property
    def throttled(self) -> bool:
        return self.code in THROTTLING_CODES

    @property
    def unauthorized(self) -> bool:
        return self.code in _UNAUTHORIZED_CODES

    @property
    def not_implemented(self) -> bool:
        """The endpoint does not implement the call (a stand-in such as moto, or an old region)."""
        return self.code in ("NotImplemented", "InvalidAction", "NotImplementedError")


def _operation(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", "") or "call"
    return "".join(part.capitalize() for part in name.split("_"))


_CAUGHT = (
    botocore_exceptions.ClientError,
    botocore_exceptions.BotoCoreError,
    botocore_parsers.ResponseParserError,
)


def _mapped(operation: str, exc: Exception) -> AWSError:
    if isinstance(exc, botocore_exceptions.ClientError):
        err = exc.response.get("Error") or {}
        code = str(err.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
        message = str(err.get("Message") or "")
        if message.lstrip().startswith("<"):  # an HTML page (a proxy, a stand-in), not AWS's answer
            message = "the endpoint answered an HTML page, not an AWS error"
        return AWSError(operation, code or "Unknown", message)
    if isinstance(exc, botocore_exceptions.NoCredentialsError | botocore_exceptions.PartialCredentialsError):
        return AWSError(operation, "NoCredentials", str(exc))
    if isinstance(exc, botocore_exceptions.NoRegionError):
        return AWSError(operation, "NoRegion", str(exc))
    if isinstance(exc, botocore_exceptions.ParamValidationError):
        return AWSError(operation, "ParamValidation", str(exc))
    if isinstance(exc, botocore_exceptions.EndpointConnectionError | botocore_exceptions.ConnectionError):
        return AWSError(operation, "EndpointConnectionError", str(exc))
    if isinstance(exc, botocore_parsers.ResponseParserError):  # an HTML 500, e.g. a stand-in's
        return AWSError(operation, "NotImplemented", str(exc).splitlines()[0])
    return AWSError(operation, type(exc).__name__, str(exc))


def call(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """``fn(**kwargs)`` (a boto3 client method), botocore's errors mapped to :class:`AWSError`."""
    try:
        return fn(**kwargs)
    except _CAUGHT as exc:
        raise _mapped(_operation(fn), exc) from None


def pages(client: Any, operation: str, key: str, /, **kwargs: Any) -> list[dict[str, Any]]:
    """Every item under ``key`` of every page of ``operation`` (e.g. ``describe_subnets``)."""
    items: list[dict[str, Any]] = []
    name = "".join(part.capitalize() for part in operation.split("_"))
    try:
        if client.can_paginate(operation):
            for page in client.get_paginator(operation).paginate(**kwargs):
                items.extend(page.get(key) or [])
        else:
            items.extend(getattr(client, operation)(**kwargs).get(key) or [])
    except _CAUGHT as exc:
        raise _mapped(name, exc) from None
    return items
