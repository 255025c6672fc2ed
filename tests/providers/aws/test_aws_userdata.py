"""User data per AMI family (:mod:`karpy.providers.aws.userdata`), parsed back and checked field by field.

Pure: no AWS call, so no moto. MIME output is parsed with :mod:`email` (what cloud-init uses on the
node), NodeConfig parts with ``yaml.safe_load``, Bottlerocket with ``tomllib``, shell with ``shlex``.
"""

from __future__ import annotations

import base64
import email.message
import email.parser
import email.policy
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy import api
from karpy.model.nodeclass import KubeletConfig
from karpy.model.taints import Taint
from karpy.providers.aws import userdata
from karpy.providers.aws.cluster import ClusterInfo
from karpy.providers.aws.userdata import BootstrapOptions, UserDataError

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "upstream-examples" / "nodepools"
CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBADANBgkqhkiG\n-----END CERTIFICATE-----\n"
).decode()
ENDPOINT = "https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com"
CLUSTER = ClusterInfo(
    name="test-cluster",
    endpoint=ENDPOINT,
    ca_bundle=CA,
    service_cidr="172.20.0.0/16",
    dns_ip="172.20.0.10",
    kubernetes_version="1.31",
)
REG = "karpenter.sh/unregistered"
NO_SYNC = "karpenter.sh/do-not-sync-taints"
LABELS = {
    "karpenter.sh/nodepool": "default",
    "karpenter.sh/capacity-type": "on-demand",
    "node.kubernetes.io/instance-type": "m5.large",
    "topology.kubernetes.io/zone": "us-west-2a",
    "kubernetes.io/arch": "amd64",
    "team": "blue",
    # restricted: dropped
    "kubernetes.io/custom": "x",
    "node-role.kubernetes.io/worker": "",
    "example.k8s.io/thing": "y",
    "node-restriction.kubernetes.io/pool": "z",
}
KEPT_LABELS = {
    "karpenter.sh/nodepool": "default",
    "karpenter.sh/capacity-type": "on-demand",
    "node.kubernetes.io/instance-type": "m5.large",
    "topology.kubernetes.io/zone": "us-west-2a",
    "kubernetes.io/arch": "amd64",
    "team": "blue",
    NO_SYNC: "true",
}
TAINTS = (
    Taint(key="gpu", value="true", effect="NoSchedule"),
    Taint(key="example.com/startup", effect="NoExecute"),
    Taint(key="dedicated", value="ml", effect="PreferNoSchedule"),
)
FULL_KUBELET = KubeletConfig(
    max_pods=30,
    pods_per_core=4,
    kube_reserved={"cpu": "100m", "memory": "500Mi"},
    system_reserved={"memory": "200Mi", "cpu": "50m"},
    eviction_hard={"nodefs.available": "10%", "memory.available": "5%"},
    eviction_soft={"memory.available": "10%"},
    eviction_soft_grace_period={"memory.available": "1m30s"},
    eviction_max_pod_grace_period=60,
    image_gc_high_threshold_percent=85,
    image_gc_low_threshold_percent=80,
    cpu_cfs_quota=False,
)


def _options(**overrides: Any) -> BootstrapOptions:
    values: dict[str, Any] = {
        "cluster": CLUSTER,
        "kubelet": KubeletConfig(),
        "max_pods": 29,
        "taints": TAINTS,
        "labels": dict(LABELS),
    }
    values.update(overrides)
    return BootstrapOptions(**values)


def _example_user_data(name: str) -> str:
    loaded = api.load_paths([EXAMPLES / name])
    assert loaded.problems == []
    (node_class,) = loaded.ec2_node_classes
    assert node_class.user_data
    return node_class.user_data


def _parts(text: str) -> list[email.message.Message]:
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
    assert message["MIME-Version"] == "1.0"
    assert message.get_content_type() == "multipart/mixed"
    assert message.get_param("boundary") == "//"
    assert message.defects == []  # well formed, close delimiter included
    payload = message.get_payload()
    assert isinstance(payload, list)
    return payload


def _node_config(part: email.message.Message) -> dict[str, Any]:
    assert part["Content-Type"] == "application/node.eks.aws"
    body = part.get_payload()
    assert isinstance(body, str)
    assert body.startswith("# Karpy Generated NodeConfig\n")
    config = yaml.safe_load(body)
    assert config["apiVersion"] == "node.eks.aws/v1alpha1"
    assert config["kind"] == "NodeConfig"
    return config


