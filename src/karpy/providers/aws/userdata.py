"""The user data an EC2 instance boots with, per AMI family (upstream ``amifamily/bootstrap``).

:func:`render` merges the EC2NodeClass ``userData`` with what karpy needs the node to register
with: cluster (name, endpoint, CA, service CIDR, DNS), kubelet settings, max pods, labels and
taints. Called by the launch-template provider, which hashes the result into the launch
template's name, so the output is deterministic: labels, taints and every map are sorted.

Every family but ``Custom`` registers with ``karpenter.sh/unregistered:NoExecute`` and the
label ``karpenter.sh/do-not-sync-taints=true``; labels a kubelet may not set on itself
(``kubernetes.io``/``k8s.io`` domains other than the kubelet-allowed ones) are dropped.

- **AL2023** (nodeadm): a MIME multipart archive (boundary ``//``). The user's parts come first
  (a MIME archive's leaf parts copied in order with their headers, a bare NodeConfig wrapped as
  ``application/node.eks.aws``, a ``#cloud-config`` document as ``text/cloud-config``, anything
  else as a shell script), karpy's NodeConfig last, so nodeadm's merge lets karpy's values win.
  No service CIDR means nodeadm cannot bootstrap: :class:`UserDataError`.
- **AL2**: the same archive with karpy's ``/etc/eks/bootstrap.sh`` script as the last part.
- **Bottlerocket**: the user data is TOML; karpy overwrites ``settings.kubernetes.*`` (labels
  merged with karpy's winning, taints replaced). Unlike upstream, which drops settings it does
  not model, karpy keeps every other setting the user wrote: a TOML the user wrote is theirs.
- **Windows2019/2022/2025**: a ``<powershell>`` block: the user's script, then
  ``Start-EKSBootstrap.ps1``. A user script already wrapped in ``<powershell>`` is unwrapped.
- **Custom**: the user data verbatim; the user must register with the registration taint.

Rendered user data over EC2's 16 KiB (raw, before base64) is a :class:`UserDataError`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import email.parser
import email.policy
import ipaddress
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import tomli_w
import yaml

from karpy.model.nodeclass import KubeletConfig
from karpy.model.taints import UNREGISTERED, Taint
from karpy.providers.aws.cluster import ClusterInfo

__all__ = [
    "DO_NOT_SYNC_TAINTS_LABEL",
    "FAMILIES",
    "MAX_USER_DATA_BYTES",
    "BootstrapOptions",
    "UserDataError",
    "is_kubelet_label",
    "render",
]

MAX_USER_DATA_BYTES = 16384  # EC2: 16 KB of user data, before base64
DO_NOT_SYNC_TAINTS_LABEL = "karpenter.sh/do-not-sync-taints"
FAMILIES = ("AL2023", "AL2", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025")

BOUNDARY = "//"
SHELL = 'text/x-shellscript; charset="us-ascii"'
NODE_CONFIG = "application/node.eks.aws"
CLOUD_CONFIG = "text/cloud-config"

# k8s.io/api/core/v1 + kubelet: the well-known labels a kubelet may set on its own Node
_KUBELET_LABELS = frozenset(
    {
        *("kubernetes.io/arch", "kubernetes.io/os", "kubernetes.io/hostname", "beta.kubernetes.io/arch"),
        *("beta.kubernetes.io/os", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"),
        *("topology.kubernetes.io/region", "topology.kubernetes.io/zone"),
        *("failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone"),
    }
)
_KUBELET_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")
_RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io")
_BOUNDARY_LINE = re.compile(r"^--" + re.escape(BOUNDARY) + r"(--)?[ \t]*$", re.MULTILINE)
# (KubeletConfiguration key, Bottlerocket settings.kubernetes key ("" = none), KubeletConfig attribute)
_PASS_THROUGH = (
    ("podsPerCore", "", "pods_per_core"),
    ("systemReserved", "system-reserved", "system_reserved"),
    ("kubeReserved", "kube-reserved", "kube_reserved"),
    ("evictionHard", "eviction-hard", "eviction_hard"),
    ("evictionSoft", "eviction-soft", "eviction_soft"),
    ("evictionSoftGracePeriod", "eviction-soft-grace-period", "eviction_soft_grace_period"),
    ("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", "eviction_max_pod_grace_period"),
    ("imageGCHighThresholdPercent", "image-gc-high-threshold-percent", "image_gc_high_threshold_percent"),
    ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent", "image_gc_low_threshold_percent"),
    ("cpuCFSQuota", "cpu-cfs-quota-enforced", "cpu_cfs_quota"),
)
_TOML_LINE = re.compile(r"at line (\d+)")
_EPHEMERAL_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")  # moved onto the RAID0 array
_EKS_BOOTSTRAP_PS1 = (
    '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"'
)


class UserDataError(ValueError):
    """The user data cannot be rendered: unparseable TOML/MIME, too large, or missing cluster facts."""


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """What the node registers with. Empty ``kube_reserved``/``system_reserved``/``eviction_hard``
    fall back to the NodeClass kubelet's; ``max_pods`` None passes no max pods."""

    cluster: ClusterInfo
    kubelet: KubeletConfig
    max_pods: int | None = None
    taints: tuple[Taint, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    instance_store_policy: str | None = None
    kube_reserved: dict[str, str] = field(default_factory=dict)
    system_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Node:
    """The options resolved once: filtered sorted labels, deduplicated sorted taints, DNS, kubelet."""

    labels: tuple[tuple[str, str], ...]
    taints: tuple[Taint, ...]
    dns: tuple[str, ...]
    kubelet: KubeletConfig  # with the resolved kube/system reserved and eviction-hard
    raid0: bool


def is_kubelet_label(key: str) -> bool:
    """Whether a kubelet may set label ``key`` on its own Node (the NodeRestriction rules)."""
    if "/" not in key:
        return True
    domain = key.split("/", 1)[0]
    if domain == "node-restriction.kubernetes.io" or domain.endswith(".node-restriction.kubernetes.io"):
        return False
    if key in _KUBELET_LABELS:
        return True
    if any(domain == d or domain.endswith("." + d) for d in _KUBELET_DOMAINS):
        return True
    return not any(domain == d or domain.endswith("." + d) for d in _RESTRICTED_DOMAINS)


def _resolve(options: BootstrapOptions) -> _Node:
    labels = {k: v for k, v in options.labels.items() if is_kubelet_label(k)}
    labels[DO_NOT_SYNC_TAINTS_LABEL] = "true"
    # one taint per (key, effect), as kubelet demands; the registration taint always wins its slot
    chosen: dict[tuple[str, str], Taint] = {(UNREGISTERED.key, UNREGISTERED.effect): UNREGISTERED}
    for taint in sorted(options.taints, key=_taint_order):
        chosen.setdefault((taint.key, taint.effect), taint)
    kubelet = options.kubelet
    dns = kubelet.cluster_dns or ((options.cluster.dns_ip,) if options.cluster.dns_ip else ())
    return _Node(
        labels=tuple(sorted(labels.items())),
        taints=tuple(sorted(chosen.values(), key=_taint_order)),
        dns=tuple(dns),
        kubelet=dataclasses.replace(
            kubelet,
            kube_reserved=dict(options.kube_reserved or kubelet.kube_reserved),
            system_reserved=dict(options.system_reserved or kubelet.system_reserved),
            eviction_hard=dict(options.eviction_hard or kubelet.eviction_hard),
        ),
        raid0=(options.instance_store_policy or "").upper() == "RAID0",
    )


def _taint_order(taint: Taint) -> tuple[str, str, str]:
    return (taint.key, taint.effect, taint.value)


def render(family: str, user_data: str, options: BootstrapOptions) -> str:
    """The user data (plain text, not base64) for an instance of AMI family ``family``
    (AL2023 | AL2 | Bottlerocket | Custom | Windows2019/2022/2025)."""
    canonical = {f.lower(): f for f in FAMILIES}.get(family.lower())
    if canonical is None:
        raise UserDataError(f"unknown AMI family {family!r} (expected one of {', '.join(FAMILIES)})")
    if canonical == "Custom":
        text = user_data
    else:
        build = {"AL2023": _al2023, "AL2": _al2, "Bottlerocket": _bottlerocket}.get(canonical, _windows)
        text = build(user_data, options=options, node=_resolve(options))
    size = len(text.encode("utf-8"))
    if size > MAX_USER_DATA_BYTES:
        raise UserDataError(
            f"{canonical} user data is {size} bytes, over EC2's limit of {MAX_USER_DATA_BYTES} bytes"
            " (UserDataSizeLimitExceeded)"
        )
    return text


# --- MIME (AL2023, AL2) --------------------------------------------------------------------------

_Part = tuple[tuple[tuple[str, str], ...], str]  # (headers, body)


def _is_mime(text: str) -> bool:
    head = text.lstrip().lower()
    return head.startswith("mime-version:") or head.startswith("content-type:")


def _mime_parts(text: str) -> list[_Part]:
    """The leaf parts of a MIME document, in order, each with its own headers and raw body.

    Parsed with Python's :mod:`email`, as cloud-init does on the node; nested multiparts are
    flattened into their leaves (cloud-init walks them the same way)."""
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
    if message.get_content_maintype() != "multipart":
        headers = tuple((k, str(v)) for k, v in message.items() if k.lower() != "mime-version")
        return [(headers, str(message.get_payload()))]
    parts: list[_Part] = []
    for part in message.walk():
        for defect in part.defects:
            name = type(defect).__name__
            if name in ("NoBoundaryInMultipartDefect", "StartBoundaryNotFoundDefect"):
                raise UserDataError(f"MIME user data is not a valid multipart archive ({name})")
        if part.is_multipart():
            continue
        headers = tuple((k, str(v)) for k, v in part.items())
        body = part.get_payload()
        if not isinstance(body, str):  # pragma: no cover - a leaf always has a string payload
            raise UserDataError("MIME user data has a part without a text body")
        if not headers and not body.strip():
            continue  # the empty "part" after a trailing delimiter without a close one
        parts.append((headers, body))
    return parts


def _user_parts(user_data: str, *, detect_node_config: bool) -> list[_Part]:
    text = user_data.replace("\r", "")
    if not text.strip():
        return []
    if _is_mime(text):
        return _mime_parts(text)
    if text.lstrip().startswith("#cloud-config"):
        return [((("Content-Type", CLOUD_CONFIG),), text)]
    if detect_node_config and _is_node_config(text):
        return [((("Content-Type", NODE_CONFIG),), text)]
    return [((("Content-Type", SHELL),), text)]


def _is_node_config(text: str) -> bool:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    if not isinstance(document, dict):
        return False
    return document.get("kind") == "NodeConfig" or str(document.get("apiVersion", "")).startswith(
        "node.eks.aws/"
    )


def _archive(parts: Iterable[_Part]) -> str:
    """A multipart/mixed archive, boundary ``//``, LF line ends (upstream strips the CRs too)."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for headers, body in parts:
        if _BOUNDARY_LINE.search(body):
            raise UserDataError(f"a user data part contains the MIME boundary line '--{BOUNDARY}'")
        lines.append(f"--{BOUNDARY}")
        lines.extend(f"{name}: {value}" for name, value in headers)
        lines.append("")
        lines.append(body)
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"


# --- AL2023 ----------------------------------------------------------------------------------------


def _al2023(user_data: str, *, options: BootstrapOptions, node: _Node) -> str:
    cluster = options.cluster
    if not cluster.service_cidr:
        raise UserDataError(
            f"AL2023 nodes cannot bootstrap without the cluster's service CIDR (cluster {cluster.name!r}:"
            " eks:DescribeCluster kubernetesNetworkConfig unknown); nodeadm requires spec.cluster.cidr"
        )
    spec_cluster: dict[str, Any] = {"name": cluster.name, "cidr": cluster.service_cidr}
    if cluster.endpoint:
        spec_cluster["apiServerEndpoint"] = cluster.endpoint
    if cluster.ca_bundle:
        spec_cluster["certificateAuthority"] = _b64(cluster.ca_bundle)
    kubelet: dict[str, Any] = {}
    if node.dns:
        kubelet["clusterDNS"] = list(node.dns)
    if options.max_pods is not None:
        kubelet["maxPods"] = options.max_pods
    kubelet.update(_kubelet_fields(node.kubelet, camel=True))
    kubelet["registerWithTaints"] = [
        {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})} for t in node.taints
    ]
    spec: dict[str, Any] = {
        "cluster": spec_cluster,
        "kubelet": {"config": kubelet, "flags": [_labels_flag(node)]},
    }
    if node.raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    config = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    body = "# Karpy Generated NodeConfig\n" + yaml.safe_dump(
        config, sort_keys=True, default_flow_style=False, width=1 << 20
    )
    parts = _user_parts(user_data, detect_node_config=True)
    return _archive([*parts, ((("Content-Type", NODE_CONFIG),), body)])


def _b64(ca: str) -> str:
    try:
        return base64.b64encode(base64.b64decode("".join(ca.split()), validate=True)).decode("ascii")
    except (binascii.Error, ValueError) as exc:
        raise UserDataError(f"the cluster CA bundle is not base64: {exc}") from exc


def _kubelet_fields(kubelet: KubeletConfig, *, camel: bool) -> dict[str, Any]:
    """The pass-through kubelet settings that are set, as KubeletConfiguration (camel) or
    Bottlerocket (kebab) keys; maps sorted."""
    out: dict[str, Any] = {}
    for camel_key, kebab_key, attr in _PASS_THROUGH:
        key, value = (camel_key if camel else kebab_key), getattr(kubelet, attr)
        if key and value is not None and value != {}:
            out[key] = dict(sorted(value.items())) if isinstance(value, dict) else value
    return out


def _labels_flag(node: _Node) -> str:
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in node.labels)


# --- AL2 and Windows (bootstrap scripts) ------------------------------------------------------------


def _extra_args(options: BootstrapOptions, node: _Node) -> str:
    """``--kubelet-extra-args`` / ``-KubeletExtraArgs``: kubelet flags in upstream's order."""
    kubelet = node.kubelet
    args = [_labels_flag(node), "--register-with-taints=" + ",".join(str(t) for t in node.taints)]
    if options.max_pods is not None:
        args.append(f"--max-pods={options.max_pods}")
    if kubelet.pods_per_core is not None:
        args.append(f"--pods-per-core={kubelet.pods_per_core}")
    for flag, values, sep in (
        ("--system-reserved", kubelet.system_reserved, "="),
        ("--kube-reserved", kubelet.kube_reserved, "="),
        ("--eviction-hard", kubelet.eviction_hard, "<"),
        ("--eviction-soft", kubelet.eviction_soft, "<"),
        ("--eviction-soft-grace-period", kubelet.eviction_soft_grace_period, "="),
    ):
        if values:
            args.append(f"{flag}=" + ",".join(f"{k}{sep}{v}" for k, v in sorted(values.items())))
    for flag, number in (
        ("--eviction-max-pod-grace-period", kubelet.eviction_max_pod_grace_period),
        ("--image-gc-high-threshold", kubelet.image_gc_high_threshold_percent),
        ("--image-gc-low-threshold", kubelet.image_gc_low_threshold_percent),
    ):
        if number is not None:
            args.append(f"{flag}={number}")
    if kubelet.cpu_cfs_quota is not None:
        args.append(f"--cpu-cfs-quota={'true' if kubelet.cpu_cfs_quota else 'false'}")
    return " ".join(args)


def _sh(value: str) -> str:
    """A POSIX-shell single-quoted word (:func:`shlex.quote`'s form, quoted even when safe)."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _ps(value: str) -> str:
    """A PowerShell single-quoted (verbatim) string."""
    return "'" + value.replace("'", "''") + "'"


def _is_ipv6(options: BootstrapOptions, node: _Node) -> bool:
    if options.cluster.ip_family.lower() == "ipv6":
        return True
    try:
        return bool(node.dns) and ipaddress.ip_address(node.dns[0]).version == 6
    except ValueError:
        return False


def _al2(user_data: str, *, options: BootstrapOptions, node: _Node) -> str:
    cluster = options.cluster
    first = f"/etc/eks/bootstrap.sh {_sh(cluster.name)} --apiserver-endpoint {_sh(cluster.endpoint)}"
    if cluster.ca_bundle:
        first += f" --b64-cluster-ca {_sh(cluster.ca_bundle)}"
    lines = [first]
    if _is_ipv6(options, node):
        lines.append("--ip-family ipv6")
    if node.dns:
        lines.append(f"--dns-cluster-ip {_sh(node.dns[0])}")
    if options.max_pods is not None:
        lines.append("--use-max-pods false")  # karpy's pods count, not bootstrap.sh's ENI table
    lines.append(f"--kubelet-extra-args {_sh(_extra_args(options, node))}")
    if node.raid0:
        lines.append("--local-disks raid0")
    script = (
        "#!/bin/bash -xe\n"
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n"
        + " \\\n".join(lines)
        + "\n"
    )
    parts = _user_parts(user_data, detect_node_config=False)
    return _archive([*parts, ((("Content-Type", SHELL),), script)])


def _windows(user_data: str, *, options: BootstrapOptions, node: _Node) -> str:
    cluster = options.cluster
    script = user_data.strip()
    if script.lower().startswith("<powershell>") and script.lower().endswith("</powershell>"):
        script = script[len("<powershell>") : -len("</powershell>")].strip("\r\n")
    call = (
        f"& $EKSBootstrapScriptFile -EKSClusterName {_ps(cluster.name)}"
        f" -APIServerEndpoint {_ps(cluster.endpoint)}"
    )
    if cluster.ca_bundle:
        call += f" -Base64ClusterCA {_ps(cluster.ca_bundle)}"
    call += f" -KubeletExtraArgs {_ps(_extra_args(options, node))}"
    if node.dns:
        call += f" -DNSClusterIP {_ps(node.dns[0])}"
    lines = ["<powershell>", *([script] if script else []), _EKS_BOOTSTRAP_PS1, call, "</powershell>"]
    return "\n".join(lines)


# --- Bottlerocket -------------------------------------------------------------------------------------


def _table(document: dict[str, Any], key: str, *, where: str) -> dict[str, Any]:
    value = document.setdefault(key, {})
    if not isinstance(value, dict):
        raise UserDataError(
            f"Bottlerocket user data: {key!r} in {where} must be a table, not {type(value).__name__}"
        )
    return value


def _parse_toml(user_data: str) -> dict[str, Any]:
    try:
        return tomllib.loads(user_data)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        where = ""
        if found:
            number = int(found.group(1))
            lines = user_data.splitlines()
            text = lines[number - 1] if 0 < number <= len(lines) else ""
            where = f"; line {number}: {text.strip()!r}"
        raise UserDataError(f"Bottlerocket user data must be TOML: {exc}{where}") from exc


def _bottlerocket(user_data: str, *, options: BootstrapOptions, node: _Node) -> str:
    document = _parse_toml(user_data)
    settings = _table(document, "settings", where="the document")
    k8s = _table(settings, "kubernetes", where="settings")
    cluster = options.cluster
    k8s["cluster-name"] = cluster.name
    if cluster.endpoint:
        k8s["api-server"] = cluster.endpoint
    if cluster.ca_bundle:
        k8s["cluster-certificate"] = cluster.ca_bundle
    if node.dns:
        k8s["cluster-dns-ip"] = node.dns[0] if len(node.dns) == 1 else list(node.dns)
    if options.max_pods is not None:
        k8s["max-pods"] = options.max_pods
    labels = _table(k8s, "node-labels", where="settings.kubernetes")
    labels.update(node.labels)
    taints: dict[str, list[str]] = {}
    for taint in node.taints:
        taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
    k8s["node-taints"] = taints
    for key, value in _kubelet_fields(node.kubelet, camel=False).items():
        if key.startswith("image-gc-"):
            value = str(value)  # Bottlerocket models these percentages as strings (upstream does too)
        k8s[key] = value
    autoscaling = settings.get("autoscaling")
    if isinstance(autoscaling, dict) and "should-wait" in autoscaling:
        autoscaling["should-wait"] = False  # karpy nodes join no Auto Scaling group: waiting blocks kubelet
    if node.raid0:
        commands = _table(settings, "bootstrap-commands", where="settings")
        commands["000-mount-instance-storage"] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                ["apiclient", "ephemeral-storage", "bind", "--dirs", *_EPHEMERAL_DIRS],
            ],
            "essential": True,
            "mode": "always",
        }
    return tomli_w.dumps(_sorted(document))


def _sorted(value: Any) -> Any:
    """Tables with their keys sorted, recursively (tomli_w keeps insertion order)."""
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value
