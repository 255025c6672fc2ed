"""Bad input on the command line, as a new user meets it: a typo (a warning naming file, object and
field with the nearest name; ``--strict``: exit 2 and that object not used), a name the API server
rejects, a NodePool whose NodeClass is missing (no NodeClaims from it unless
``--assume-nodeclasses``), an empty or missing input, a non-UTF-8 file, Kubernetes manifests given
to ``simulate``, and a curve above ``--max-pods``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner, Result

from karpy.cli import app

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()

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
POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: "{name}"}}
spec:
  weight: {weight}
  disruption: {{{disruption}: 1m}}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {node_class}}}
      requirements: [{{key: karpenter.k8s.aws/instance-family, operator: In, values: [{family}]}}]
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def pool(
    name: str,
    *,
    family: str = "m5",
    weight: int = 10,
    disruption: str = "consolidateAfter",
    node_class: str = "default",
) -> str:
    return POOL.format(name=name, family=family, weight=weight, disruption=disruption, node_class=node_class)


def write(folder: Path, *documents: str, name: str = "cluster.yaml") -> Path:
    path = folder / name
    path.write_text("---\n".join(documents))
    return path


def plan(*args: str) -> tuple[Result, dict[str, Any]]:
    result = runner.invoke(app, ["plan", *args, "-o", "json"])
    return result, json.loads(result.stdout) if result.stdout.strip() else {}


def lines(result: Result, head: str) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith(head)]


def test_a_typo_is_a_warning_and_strict_makes_it_an_error_that_drops_the_object(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        pool("typo", family="c5", weight=50, disruption="consolidateAfer"),
        pool("good", family="m5", weight=10),
        NODE_CLASS,
        DEPLOYMENT,
    )
    result, doc = plan("-f", str(manifest))
    assert result.exit_code == 0, result.stderr
    assert lines(result, "warning:") == [
        f'warning: {manifest}: document 0 (NodePool "typo"): spec.disruption.consolidateAfer: unknown field; '
        "did you mean consolidateAfter?"
    ]
    assert {c["nodePool"] for c in doc["nodeClaims"]} == {"typo"}  # the heavier pool, typo and all

    result, doc = plan("-f", str(manifest), "--strict")
    assert result.exit_code == 2
    assert lines(result, "error:") == [
        f'error: {manifest}: document 0 (NodePool "typo"): spec.disruption.consolidateAfer: unknown field; '
        "did you mean consolidateAfter?"
    ]
    assert {c["nodePool"] for c in doc["nodeClaims"]} == {"good"}  # the others are still used
    assert doc["summary"]["scheduledPods"] == 2


def test_a_name_kubernetes_rejects_is_one_error_and_exit_2(tmp_path: Path) -> None:
    manifest = write(
        tmp_path, pool("général-池", weight=50, family="c5"), pool("good"), NODE_CLASS, DEPLOYMENT
    )
    result, doc = plan("-f", str(manifest))
    assert result.exit_code == 2
    (line,) = lines(result, "error:")
    assert line.startswith(
        f'error: {manifest}: document 0 (NodePool "général-池"): metadata.name: '
        '"général-池" is not a valid name'
    )
    assert {c["nodePool"] for c in doc["nodeClaims"]} == {"good"}


def test_a_nodepool_without_its_nodeclass_launches_nothing_unless_assumed(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        pool("orphan", family="c5", weight=50, node_class="foo"),
        pool("good"),
        NODE_CLASS,
        DEPLOYMENT,
    )
    result, doc = plan("-f", str(manifest))
    assert result.exit_code == 0, result.stderr
    assert lines(result, "warning:") == [
        'warning: NodePool "orphan" launches nothing: NodeClass EC2NodeClass/foo not found '
        "(see --assume-nodeclasses)"
    ]
    assert doc["skippedNodePools"] == [
        {"nodePool": "orphan", "reason": "NodeClass EC2NodeClass/foo not found"}
    ]
    assert {c["nodePool"] for c in doc["nodeClaims"]} == {"good"}

    result, doc = plan("-f", str(manifest), "--assume-nodeclasses")
    assert result.exit_code == 0 and lines(result, "warning:") == []
    assert doc["skippedNodePools"] == []
    assert {c["nodePool"] for c in doc["nodeClaims"]} == {"orphan"}

    alone = write(tmp_path, pool("orphan", node_class="foo"), DEPLOYMENT, name="alone.yaml")
    result, doc = plan("-f", str(alone))
    assert doc["nodeClaims"] == [] and doc["summary"]["unschedulablePods"] == 2
    for item in doc["unschedulable"]:
        assert item["reasons"]["nodepool/orphan"] == "NodeClass EC2NodeClass/foo not found"


def test_the_upstream_examples_still_plan(tmp_path: Path) -> None:
    result, doc = plan("-f", str(ROOT / "tests" / "data" / "upstream-examples"))
    assert result.exit_code == 0, result.stderr
    assert doc["skippedNodePools"] == [] and doc["summary"]["newNodeClaims"] > 0
    assert lines(result, "error:") == []


def test_an_empty_input_warns_and_a_missing_file_names_no_document(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_text("not yaml")
    for path, warning in [
        (tmp_path / "empty.yaml", f"warning: no objects found in {tmp_path / 'empty.yaml'}"),
        (
            tmp_path / "folder",
            f"warning: no objects found in {tmp_path / 'folder'} (no *.yaml or *.yml file)",
        ),
    ]:
        result, doc = plan("-f", str(path))
        assert result.exit_code == 0
        assert lines(result, "warning:") == [warning]
        assert doc["summary"]["pendingPods"] == 0
    result, _ = plan("-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert lines(result, "error:") == [f"error: {tmp_path / 'nope.yaml'}: no such file or directory"]


def test_a_file_in_another_encoding_is_one_line_and_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    (tmp_path / "latin1.yaml").write_bytes(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: x} # é\n".encode("latin-1")
    )
    result, _ = plan("-f", str(tmp_path / "latin1.yaml"))
    assert result.exit_code == 2
    assert lines(result, "error:") == [
        f"error: {tmp_path / 'latin1.yaml'}: not UTF-8 text (byte 0xe9 at offset 53); save it as UTF-8"
    ]
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbf" + (NODE_CLASS + "---\n" + pool("good")).encode())
    result, doc = plan("-f", str(tmp_path / "bom.yaml"))
    assert result.exit_code == 0 and result.stderr == "" and doc["kind"] == "Plan"


def test_explain_and_disrupt_take_strict_and_explain_pod_the_nodeclass_check(tmp_path: Path) -> None:
    folder = tmp_path / "explain"
    shutil.copytree(ROOT / "examples" / "explain", folder)
    text = (folder / "cluster.yaml").read_text().replace("  weight: 10\n", "  wieght: 10\n")
    (folder / "cluster.yaml").write_text(text)
    warned = runner.invoke(app, ["explain", "pod", "shop/web-0", "-f", str(folder), "-o", "json"])
    assert warned.exit_code == 0
    assert lines(warned, "warning:") == [
        f'warning: {folder / "cluster.yaml"}: document 1 (NodePool "gpu"): spec.wieght: unknown field; '
        "did you mean weight?"
    ]
    strict = runner.invoke(app, ["explain", "pod", "shop/web-0", "-f", str(folder), "-o", "json", "--strict"])
    assert strict.exit_code == 2 and len(lines(strict, "error:")) == 1
    orphan = write(folder, pool("orphan", node_class="foo"), name="orphan.yaml")
    assert orphan.exists()
    result = runner.invoke(app, ["explain", "pod", "shop/web-0", "-f", str(folder), "-o", "json"])
    assert (
        'warning: NodePool "orphan" launches nothing: NodeClass EC2NodeClass/foo not found' in result.stderr
    )
    assume = ["explain", "pod", "shop/web-0", "-f", str(folder), "-o", "json", "--assume-nodeclasses"]
    assert "orphan" not in runner.invoke(app, assume).stderr

    disruption = tmp_path / "disruption"
    shutil.copytree(ROOT / "examples" / "disruption", disruption)
    cluster = disruption / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("consolidateAfter: 5m", "consolidateAftr: 5m"))
    args = ["-f", str(disruption), "--now", "2026-03-02T12:00:00Z", "-o", "json"]
    loose = runner.invoke(app, ["disrupt", *args])
    assert loose.exit_code == 0 and "spec.disruption.consolidateAftr: unknown field" in loose.stderr
    refused = runner.invoke(app, ["disrupt", *args, "--strict"])
    assert refused.exit_code == 2 and "error:" in refused.stderr
    node = runner.invoke(app, ["explain", "node", "ip-10-0-1-11", *args, "--strict"])
    assert node.exit_code == 2 and "spec.disruption.consolidateAftr: unknown field" in node.stderr


def _scenario(tmp_path: Path, replicas: Any, name: str = "sim.yaml") -> Path:
    doc = {
        "kind": "Simulation",
        "name": "t",
        "duration": "1h",
        "nodePools": [yaml.safe_load(pool("default", disruption="consolidateAfer"))],
        "nodeClasses": [yaml.safe_load(NODE_CLASS)],
        "workloads": [{"deployment": yaml.safe_load(DEPLOYMENT), "replicas": replicas}],
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_simulate_names_what_a_manifest_file_holds_and_caps_the_pods(tmp_path: Path) -> None:
    manifest = write(tmp_path, pool("good"), NODE_CLASS, DEPLOYMENT)
    result = runner.invoke(app, ["simulate", str(manifest), "--no-progress"])
    assert result.exit_code == 2
    assert lines(result, "error:") == [
        f"error: {manifest}: a Simulation file holds one kind: Simulation document, found 3 documents: "
        "NodePool, EC2NodeClass, Deployment; Kubernetes manifests are read by karpy plan -f"
    ]
    huge = _scenario(tmp_path, {"points": [["00:00", 1], ["00:30", 1_000_000_000]]})
    result = runner.invoke(app, ["simulate", str(huge), "--no-progress"])
    assert result.exit_code == 2
    assert "workloads[0].replicas: 1,000,000,000 pods at the peak; the cap is 100,000 pods" in result.stderr
    over = _scenario(tmp_path, 3, "over.yaml")
    result = runner.invoke(app, ["simulate", str(over), "--no-progress", "--max-pods", "2"])
    assert result.exit_code == 2 and "3 pods at the peak; the cap is 2 pods" in result.stderr


def test_simulate_warns_about_an_embedded_typo_and_strict_refuses_it(tmp_path: Path) -> None:
    path = _scenario(tmp_path, 1)
    args = ["simulate", str(path), "--no-progress", "--until", "2m", "-o", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert lines(result, "warning:")[0].endswith(
        "nodePools[0].spec.disruption.consolidateAfer: unknown field; did you mean consolidateAfter?"
    )
    strict = runner.invoke(app, [*args, "--strict"])
    assert strict.exit_code == 2 and len(lines(strict, "error:")) == 1