def _flags(arg: str) -> dict[str, str]:
    """``--a=b --c=d`` -> {"--a": "b", "--c": "d"} (each flag once)."""
    out: dict[str, str] = {}
    for word in arg.split(" "):
        name, _, value = word.partition("=")
        assert name not in out
        out[name] = value
    return out


def _bootstrap_argv(script: str) -> list[str]:
    lines = script.split("\n")
    assert lines[0] == "#!/bin/bash -xe"
    assert lines[1] == "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1"
    return shlex.split("\n".join(lines[2:]).replace(" \\\n", " "))


def _argv_options(argv: list[str]) -> dict[str, str]:
    """bootstrap.sh's ``--name value`` options (after the cluster name)."""
    assert argv[0] == "/etc/eks/bootstrap.sh"
    rest = argv[2:]
    assert len(rest) % 2 == 0
    return dict(zip(rest[::2], rest[1::2], strict=True))


# --- AL2023 ----------------------------------------------------------------------------------------


def test_al2023_node_config_field_by_field() -> None:
    options = _options(kubelet=FULL_KUBELET, max_pods=58, kube_reserved={"cpu": "80m", "memory": "893Mi"})
    (part,) = _parts(userdata.render("AL2023", "", options))
    config = _node_config(part)
    assert config["spec"] == {
        "cluster": {
            "name": "test-cluster",
            "apiServerEndpoint": ENDPOINT,
            "certificateAuthority": CA,
            "cidr": "172.20.0.0/16",
        },
        "kubelet": {
            "config": {
                "clusterDNS": ["172.20.0.10"],
                "maxPods": 58,  # the options' pods, not kubelet.max_pods
                "podsPerCore": 4,
                "kubeReserved": {"cpu": "80m", "memory": "893Mi"},  # the resolved options win
                "systemReserved": {"cpu": "50m", "memory": "200Mi"},  # empty in options: the kubelet's
                "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
                "evictionSoft": {"memory.available": "10%"},
                "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                "evictionMaxPodGracePeriod": 60,
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
                "cpuCFSQuota": False,
                "registerWithTaints": [
                    {"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"},
                    {"key": "example.com/startup", "effect": "NoExecute"},
                    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                    {"key": REG, "effect": "NoExecute"},
                ],
            },
            "flags": ["--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(KEPT_LABELS.items()))],
        },
    }
    assert base64.b64decode(config["spec"]["cluster"]["certificateAuthority"]).startswith(b"-----BEGIN")


def test_al2023_sets_only_the_kubelet_fields_that_are_set() -> None:
    (part,) = _parts(
        userdata.render(
            "AL2023",
            "",
            _options(
                max_pods=None,
                cluster=ClusterInfo(name="c", endpoint=ENDPOINT, ca_bundle=CA, service_cidr="10.100.0.0/16"),
            ),
        )
    )
    kubelet = _node_config(part)["spec"]["kubelet"]["config"]
    assert set(kubelet) == {"registerWithTaints"}  # no DNS known, no max pods, nothing else set
    assert "instance" not in _node_config(part)["spec"]


def test_al2023_kubelet_cluster_dns_wins_over_discovered() -> None:
    options = _options(kubelet=KubeletConfig(cluster_dns=("10.0.0.53", "10.0.0.54")))
    (part,) = _parts(userdata.render("AL2023", "", options))
    assert _node_config(part)["spec"]["kubelet"]["config"]["clusterDNS"] == ["10.0.0.53", "10.0.0.54"]


def test_al2023_upstream_example_mime_parts_first_in_order_then_karpy() -> None:
    parts = _parts(userdata.render("AL2023", _example_user_data("al2023-custom-userdata.yaml"), _options()))
    assert [p["Content-Type"] for p in parts] == [
        "application/node.eks.aws",
        'text/x-shellscript; charset="us-ascii"',
        "application/node.eks.aws",
    ]
    user_config = yaml.safe_load(parts[0].get_payload())
    assert user_config["spec"] == {"instance": {"localStorage": {"strategy": "Mount"}}}
    assert parts[1].get_payload() == '#!/bin/bash\necho "Hello, AL2023!"'
    assert _node_config(parts[2])["spec"]["cluster"]["name"] == "test-cluster"


def test_al2023_nested_and_other_boundary_mime_is_flattened_with_headers() -> None:
    user = (
        'Content-Type: multipart/mixed; boundary="OUTER"\nMIME-Version: 1.0\n\n'
        "--OUTER\nContent-Type: text/cloud-config\n\n#cloud-config\npackages: [jq]\n"
        '--OUTER\nContent-Type: multipart/alternative; boundary="INNER"\n\n'
        "--INNER\nContent-Type: text/x-shellscript\nContent-Disposition: attachment; filename=a.sh\n\n"
        "#!/bin/sh\necho a\n--INNER--\n"
        "--OUTER--\n"
    )
    parts = _parts(userdata.render("AL2023", user, _options()))
    assert [p.get_content_type() for p in parts] == [
        "text/cloud-config",
        "text/x-shellscript",
        "application/node.eks.aws",
    ]
    assert parts[0].get_payload() == "#cloud-config\npackages: [jq]"
    assert parts[1]["Content-Disposition"] == "attachment; filename=a.sh"
    assert parts[1].get_payload() == "#!/bin/sh\necho a"


@pytest.mark.parametrize(
    ("user", "content_type"),
    [
        (
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n"
            "      shutdownGracePeriod: 30s\n",
            "application/node.eks.aws",
        ),
        (
            '{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {}}',
            "application/node.eks.aws",
        ),
        ("#!/bin/bash\necho hello\n", 'text/x-shellscript; charset="us-ascii"'),
        ("#cloud-config\nruncmd:\n  - echo hi\n", "text/cloud-config"),
        ("key: value\n", 'text/x-shellscript; charset="us-ascii"'),  # a mapping, but not a NodeConfig
    ],
    ids=["nodeconfig-yaml", "nodeconfig-json", "shell", "cloud-config", "other-yaml"],
)
def test_al2023_bare_user_data_is_wrapped_by_kind(user: str, content_type: str) -> None:
    parts = _parts(userdata.render("AL2023", user, _options()))
    assert len(parts) == 2
    assert parts[0]["Content-Type"] == content_type
    assert parts[0].get_payload() == user  # byte for byte: the delimiter's own line break is added
    _node_config(parts[1])


def test_al2023_raid0_sets_local_storage_strategy() -> None:
    (part,) = _parts(userdata.render("AL2023", "", _options(instance_store_policy="RAID0")))
    assert _node_config(part)["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}


def test_al2023_without_service_cidr_cannot_bootstrap() -> None:
    cluster = ClusterInfo(name="c", endpoint=ENDPOINT, ca_bundle=CA)
    with pytest.raises(UserDataError, match="service CIDR"):
        userdata.render("AL2023", "", _options(cluster=cluster))


def test_al2023_ca_bundle_must_be_base64() -> None:
    cluster = ClusterInfo(name="c", endpoint=ENDPOINT, ca_bundle="not base64!", service_cidr="10.0.0.0/16")
    with pytest.raises(UserDataError, match="base64"):
        userdata.render("AL2023", "", _options(cluster=cluster))


@pytest.mark.parametrize(
    "user",
    [
        "MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n--//\nContent-Type: text/plain\n\nx\n--//--\n",
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\nno delimiter at all\n',
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\n\necho x\n--//\n--B--\n',
    ],
    ids=["no-boundary", "no-parts", "part-holds-our-boundary"],
)
def test_al2023_bad_mime_raises(user: str) -> None:
    with pytest.raises(UserDataError):
        userdata.render("AL2023", user, _options())


# --- AL2 ---------------------------------------------------------------------------------------------


def test_al2_upstream_example_user_part_first_then_bootstrap_script() -> None:
    user = _example_user_data("al2-custom-userdata.yaml")
    parts = _parts(userdata.render("AL2", user, _options(kubelet=FULL_KUBELET)))
    assert [p["Content-Type"] for p in parts] == ['text/x-shellscript; charset="us-ascii"'] * 2
    assert parts[0].get_payload() == '#!/bin/bash\necho "Running a custom user data script"\n'
    argv = _bootstrap_argv(str(parts[1].get_payload()))
    assert argv[1] == "test-cluster"
    opts = _argv_options(argv)
    assert list(opts) == [
        "--apiserver-endpoint",
        "--b64-cluster-ca",
        "--dns-cluster-ip",
        "--use-max-pods",
        "--kubelet-extra-args",
    ]
    assert opts["--apiserver-endpoint"] == ENDPOINT
    assert opts["--b64-cluster-ca"] == CA
    assert opts["--dns-cluster-ip"] == "172.20.0.10"
    assert opts["--use-max-pods"] == "false"
    args = opts["--kubelet-extra-args"].split(" ")
    assert [a.partition("=")[0] for a in args] == [
        "--node-labels",
        "--register-with-taints",
        "--max-pods",
        "--pods-per-core",
        "--system-reserved",
        "--kube-reserved",
        "--eviction-hard",
        "--eviction-soft",
        "--eviction-soft-grace-period",
        "--eviction-max-pod-grace-period",
        "--image-gc-high-threshold",
        "--image-gc-low-threshold",
        "--cpu-cfs-quota",
    ]
    assert _flags(opts["--kubelet-extra-args"]) == {
        "--node-labels": ",".join(f"{k}={v}" for k, v in sorted(KEPT_LABELS.items())),
        "--register-with-taints": f"dedicated=ml:PreferNoSchedule,example.com/startup:NoExecute,"
        f"gpu=true:NoSchedule,{REG}:NoExecute",
        "--max-pods": "29",
        "--pods-per-core": "4",
        "--system-reserved": "cpu=50m,memory=200Mi",
        "--kube-reserved": "cpu=100m,memory=500Mi",
        "--eviction-hard": "memory.available<5%,nodefs.available<10%",
        "--eviction-soft": "memory.available<10%",
        "--eviction-soft-grace-period": "memory.available=1m30s",
        "--eviction-max-pod-grace-period": "60",
        "--image-gc-high-threshold": "85",
        "--image-gc-low-threshold": "80",
        "--cpu-cfs-quota": "false",
    }


def test_al2_plain_script_is_wrapped_as_shell_part() -> None:
    parts = _parts(userdata.render("AL2", "#!/bin/bash\necho plain\n", _options()))
    assert parts[0]["Content-Type"] == 'text/x-shellscript; charset="us-ascii"'
    assert parts[0].get_payload() == "#!/bin/bash\necho plain\n"
    assert _bootstrap_argv(str(parts[1].get_payload()))[0] == "/etc/eks/bootstrap.sh"


def test_al2_ipv6_raid0_and_no_max_pods() -> None:
    cluster = ClusterInfo(name="c6", endpoint=ENDPOINT, ca_bundle=CA, dns_ip="fd00::a", ip_family="ipv6")
    (part,) = _parts(
        userdata.render("AL2", "", _options(cluster=cluster, max_pods=None, instance_store_policy="RAID0"))
    )
    opts = _argv_options(_bootstrap_argv(str(part.get_payload())))
    assert opts["--ip-family"] == "ipv6"
    assert opts["--dns-cluster-ip"] == "fd00::a"
    assert opts["--local-disks"] == "raid0"
    assert "--use-max-pods" not in opts
    assert "--max-pods" not in _flags(opts["--kubelet-extra-args"])


def test_al2_quotes_hostile_values_for_the_shell() -> None:
    cluster = ClusterInfo(name="it's $(reboot)", endpoint="https://x'; rm -rf /; '", ca_bundle=CA)
    (part,) = _parts(userdata.render("AL2", "", _options(cluster=cluster)))
    argv = _bootstrap_argv(str(part.get_payload()))
    assert argv[1] == "it's $(reboot)"
    assert _argv_options(argv)["--apiserver-endpoint"] == "https://x'; rm -rf /; '"


# --- Bottlerocket ------------------------------------------------------------------------------------


def test_bottlerocket_upstream_example_keeps_kube_api_qps_and_sets_everything() -> None:
    user = _example_user_data("br-custom-userdata.yaml")
    document = tomllib.loads(userdata.render("Bottlerocket", user, _options(kubelet=FULL_KUBELET)))
    assert document == {
        "settings": {
            "kubernetes": {
                "kube-api-qps": 30,  # the user's, kept
                "cluster-name": "test-cluster",
                "api-server": ENDPOINT,
                "cluster-certificate": CA,
                "cluster-dns-ip": "172.20.0.10",
                "max-pods": 29,
                "node-labels": KEPT_LABELS,
                "node-taints": {
                    "dedicated": ["ml:PreferNoSchedule"],
                    "example.com/startup": [":NoExecute"],
                    "gpu": ["true:NoSchedule"],
                    REG: [":NoExecute"],
                },
                "system-reserved": {"cpu": "50m", "memory": "200Mi"},
                "kube-reserved": {"cpu": "100m", "memory": "500Mi"},
                "eviction-hard": {"memory.available": "5%", "nodefs.available": "10%"},
                "eviction-soft": {"memory.available": "10%"},
                "eviction-soft-grace-period": {"memory.available": "1m30s"},
                "eviction-max-pod-grace-period": 60,
                "image-gc-high-threshold-percent": "85",
                "image-gc-low-threshold-percent": "80",
                "cpu-cfs-quota-enforced": False,
            }
        }
    }


def test_bottlerocket_merges_labels_replaces_taints_keeps_other_settings() -> None:
    user = """
[settings.kubernetes]
cluster-name = "someone-else"
max-pods = 7
node-labels = { "team" = "red", "user/only" = "kept" }
[settings.kubernetes.node-taints]
"user/taint" = ["a:NoSchedule"]
[settings.host-containers.admin]
enabled = true
[settings.autoscaling]
should-wait = true
[settings.bootstrap-commands.010-user]
commands = [["echo", "hi"]]
essential = false
mode = "once"
"""
    settings_ = tomllib.loads(userdata.render("Bottlerocket", user, _options(instance_store_policy="RAID0")))[
        "settings"
    ]
    k8s = settings_["kubernetes"]
    assert k8s["cluster-name"] == "test-cluster"
    assert k8s["max-pods"] == 29
    assert k8s["node-labels"] == {**KEPT_LABELS, "user/only": "kept"}  # team=blue: karpy wins
    assert "user/taint" not in k8s["node-taints"]
    assert k8s["node-taints"][REG] == [":NoExecute"]
    assert settings_["host-containers"] == {"admin": {"enabled": True}}
    assert settings_["autoscaling"] == {"should-wait": False}
    assert settings_["bootstrap-commands"] == {
        "010-user": {"commands": [["echo", "hi"]], "essential": False, "mode": "once"},
        "000-mount-instance-storage": {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                [
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods",
                ],
            ],
            "essential": True,
            "mode": "always",
        },
    }


def test_bottlerocket_without_raid0_or_dns_or_pods_leaves_them_out() -> None:
    cluster = ClusterInfo(name="c", endpoint=ENDPOINT, ca_bundle=CA)
    settings_ = tomllib.loads(userdata.render("Bottlerocket", "", _options(cluster=cluster, max_pods=None)))[
        "settings"
    ]
    assert set(settings_) == {"kubernetes"}
    assert set(settings_["kubernetes"]) == {
        "cluster-name",
        "api-server",
        "cluster-certificate",
        "node-labels",
        "node-taints",
    }


def test_bottlerocket_several_dns_ips_are_a_list() -> None:
    options = _options(kubelet=KubeletConfig(cluster_dns=("10.0.0.53", "169.254.20.10")))
    k8s = tomllib.loads(userdata.render("Bottlerocket", "", options))["settings"]["kubernetes"]
    assert k8s["cluster-dns-ip"] == ["10.0.0.53", "169.254.20.10"]


def test_bottlerocket_output_has_sorted_keys() -> None:
    user = "[settings.kubernetes]\nzzz-user = 1\naaa-user = 2\n[settings.aaa]\nb = 1\na = 2\n"
    text = userdata.render("Bottlerocket", user, _options())
    headers = re.findall(r"^\[(.+)\]$", text, re.MULTILINE)
    assert headers == sorted(headers)
    kubernetes = text.split("[settings.kubernetes]\n", 1)[1].split("\n\n", 1)[0]
    keys = [line.split(" = ")[0].strip('"') for line in kubernetes.splitlines()]
    assert keys == sorted(keys) and "aaa-user" in keys and "zzz-user" in keys
    aaa = text.split("[settings.aaa]\n", 1)[1].split("\n\n", 1)[0]
    assert aaa.splitlines() == ["a = 2", "b = 1"]


def test_bottlerocket_bad_toml_names_the_line() -> None:
    user = "[settings.kubernetes]\nkube-api-qps = = 30\n"
    with pytest.raises(UserDataError, match=r"line 2.*kube-api-qps = = 30"):
        userdata.render("Bottlerocket", user, _options())


def test_bottlerocket_kubernetes_must_be_a_table() -> None:
    with pytest.raises(UserDataError, match="'kubernetes'"):
        userdata.render("Bottlerocket", '[settings]\nkubernetes = "x"\n', _options())


# --- Windows -------------------------------------------------------------------------------------------

_PS_ARG = re.compile(r"-(\w+) '((?:[^']|'')*)'")


def _ps_call(line: str) -> dict[str, str]:
    assert line.startswith("& $EKSBootstrapScriptFile ")
    found = {name: value.replace("''", "'") for name, value in _PS_ARG.findall(line)}
    assert _PS_ARG.sub("", line[len("& $EKSBootstrapScriptFile ") :]).strip() == ""  # nothing else
    return found


@pytest.mark.parametrize("family", ["Windows2019", "Windows2022", "Windows2025"])
def test_windows_upstream_example_user_script_then_bootstrap(family: str) -> None:
    user = _example_user_data("windows-custom-userdata.yaml")
    text = userdata.render(
        family, user, _options(kubelet=KubeletConfig(eviction_hard={"memory.available": "5%"}))
    )
    lines = text.split("\n")
    assert lines[0] == "<powershell>"
    assert lines[1:3] == [
        "New-Item -Path 'C:\\temp\\' -ItemType Directory",
        "New-Item -Path 'C:\\temp\\sample.txt' -ItemType File",
    ]
    assert (
        lines[3]
        == '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"'
    )
    assert lines[5] == "</powershell>" and len(lines) == 6
    call = _ps_call(lines[4])
    assert list(call) == [
        "EKSClusterName",
        "APIServerEndpoint",
        "Base64ClusterCA",
        "KubeletExtraArgs",
        "DNSClusterIP",
    ]
    assert call["EKSClusterName"] == "test-cluster"
    assert call["APIServerEndpoint"] == ENDPOINT
    assert call["Base64ClusterCA"] == CA
    assert call["DNSClusterIP"] == "172.20.0.10"
    assert _flags(call["KubeletExtraArgs"]) == {
        "--node-labels": ",".join(f"{k}={v}" for k, v in sorted(KEPT_LABELS.items())),
        "--register-with-taints": f"dedicated=ml:PreferNoSchedule,example.com/startup:NoExecute,"
        f"gpu=true:NoSchedule,{REG}:NoExecute",
        "--max-pods": "29",
        "--eviction-hard": "memory.available<5%",
    }


def test_windows_unwraps_a_user_powershell_block_and_escapes_quotes() -> None:
    cluster = ClusterInfo(name="o'brien", endpoint=ENDPOINT)
    text = userdata.render(
        "Windows2022", "<powershell>\nWrite-Host hi\n</powershell>\n", _options(cluster=cluster)
    )
    assert text.count("<powershell>") == 1 and text.count("</powershell>") == 1
    lines = text.split("\n")
    assert lines[1] == "Write-Host hi"
    call = _ps_call(lines[3])
    assert call["EKSClusterName"] == "o'brien"
    assert "Base64ClusterCA" not in call


def test_windows_without_user_data() -> None:
    lines = userdata.render("Windows2025", "", _options()).split("\n")
    assert lines[0] == "<powershell>" and lines[1].startswith("[string]$EKSBootstrapScriptFile")


# --- Custom, labels, taints, sizes, determinism ----------------------------------------------------------


def test_custom_is_verbatim() -> None:
    user = "#!/bin/bash\n/etc/eks/bootstrap.sh mine --kubelet-extra-args '--register-with-taints=x:NoExecute'"
    user += "\r\n  \n"
    assert userdata.render("Custom", user, _options()) == user


@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/nodepool",
        "team",
        "example.com/x",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "kubernetes.io/hostname",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "kubelet.kubernetes.io/anything",
        "node.kubernetes.io/anything",
        "sub.node.kubernetes.io/x",
        "sub.kubelet.kubernetes.io/x",
        "notkubernetes.io/x",
    ],
)
def test_kubelet_allowed_labels_are_kept(key: str) -> None:
    assert userdata.is_kubelet_label(key)
    (part,) = _parts(userdata.render("AL2023", "", _options(labels={key: "v"})))
    assert f"{key}=v" in _node_config(part)["spec"]["kubelet"]["flags"][0].removeprefix(
        "--node-labels="
    ).split(",")


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/custom",
        "k8s.io/x",
        "node-role.kubernetes.io/worker",
        "topology.kubernetes.io/rack",
        "example.k8s.io/x",
        "node-restriction.kubernetes.io/pool",
        "a.node-restriction.kubernetes.io/pool",
    ],
)
def test_restricted_labels_are_dropped(key: str) -> None:
    assert not userdata.is_kubelet_label(key)
    for family in ("AL2023", "AL2", "Bottlerocket", "Windows2022"):
        assert key not in userdata.render(family, "", _options(labels={key: "v", "team": "blue"}))


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket", "Windows2022"])
def test_registration_taint_present_exactly_once(family: str) -> None:
    taints = (*TAINTS, Taint(key=REG, effect="NoExecute"), Taint(key=REG, value="x", effect="NoExecute"))
    text = userdata.render(family, "", _options(taints=taints))
    assert text.count(REG) == 1
    assert text.count(NO_SYNC) == 1


