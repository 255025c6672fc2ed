"""Loading YAML streams, files and directories: problems are located and never stop other objects."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy import api
from karpy.model import errors, objects

_POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: {values}
"""
_NODE_CLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop, creationTimestamp: 2026-01-01T00:00:00Z}
spec:
  containers: [{name: web, image: nginx, resources: {requests: {cpu: 250m}}}]
"""


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_one_bad_node_pool_does_not_stop_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = "---\n".join(
        [
            _POOL.format(name="general", values='["spot", "on-demand"]'),
            _NODE_CLASS,
            _POOL.format(name="gpu", values="[]"),
            _POD,
        ]
    )
    _write(tmp_path, "examples/bad.yaml", "# three good objects and a bad one\n---\n" + stream)
    monkeypatch.chdir(tmp_path)
    loaded = api.load_paths([Path("examples/bad.yaml")])
    assert [str(p) for p in loaded.problems] == [
        'examples/bad.yaml: document 2 (NodePool "gpu"): spec.template.spec.requirements[0].values: '
        "In requires at least one value"
    ]
    (problem,) = loaded.problems
    assert (problem.file, problem.index, problem.kind, problem.name, problem.severity) == (
        "examples/bad.yaml",
        2,
        "NodePool",
        "gpu",
        "error",
    )
    assert problem.path == "spec.template.spec.requirements[0].values"
    assert [p.name for p in loaded.node_pools] == ["general"]
    assert [c.name for c in loaded.ec2_node_classes] == ["default"]
    assert [p.key for p in loaded.pods] == ["shop/web"]
    assert loaded.pods[0].created == 1767225600.0  # an unquoted timestamp is read as RFC3339
    assert not loaded.ok and loaded.skipped == []


def test_yaml_syntax_error_costs_only_its_document() -> None:
    text = "\n".join(
        [
            _POOL.format(name="a", values="[spot]"),
            "---",
            "apiVersion: v1",
            "kind: Pod",
            "metadata: {name: broken",
            "spec: {}",
            "---",
            _POOL.format(name="b", values="[spot]"),
        ]
    )
    loaded = api.load_text(text, file="mixed.yaml")
    (problem,) = loaded.problems
    assert problem.index == 1 and problem.line == 18  # where the parser notices the open brace
    assert str(problem).startswith("mixed.yaml: document 1: YAML syntax error at line 18, column 5: ")
    assert [p.name for p in loaded.node_pools] == ["a", "b"]


def test_yaml_syntax_error_line_in_a_single_document_file() -> None:
    loaded = api.load_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: indent\n", file="p.yaml")
    (problem,) = loaded.problems
    assert problem.line == 5 and "line 5" in str(problem)


def test_unknown_kinds_are_skipped_with_a_warning() -> None:
    text = "\n---\n".join(
        [
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}",
            "apiVersion: karpenter.sh/v1alpha1\nkind: NodePool\nmetadata: {name: old}\nspec: {}",
            "metadata: {name: nameless}",
            _POD,
        ]
    )
    loaded = api.load_text(text, file="mix.yaml")
    assert loaded.ok and [p.key for p in loaded.pods] == ["shop/web"]
    assert [str(p) for p in loaded.skipped] == [
        'mix.yaml: document 0 (ConfigMap "settings"): unsupported kind v1 ConfigMap; skipped',
        'mix.yaml: document 1 (NodePool "old"): karpenter.sh/v1alpha1 NodePool is not supported '
        "(expected karpenter.sh/v1); skipped",
        "mix.yaml: document 2: no apiVersion/kind; skipped",
    ]
    assert {p.severity for p in loaded.skipped} == {"warning"}


def test_empty_documents_are_ignored_but_counted() -> None:
    text = "---\n---\nnull\n---\n# only a comment\n---\n" + _POD + "---\n"
    loaded = api.load_text(text, file="e.yaml")
    assert loaded.ok and loaded.skipped == [] and len(loaded.pods) == 1
    bad = api.load_text("---\n---\n" + _POOL.format(name="x", values="[]"), file="e.yaml")
    assert bad.problems[0].index == 1


def test_document_that_is_not_a_mapping() -> None:
    loaded = api.load_text("- a\n- b\n", file="l.yaml")
    assert [str(p) for p in loaded.problems] == [
        "l.yaml: document 0: expected a Kubernetes object (a mapping), got list"
    ]


def test_kind_list_items_are_loaded_with_item_paths() -> None:
    text = """\
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {capacity: {cpu: "4"}}}
  - {apiVersion: v1, kind: Node, metadata: {name: n2}, spec: {taints: [{effect: NoSchedule}]}}
  - {apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {team: web}}}
