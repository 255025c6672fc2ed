"""``karpy snapshot``'s reading: list what karpy reads from a live cluster and write it as YAML.

:func:`take` builds a :class:`~karpy.adapters.kube.client.KubeClient` from a kubeconfig (and
context), checks the API server answers (``GET /version``), then lists every kind of
:data:`KINDS` in all namespaces (:func:`read`). The objects are kept as the API server returns
them (``kind`` and ``apiVersion`` filled in, as a list's items lack them) with
``metadata.managedFields`` dropped. A kind whose resource is not served (HTTP 404: a cluster
without Karpenter's CRDs) is left out and named in :attr:`Snapshot.skipped`; any other failure
raises. Secrets are never read. :func:`write` puts one multi-document YAML file per kind
(``<plural>.yaml``, e.g. ``nodepools.yaml``) into a folder that ``karpy plan -f`` and
``karpy disrupt -f`` read. Called by :mod:`karpy.cli.snapshot_cmd`.

Errors: :class:`Unreachable` (no answer from the API server, or its ``/version`` failing with
5xx) names the server; a kubeconfig that cannot be loaded (missing file, unknown context)
raises :class:`karpy.model.errors.InputError`; other API failures are the
:mod:`karpy.model.errors` errors the client maps them to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import config as k8s_config

from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube.client import KubeClient
from karpy.adapters.kube.verbs import RESOURCES
from karpy.model import errors
from karpy.ports import RawObject

__all__ = [
    "KINDS",
    "Snapshot",
    "Unreachable",
    "connect",
    "events_about",
    "file_name",
    "read",
    "strip",
    "take",
    "write",
]

# What karpy reads (the operator's watched kinds, less Leases, Events and Services), plus the
# storage and workload kinds a later ``karpy explain`` needs. Never Secrets.
KINDS: tuple[str, ...] = (
    "NodePool",
    "NodeClaim",
    "EC2NodeClass",
    "KWOKNodeClass",
    "Node",
    "Pod",
    "DaemonSet",
    "PodDisruptionBudget",
    "Namespace",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
)


class Unreachable(kerrors.Unavailable):
    """The API server did not answer (refused, timed out, TLS) or answered ``/version`` with 5xx."""


@dataclass
class Snapshot:
    """The objects read, per kind (in :data:`KINDS` order), and the kinds not served, with why."""

    server: str
    version: str = ""
    objects: dict[str, list[RawObject]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # kind -> the API server's 404 message


def strip(obj: RawObject) -> RawObject:
    """``obj`` without ``metadata.managedFields`` (a shallow copy; ``obj`` is left as it was)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def file_name(kind: str) -> str:
    """The file a kind is written to: its plural, ``.yaml`` (``nodepools.yaml``)."""
    return f"{RESOURCES[kind].plural}.yaml"


def read(client: KubeClient, kinds: Sequence[str] = KINDS, *, server: str = "") -> Snapshot:
    """List ``kinds`` in all namespaces; a kind answering 404 goes to ``skipped``."""
    if "Secret" in kinds:
        raise errors.InputError("a snapshot never reads Secrets")
    snap = Snapshot(server=server)
    try:
        snap.version = client.server_version()
    except errors.NotFound:
        pass  # an API server without /version still lists
    except kerrors.Unavailable as exc:
        raise Unreachable(f"cannot reach the API server {server or '(unknown)'}: {exc}") from None
    for kind in kinds:
        try:
            items = client.list(kind)
        except errors.NotFound as exc:
            snap.skipped[kind] = str(exc)
            continue
        snap.objects[kind] = [strip(item) for item in items]
    return snap


def connect(kubeconfig: str | None, context: str | None, host: str | None, timeout: float) -> KubeClient:
    """A started client (the caller closes it); a kubeconfig that cannot be loaded is InputError."""
    client = KubeClient(
        kubeconfig=kubeconfig, context=context, host=host, timeout=timeout, identity="snapshot"
    )
    try:
        client.start()
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        client.close()
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "the kubeconfig"
        shown = f" (context {context!r})" if context else ""
        raise errors.InputError(f"cannot load {where}{shown}: {exc}") from None
    return client


def take(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    host: str | None = None,
    timeout: float = 30.0,
    kinds: Sequence[str] = KINDS,
) -> Snapshot:
    """Connect (a kubeconfig and context, or ``host``), :func:`read`, and close the client."""
    client = connect(kubeconfig, context, host, timeout)
    try:
        return read(client, kinds, server=client.server)
    finally:
        client.close()


def events_about(
    kind: str,
    namespace: str,
    name: str,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    host: str | None = None,
    timeout: float = 30.0,
) -> list[RawObject]:
    """The ``events.k8s.io/v1`` Events in ``namespace`` regarding ``kind``/``name``, oldest
    first (by ``eventTime``, else ``deprecatedLastTimestamp``, else creation); [] where Events are
    not served. Errors as :func:`take`."""
    client = connect(kubeconfig, context, host, timeout)
    try:
        try:
            items = client.list("Event", namespace)
        except errors.NotFound:
            return []
        except kerrors.Unavailable as exc:
            server = client.server or "(unknown)"
            raise Unreachable(f"cannot reach the API server {server}: {exc}") from None
    finally:
        client.close()
    about = [
        e
        for e in items
        if (e.get("regarding") or {}).get("kind") == kind and (e.get("regarding") or {}).get("name") == name
    ]
    return sorted(about, key=_event_time)


def _event_time(event: RawObject) -> str:
    meta = event.get("metadata") or {}
    return str(
        event.get("eventTime") or event.get("deprecatedLastTimestamp") or meta.get("creationTimestamp") or ""
    )


class _Dumper(yaml.SafeDumper):
    """Block-style YAML; multi-line strings (scripts, certificates) as ``|`` blocks."""


def _text(dumper: yaml.SafeDumper, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _meta(obj: RawObject) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def write(snap: Snapshot, directory: Path) -> list[Path]:
    """One multi-document YAML file per kind read (an empty file for a kind with no objects),
    objects sorted by namespace and name; the paths written, in :data:`KINDS` order."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for kind, items in snap.objects.items():
        ordered = sorted(
            items,
            key=lambda o: (str(_meta(o).get("namespace") or ""), str(_meta(o).get("name") or "")),
        )
        path = directory / file_name(kind)
        text = yaml.dump_all(ordered, Dumper=_Dumper, sort_keys=False, explicit_start=True) if ordered else ""
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
