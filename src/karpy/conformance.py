"""The conformance runner: scheduling scenarios (``FORMAT.md`` v1) through karpy's engine.

For each scenario file it builds a :class:`~karpy.state.cluster.Cluster` from the
scenario's NodePools, existing nodes, DaemonSets, pods and ``objects`` (karpy's extension of the
format: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and Namespaces;
``tests/conformance/volumes/README.md``), runs ONE provisioning pass
(:func:`karpy.core.scheduling.solve`), launches every new NodeClaim with the launch rule,
binds pods and checks ``expect``. A scenario holds no NodeClasses: its NodePools are used as if
their NodeClass were there (``karpy plan --assume-nodeclasses``), and its objects are read as an
API server would serve them (no name or unknown-field checks). Scenarios of a kind not
implemented yet are skipped; scenarios listed in the disputed file are reported ``DISPUTED`` and
never counted as passed. Called by ``karpy conformance`` and the pytest wrapper.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpy import settings as settings_mod
from karpy.api import common as api_common
from karpy.api import load as api_load
from karpy.catalog import conformance as conformance_catalog
from karpy.core import disruption, scheduling
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model import volumes as volumes_mod
from karpy.model.catalog import Catalog
from karpy.model.errors import InputError
from karpy.model.objects import Node, Pod
from karpy.state.cluster import Cluster
from karpy.state.events import ObjectEvent

__all__ = [
    "DISPUTED",
    "FAIL",
    "PASS",
    "SKIP",
    "Outcome",
    "Scenario",
    "Summary",
    "iter_run",
    "load_disputed",
    "run_paths",
    "run_scenario",
    "scenario_files",
    "scenario_snapshot",
]

PASS, FAIL, SKIP, DISPUTED = "PASS", "FAIL", "SKIP", "DISPUTED"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    status: str
    reason: str = ""
    path: str = ""

    def line(self) -> str:
        if self.status == FAIL:
            return f"FAIL {self.name}: {self.reason}"
        if self.status == SKIP:
            return f"SKIP {self.name}: {self.reason}"
        return f"{self.status} {self.name}"


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def line(self) -> str:
        return (
            f"{self.count(PASS)} passed, {self.count(FAIL)} failed, "
            f"{self.count(SKIP)} skipped, {self.count(DISPUTED)} disputed"
        )


def scenario_files(paths: Sequence[Path]) -> list[Path]:
    """Scenario YAML files under ``paths``, a folder's own files first, then its subfolders' (in
    name order, recursively); ``catalogs`` folders and ``disputed.yaml`` are not scenarios."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise InputError(f"{path}: no such file or directory")
        found.extend(_folder_scenarios(path))
    return found


def _folder_scenarios(folder: Path) -> list[Path]:
    found = [p for p in sorted(folder.glob("*.yaml")) if p.name != "disputed.yaml"]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        if sub.name != "catalogs" and not sub.name.startswith((".", "_")):
            found.extend(_folder_scenarios(sub))
    return found


def load_disputed(path: Path | None) -> dict[str, dict[str, Any]]:
    """Disputed scenarios by name (each entry names the upstream test line and karpy's trace)."""
    if path is None or not path.exists():
        return {}
    raw = yaml.load(path.read_text(), Loader=_Loader) or {}
    entries = raw.get("disputed", []) if isinstance(raw, dict) else raw
    out: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate(entries or []):
        if not isinstance(entry, dict) or "name" not in entry:
            raise InputError(f"{path}: entry {index}: needs a name")
        for needed in ("upstream", "trace"):
            if not entry.get(needed):
                raise InputError(f"{path}: entry {index} ({entry['name']}): {needed} is required")
        out[str(entry["name"])] = entry
    return out


class _Catalogs:
    def __init__(self) -> None:
        self._cache: dict[Path, Catalog] = {}

    def get(self, scenario: Path, spec: object) -> Catalog:
        if isinstance(spec, str):
            path = _catalog_path(scenario, spec)
            if path not in self._cache:
                self._cache[path] = conformance_catalog.load(path)
            return self._cache[path]
        if isinstance(spec, list):
            return conformance_catalog.from_entries(spec, name=f"{scenario.name}:instanceTypes")
        raise InputError(f"{scenario}: instanceTypes must be a catalog name or a list")


