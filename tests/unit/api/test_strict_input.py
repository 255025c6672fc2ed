"""Unknown fields, as kubectl's field validation reports them: a warning naming file, object and the
field path with the nearest known name; with ``strict`` an error that drops the object (the others
still load). Only the upstream schema counts: status, metadata karpy does not read and fields of
structs karpy does not model never warn."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api import fields, karpenter_v1, load, nodeclasses
from karpy.sim import scenario

ROOT = Path(__file__).resolve().parents[3]

NODE_POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  disruption:
    consolidateAfer: 1m
    budgets: [{nodes: "10%"}, {nodes: "1", reason: [Empty]}]
  template:
    metadata: {lables: {team: a}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot], minvalues: 1}
  limits: {cpu: "100"}
  wieght: 10
"""
NODE_CLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  nodeSelecter: {disk: ssd}
  containers: [{name: web, image: nginx, resources: {requets: {cpu: 250m}}}]
"""


def paths(loaded: load.Loaded) -> list[tuple[str, str, str]]:
    return [(p.name, p.path, p.message) for p in loaded.warnings]


def test_each_unknown_field_is_a_warning_with_its_path_and_the_nearest_name() -> None:
    loaded = load.load_text("---\n".join([NODE_POOL, NODE_CLASS, POD]), file="in.yaml")
    assert loaded.problems == [] and loaded.skipped == []
    assert [p.name for p in loaded.node_pools] == ["default"]  # loaded all the same
    assert paths(loaded) == [
        ("default", "spec.disruption.consolidateAfer", "unknown field; did you mean consolidateAfter?"),
        ("default", "spec.disruption.budgets[1].reason", "unknown field; did you mean reasons?"),
        ("default", "spec.template.metadata.lables", "unknown field; did you mean labels?"),
        (
            "default",
            "spec.template.spec.requirements[0].minvalues",
            "unknown field; did you mean minValues?",
        ),
        ("default", "spec.wieght", "unknown field; did you mean weight?"),
        ("shop/web", "spec.nodeSelecter", "unknown field; did you mean nodeSelector?"),
        ("shop/web", "spec.containers[0].resources.requets", "unknown field; did you mean requests?"),
    ]
    line = str(loaded.warnings[0])
    assert line == (
        'in.yaml: document 0 (NodePool "default"): spec.disruption.consolidateAfer: unknown field; '
        "did you mean consolidateAfter?"
    )
    assert all(p.severity == load.WARNING for p in loaded.warnings)
    # the typo fell back to the default, which is why it is worth a warning
    assert loaded.node_pools[0].disruption.consolidate_after == 0.0


def test_a_name_far_from_every_known_one_has_no_suggestion() -> None:
    raw = yaml.safe_load(NODE_CLASS)
    raw["spec"]["zzzqqq"] = True
    found = fields.unknown_fields(raw, nodeclasses.EC2NodeClass)
    assert found == [fields.Unknown("spec.zzzqqq", None)]
    assert found[0].message == "unknown field"


def test_strict_makes_them_errors_and_drops_only_those_objects() -> None:
    clean_pool = NODE_POOL.replace("consolidateAfer", "consolidateAfter").replace("default}", "b}", 1)
    clean_pool = clean_pool.replace("lables", "labels").replace("minvalues", "minValues")
    clean_pool = clean_pool.replace("wieght", "weight").replace("reason:", "reasons:")
    text = "---\n".join([NODE_POOL, clean_pool, NODE_CLASS, POD])
    loaded = load.load_text(text, file="in.yaml", strict=True)
    assert loaded.warnings == []
    assert {p.name for p in loaded.problems} == {"default", "shop/web"}
    assert all(p.severity == load.ERROR for p in loaded.problems)
    assert len(loaded.problems) == 7
    assert [p.name for p in loaded.node_pools] == ["b"]  # the clean one is used
    assert loaded.pods == [] and len(loaded.ec2_node_classes) == 1


def test_status_metadata_and_unmodelled_structs_never_warn() -> None:
    pool = yaml.safe_load(NODE_POOL.replace("consolidateAfer", "consolidateAfter"))
    pool["spec"]["disruption"]["budgets"][1] = {"nodes": "1", "reasons": ["Empty"]}
    pool["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    pool["spec"]["template"]["spec"]["requirements"][0]["minValues"] = pool["spec"]["template"]["spec"][
        "requirements"
    ][0].pop("minvalues")
    pool["spec"]["weight"] = pool["spec"].pop("wieght")
    pool["metadata"].update(
        resourceVersion="7",
        uid="u-1",
        generation=3,
        finalizers=["karpenter.sh/termination"],
        managedFields=[{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
    )
    pool["status"] = {"conditions": [{"type": "Ready", "status": "True"}], "resources": {"cpu": "4"}}
    assert fields.unknown_fields(pool, karpenter_v1.NodePool) == []

    node_class = yaml.safe_load(NODE_CLASS)
    node_class["spec"].update(
        ipPrefixCount=2,
        subnetSelectorTerms=[{"cidr": "10.0.0.0/24"}],
        kubelet={"maxPods": 110, "evictionSoftGracePeriod": {"memory.available": "1m"}, "cpuCFSQuota": True},
        blockDeviceMappings=[{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}}],
        metadataOptions={"httpTokens": "required", "httpProtocolIPv6": "disabled"},
        capacityReservationSelectorTerms=[{"id": "cr-1"}],
        associatePublicIPAddress=False,
    )
    node_class["status"] = {"amis": [{"id": "ami-1", "whatever": 1}], "instanceProfile": "p"}
    assert fields.unknown_fields(node_class, nodeclasses.EC2NodeClass) == []


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
  annotations: {deployment.kubernetes.io/revision: "3"}
spec:
  replicas: 3
  revisionHistoryLimit: 5
  progressDeadlineSeconds: 600
  minReadySeconds: 5
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {prometheus.io/scrape: "true"}
      creationTimestamp: null
    spec:
      serviceAccountName: web
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, fsGroup: 2000}
      priorityClassName: high
      terminationGracePeriodSeconds: 30
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      imagePullSecrets: [{name: registry}]
      nodeSelector: {kubernetes.io/os: linux}
      os: {name: linux}
      tolerations: [{key: dedicated, operator: Equal, value: web, effect: NoSchedule, tolerationSeconds: 60}]
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector: {matchLabels: {app: web}}
          matchLabelKeys: [pod-template-hash]
          nodeAffinityPolicy: Honor
          nodeTaintsPolicy: Ignore
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 10
              preference: {matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]}
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
                namespaceSelector: {}
      volumes:
        - {name: cache, emptyDir: {sizeLimit: 1Gi}}
        - {name: config, configMap: {name: web}}
      initContainers:
        - name: migrate
          image: web:3
          command: [./migrate]
          restartPolicy: Always
          resources: {requests: {cpu: 50m}}
      containers:
        - name: web
          image: web:3
          imagePullPolicy: IfNotPresent
          args: [--port=8080]
          ports: [{name: http, containerPort: 8080, protocol: TCP}]
          env: [{name: MODE, value: prod}, {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
          envFrom: [{configMapRef: {name: web}}]
          resources:
            requests: {cpu: 500m, memory: 512Mi}
            limits: {memory: 1Gi}
          volumeMounts: [{name: cache, mountPath: /cache}]
          livenessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 10}
          readinessProbe: {tcpSocket: {port: 8080}}
          startupProbe: {exec: {command: [cat, /ready]}}
          lifecycle: {preStop: {sleep: {seconds: 5}}}
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
          terminationMessagePolicy: FallbackToLogsOnError
status:
  replicas: 3
  readyReplicas: 3
  conditions: [{type: Available, status: "True"}]
"""


