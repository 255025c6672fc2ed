"""``karpy convert -f OLD.yaml [-f more] [-o DIR]``: Karpenter's legacy objects rewritten as v1.

Files and folders are read as ``karpy plan -f`` reads them, as one set; every v1alpha5
Provisioner, v1alpha1 AWSNodeTemplate and v1beta1 NodePool / NodeClaim / EC2NodeClass becomes
its v1 objects (docs/convert.md), and every other document is copied unchanged. Without ``-o``
the documents go to stdout; with ``-o DIR`` each input file becomes ``DIR/<its name>``. Fields
with no v1 equivalent are ``warning:`` lines on stderr. Bad input (YAML syntax, a field that
does not convert, a converted object that does not validate as v1) is one ``error:`` line per
problem, naming file, object and field, and exit 2; nothing is written then. An ``-o`` folder
that cannot be written (a file there, no permission) exits 2 before anything is read.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml

from karpy.cli import conventions

if TYPE_CHECKING:
    from karpy.api import load as api_load
    from karpy.api.legacy import base as legacy_base

__all__ = ["convert", "dump"]


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as ``|`` blocks, no anchors for repeated values."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str)


def dump(documents: list[Any]) -> str:
    """YAML documents separated by ``---``, keys in the order written."""
    if not documents:
        return ""
    return yaml.dump_all(
        documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def _items(raw: object) -> list[object]:
    if isinstance(raw, Mapping) and raw.get("kind") == "List" and isinstance(raw.get("items"), list):
        return list(raw["items"])
    return [raw]


def _converted(
    read: list[tuple[str, list[api_load.Document]]], options: legacy_base.Options
) -> list[tuple[str, list[Any], bool]]:
    """(file, its documents as v1, whether any was legacy), with the legacy documents converted as one set."""
    from karpy.api.legacy import convert as legacy

    raws = [item for _, docs in read for _, _, raw in docs for item in _items(raw) if legacy.is_legacy(item)]
    results = iter(legacy.convert_all(raws, options))

    def rewrite(items: list[object]) -> list[Any]:
        out: list[Any] = []
        for item in items:
            if legacy.is_legacy(item):
                out.extend(o.raw for o in next(results).outputs)
            else:
                out.append(item)
        return out

    files = []
    for file, docs in read:
        written: list[Any] = []
        for _, _, raw in docs:
            if isinstance(raw, Mapping) and raw.get("kind") == "List" and isinstance(raw.get("items"), list):
                written.append({**raw, "items": rewrite(list(raw["items"]))})
            else:
                written.extend(rewrite([raw]))
        touched = any(legacy.is_legacy(item) for _, _, raw in docs for item in _items(raw))
        files.append((file, written, touched))
    return files


def _targets(files: list[str], output_dir: Path) -> list[Path]:
    """DIR/<name> per input file; two inputs of one name, or writing over an input, exit 2."""
    targets = [output_dir / Path(f).name for f in files]
    seen: dict[Path, str] = {}
    for file, target in zip(files, targets, strict=True):
        if target in seen:
            typer.echo(f"error: {file} and {seen[target]} would both be written to {target}", err=True)
            raise typer.Exit(2)
        if target.resolve() == Path(file).resolve():
            typer.echo(f"error: {target} would overwrite its input; give another -o folder", err=True)
            raise typer.Exit(2)
        seen[target] = file
    return targets


def convert(
    files: list[Path] = typer.Option(
        ..., "-f", "--filename", metavar="PATH", help="Legacy YAML files or folders to read (repeatable)."
    ),
    output_dir: Path | None = typer.Option(
        None,
        "-o",
        "--output-dir",
        metavar="DIR",
        help="Write one v1 file per input file here (default: stdout).",
    ),
    role: str | None = typer.Option(
        None, "--role", metavar="ROLE", help="Node role for node templates without instanceProfile."
    ),
    instance_profile: str | None = typer.Option(
        None,
        "--instance-profile",
        metavar="NAME",
        help="Instance profile for node templates without one (v1alpha5's aws.defaultInstanceProfile).",
    ),
) -> None:
    """Rewrite Karpenter v1alpha5 / v1beta1 objects in FILES as v1, field by field."""
    from karpy.api import load as api_load
    from karpy.api.legacy import base as legacy_base

    if role and instance_profile:
        typer.echo("error: give --role or --instance-profile, not both", err=True)
        raise typer.Exit(2)
    conventions.check_folder(output_dir, "-o")
    options = legacy_base.Options(instance_profile=instance_profile, role=role)
    read = api_load.read_paths(files)
    loaded = api_load.load_documents([d for _, docs in read for d in docs], legacy_options=options)
    for problem in loaded.problems:
        typer.echo(f"error: {problem}", err=True)
    for warning in loaded.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if loaded.problems:
        raise typer.Exit(2)
    converted = _converted(read, options)
    for file, _, touched in converted:
        if not touched:
            typer.echo(f"warning: {file}: no legacy object; copied unchanged", err=True)
    if output_dir is None:
        sys.stdout.write(dump([doc for _, docs, _ in converted for doc in docs]))
        return
    targets = _targets([file for file, _, _ in converted], output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for (_, docs, _), target in zip(converted, targets, strict=True):
        target.write_text(dump(docs), encoding="utf-8")
        typer.echo(f"wrote {target}: {len(docs)} document{'s' if len(docs) != 1 else ''}")
