"""YAML files, directories and raw dicts → model objects, with one-line problems.

:func:`load_paths` reads files or directories (``*.yaml``/``*.yml``, sorted, recursive),
splits multi-document streams (a syntax error costs only its own document), unpacks
``kind: List``, validates each object against its :mod:`karpy.api` schema and converts
it with :mod:`karpy.api.convert`. A bad object becomes a :class:`Problem` naming file,
document, object and field path; the others still load. Unknown kinds are skipped
with a warning. Objects read from files are also checked as the API server and kubectl would
(:class:`Checks`): names (:mod:`karpy.api.names`, an error) and unknown fields
(:mod:`karpy.api.fields`: a warning naming the nearest known field, an error that drops the
object with ``strict``); objects an API server served are not. A path that holds no object is a
warning (``no objects found in PATH``); a missing or unreadable file a problem of the file itself
(no document). Karpenter's legacy kinds (v1alpha5 Provisioner, v1alpha1 AWSNodeTemplate,
v1beta1 NodePool/NodeClaim/EC2NodeClass) are converted to v1 by :mod:`karpy.api.legacy` (all
documents of a load as one set) and then validated as v1; their fields with no v1 equivalent
are :attr:`Loaded.warnings`, their errors name the legacy field. Called by the CLI
(``plan``, ``explain``, ``convert``); the conformance runner and the watch codec use
:func:`parse_object` and the typed ``convert_*`` helpers, which raise
:class:`karpy.model.errors.InputError`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from karpy.api import (
    apps_v1,
    common,
    convert,
    core_v1,
    karpenter_v1,
    names,
    nodeclasses,
    policy_v1,
    storage_v1,
)
from karpy.api import documents as documents_mod
from karpy.api import fields as fields_mod
from karpy.api.documents import Document, Reading, read_paths
from karpy.api.legacy import base as legacy_base
from karpy.api.legacy import convert as legacy
from karpy.api.problems import ERROR, FILE, WARNING, ObjectError, Problem
from karpy.model import nodeclass, objects
from karpy.model import volumes as volumes_mod

__all__ = [
    "API",
    "ERROR",
    "FILE",
    "FILES",
    "STRICT",
    "WARNING",
    "Checks",
    "Document",
    "Loaded",
    "ObjectError",
    "Problem",
    "convert_daemonset",
    "convert_node",
    "convert_node_claim",
    "convert_node_pool",
    "convert_pdb",
    "convert_pod",
    "load_documents",
    "load_objects",
    "load_paths",
    "load_text",
    "parse_object",
    "read_paths",
]


@dataclass(frozen=True, slots=True)
class Checks:
    """What is checked beyond the schema: unknown fields (:data:`karpy.api.fields.MODES`) and
    names (as the API server validates them)."""

    fields: str = fields_mod.IGNORE
    names: bool = False


API = Checks()  # an object an API server served: it checked names and fields already
FILES = Checks(fields_mod.WARN, names=True)  # objects written by hand: what kubectl would warn about
STRICT = Checks(fields_mod.STRICT, names=True)  # --strict: an unknown field is an error


@dataclass
class Loaded:
    """Everything read from a set of files: model objects per kind, plus problems."""

    node_pools: list[objects.NodePool] = field(default_factory=list)
    node_claims: list[objects.NodeClaim] = field(default_factory=list)
    ec2_node_classes: list[nodeclass.EC2NodeClass] = field(default_factory=list)
    kwok_node_classes: list[nodeclass.KWOKNodeClass] = field(default_factory=list)
    pods: list[objects.Pod] = field(default_factory=list)
    nodes: list[objects.Node] = field(default_factory=list)
    namespaces: list[convert.Namespace] = field(default_factory=list)
    daemonsets: list[objects.DaemonSet] = field(default_factory=list)
    deployments: list[convert.Workload] = field(default_factory=list)
    replicasets: list[convert.Workload] = field(default_factory=list)
    pdbs: list[objects.PodDisruptionBudget] = field(default_factory=list)
    claims: list[volumes_mod.PersistentVolumeClaim] = field(default_factory=list)
    persistent_volumes: list[volumes_mod.PersistentVolume] = field(default_factory=list)
    storage_classes: list[volumes_mod.StorageClass] = field(default_factory=list)
    csi_nodes: list[volumes_mod.CSINode] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # errors: the object was not loaded
    skipped: list[Problem] = field(default_factory=list)  # warnings: unknown kinds, replaced duplicates
    # warnings about legacy objects that were converted and loaded: fields with no v1 equivalent
    warnings: list[Problem] = field(default_factory=list)
    # (list, namespace, name) -> (file, document, position): where each object came from, for duplicates
    _seen: dict[tuple[str, str, str], tuple[str, int, int]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def ok(self) -> bool:
        return not self.problems

    def workload_pods(self) -> list[objects.Pod]:
        """Pods from ``kind: Pod`` documents, then the expansions of Deployments and ReplicaSets
        whose pods are not loaded already. A cluster's snapshot (``karpy snapshot``) holds a
        Deployment, its ReplicaSets (``<deployment>-<pod-template-hash>``) and their pods: only
        the pods count, so a ReplicaSet owning a loaded pod is not expanded, nor a Deployment
        with such a ReplicaSet (loaded, or named by a loaded pod's owner)."""
        out = list(self.pods)
        live = {(p.namespace, o.name) for p in self.pods for o in p.owners if o.kind == "ReplicaSet"}
        owned = [
            (p.namespace, o.name, p.labels) for p in self.pods for o in p.owners if o.kind == "ReplicaSet"
        ]
        owned += [(rs.namespace, rs.name, rs.template.labels) for rs in self.replicasets]
        hashed = {
            (ns, name.removesuffix(f"-{labels['pod-template-hash']}"))
            for ns, name, labels in owned
            if labels.get("pod-template-hash") and name.endswith(f"-{labels['pod-template-hash']}")
        }
        for wl in self.deployments:
            if (wl.namespace, wl.name) not in hashed:
                out.extend(convert.expand(wl))
        for wl in self.replicasets:
            if (wl.namespace, wl.name) not in live:
                out.extend(convert.expand(wl))
        return out

    def add(self, obj: object, *, file: str = "", index: int = 0) -> None:
        """Append ``obj`` to its list; a later object of the same kind and name replaces the earlier one."""
        attr = _attr_of(obj)
        items: list[Any] = getattr(self, attr)
        key = (attr, getattr(obj, "namespace", ""), getattr(obj, "name", ""))
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = (file, index, len(items))
            items.append(obj)
            return
        first_file, first_index, position = seen
        items[position] = obj
        self._seen[key] = (file, index, position)
        kind, name = _KIND_BY_ATTR[attr], "/".join(p for p in key[1:] if p)
        message = (
            f"replaces the {kind} of the same name from {first_file or '<input>'} document {first_index}"
        )
        self.skipped.append(Problem(file, index, kind, name, "", message, WARNING))

    def extend(self, other: Loaded) -> None:
        """Add everything ``other`` holds (duplicates replace, as :meth:`add`)."""
        for attr in _KIND_BY_ATTR:
            for obj in getattr(other, attr):
                key = (attr, getattr(obj, "namespace", ""), getattr(obj, "name", ""))
                file, index, _ = other._seen.get(key, ("", 0, 0))
                self.add(obj, file=file, index=index)
        self.problems.extend(other.problems)
        self.skipped.extend(other.skipped)
        self.warnings.extend(other.warnings)


_Schema = type[pydantic.BaseModel]
_KINDS: dict[tuple[str, str], tuple[_Schema, Callable[[Any], object]]] = {
    ("v1", "Pod"): (core_v1.Pod, convert.pod),
    ("v1", "Node"): (core_v1.Node, convert.node),
    ("v1", "Namespace"): (core_v1.Namespace, convert.namespace),
    ("apps/v1", "DaemonSet"): (apps_v1.DaemonSet, convert.daemonset),
    ("apps/v1", "Deployment"): (apps_v1.Deployment, convert.workload),
    ("apps/v1", "ReplicaSet"): (apps_v1.ReplicaSet, convert.workload),
    ("policy/v1", "PodDisruptionBudget"): (policy_v1.PodDisruptionBudget, convert.pdb),
    ("v1", "PersistentVolumeClaim"): (core_v1.PersistentVolumeClaim, storage_v1.persistent_volume_claim),
    ("v1", "PersistentVolume"): (core_v1.PersistentVolume, storage_v1.persistent_volume),
    ("storage.k8s.io/v1", "StorageClass"): (storage_v1.StorageClass, storage_v1.storage_class),
    ("storage.k8s.io/v1", "CSINode"): (storage_v1.CSINode, storage_v1.csi_node),
    ("karpenter.sh/v1", "NodePool"): (karpenter_v1.NodePool, convert.node_pool),
    ("karpenter.sh/v1", "NodeClaim"): (karpenter_v1.NodeClaim, convert.node_claim),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): (nodeclasses.EC2NodeClass, convert.ec2_node_class),
    ("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass"): (nodeclasses.KWOKNodeClass, convert.kwok_node_class),
}
_KIND_BY_ATTR = {
    "node_pools": "NodePool",
    "node_claims": "NodeClaim",
    "ec2_node_classes": "EC2NodeClass",
    "kwok_node_classes": "KWOKNodeClass",
    "pods": "Pod",
    "nodes": "Node",
    "namespaces": "Namespace",
    "daemonsets": "DaemonSet",
    "deployments": "Deployment",
    "replicasets": "ReplicaSet",
    "pdbs": "PodDisruptionBudget",
    "claims": "PersistentVolumeClaim",
    "persistent_volumes": "PersistentVolume",
    "storage_classes": "StorageClass",
    "csi_nodes": "CSINode",
}
_ATTR_BY_TYPE: dict[type, str] = {
    objects.NodePool: "node_pools",
    objects.NodeClaim: "node_claims",
    nodeclass.EC2NodeClass: "ec2_node_classes",
    nodeclass.KWOKNodeClass: "kwok_node_classes",
    objects.Pod: "pods",
    objects.Node: "nodes",
    convert.Namespace: "namespaces",
    objects.DaemonSet: "daemonsets",
    objects.PodDisruptionBudget: "pdbs",
    volumes_mod.PersistentVolumeClaim: "claims",
    volumes_mod.PersistentVolume: "persistent_volumes",
    volumes_mod.StorageClass: "storage_classes",
    volumes_mod.CSINode: "csi_nodes",
}


