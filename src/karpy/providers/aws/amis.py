"""The AMIs of an EC2NodeClass, from its ``amiSelectorTerms`` (upstream's ``amifamily`` AMI provider).

- **Aliases** (``al2023@latest``, ``bottlerocket@v1.20.0``, ``windows2022@latest``...) read the
  public SSM parameters AWS publishes for the cluster's Kubernetes version
  (:func:`alias_parameters`: one per architecture and variant). A missing parameter is skipped;
  none found is an error. Each parameter's variant says which instance types the image serves
  (standard: no GPU and no accelerator; nvidia: a GPU; neuron: an accelerator); AL2 aliases are
  refused on Kubernetes 1.33 and later (``UnsupportedAlias``: EKS publishes no AL2 AMIs there).
- **Other terms**: ``ssmParameter`` (GetParameter; the value must be an AMI id) and ``id`` terms
  are batched into one ``image-id`` query; ``name`` / ``owner`` / ``tags`` terms are one
  ``DescribeImages`` each (owners ``self,amazon`` when a name is given without an owner). Every
  query asks for ``state=available`` images, deprecated ones included. A custom image's only
  known requirement is its architecture (a missing ``Architecture`` means x86_64).

Per distinct requirement set one AMI is kept: non-deprecated before deprecated, then the newest
``CreationDate``, then the name, then the id; :func:`resolve_amis` returns them in that order
(``status.amis``, newest first), and :func:`amis_for` picks those an instance type can run,
first = what a launch uses. :class:`AMICache` holds SSM values (public 24 h, custom 5 min, so
a changed golden-image parameter is seen within 5 min) and DescribeImages results (1 min) on
the injected clock; a public "latest" value is dropped early when its image turns deprecated
(re-checked after 30 min, as upstream's invalidation controller).

Called by :class:`~karpy.providers.aws.nodeclass_status.NodeClassStatusController` (status)
and the provider's launch path (:func:`amis_for`). Failures raise :class:`AMIError`, naming
the spec field.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from karpy.core import capacity as capacity_mod
from karpy.model import labels
from karpy.model.nodeclass import AMI, AMISelectorTerm, EC2NodeClass
from karpy.model.requirements import Requirement, Requirements
from karpy.ports import Clock
from karpy.providers.aws import errors, sdk
from karpy.providers.aws.network import tag_filters

__all__ = [
    "ACCELERATOR_COUNT",
    "GPU_COUNT",
    "AMICache",
    "AMIError",
    "AliasParameter",
    "alias_parameters",
    "amis_for",
    "resolve_amis",
]

log = logging.getLogger("karpy.aws.amis")

GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
TERMS = "spec.amiSelectorTerms"
PUBLIC_TTL = 24 * 3600.0
CUSTOM_TTL = 5 * 60.0
IMAGES_TTL = 60.0
DEPRECATED_RECHECK = 30 * 60.0
LATEST = "latest"
_ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}  # EC2 -> kubernetes.io/arch
_MAX_ENTRIES = 512

_ReqSet = tuple[Requirement, ...]
_VARIANTS: dict[str, _ReqSet] = {
    "standard": (Requirement.does_not_exist(ACCELERATOR_COUNT), Requirement.does_not_exist(GPU_COUNT)),
    "nvidia": (Requirement.exists(GPU_COUNT),),
    "neuron": (Requirement.exists(ACCELERATOR_COUNT),),
}


class AMIError(Exception):
    """AMI resolution failed: ``field`` (e.g. ``spec.amiSelectorTerms[0].ssmParameter``), the
    condition ``reason`` (``AMINotFound``, ``UnsupportedAlias``, ``SSMParameterNotFound``...)."""

    def __init__(self, field: str, reason: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One public SSM parameter an alias reads and the requirement sets its image serves."""

    path: str
    requirements: tuple[_ReqSet, ...]


