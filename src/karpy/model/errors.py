"""karpy's error tree.

``KarpyError`` ⊃ ``InputError`` (bad user input: exit code 2) and ``CloudError`` ⊃
``InsufficientCapacity``, ``NodeClaimNotFound``, ``NodeClassNotReady``.
"""

from __future__ import annotations

__all__ = [
    "CloudError",
    "InputError",
    "InsufficientCapacity",
    "KarpyError",
    "NodeClaimNotFound",
    "NodeClassNotReady",
]


class KarpyError(Exception):
    """Base of every error karpy raises on purpose."""


class InputError(KarpyError):
    """Input that cannot be used (a file, an object or a field); the CLI exits 2."""


class CloudError(KarpyError):
    """A cloud provider call failed."""


class InsufficientCapacity(CloudError):
    """No capacity for the requested offerings."""


class NodeClaimNotFound(CloudError):
    """The instance behind a NodeClaim is gone."""


class NodeClassNotReady(CloudError):
    """The NodeClass cannot be used to launch yet."""