def test_a_full_real_world_deployment_gives_no_warning() -> None:
    loaded = load.load_text(DEPLOYMENT, file="web.yaml")
    assert loaded.problems == [] and loaded.warnings == [] and len(loaded.deployments) == 1


def test_a_typo_under_a_struct_karpy_does_not_model_is_not_reported() -> None:
    raw = yaml.safe_load(DEPLOYMENT)
    raw["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["periodSecnds"] = 3
    assert load.load_objects([raw], file="x").warnings == []  # (from an API server: never checked)
    loaded = load.load_documents([("web.yaml", 0, raw)])
    assert loaded.warnings == []  # inside livenessProbe: upstream's, not karpy's, to check


def test_each_pod_of_a_shared_spec_gets_its_own_warning() -> None:
    pods = [yaml.safe_load(POD) for _ in range(3)]
    for i, pod in enumerate(pods):
        pod["metadata"]["name"] = f"web-{i}"
        pod["spec"]["nodeName"] = f"node-{i}"
    loaded = load.load_documents([("p.yaml", i, copy.deepcopy(p)) for i, p in enumerate(pods)])
    assert [(p.name, p.path) for p in loaded.warnings if p.path == "spec.nodeSelecter"] == [
        ("shop/web-0", "spec.nodeSelecter"),
        ("shop/web-1", "spec.nodeSelecter"),
        ("shop/web-2", "spec.nodeSelecter"),
    ]
    strict = load.load_documents([("p.yaml", i, p) for i, p in enumerate(pods)], checks=load.STRICT)
    assert strict.pods == [] and len(strict.problems) == 6


def test_objects_from_an_api_server_are_not_checked() -> None:
    raw = yaml.safe_load(NODE_POOL)
    obj, problems = load.parse_object(raw, file="watch:NodePool", index=0)
    assert obj is not None and problems == []


def _crd_properties(schema: dict[str, Any], path: str = "") -> list[str]:
    out: list[str] = []
    for name, sub in (schema.get("properties") or {}).items():
        items = sub.get("items") if sub.get("type") == "array" else None
        here = (f"{path}.{name}" if path else name) + ("[0]" if items else "")
        out.append(here)
        out += _crd_properties(items or sub, here)
    return out


def _skeleton(paths_: list[str]) -> dict[str, Any]:
    """A raw object holding every path (values: empty maps, lists of one map)."""
    root: dict[str, Any] = {}
    for path in paths_:
        node: Any = root
        for part in path.split("."):
            key, listed = (part[:-3], True) if part.endswith("[0]") else (part, False)
            node = node.setdefault(key, [{}])[0] if listed else node.setdefault(key, {})
    return root


@pytest.mark.parametrize(
    ("crd", "schema"),
    [
        ("karpenter.sh_nodepools.yaml", karpenter_v1.NodePool),
        ("karpenter.sh_nodeclaims.yaml", karpenter_v1.NodeClaim),
        ("karpenter.k8s.aws_ec2nodeclasses.yaml", nodeclasses.EC2NodeClass),
        ("karpenter.kwok.sh_kwoknodeclasses.yaml", nodeclasses.KWOKNodeClass),
    ],
)
def test_every_field_of_the_shipped_crds_is_known(crd: str, schema: Any) -> None:
    document = yaml.safe_load((ROOT / "deploy" / "crds" / crd).read_text())
    (version,) = document["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]
    found = _crd_properties(spec)
    assert "spec" in found and len(found) > 5
    unknown = fields.unknown_fields(_skeleton(found), schema)
    # (map-valued fields such as labels read their single key as an entry, never as a field)
    assert unknown == []


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml"))


def test_the_upstream_examples_and_the_shipped_examples_give_no_unknown_field_warning() -> None:
    manifests = [*_files(ROOT / "tests" / "data" / "upstream-examples"), *_files(ROOT / "examples")]
    scenarios = [p for p in manifests if "kind: Simulation" in p.read_text()]
    assert len(manifests) > 40 and len(scenarios) >= 5
    for path in manifests:
        if path in scenarios:
            continue
        loaded = load.load_paths([path])
        assert loaded.problems == [], path
        assert loaded.warnings == [], (path, [str(w) for w in loaded.warnings])
    for path in scenarios:
        assert scenario.load(path).warnings == (), path