def _version_tuple(version: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def alias_parameters(alias: str, *, kubernetes_version: str, field: str = TERMS) -> list[AliasParameter]:
    """The SSM parameters ``alias`` reads on ``kubernetes_version`` ("1.31"), in reading order."""
    family, _, version = alias.partition("@")
    k8s = kubernetes_version
    parsed = _version_tuple(k8s)
    if parsed is None:
        raise AMIError(
            field, "KubernetesVersionUnknown", f"the cluster's Kubernetes version is unknown ({k8s!r})"
        )
    latest = version == LATEST
    std, nvidia, neuron = _VARIANTS["standard"], _VARIANTS["nvidia"], _VARIANTS["neuron"]
    if family == "al2023":
        out = []
        for arch, variants in (
            ("x86_64", ("standard", "nvidia", "neuron")),
            ("arm64", ("standard", "nvidia")),
        ):
            for variant in variants:
                name = "recommended" if latest else f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}"
                path = (
                    f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{name}/image_id"
                )
                out.append(AliasParameter(path, (_VARIANTS[variant],)))
        return out
    if family == "al2":
        if parsed >= (1, 33):
            raise AMIError(
                field,
                "UnsupportedAlias",
                f'alias "{alias}" is not supported on Kubernetes {k8s}: '
                "EKS publishes no AL2 AMIs for 1.33 and later",
            )
        base = f"/aws/service/eks/optimized-ami/{k8s}"
        return [
            AliasParameter(
                f"{base}/amazon-linux-2{suffix}/"
                f"{'recommended' if latest else f'amazon-eks-{prefix}node-{k8s}-{version}'}/image_id",
                reqs,
            )
            for suffix, prefix, reqs in (
                ("", "", (std,)),
                ("-arm64", "arm64-", (std,)),
                ("-gpu", "gpu-", (nvidia, neuron)),
            )
        ]
    if family == "bottlerocket":
        trimmed = version if latest else version.removeprefix("v")
        return [
            AliasParameter(
                f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/{trimmed}/image_id", (reqs,)
            )
            for flavour, reqs in (("", std), ("-nvidia", nvidia))
            for arch in ("x86_64", "arm64")
        ]
    if family.startswith("windows"):
        year = family.removeprefix("windows")
        build = capacity_mod.WINDOWS_BUILDS.get(f"Windows{year}")
        if build is None or not latest:
            raise AMIError(field, "UnsupportedAlias", f'alias "{alias}" is not supported')
        reqs = (Requirement.in_(labels.OS, "windows"), Requirement.in_(labels.WINDOWS_BUILD, build))
        path = (
            f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
        )
        return [AliasParameter(path, (reqs,))]
    raise AMIError(field, "UnsupportedAlias", f'alias "{alias}" names no known AMI family')


@dataclass
class _Entry:
    value: Any
    fetched: float
    expires: float
    custom: bool = False  # a custom ssmParameter value (the one users change and wait on)


class AMICache:
    """SSM parameter values and DescribeImages results, with TTLs on the injected clock."""

    def __init__(
        self,
        clock: Clock,
        *,
        public_ttl: float = PUBLIC_TTL,
        custom_ttl: float = CUSTOM_TTL,
        images_ttl: float = IMAGES_TTL,
    ) -> None:
        self.clock = clock
        self.public_ttl = public_ttl
        self.custom_ttl = custom_ttl
        self.images_ttl = images_ttl
        self._parameters: dict[str, _Entry] = {}
        self._images: dict[Hashable, _Entry] = {}

    def _get(self, store: dict[Any, _Entry], key: Hashable) -> Any:
        entry = store.get(key)
        if entry is None:
            return None
        if self.clock.now() >= entry.expires:
            del store[key]
            return None
        return entry.value

    def _put(
        self, store: dict[Any, _Entry], key: Hashable, value: Any, ttl: float, *, custom: bool = False
    ) -> None:
        now = self.clock.now()
        if len(store) >= _MAX_ENTRIES:
            for stale in [k for k, e in store.items() if now >= e.expires]:
                del store[stale]
        store[key] = _Entry(value, now, now + ttl, custom)

    def parameter(self, name: str) -> str | None:
        """The cached value of an SSM parameter, None when unknown or expired."""
        value = self._get(self._parameters, name)
        return None if value is None else str(value)

    def put_parameter(self, name: str, value: str, *, public: bool) -> None:
        ttl = self.public_ttl if public else self.custom_ttl
        self._put(self._parameters, name, value, ttl, custom=not public)

    def next_custom_expiry(self) -> float | None:
        """When the first cached custom ``ssmParameter`` value expires (None: none cached): a
        caller re-resolving then sees a changed parameter within the custom TTL."""
        now = self.clock.now()
        due = [e.expires for e in self._parameters.values() if e.custom and e.expires > now]
        return min(due) if due else None

    def expire_parameter(self, name: str, *, older_than: float) -> bool:
        """Drop a cached value fetched at least ``older_than`` seconds ago (True when dropped)."""
        entry = self._parameters.get(name)
        if entry is None or self.clock.now() - entry.fetched < older_than:
            return False
        del self._parameters[name]
        return True

    def images(self, key: Hashable) -> tuple[dict[str, Any], ...] | None:
        found = self._get(self._images, key)
        return None if found is None else tuple(found)

    def put_images(self, key: Hashable, images: Iterable[dict[str, Any]]) -> None:
        self._put(self._images, key, tuple(images), self.images_ttl)


