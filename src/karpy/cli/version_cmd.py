"""``karpy version``: karpy's version, the Python it runs on and which build of the core runs.

The same lines as ``karpy --version``; ``-o json|yaml`` prints them as a document
(``{karpy, python, core: {build, detail}}``).
"""

from __future__ import annotations

import typer

from karpy.cli import conventions
from karpy.cli.conventions import Output, version_document, version_lines

__all__ = ["version"]


def version(
    output: Output = typer.Option(Output.table, "--output", "-o", help="The lines, or a document."),
) -> None:
    """Print karpy's version, the Python version and whether the compiled core runs."""
    if output is Output.table:
        for line in version_lines():
            typer.echo(line)
        return
    doc = version_document()
    if output is Output.json:
        conventions.print_json(doc)
    else:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
