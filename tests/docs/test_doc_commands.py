"""Pages in docs/ whose command outputs are generated: each block marked

    <!-- output of: karpy explain pod shop/report-0 -f examples/explain/ -->
    ```console
    $ karpy explain pod shop/report-0 -f examples/explain/
    ...what the command prints...
    ```

must hold what the command prints today (run in-process, 100 columns, from the repository root).
``KARPY_WRITE_DOCS=1 pytest tests/docs`` rewrites the blocks; the test then passes and the diff
shows what changed.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if "<!-- output of: " in p.read_text())
_BLOCK = re.compile(
    r"(?P<head><!-- output of: (?P<command>[^\n]*?) -->\n```console\n)(?P<body>.*?)(?P<tail>```\n)",
    re.DOTALL,
)


def _output(command: str) -> str:
    words = shlex.split(command)
    assert words[0] == "karpy", f"a generated block runs karpy, not {words[0]!r}"
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(app, words[1:], env={"COLUMNS": "100", "NO_COLOR": "1"}, color=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code in (0, 2), f"{command}: exit {result.exit_code}\n{result.output}"
    text = "\n".join(line.rstrip() for line in result.stdout.splitlines())
    return f"$ {command}\n{text}\n"


def test_some_page_has_generated_blocks() -> None:
    assert PAGES, "no page in docs/ has a generated command block"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_generated_blocks_hold_what_the_commands_print(page: Path) -> None:
    text = page.read_text()
    blocks = list(_BLOCK.finditer(text))
    assert blocks, f"{page.name}: a marker without a ```console block after it"
    assert len(blocks) == text.count("<!-- output of: "), f"{page.name}: a marker not followed by a block"
    stale: list[str] = []

    def render(match: re.Match[str]) -> str:
        fresh = _output(match["command"])
        if fresh != match["body"]:
            stale.append(match["command"])
        return match["head"] + fresh + match["tail"]

    updated = _BLOCK.sub(render, text)
    if stale and os.environ.get("KARPY_WRITE_DOCS") == "1":
        page.write_text(updated)
        return
    assert not stale, (
        f"{page.name}: outputs changed for {stale}; run KARPY_WRITE_DOCS=1 pytest tests/docs and review"
    )