@dataclass(frozen=True, slots=True)
class _Query:
    """One DescribeImages call (the cache key); ``field`` names the terms it came from."""

    filters: tuple[tuple[str, tuple[str, ...]], ...]
    owners: tuple[str, ...] = ()
    where: str = dataclasses.field(default=TERMS, compare=False)

    def kwargs(self) -> dict[str, Any]:
        filters = [{"Name": name, "Values": list(values)} for name, values in self.filters]
        filters.append({"Name": "state", "Values": ["available"]})
        out: dict[str, Any] = {"Filters": filters, "IncludeDeprecated": True, "MaxResults": 1000}
        if self.owners:
            out["Owners"] = list(self.owners)
        return out


def _term_query(term: AMISelectorTerm, index: int) -> _Query:
    owners: tuple[str, ...] = (term.owner,) if term.owner else ()
    filters: list[tuple[str, tuple[str, ...]]] = []
    if term.name:
        owners = owners or ("self", "amazon")
        filters.append(("name", (term.name,)))
    filters += [(f["Name"], tuple(f["Values"])) for f in tag_filters(term.tags)]
    if not filters and not owners:
        raise AMIError(
            f"{TERMS}[{index}]", "AMINotFound", "a term needs an alias, id, name, owner, tags or ssmParameter"
        )
    return _Query(tuple(filters), owners, f"{TERMS}[{index}]")


def _parameter(ssm: Any, name: str) -> str:
    return str(errors.call(ssm.get_parameter, Name=name)["Parameter"]["Value"])


def _custom_parameter(ssm: Any, name: str, *, field: str, cache: AMICache) -> str:
    value = cache.parameter(name)
    if value is not None:
        return value
    try:
        value = _parameter(ssm, name)
    except errors.AWSError as exc:
        if exc.not_found:
            raise AMIError(field, "SSMParameterNotFound", f"parameter {name} not found") from exc
        raise AMIError(field, "SSMParameterError", f"reading parameter {name}: {exc}") from exc
    if not value.startswith("ami-"):
        raise AMIError(field, "SSMParameterInvalid", f"parameter {name} holds {value!r}, not an AMI id")
    cache.put_parameter(name, value, public=False)
    return value


def _alias_query(
    ssm: Any, alias: str, *, field: str, kubernetes_version: str, cache: AMICache
) -> tuple[_Query, dict[str, list[_ReqSet]], dict[str, list[str]]]:
    """The image-id query of an alias, each image's requirement sets, and its "latest" parameters."""
    known: dict[str, list[_ReqSet]] = {}
    mutable: dict[str, list[str]] = {}
    failures: list[errors.AWSError] = []
    params = alias_parameters(alias, kubernetes_version=kubernetes_version, field=field)
    for param in params:
        value = cache.parameter(param.path)
        if value is None:
            try:
                value = _parameter(ssm, param.path)
            except errors.AWSError as exc:
                if not exc.not_found:
                    failures.append(exc)
                    log.warning("reading SSM parameter %s for alias %s failed: %s", param.path, alias, exc)
                continue
            cache.put_parameter(param.path, value, public=True)
        if not value.startswith("ami-"):
            log.warning("SSM parameter %s holds %r, not an AMI id: skipped", param.path, value)
            continue
        known.setdefault(value, []).extend(param.requirements)
        if alias.endswith(f"@{LATEST}"):
            mutable.setdefault(value, []).append(param.path)
    if not known:
        if failures:
            raise AMIError(field, "SSMParameterError", f'alias "{alias}": {failures[0]}')
        raise AMIError(
            field,
            "AMINotFound",
            f'no AMI for alias "{alias}" on Kubernetes {kubernetes_version}: '
            f"none of its {len(params)} SSM parameters exist",
        )
    return _Query((("image-id", tuple(sorted(known))),), (), field), known, mutable


