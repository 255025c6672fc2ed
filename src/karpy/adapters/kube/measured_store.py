"""The operator's measured capacity, kept in a ConfigMap in karpy's namespace.

:class:`ConfigMapStore` is the :class:`~karpy.controllers.measured_capacity.Store` the operator
gives the measured-capacity controller (``karpy operator --measured-capacity``): the ConfigMap
:data:`NAME` in karpy's namespace (``POD_NAMESPACE``, ``karpy-system`` by default) holds the
JSON document of :func:`karpy.core.measured.to_doc` under the data key :data:`DATA_KEY`.

``load`` reads it (None when the ConfigMap does not exist or holds no document; a document that
is not JSON is logged and read as none, so the next write replaces it); ``save`` writes it with
the resourceVersion ``load`` read (the controller loads right before it saves, so a concurrent
write answers Conflict and is retried at the next save), or creates the ConfigMap. The verbs
are ``get``, ``create`` and ``update`` on configmaps in that namespace (``deploy/rbac.yaml``).
Works over any :class:`~karpy.ports.KubeAPI`: the kube client in the operator, the in-memory
API server in tests.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from karpy.model import errors
from karpy.ports import KubeAPI, RawObject

__all__ = ["DATA_KEY", "NAME", "ConfigMapStore"]

NAME = "karpy-measured-capacity"
DATA_KEY = "measured-capacity.json"

log = logging.getLogger("karpy.operator")


class ConfigMapStore:
    def __init__(self, kube: KubeAPI, namespace: str, name: str = NAME) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self._version: str | None = None  # the resourceVersion read last (None: not there)

    def load(self) -> Mapping[str, Any] | None:
        try:
            raw = self.kube.get("ConfigMap", self.name, self.namespace)
        except errors.NotFound:
            self._version = None
            return None
        self._version = str((raw.get("metadata") or {}).get("resourceVersion") or "") or None
        text = (raw.get("data") or {}).get(DATA_KEY)
        if not text:
            return None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            log.warning(
                "ConfigMap %s/%s: %s is not JSON (%s): replaced at the next write",
                self.namespace,
                self.name,
                DATA_KEY,
                exc,
            )
            return None
        return doc if isinstance(doc, dict) else None

    def _body(self, doc: Mapping[str, Any]) -> RawObject:
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/name": "karpy", "app.kubernetes.io/component": "measured-capacity"},
        }
        if self._version:
            meta["resourceVersion"] = self._version
        text = json.dumps(doc, sort_keys=True, indent=1)
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {DATA_KEY: text}}

    def save(self, doc: Mapping[str, Any]) -> None:
        if self._version is None:
            try:
                out = self.kube.create(self._body(doc))
            except errors.AlreadyExists:
                self.load()  # created meanwhile: written over at the next save, with its version
                raise errors.Conflict(
                    f"ConfigMap {self.namespace}/{self.name} was created meanwhile"
                ) from None
        else:
            out = self.kube.update(self._body(doc))
        self._version = str((out.get("metadata") or {}).get("resourceVersion") or "") or None