def _catalog_path(scenario: Path, name: str) -> Path:
    """``catalogs/<name>.yaml`` beside the scenario, else beside the nearest folder above it that
    has one (a subfolder's scenarios share the suite's catalogs)."""
    for folder in (scenario.parent, *scenario.parent.parents):
        path = folder / "catalogs" / f"{name}.yaml"
        if path.exists():
            return path
    return scenario.parent / "catalogs" / f"{name}.yaml"


# The kinds the ``objects:`` extension holds (tests/conformance/volumes/README.md).
OBJECT_KINDS = frozenset({*volumes_mod.STORAGE_KINDS, "Namespace"})


def _extra_objects(doc: Mapping[str, Any], scenario: Path) -> list[Any]:
    """The ``objects:`` key: PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes
    and Namespaces, read as an API server serves them."""
    out: list[Any] = []
    for index, raw in enumerate(doc.get("objects") or []):
        kind = raw.get("kind") if isinstance(raw, Mapping) else None
        if kind not in OBJECT_KINDS:
            raise InputError(
                f"{scenario.name}: objects[{index}]: kind {kind!r} is not one of {sorted(OBJECT_KINDS)}"
            )
        obj, problems = api_load.parse_object(raw, file=scenario.name, index=index)
        if obj is None:
            raise InputError(f"{scenario.name}: objects[{index}]: " + "; ".join(str(p) for p in problems))
        out.append(obj)
    return out


def _objects(doc: Mapping[str, Any], field_name: str, convert: Any, scenario: Path) -> list[Any]:
    out = []
    for index, raw in enumerate(doc.get(field_name) or []):
        try:
            out.append(convert(raw))
        except InputError as exc:
            raise InputError(f"{scenario.name}: {field_name}[{index}]: {exc}") from None
    return out


@dataclass
class _Placed:
    node: str
    labels: dict[str, str]
    new: bool
    node_pool: str = ""