def _describe(ec2: Any, query: _Query, cache: AMICache) -> tuple[dict[str, Any], ...]:
    cached = cache.images(query)
    if cached is not None:
        return cached
    try:
        found = errors.pages(ec2, "describe_images", "Images", **query.kwargs())
    except errors.AWSError as exc:
        raise AMIError(query.where, "AMIDiscoveryFailed", str(exc)) from exc
    keep = ("ImageId", "Name", "Architecture", "CreationDate", "DeprecationTime")
    slim = [{k: image[k] for k in keep if image.get(k) is not None} for image in found]
    cache.put_images(query, slim)
    return tuple(slim)


def _seconds(text: object, default: float) -> float:
    if not isinstance(text, str) or not text:
        return default
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return default


@dataclass(frozen=True, slots=True)
class _Candidate:
    id: str
    name: str
    created: float
    deprecated: bool
    requirements: _ReqSet

    def rank(self) -> tuple[bool, float, str, str]:
        return (self.deprecated, -self.created, self.name, self.id)


def resolve_amis(
    clients: sdk.Clients, nc: EC2NodeClass, *, kubernetes_version: str, cache: AMICache
) -> list[AMI]:
    """``nc``'s AMIs: one per distinct requirement set, best first (see the module docstring).
    An empty list: the terms matched no image. Raises :class:`AMIError`."""
    known: dict[str, list[_ReqSet]] = {}
    mutable: dict[str, list[str]] = {}
    queries: list[_Query] = []
    ids: list[str] = []
    for index, term in enumerate(nc.ami_selector_terms):
        where = f"{TERMS}[{index}]"
        if term.alias:
            query, alias_known, alias_mutable = _alias_query(
                clients.ssm,
                term.alias,
                field=f"{where}.alias",
                kubernetes_version=kubernetes_version,
                cache=cache,
            )
            queries.append(query)
            for image_id, sets in alias_known.items():
                known.setdefault(image_id, []).extend(sets)
            for image_id, paths in alias_mutable.items():
                mutable.setdefault(image_id, []).extend(paths)
        elif term.id:
            ids.append(term.id)
        elif term.ssm_parameter:
            at = f"{where}.ssmParameter"
            ids.append(_custom_parameter(clients.ssm, term.ssm_parameter, field=at, cache=cache))
        else:
            queries.append(_term_query(term, index))
    if ids:
        queries.append(_Query((("image-id", tuple(sorted(set(ids)))),), (), TERMS))
    now = cache.clock.now()
    best: dict[frozenset[Requirement], _Candidate] = {}
    for query in queries:
        for image in _describe(clients.ec2, query, cache):
            image_id = str(image["ImageId"])
            arch = _ARCHITECTURES.get(str(image.get("Architecture") or "x86_64"))
            if arch is None:
                continue  # i386, the mac architectures: nothing karpy launches
            deprecated = _seconds(image.get("DeprecationTime"), float("inf")) <= now
            if deprecated:
                for path in mutable.get(image_id, ()):
                    if cache.expire_parameter(path, older_than=DEPRECATED_RECHECK):
                        log.info("AMI %s of %s is deprecated: reading the parameter again", image_id, path)
            for extra in known.get(image_id) or [()]:
                reqs = tuple(sorted((Requirement.in_(labels.ARCH, arch), *extra), key=lambda r: r.key))
                candidate = _Candidate(
                    image_id,
                    str(image.get("Name") or ""),
                    _seconds(image.get("CreationDate"), float("-inf")),
                    deprecated,
                    reqs,
                )
                key = frozenset(reqs)
                held = best.get(key)
                if held is None or candidate.rank() < held.rank():
                    best[key] = candidate
    chosen = sorted(best.values(), key=_Candidate.rank)
    return [AMI(c.id, c.name, c.deprecated, c.requirements) for c in chosen]


def amis_for(amis: Sequence[AMI], requirements: Requirements) -> list[AMI]:
    """The AMIs (in ``status.amis`` order) whose requirements an instance type with
    ``requirements`` meets; the first is what a launch uses."""
    return [
        ami
        for ami in amis
        if requirements.is_compatible(Requirements(ami.requirements), labels.CORE_WELL_KNOWN)
    ]
