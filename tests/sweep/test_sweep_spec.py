"""The ``kind: Sweep`` file: defaults, strict fields, one located line per problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy.sweep import spec


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    with pytest.raises(spec.SweepError) as caught:
        spec.load(path)
    return [str(p) for p in caught.value.problems]


def test_defaults_are_the_scenarios_own_configuration_one_seed_no_grid() -> None:
    sweep = spec.parse({"kind": "Sweep", "name": "s", "scenarios": ["a.yaml"]})
    assert [c.name for c in sweep.configurations] == [spec.BASELINE]
    assert sweep.configurations[0].file is None
    assert sweep.seeds == [1]
    assert sweep.grid.axes() == []
    assert sweep.cluster_autoscaler is False


def test_grid_axes_come_in_a_fixed_order_with_their_values() -> None:
    sweep = spec.parse(
        {
            "kind": "Sweep",
            "name": "s",
            "scenarios": ["a.yaml"],
            "grid": {
                "spot": [True, False],
                "budgets.nodes": ["10%", 1],
                "consolidateAfter": ["30s", "Never"],
            },
        }
    )
    assert sweep.grid.axes() == [
        ("consolidateAfter", ["30s", "Never"]),
        ("budgets.nodes", ["10%", "1"]),
        ("spot", [True, False]),
    ]


def test_every_problem_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    lines = problems(
        tmp_path,
        "kind: Sweep\nname: s\nscenarios: [a.yaml]\nseeds: [1, 1]\nconfigurations: [{name: a, fle: x}]\n"
        "grid:\n  consolidateAfter: [30s, 5x]\n  budgets.nodes: ['10%', x]\n  spot: ['yes']\n  nodes: [1]\n"
        "until: 0s\n",
    )
    head = f'{tmp_path / "sweep.yaml"}: document 0 (Sweep "s"): '
    assert all(line.startswith(head) for line in lines), lines
    found = {line[len(head) :] for line in lines}
    assert found == {
        "configurations[0].fle: unknown field",
        "seeds: 1 is listed twice",
        'grid.consolidateAfter[1]: "5x" is not a duration (expected e.g. 30s, 1h30m or 720h)',
        'grid.budgets.nodes[1]: "x" is not a node count or a percentage (e.g. "1" or "10%")',
        "grid.spot[0]: Input should be a valid boolean (got 'yes')",
        "grid.nodes: unknown field",
        'until: must be longer than 0s, got "0s"',
    }


def test_configuration_names_are_distinct_and_not_the_autoscalers(tmp_path: Path) -> None:
    lines = problems(
        tmp_path, "kind: Sweep\nname: s\nscenarios: [a.yaml]\nconfigurations: [{name: a}, {name: a}]\n"
    )
    assert [line.split("): ", 1)[1] for line in lines] == ['configurations[1].name: "a" is used twice']
    lines = problems(
        tmp_path, "kind: Sweep\nname: s\nscenarios: [a.yaml]\nconfigurations: [{name: cluster-autoscaler}]\n"
    )
    assert "configurations[0].name" in lines[0] and "Cluster Autoscaler" in lines[0]


def test_required_fields_and_the_kind(tmp_path: Path) -> None:
    lines = problems(tmp_path, "kind: Simulation\nname: s\n")
    assert any(line.endswith("kind: must be 'Sweep', got 'Simulation'") for line in lines), lines
    assert any(line.endswith("scenarios: required") for line in lines), lines


def test_a_file_that_is_not_one_yaml_document(tmp_path: Path) -> None:
    assert problems(tmp_path, "kind: Sweep\n---\nkind: Sweep\n") == [
        f"{tmp_path / 'sweep.yaml'}: a Sweep file holds one kind: Sweep document, found 2"
    ]
    (line,) = problems(tmp_path, "kind: [Sweep\n")
    assert "YAML syntax error at line 2" in line
