"""What the legacy converters share: notes, options, results and a field reader.

A converter turns one raw legacy document into raw ``v1`` documents (:class:`Output`) and
:class:`Note` s: an error (the document cannot be converted) or a warning (a field with no
``v1`` equivalent, dropped; or a value karpy had to choose). Every field of the input is read
through a :class:`Reader`, which reports each field nobody read, so nothing is dropped
silently. Used by :mod:`karpy.api.legacy.v1alpha5`, :mod:`~karpy.api.legacy.v1beta1` and
:mod:`~karpy.api.legacy.convert`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic

from karpy.api import common, encode, nodeclasses

__all__ = [
    "EC2_GROUP",
    "EC2_KIND",
    "ROLE_PLACEHOLDER",
    "KubeletUse",
    "Note",
    "Options",
    "Output",
    "Reader",
    "Result",
    "canonical",
    "kubelet",
    "seconds",
    "source_path",
]

EC2_GROUP = "karpenter.k8s.aws"
EC2_KIND = "EC2NodeClass"
ROLE_PLACEHOLDER = "$KARPENTER_NODE_ROLE"  # as upstream's karpenter-convert writes it, for envsubst

# The v1 EC2NodeClass kubelet fields (the same names in v1alpha5 kubeletConfiguration and v1beta1 kubelet).
KUBELET_FIELDS = (
    "clusterDNS",
    "maxPods",
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
)


@dataclass(frozen=True, slots=True)
class Note:
    """One finding about a legacy document, at its (legacy) field path."""

    path: str
    message: str
    error: bool = False


@dataclass(frozen=True, slots=True)
class Options:
    """Choices the legacy objects leave to the cluster's settings.

    ``instance_profile`` stands in for v1alpha5's ``aws.defaultInstanceProfile`` setting (an
    AWSNodeTemplate without ``instanceProfile`` used it); ``role`` is written instead when given.
    With neither, such a node class gets ``role: $KARPENTER_NODE_ROLE`` and a warning.
    """

    instance_profile: str | None = None
    role: str | None = None


@dataclass
class Output:
    """One ``v1`` document; ``origin`` maps its field paths back to the legacy document's."""

    raw: dict[str, Any]
    origin: dict[str, str] = field(default_factory=dict)


@dataclass
class KubeletUse:
    """A pool's kubelet, waiting to be written on the EC2NodeClass its pool references."""

    pool: str
    node_class: str
    kubelet: dict[str, Any]
    path: str
    output: Output  # the NodePool, whose nodeClassRef moves if its kubelet needs a class of its own


@dataclass
class Result:
    """The conversion of one legacy document (kind and name as the user wrote them)."""

    kind: str
    name: str
    outputs: list[Output] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    kubelet: KubeletUse | None = None

    @property
    def ok(self) -> bool:
        return not any(n.error for n in self.notes)

    def warn(self, path: str, message: str) -> None:
        self.notes.append(Note(path, message))

    def fail(self, path: str, message: str) -> None:
        self.notes.append(Note(path, message, error=True))


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Reader:
    """Reads a mapping's fields by name; :meth:`done` warns about every field not read."""

    def __init__(self, raw: object, path: str, result: Result) -> None:
        self.path = path
        self.result = result
        self.seen: set[str] = set()
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            result.fail(path, f"expected a mapping, got {type(raw).__name__}")
            raw = {}
        self.raw: Mapping[str, Any] = raw

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        value = self.raw.get(key)
        return default if value is None else value

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def child(self, key: str) -> Reader:
        return Reader(self.get(key), join(self.path, key), self.result)

    def at(self, key: str) -> str:
        return join(self.path, key)

    def done(self, *, ignore: Iterable[str] = (), why: str = "") -> None:
        """Warn about each field not read (``ignore``: fields that are dropped on purpose)."""
        skip = set(ignore)
        for key in sorted(k for k in self.raw if k not in self.seen and k not in skip):
            if self.raw[key] is None:
                continue
            self.result.warn(self.at(str(key)), f"has no v1 equivalent; dropped{why}")


def seconds(value: object, path: str, result: Result) -> str | None:
    """A whole number of seconds (v1alpha5 ``ttlSeconds*``) as a v1 duration, or None (error noted)."""
    if isinstance(value, bool) or not isinstance(value, int | str) or not re.fullmatch(r"\d+", str(value)):
        result.fail(path, f"expected a whole number of seconds, got {value!r}")
        return None
    return encode.duration(int(value))


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def kubelet(reader: Reader) -> dict[str, Any]:
    """The v1 fields of a legacy kubelet block, validated as the v1 EC2NodeClass kubelet;
    other fields (``containerRuntime``) are warnings."""
    out = {key: reader.get(key) for key in KUBELET_FIELDS if reader.has(key)}
    reader.done(why=" (the v1 EC2NodeClass kubelet has no such field)")
    try:
        nodeclasses.KubeletConfiguration.model_validate(out)
    except pydantic.ValidationError as exc:
        for err in exc.errors():
            loc: list[str | int] = list(err["loc"])
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, common.FieldError):
                loc += list(cause.subpath)
            sub = common.format_loc(nodeclasses.KubeletConfiguration, loc)
            path = f"{reader.path}{'' if not sub or sub.startswith('[') else '.'}{sub}"
            message = str(cause) if cause is not None else err["msg"]
            reader.result.fail(path, message)
        return {}
    return out


def source_path(origin: Mapping[str, str], path: str) -> str:
    """``path`` in a converted document → the legacy field it came from (longest mapped prefix)."""
    best = ""
    for prefix in origin:
        fits = path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))
        if fits and len(prefix) > len(best):
            best = prefix
    if not best:
        return path
    return origin[best] + path[len(best) :]