def _attr_of(obj: object) -> str:
    if isinstance(obj, convert.Workload):
        return "deployments" if obj.kind == "Deployment" else "replicasets"
    return _ATTR_BY_TYPE[type(obj)]


def _display_name(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    name, ns = meta.get("name") or meta.get("generateName") or "", meta.get("namespace") or ""
    return f"{ns}/{name}" if ns and name else str(name)


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    return f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"


def _validation_problems(
    exc: pydantic.ValidationError, schema: _Schema, base: Problem, prefix: str
) -> list[Problem]:
    out: list[Problem] = []
    for err in exc.errors():
        loc: list[str | int] = list(err["loc"])
        ctx = err.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, common.FieldErrors):
            for one in cause.errors:
                path = _join(prefix, common.format_loc(schema, [*loc, *one.subpath]))
                out.append(Problem(base.file, base.index, base.kind, base.name, path, one.message))
            continue
        if isinstance(cause, common.FieldError):
            loc += list(cause.subpath)
            message = cause.message
        elif err["type"] in ("value_error", "assertion_error") and cause is not None:
            message = str(cause)
        elif err["type"] == "missing":
            message = "required"
        elif err["type"] == "literal_error":
            message = f"must be {ctx.get('expected', '')}, got {err['input']!r}"
        else:
            message = err["msg"]
            value = err.get("input")
            if isinstance(value, str | int | float | bool):
                message += f" (got {value!r})"
        path = _join(prefix, common.format_loc(schema, loc))
        out.append(Problem(base.file, base.index, base.kind, base.name, path, message))
    return out