def _pod_key(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def run_scenario(
    path: Path, catalogs: _Catalogs | None = None, disputed: Mapping[str, Any] | None = None
) -> Outcome:
    doc = yaml.load(path.read_text(), Loader=_Loader)
    if not isinstance(doc, dict):
        return Outcome(path.stem, FAIL, "not a scenario mapping", str(path))
    name = str(doc.get("name", path.stem))
    if disputed and name in disputed:
        return Outcome(name, DISPUTED, "", str(path))
    kind = doc.get("kind", "scheduling")
    runners = {"scheduling": _run, "disruption": _run_disruption}
    if kind not in runners:
        return Outcome(name, SKIP, f"kind {kind} not supported", str(path))
    try:
        return Outcome(name, *runners[kind](path, doc, catalogs or _Catalogs()), path=str(path))
    except InputError as exc:
        return Outcome(name, FAIL, f"bad scenario: {exc}", str(path))


@dataclass(frozen=True, slots=True)
class Scenario:
    """A scenario's state, built as the runner builds it: the snapshot at ``now`` and its inputs."""

    name: str
    kind: str  # scheduling | disruption
    catalog: Catalog
    snapshot: Snapshot
    now: float
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    expect: Mapping[str, Any]


def scenario_snapshot(path: Path, catalogs: _Catalogs | None = None) -> Scenario:
    """Read the scenario at ``path`` into the snapshot its one pass runs on (``explain`` uses it)."""
    doc = yaml.load(path.read_text(), Loader=_Loader)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a scenario mapping")
    return _scenario(path, doc, catalogs or _Catalogs())


def _scenario(path: Path, doc: Mapping[str, Any], catalogs: _Catalogs) -> Scenario:
    kind = str(doc.get("kind", "scheduling"))
    catalog = catalogs.get(path, doc.get("instanceTypes", "karpenter-fake"))
    gates = doc.get("featureGates") or {}
    settings = settings_mod.Settings(
        features=settings_mod.FeatureGates(
            spot_to_spot_consolidation=bool(gates.get("SpotToSpotConsolidation", False))
        )
    )
    nodes: list[Node] = _objects(doc, "existingNodes", api_load.convert_node, path)
    pods: list[Pod] = _objects(doc, "pods", api_load.convert_pod, path)
    objects: list[Any] = [
        *_objects(doc, "nodePools", api_load.convert_node_pool, path),
        *nodes,
        *_objects(doc, "nodeClaims", api_load.convert_node_claim, path),
        *_objects(doc, "daemonSets", api_load.convert_daemonset, path),
        *pods,
        *_objects(doc, "podDisruptionBudgets", api_load.convert_pdb, path),
        *_extra_objects(doc, path),
    ]
    types = catalog.instance_types
    cluster = Cluster(lambda _pool, _nc: types, settings=settings, well_known=catalog.well_known)
    cluster.storage_complete = True  # a scenario lists every storage object there is
    for obj in objects:
        cluster.apply(ObjectEvent.added(obj))
    now = api_common.parse_time(str(doc.get("now", "2026-01-01T00:00:00Z"))) if kind == "disruption" else 0.0
    return Scenario(
        str(doc.get("name", path.stem)),
        kind,
        catalog,
        cluster.snapshot(now),
        now,
        tuple(nodes),
        tuple(pods),
        doc.get("expect") or {},
    )


def _run(path: Path, doc: Mapping[str, Any], catalogs: _Catalogs) -> tuple[str, str]:
    scenario = _scenario(path, doc, catalogs)
    catalog, snapshot, nodes, pods = scenario.catalog, scenario.snapshot, scenario.nodes, scenario.pods
    results = scheduling.solve(snapshot)
    catalog_order = [it.name for it in catalog.instance_types]
    placed: dict[str, _Placed] = {}
    node_labels: dict[str, dict[str, str]] = {n.name: dict(n.labels) for n in nodes}
    for n in nodes:
        node_labels[n.name].setdefault(labels.HOSTNAME, n.name)
    for pod in pods:
        if pod.node_name:
            placed[pod.key] = _Placed(pod.node_name, node_labels.get(pod.node_name, {}), False)
    for pod_key, node_name in results.existing.items():
        placed[pod_key] = _Placed(node_name, node_labels.get(node_name, {}), False)
    new_per_pool: Counter[str] = Counter()
    launched = 0
    launcher = scheduling.Launcher(catalog_order, well_known=catalog.well_known)
    for claim in results.new_claims:
        node = launcher.launch(claim)
        if node is None:
            continue
        launched += 1
        new_per_pool[claim.node_pool] += 1
        for pod in claim.pods:
            placed[pod.key] = _Placed(claim.name, node.labels, True, claim.node_pool)
    failures = _check(doc.get("expect") or {}, pods, placed, launched, new_per_pool, results)
    if failures:
        return FAIL, "; ".join(failures)
    return PASS, ""


def _run_disruption(path: Path, doc: Mapping[str, Any], catalogs: _Catalogs) -> tuple[str, str]:
    scenario = _scenario(path, doc, catalogs)
    catalog, now = scenario.catalog, scenario.now
    decision = disruption.compute(scenario.snapshot, now)
    types = catalog.instance_types
    order = [it.name for it in types]
    failures = _check_disruption(doc.get("expect") or {}, decision, order, catalog.well_known)
    if failures:
        return FAIL, "; ".join(failures)
    return PASS, ""


def _check_disruption(
    expect: Mapping[str, Any], decision: disruption.Decision, order: Sequence[str], well_known: frozenset[str]
) -> list[str]:
    command = decision.command
    mismatch = _command_mismatch(expect, decision)
    if mismatch is not None:
        return [mismatch]
    if command is None:
        return []
    failures = _check_command(expect, command)
    launcher = scheduling.Launcher(order, well_known=well_known)
    launched = [launcher.launch(r) for r in command.replacements]
    return (
        failures
        + _check_replacements(expect, command, launched)
        + _check_replacement_launches(expect, command, launched)
    )


def _command_mismatch(expect: Mapping[str, Any], decision: disruption.Decision) -> str | None:
    """The failure when a command was expected and none came (or the other way round)."""
    command = decision.command
    if "command" not in expect or bool(expect["command"]) == (command is not None):
        return None
    got = "no command" if command is None else f"{command.reason} {sorted(command.candidates)}"
    blocked = "; ".join(
        f"{r.node}: {' / '.join(r.reasons)}" for r in decision.records.values() if r.verdict != "not-managed"
    )
    return f"command {command is not None}, want {expect['command']} (got {got}; {blocked})"


def _check_command(expect: Mapping[str, Any], command: disruption.Command) -> list[str]:
    """The command's reason, the nodes it disrupts and how many replacements it launches."""
    failures: list[str] = []
    disrupted = set(command.candidates)
    if "reason" in expect and command.reason != expect["reason"]:
        failures.append(f"reason {command.reason}, want {expect['reason']}")
    if "disrupted" in expect and disrupted != {str(n) for n in expect["disrupted"]}:
        failures.append(f"disrupted {sorted(disrupted)}, want {sorted(expect['disrupted'])}")
    for name in expect.get("notDisrupted") or []:
        if name in disrupted:
            failures.append(f"{name} disrupted, want it kept")
    if "disruptedCount" in expect and len(disrupted) != int(expect["disruptedCount"]):
        failures.append(f"{len(disrupted)} disrupted, want {expect['disruptedCount']}")
    if "replacements" in expect and len(command.replacements) != int(expect["replacements"]):
        failures.append(f"{len(command.replacements)} replacements, want {expect['replacements']}")
    return failures


def _check_replacements(
    expect: Mapping[str, Any], command: disruption.Command, launched: Sequence[scheduling.Launched | None]
) -> list[str]:
    """The instance types the replacements launch as, and those they must not list."""
    failures: list[str] = []
    chosen = [node.instance_type.name if node is not None else None for node in launched]
    if "replacementInstanceTypesIn" in expect:
        allowed = {str(t) for t in expect["replacementInstanceTypesIn"]}
        if any(name not in allowed for name in chosen):
            failures.append(f"replacements launch as {chosen}, want one of {sorted(allowed)}")
    if "replacementInstanceTypesNotIn" in expect:
        banned = {str(t) for t in expect["replacementInstanceTypesNotIn"]}
        listed = {it.name for r in command.replacements for it in r.instance_types}
        if banned & (set(chosen) | listed):
            failures.append(f"replacements use {sorted(banned & (set(chosen) | listed))}, which are excluded")
    return failures


def _check_replacement_launches(
    expect: Mapping[str, Any], command: disruption.Command, launched: Sequence[scheduling.Launched | None]
) -> list[str]:
    """The capacity types, instance-type options and labels the replacements launch with."""
    failures: list[str] = []
    if "replacementCapacityType" in expect:
        cts = [node.offering.capacity_type if node is not None else None for node in launched]
        if any(ct != expect["replacementCapacityType"] for ct in cts):
            failures.append(f"replacement capacity types {cts}, want {expect['replacementCapacityType']}")
    if "replacementInstanceTypeOptions" in expect:
        want = {str(t) for t in expect["replacementInstanceTypeOptions"]}
        for replacement in command.replacements:
            options = {it.name for it in replacement.instance_types}
            if options != want:
                failures.append(f"replacement options {sorted(options)}, want {sorted(want)}")
    for key, value in (expect.get("replacementLabels") or {}).items():
        for node in launched:
            if node is None or node.labels.get(key) != str(value):
                failures.append(f"replacement label {key}={None if node is None else node.labels.get(key)}")
    return failures


def _check(
    expect: Mapping[str, Any],
    pods: Sequence[Pod],
    placed: Mapping[str, _Placed],
    launched: int,
    new_per_pool: Counter[str],
    results: scheduling.Results,
) -> list[str]:
    errors = {e.pod.key: e for e in results.errors}
    failures: list[str] = []
    for raw_name, want in (expect.get("pods") or {}).items():
        key = _pod_key(str(raw_name))
        failures.extend(_check_pod(str(raw_name), want, placed.get(key), errors.get(key)))
    failures.extend(_check_groups(expect, placed))
    failures.extend(_check_counts(expect, launched, new_per_pool))
    failures.extend(_check_skews(expect, pods, placed))
    return failures


def _check_pod(
    raw_name: str, want: Mapping[str, Any], got: _Placed | None, error: scheduling.PodError | None
) -> list[str]:
    """One pod of ``expect.pods``: scheduled or pending, and the labels of the node it is on."""
    if want.get("scheduled") is True and got is None:
        why = error.summary() if error is not None else "not placed"
        return [f"{raw_name} pending, want scheduled ({why})"]
    if want.get("scheduled") is False and got is not None:
        return [f"{raw_name} scheduled on {got.node}, want pending"]
    if got is None:
        return []
    failures: list[str] = []
    for label, value in (want.get("nodeLabels") or {}).items():
        if got.labels.get(label) != str(value):
            failures.append(f"{raw_name} on node with {label}={got.labels.get(label)!r}, want {value!r}")
    for label, values in (want.get("nodeLabelsIn") or {}).items():
        if got.labels.get(label) not in [str(v) for v in values]:
            failures.append(
                f"{raw_name} on node with {label}={got.labels.get(label)!r}, want one of {values}"
            )
    if "existingNode" in want and (got.new or got.node != want["existingNode"]):
        failures.append(f"{raw_name} on {got.node}, want existing node {want['existingNode']}")
    return failures


def _check_groups(expect: Mapping[str, Any], placed: Mapping[str, _Placed]) -> list[str]:
    """``sameNode`` and ``differentNodes``: groups of pods on one node, or each on its own."""
    failures: list[str] = []
    for group in expect.get("sameNode") or []:
        hosts = {placed[_pod_key(p)].node if _pod_key(p) in placed else None for p in group}
        if len(hosts) != 1 or None in hosts:
            failures.append(f"sameNode {group}: on {sorted(str(h) for h in hosts)}")
    for group in expect.get("differentNodes") or []:
        spread = [placed[_pod_key(p)].node if _pod_key(p) in placed else None for p in group]
        if None in spread or len(set(spread)) != len(spread):
            failures.append(f"differentNodes {group}: on {spread}")
    return failures


def _check_counts(expect: Mapping[str, Any], launched: int, new_per_pool: Counter[str]) -> list[str]:
    """``newNodes``, ``newNodesAtMost`` and ``nodePoolsUsed``: how many new nodes, and from which pools."""
    failures: list[str] = []
    if "newNodes" in expect and launched != int(expect["newNodes"]):
        failures.append(f"newNodes {launched}, want {expect['newNodes']}")
    if "newNodesAtMost" in expect and launched > int(expect["newNodesAtMost"]):
        failures.append(f"newNodes {launched}, want at most {expect['newNodesAtMost']}")
    for pool, count in (expect.get("nodePoolsUsed") or {}).items():
        if new_per_pool.get(str(pool), 0) != int(count):
            failures.append(f"nodePoolsUsed {pool}: {new_per_pool.get(str(pool), 0)}, want {count}")
    return failures


def _check_skews(expect: Mapping[str, Any], pods: Sequence[Pod], placed: Mapping[str, _Placed]) -> list[str]:
    """``skew``: the sorted pod counts per topology domain of a selector."""
    failures: list[str] = []
    for skew in expect.get("skew") or []:
        counts = _skew_counts(skew, pods, placed)
        want_counts = [int(c) for c in skew.get("counts", [])]
        if counts != want_counts:
            failures.append(
                f"skew {skew.get('topologyKey')} {skew.get('selector')}: {counts}, want {want_counts}"
            )
    return failures


def _skew_counts(skew: Mapping[str, Any], pods: Sequence[Pod], placed: Mapping[str, _Placed]) -> list[int]:
    key = str(skew.get("topologyKey"))
    selector = {str(k): str(v) for k, v in (skew.get("selector") or {}).items()}
    counter: Counter[str] = Counter()
    for pod in pods:
        if pod.namespace != "default" or pod.is_terminal():
            continue
        if any(pod.labels.get(k) != v for k, v in selector.items()):
            continue
        where = placed.get(pod.key)
        if where is None:
            continue
        domain = where.labels.get(key)
        if domain is None:
            continue
        counter[domain] += 1
    return sorted(counter.values())


def iter_run(paths: Sequence[Path], disputed_path: Path | None) -> Iterator[Outcome]:
    disputed = load_disputed(disputed_path)
    catalogs = _Catalogs()
    for path in scenario_files(paths):
        yield run_scenario(path, catalogs, disputed)


def run_paths(paths: Sequence[Path], disputed_path: Path | None) -> Summary:
    return Summary(list(iter_run(paths, disputed_path)))
