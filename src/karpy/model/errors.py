"""karpy's error tree.

``KarpyError`` ⊃ ``InputError`` (bad user input: exit code 2),
``CloudError`` ⊃ ``InsufficientCapacity``, ``NodeClaimNotFound``, ``NodeClassNotReady``,
and ``KubeError`` ⊃ ``NotFound``, ``Conflict``, ``AlreadyExists``, ``TooManyRequests``,
``Invalid``. Adapters translate foreign errors (HTTP statuses, botocore codes) into these;
nothing above the adapters sees a foreign exception.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExists",
    "CloudError",
    "Conflict",
    "InputError",
    "InsufficientCapacity",
    "Invalid",
    "KarpyError",
    "KubeError",
    "NodeClaimNotFound",
    "NodeClassNotReady",
    "NotFound",
    "TooManyRequests",
]


class KarpyError(Exception):
    """Base of every error karpy raises on purpose."""


class InputError(KarpyError):
    """Input that cannot be used (a file, an object or a field); the CLI exits 2."""


class CloudError(KarpyError):
    """A cloud provider call failed."""


class InsufficientCapacity(CloudError):
    """No capacity for the requested offerings (they are marked unavailable for a while)."""

    def __init__(self, message: str, offerings: tuple[tuple[str, str, str], ...] = ()) -> None:
        super().__init__(message)
        self.offerings = offerings  # (instance type, zone, capacity type)


class NodeClaimNotFound(CloudError):
    """The instance behind a NodeClaim is gone."""


class NodeClassNotReady(CloudError):
    """The NodeClass cannot be used to launch yet."""


class KubeError(KarpyError):
    """A Kubernetes API call failed; ``status`` is the HTTP status it maps to."""

    status = 500


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    """The object changed since it was read (resourceVersion mismatch)."""

    status = 409


class AlreadyExists(KubeError):
    status = 409


class TooManyRequests(KubeError):
    """The request is refused for now (e.g. an eviction a PodDisruptionBudget forbids)."""

    status = 429


class Invalid(KubeError):
    status = 422