def test_taints_with_the_same_key_and_effect_are_deduplicated_deterministically() -> None:
    taints = (
        Taint(key="a", value="2", effect="NoSchedule"),
        Taint(key="a", value="1", effect="NoSchedule"),
        Taint(key="a", value="1", effect="NoExecute"),
    )
    (part,) = _parts(userdata.render("AL2023", "", _options(taints=taints)))
    assert _node_config(part)["spec"]["kubelet"]["config"]["registerWithTaints"] == [
        {"key": "a", "value": "1", "effect": "NoExecute"},
        {"key": "a", "value": "1", "effect": "NoSchedule"},
        {"key": REG, "effect": "NoExecute"},
    ]


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket", "Windows2019", "Custom"])
def test_user_data_over_16_kib_is_rejected(family: str) -> None:
    big = "#" + "x" * userdata.MAX_USER_DATA_BYTES
    if family == "Bottlerocket":  # a TOML comment would be dropped: a setting is kept
        big = '[settings]\nmotd = "' + "x" * userdata.MAX_USER_DATA_BYTES + '"\n'
    with pytest.raises(UserDataError, match="16384"):
        userdata.render(family, big, _options())


def test_size_limit_counts_bytes_not_characters() -> None:
    assert userdata.render("Custom", "x" * 16384, _options()) == "x" * 16384
    with pytest.raises(UserDataError):
        userdata.render("Custom", "é" * 8193, _options())  # 8193 characters, 16386 bytes


