"""A ``karpy snapshot`` folder read as the starting state of a simulation.

:func:`read` takes the folder ``karpy snapshot -o DIR`` writes (one multi-document YAML file per
kind; ``kind: List`` documents are unpacked) and returns an :class:`InitialState`: every object
of a kind the simulator takes, validated with the same :mod:`karpy.api` schemas as ``karpy
plan`` and kept both raw (what the in-memory API server is given) and typed (what the runner
decides with), each with the file and document it came from. The kinds taken are NodePools,
NodeClaims, EC2NodeClasses, KWOKNodeClasses, Nodes, Pods, DaemonSets, PodDisruptionBudgets and
Namespaces, plus Deployments, ReplicaSets and StatefulSets, which only tell which controller
owns a pod. Objects of other kinds (PersistentVolumeClaims, PersistentVolumes, StorageClasses,
anything else) are left out with one note per file and kind. A file that does not parse, or an
object that fails its schema, raises :class:`~karpy.model.errors.InputError` whose ``problems``
name file, document, object and field. :mod:`karpy.sim.scenario` calls it for
``initialState.snapshot`` and ``--from-snapshot``; :mod:`karpy.sim.adopt` puts it into a run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpy.api import documents as documents_mod
from karpy.api import load as api_load
from karpy.model import errors

__all__ = ["Entry", "InitialState", "SnapshotError", "clean", "read"]

# the kinds whose objects a run takes, and the attribute of InitialState each goes to
_TAKEN = {
    "NodePool": "node_pools",
    "NodeClaim": "node_claims",
    "EC2NodeClass": "node_classes",
    "KWOKNodeClass": "node_classes",
    "Node": "nodes",
    "Pod": "pods",
    "DaemonSet": "daemon_sets",
    "PodDisruptionBudget": "pdbs",
    "Namespace": "namespaces",
    "Deployment": "deployments",
    "ReplicaSet": "replica_sets",
}
_OWNERS_ONLY = {"StatefulSet": "stateful_sets"}  # read for pod ownership only (no schema karpy models)
_VOLUMES = frozenset({"PersistentVolumeClaim", "PersistentVolume", "StorageClass"})
# metadata a run does not carry over: the API server of the run sets its own, and times of the
# live cluster would make ages (expireAfter, consolidateAfter) relative to another clock
_DROPPED_META = (
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)


class SnapshotError(errors.InputError):
    """A snapshot folder that cannot be read; ``problems`` has one located line per finding."""

    def __init__(self, problems: Sequence[api_load.Problem]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class Entry:
    """One object of the snapshot: as written (raw), as karpy models it (typed), and where from."""

    raw: dict[str, Any]
    typed: Any  # the karpy.model object (None for the kinds read for ownership only)
    file: str
    index: int

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.raw.get("metadata") or {}).get("name") or "")

    @property
    def namespace(self) -> str:
        return str((self.raw.get("metadata") or {}).get("namespace") or "")

    @property
    def where(self) -> str:
        """``FILE: Kind "namespace/name"``: how a warning names the object."""
        shown = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f'{self.file}: {self.kind} "{shown}"'


@dataclass(frozen=True)
class InitialState:
    """The objects of a snapshot folder a run takes, per kind, in file and document order."""

    directory: str
    node_pools: tuple[Entry, ...] = ()
    node_claims: tuple[Entry, ...] = ()
    node_classes: tuple[Entry, ...] = ()
    nodes: tuple[Entry, ...] = ()
    pods: tuple[Entry, ...] = ()
    daemon_sets: tuple[Entry, ...] = ()
    pdbs: tuple[Entry, ...] = ()
    namespaces: tuple[Entry, ...] = ()
    deployments: tuple[Entry, ...] = ()
    replica_sets: tuple[Entry, ...] = ()
    stateful_sets: tuple[Entry, ...] = ()
    notes: tuple[str, ...] = ()  # what was left out while reading, one line per file and kind


@dataclass
class _Reading:
    found: dict[str, list[Entry]] = field(default_factory=dict)
    problems: list[api_load.Problem] = field(default_factory=list)
    left_out: dict[tuple[str, str], int] = field(default_factory=dict)  # (file, kind) -> count


def read(directory: Path | str) -> InitialState:
    """The objects of the snapshot folder ``directory``; raises :class:`SnapshotError`."""
    folder = Path(directory)
    if not folder.is_dir():
        problem = api_load.Problem(str(folder), 0, "", "", "", "no such snapshot folder")
        raise SnapshotError([problem])
    reading = _Reading()
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    for path in files:
        _read_file(path, reading)
    if reading.problems:
        raise SnapshotError(reading.problems)
    notes = [_note(file, kind, count) for (file, kind), count in sorted(reading.left_out.items())]
    by_attr = {attr: tuple(items) for attr, items in reading.found.items()}
    return InitialState(directory=str(folder), notes=tuple(notes), **by_attr)


def _note(file: str, kind: str, count: int) -> str:
    what = f"{count} {kind}{'' if count == 1 else 's'}"
    if kind in _VOLUMES:
        return f"{file}: {what} left out (the simulator does not model volumes)"
    return f"{file}: {what} left out (a kind the simulator does not take)"


def _read_file(path: Path, reading: _Reading) -> None:
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        documents = documents_mod.load(text, many=True)
    except (OSError, UnicodeDecodeError) as exc:
        reading.problems.append(api_load.Problem(file, 0, "", "", "", f"cannot read: {exc}"))
        return
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        message = f"YAML syntax error{where}: {what}"
        reading.problems.append(api_load.Problem(file, 0, "", "", "", message, line=line))
        return
    for index, doc in enumerate(d for d in documents if d is not None):
        items = doc.get("items") if isinstance(doc, Mapping) and doc.get("kind") == "List" else [doc]
        if not isinstance(items, list):
            reading.problems.append(api_load.Problem(file, index, "List", "", "items", "expected a list"))
            continue
        for item in items:
            _read_object(item, file, index, reading)


def _read_object(raw: object, file: str, index: int, reading: _Reading) -> None:
    if not isinstance(raw, Mapping):
        message = f"expected a Kubernetes object (a mapping), got {type(raw).__name__}"
        reading.problems.append(api_load.Problem(file, index, "", "", "", message))
        return
    obj = dict(raw)
    kind = str(obj.get("kind") or "")
    if kind in _OWNERS_ONLY:
        if not (obj.get("metadata") or {}).get("name"):
            reading.problems.append(api_load.Problem(file, index, kind, "", "metadata.name", "required"))
            return
        reading.found.setdefault(_OWNERS_ONLY[kind], []).append(Entry(obj, None, file, index))
        return
    if kind not in _TAKEN:
        key = (file, kind or "object without a kind")
        reading.left_out[key] = reading.left_out.get(key, 0) + 1
        return
    typed, problems = api_load.parse_object(obj, file=file, index=index)
    errors_found = [p for p in problems if p.severity == api_load.ERROR]
    if errors_found or typed is None:
        reading.problems.extend(errors_found or problems)
        return
    reading.found.setdefault(_TAKEN[kind], []).append(Entry(obj, typed, file, index))


def clean(raw: Mapping[str, Any], *, keep_status: bool = False) -> dict[str, Any]:
    """A copy of an object as a run creates it: apiVersion, kind, metadata without what the run's
    API server sets (resource version, times, generation), spec, and the status if asked for."""
    meta = {k: v for k, v in (raw.get("metadata") or {}).items() if k not in _DROPPED_META}
    out: dict[str, Any] = {"apiVersion": raw.get("apiVersion"), "kind": raw.get("kind"), "metadata": meta}
    for key, value in raw.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            out[key] = value
    if keep_status and "status" in raw:
        out["status"] = raw["status"]
    copied: dict[str, Any] = _deep(out)
    return copied


def _deep(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v) for v in value]
    return value