_Out = TypeVar("_Out")


# Pod spec (canonical JSON, as _POD_SPECS) -> its unknown fields, in the order the first one had them.
_SPEC_UNKNOWN: OrderedDict[str, tuple[fields_mod.Unknown, ...]] = OrderedDict()


def _unknown(raw: Mapping[str, Any], schema: _Schema, key: str | None) -> list[fields_mod.Unknown]:
    """The unknown fields of ``raw``; a Pod spec seen before (``key``) is not walked again."""
    spec = raw.get("spec")
    if key is None:
        return fields_mod.unknown_fields(raw, schema)
    found = _SPEC_UNKNOWN.get(key)
    if found is None:
        assert isinstance(spec, Mapping)
        found = _SPEC_UNKNOWN[key] = tuple(fields_mod.unknown_fields(spec, core_v1.PodSpec, path="spec"))
        while len(_SPEC_UNKNOWN) > _POD_SPECS_MAX:
            _SPEC_UNKNOWN.popitem(last=False)
    rest = {k: v for k, v in raw.items() if k != "spec"}
    return [*fields_mod.unknown_fields(rest, schema), *found]


def _checked(
    raw: Mapping[str, Any],
    schema: _Schema,
    base: Problem,
    prefix: str,
    checks: Checks,
    spec_key: str | None = None,
) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings) of the checks beyond the schema: names, then unknown fields (``spec_key``:
    a Pod's spec as :func:`_pod_spec_key` gives it)."""
    bad: list[Problem] = []
    warnings: list[Problem] = []
    if checks.names:
        for path, message in names.name_problems(base.kind, raw.get("metadata")):
            bad.append(Problem(base.file, base.index, base.kind, base.name, _join(prefix, path), message))
    if checks.fields != fields_mod.IGNORE:
        strict = checks.fields == fields_mod.STRICT
        for found in _unknown(raw, schema, spec_key):
            path = _join(prefix, found.path)
            problem = Problem(
                base.file, base.index, base.kind, base.name, path, found.message, ERROR if strict else WARNING
            )
            (bad if strict else warnings).append(problem)
    return bad, warnings


def _parse(
    raw: Mapping[str, Any],
    schema: _Schema,
    converter: Callable[[Any], _Out],
    *,
    base: Problem,
    prefix: str = "",
    checks: Checks = API,
) -> tuple[_Out | None, list[Problem]]:
    bad, warnings = _checked(raw, schema, base, prefix, checks) if checks != API else ([], [])
    try:
        parsed = schema.model_validate(raw)
    except pydantic.ValidationError as exc:
        return None, [*_validation_problems(exc, schema, base, prefix), *bad, *warnings]
    if not getattr(getattr(parsed, "metadata", None), "name", "x"):
        problem = Problem(
            base.file, base.index, base.kind, base.name, _join(prefix, "metadata.name"), "required"
        )
        return None, [problem, *bad, *warnings]
    if bad:
        return None, [*bad, *warnings]
    try:
        return converter(parsed), warnings
    except (ValueError, KeyError) as exc:  # a gap in validation; report, never crash
        return None, [Problem(base.file, base.index, base.kind, base.name, prefix, str(exc)), *warnings]


def _parse_one(
    raw: object, *, file: str, index: int, prefix: str = "", checks: Checks = API
) -> tuple[object | None, list[Problem]]:
    if not isinstance(raw, Mapping):
        message = f"expected a Kubernetes object (a mapping), got {type(raw).__name__}"
        return None, [Problem(file, index, "", "", prefix, message)]
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    base = Problem(file, index, str(kind or ""), _display_name(raw), prefix, "")
    entry = _KINDS.get((str(api_version), str(kind)))
    if entry is None:
        known = sorted(v for v, k in _KINDS if k == kind)
        if not kind or not api_version:
            message = "no apiVersion/kind; skipped"
        elif known:
            message = f"{api_version} {kind} is not supported (expected {known[0]}); skipped"
        else:
            message = f"unsupported kind {api_version} {kind}; skipped"
        return None, [Problem(file, index, base.kind, base.name, prefix, message, WARNING)]
    schema, converter = entry
    if schema is core_v1.Pod:
        return _parse_pod(raw, base=base, prefix=prefix, checks=checks)
    return _parse(raw, schema, converter, base=base, prefix=prefix, checks=checks)


# Pod spec (without nodeName) as canonical JSON -> its converted fields. A watch sees each pod
# several times (created, bound, started, ready, deleted) and the pods of a template share one
# spec, so a spec seen before is neither validated nor converted again: only metadata, status
# and nodeName are (with the same schema, so errors name the same fields).
_POD_SPECS: OrderedDict[str, dict[str, Any]] = OrderedDict()
_POD_SPECS_MAX = 4096


def _pod_spec_key(spec: object) -> str | None:
    if not isinstance(spec, Mapping):
        return None
    try:
        return json.dumps(
            {k: v for k, v in spec.items() if k != "nodeName"}, sort_keys=True, separators=(",", ":")
        )
    except (TypeError, ValueError):
        return None


def _parse_pod(
    raw: Mapping[str, Any], *, base: Problem, prefix: str, checks: Checks
) -> tuple[object | None, list[Problem]]:
    spec = raw.get("spec")
    key = _pod_spec_key(spec)
    bad, warnings = _checked(raw, core_v1.Pod, base, prefix, checks, key) if checks != API else ([], [])
    fields = _POD_SPECS.get(key) if key is not None else None
    if fields is None:
        converted: list[dict[str, Any]] = []

        def remember(obj: core_v1.Pod) -> objects.Pod:
            converted.append(convert.pod_spec_fields(obj.spec))
            return convert.pod(obj, converted[0])

        parsed, problems = _parse(raw, core_v1.Pod, remember, base=base, prefix=prefix)
        if parsed is not None and key is not None:
            _POD_SPECS[key] = converted[0]
            while len(_POD_SPECS) > _POD_SPECS_MAX:
                _POD_SPECS.popitem(last=False)
    else:
        _POD_SPECS.move_to_end(key)  # type: ignore[arg-type]
        assert isinstance(spec, Mapping)
        shell = {**raw, "spec": {"nodeName": spec["nodeName"]} if "nodeName" in spec else {}}
        parsed, problems = _parse(
            shell, core_v1.Pod, lambda obj: convert.pod(obj, fields), base=base, prefix=prefix
        )
    if bad:
        return None, [*problems, *bad, *warnings]
    return parsed, [*problems, *warnings]


def parse_object(
    raw: Mapping[str, Any], *, file: str, index: int, checks: Checks = API
) -> tuple[object | None, list[Problem]]:
    """One raw object → (model object or None, problems). Unknown kinds give a warning and None;
    ``checks`` (default: none, for objects an API server served) add names and unknown fields."""
    if isinstance(raw, Mapping) and raw.get("kind") == "List":
        return None, [Problem(file, index, "List", "", "", "a List holds several objects; use load_text")]
    return _parse_one(raw, file=file, index=index, checks=checks)


def load_documents(
    documents: Iterable[Document],
    *,
    legacy_options: legacy_base.Options | None = None,
    checks: Checks = FILES,
) -> Loaded:
    """Load parsed documents (``kind: List`` unpacked); the legacy ones are converted as one set.
    A warning about a loaded object (an unknown field) is in ``warnings``, about one not loaded
    (an unknown kind) in ``skipped``."""
    loaded = Loaded()
    # (file, index, "items[i]" prefix, raw or Problem, parsed): every object but the legacy ones
    # is parsed as its document arrives (while a long stream is still being read:
    # karpy.api.parallel); the legacy ones are converted as one set at the end; all are added in
    # document order.
    items: list[tuple[str, int, str, object, tuple[object | None, list[Problem]] | None]] = []
    for file, index, raw in documents:
        if isinstance(raw, Mapping) and raw.get("kind") == "List":
            entries = raw.get("items") or []
            if not isinstance(entries, list):
                problem = Problem(file, index, "List", "", "items", "expected a list of objects")
                items.append((file, index, "", problem, None))
                continue
            for i, item in enumerate(entries):
                items.append(_item(file, index, f"items[{i}]", item, checks))
        else:
            items.append(_item(file, index, "", raw, checks))
    results = iter(legacy.convert_all([raw for *_, raw, _ in items if legacy.is_legacy(raw)], legacy_options))
    for file, index, prefix, raw, parsed in items:
        if isinstance(raw, Problem):
            loaded.problems.append(raw)
        elif parsed is None:
            _add_legacy(loaded, next(results), file=file, index=index, prefix=prefix, checks=checks)
        else:
            obj, problems = parsed
            loaded.problems.extend(p for p in problems if p.severity == ERROR)
            (loaded.warnings if obj is not None else loaded.skipped).extend(
                p for p in problems if p.severity == WARNING
            )
            if obj is not None:
                loaded.add(obj, file=file, index=index)
    return loaded


def _item(
    file: str, index: int, prefix: str, raw: object, checks: Checks
) -> tuple[str, int, str, object, tuple[object | None, list[Problem]] | None]:
    """One entry of :func:`load_documents`: parsed now, unless a Problem or legacy (parsed None)."""
    if isinstance(raw, Problem) or legacy.is_legacy(raw):
        return (file, index, prefix, raw, None)
    return (file, index, prefix, raw, _parse_one(raw, file=file, index=index, prefix=prefix, checks=checks))


def _add_legacy(
    loaded: Loaded, result: legacy_base.Result, *, file: str, index: int, prefix: str, checks: Checks
) -> None:
    """A converted legacy document: its notes, then its v1 documents (problems at the legacy paths;
    their names checked as ``checks`` say, their fields by the converter, which notes each it drops)."""
    for note in result.notes:
        severity = ERROR if note.error else WARNING
        problem = Problem(
            file, index, result.kind, result.name, _join(prefix, note.path), note.message, severity
        )
        (loaded.problems if note.error else loaded.warnings).append(problem)
    if not result.ok:
        return
    for out in result.outputs:
        obj, problems = _parse_one(out.raw, file=file, index=index, checks=Checks(names=checks.names))
        for p in problems:
            path = _join(prefix, legacy_base.source_path(out.origin, p.path))
            loaded.problems.append(Problem(file, index, result.kind, result.name, path, p.message))
        if obj is not None:
            loaded.add(obj, file=file, index=index)


def load_text(
    text: str,
    *,
    file: str = "<string>",
    legacy_options: legacy_base.Options | None = None,
    strict: bool = False,
) -> Loaded:
    """Load one YAML stream (several documents, ``kind: List`` unpacked); ``strict``: an unknown
    field is an error (the object is not loaded), else a warning."""
    documents = documents_mod.read_text(text, file=file)
    return load_documents(documents, legacy_options=legacy_options, checks=STRICT if strict else FILES)


def load_objects(raws: Iterable[Mapping[str, Any]], *, file: str) -> Loaded:
    """Load objects already parsed (a live cluster's, as ``karpy snapshot`` reads them): the API
    server checked their names and fields, so these are not checked again."""
    return load_documents(((file, index, raw) for index, raw in enumerate(raws)), checks=API)


def load_paths(
    paths: Sequence[Path] | Reading,
    *,
    legacy_options: legacy_base.Options | None = None,
    strict: bool = False,
) -> Loaded:
    """Load files and folders (``*.yaml``/``*.yml`` found recursively, sorted) or a started :class:`Reading`
    (its caller closes it); ``strict``: an unknown field is an error (the object is not loaded)."""
    entries = paths if isinstance(paths, Reading) else Reading(paths, start=False)
    empty: list[Problem] = []

    def documents() -> Iterator[Document]:  # parsed as load_documents takes them
        for path, files_of_path in entries:
            files, found = 0, False
            for _, docs in files_of_path:
                files += 1
                for doc in docs:
                    found = True
                    yield doc
            if not found:
                empty.append(documents_mod.nothing_found(path, files=files))

    loaded = load_documents(documents(), legacy_options=legacy_options, checks=STRICT if strict else FILES)
    loaded.skipped.extend(empty)
    return loaded


# --- typed helpers ---------------------------------------------------------------------


def _typed(raw: Mapping[str, Any], schema: _Schema, converter: Callable[[Any], _Out]) -> _Out:
    kind = str(raw.get("kind") or schema.model_fields["kind"].default) if isinstance(raw, Mapping) else ""
    base = Problem("", 0, kind, _display_name(raw) if isinstance(raw, Mapping) else "", "", "")
    if not isinstance(raw, Mapping):
        raise ObjectError([Problem("", 0, "", "", "", f"expected a mapping, got {type(raw).__name__}")])
    obj, problems = _parse(raw, schema, converter, base=base)
    if obj is None:
        raise ObjectError(problems)
    return obj


def convert_pod(raw: Mapping[str, Any]) -> objects.Pod:
    return _typed(raw, core_v1.Pod, convert.pod)


def convert_node(raw: Mapping[str, Any]) -> objects.Node:
    return _typed(raw, core_v1.Node, convert.node)


def convert_node_pool(raw: Mapping[str, Any]) -> objects.NodePool:
    return _typed(raw, karpenter_v1.NodePool, convert.node_pool)


def convert_node_claim(raw: Mapping[str, Any]) -> objects.NodeClaim:
    return _typed(raw, karpenter_v1.NodeClaim, convert.node_claim)


def convert_daemonset(raw: Mapping[str, Any]) -> objects.DaemonSet:
    return _typed(raw, apps_v1.DaemonSet, convert.daemonset)


def convert_pdb(raw: Mapping[str, Any]) -> objects.PodDisruptionBudget:
    return _typed(raw, policy_v1.PodDisruptionBudget, convert.pdb)
