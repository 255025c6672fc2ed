"""Write the apps/v1 object of a simulated workload (a Deployment, a StatefulSet) to the API server.

The first write creates it with a uid derived from its kind, namespace and name (the same in every
run); if it exists already, that write patches it instead. Later writes patch it; one deleted in
the meantime is not written again. Used by the workload stand-ins' publishers
(:mod:`karpy.sim.deployment_status`, :mod:`karpy.sim.statefulsets`).
"""

from __future__ import annotations

import contextlib
import uuid

from karpy.model import errors
from karpy.ports import KubeAPI, RawObject

__all__ = ["write"]


def write(kube: KubeAPI, kind: str, namespace: str, name: str, body: RawObject, *, first: bool) -> None:
    """Create (``first``) or patch the ``kind`` object ``namespace/name`` with ``body``."""
    if first:
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"karpy-sim:{kind}/{namespace}/{name}"))
        meta = {"name": name, "namespace": namespace, "uid": uid}
        with contextlib.suppress(errors.AlreadyExists):
            kube.create({"apiVersion": "apps/v1", "kind": kind, "metadata": meta, **body})
            return
    with contextlib.suppress(errors.NotFound):
        kube.patch(kind, name, body, namespace)