def test_unknown_family_is_rejected_and_family_case_is_forgiven() -> None:
    with pytest.raises(UserDataError, match="unknown AMI family"):
        userdata.render("Ubuntu", "", _options())
    assert userdata.render("al2023", "", _options()) == userdata.render("AL2023", "", _options())


_LABEL_KEYS = st.sampled_from([*sorted(LABELS), "a", "b/c", "z.example.com/d"])
_TAINT = st.builds(
    Taint,
    key=st.sampled_from(["gpu", "dedicated", "example.com/x", REG]),
    effect=st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
    value=st.sampled_from(["", "true", "ml"]),
)


@settings(max_examples=60, deadline=None)
@given(
    labels=st.dictionaries(_LABEL_KEYS, st.sampled_from(["v1", "v2", ""]), max_size=8),
    taints=st.lists(_TAINT, max_size=6),
    data=st.data(),
)
def test_any_label_and_taint_order_gives_identical_output(
    labels: dict[str, str], taints: list[Taint], data: st.DataObject
) -> None:
    shuffled_taints = data.draw(st.permutations(taints))
    shuffled_labels = dict(data.draw(st.permutations(list(labels.items()))))
    for family in ("AL2023", "AL2", "Bottlerocket", "Windows2022"):
        first = userdata.render(family, "", _options(labels=labels, taints=tuple(taints)))
        again = userdata.render(family, "", _options(labels=shuffled_labels, taints=tuple(shuffled_taints)))
        assert first == again