"""
    loaded = api.load_text(text, file="list.yaml")
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert loaded.namespaces == [api.Namespace("shop", {"team": "web"})]
    assert [str(p) for p in loaded.problems] == [
        'list.yaml: document 0 (Node "n2"): items[1].spec.taints[0].key: required'
    ]


def test_missing_name_is_a_problem() -> None:
    loaded = api.load_text("apiVersion: v1\nkind: Node\nmetadata: {}\n", file="n.yaml")
    assert [str(p) for p in loaded.problems] == ["n.yaml: document 0 (Node): metadata.name: required"]


def test_directories_are_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    _write(tmp_path, "b/pools.yml", _POOL.format(name="from-b", values="[spot]"))
    _write(tmp_path, "a/nested/pools.yaml", _POOL.format(name="from-a", values="[spot]"))
    _write(tmp_path, "a/notes.txt", "not yaml: [")
    _write(tmp_path, "c.yaml", "")
    loaded = api.load_paths([tmp_path])
    assert loaded.ok and [p.name for p in loaded.node_pools] == ["from-a", "from-b"]


def test_missing_path(tmp_path: Path) -> None:
    loaded = api.load_paths([tmp_path / "nope.yaml"])
    assert [p.message for p in loaded.problems] == ["no such file or directory"]


def test_a_duplicate_replaces_the_earlier_object_with_a_warning(tmp_path: Path) -> None:
    first = _write(tmp_path, "1.yaml", _POOL.format(name="default", values="[spot]"))
    second = _write(tmp_path, "2.yaml", _POOL.format(name="default", values="[on-demand]"))
    loaded = api.load_paths([first, second])
    (pool,) = loaded.node_pools
    assert pool.requirements[0].has("on-demand")
    assert [str(p) for p in loaded.skipped] == [
        f'{second}: document 0 (NodePool "default"): replaces the NodePool of the same name from {first} '
        "document 0"
    ]
    assert loaded.ok


def test_parse_object_for_callers_holding_dicts() -> None:
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    obj, problems = api.parse_object(raw, file="scenario.yaml", index=3)
    assert problems == [] and isinstance(obj, objects.Pod)
    obj, problems = api.parse_object(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, file="scenario.yaml", index=3
    )
    assert obj is None and problems[0].severity == "warning"
    obj, problems = api.parse_object(
        {"apiVersion": "v1", "kind": "List", "items": []}, file="s.yaml", index=0
    )
    assert obj is None and problems[0].severity == "error"


def test_typed_helpers_raise_input_error_with_one_line() -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2 cores"}}}]},
    }
    with pytest.raises(errors.InputError) as info:
        api.convert_pod(raw)
    assert str(info.value) == (
        'Pod "shop/p": spec.containers[0].resources.limits[cpu]: "2 cores" is not a quantity '
        "(expected e.g. 100m, 1.5Gi, 2k or 1e3)"
    )
    with pytest.raises(errors.InputError) as info:
        api.convert_node(
            {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "x"}, "allocatable": {"cpu": "y"}}}
        )
    assert "\n" not in str(info.value) and str(info.value).endswith("(and 1 more)")


def test_problem_str_shapes() -> None:
    assert str(api.Problem("f.yaml", 0, "", "", "", "boom")) == "f.yaml: document 0: boom"
    assert str(api.Problem("", 0, "Pod", "p", "spec", "bad")) == 'Pod "p": spec: bad'
    assert str(api.Problem("f.yaml", 2, "Node", "", "metadata.name", "required")) == (
        "f.yaml: document 2 (Node): metadata.name: required"
    )


def test_workload_pods_lists_pods_then_expansions() -> None:
    text = (
        _POD
        + """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: api, resources: {requests: {cpu: "1"}}}]}
"""
    )
    loaded = api.load_text(text, file="w.yaml")
    assert [p.key for p in loaded.workload_pods()] == ["shop/web", "shop/api-0", "shop/api-1"]
