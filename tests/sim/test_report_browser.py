"""The HTML report in a real browser: headless Chromium loads the page offline and every plot
image decodes (its natural size is the PNG's own).

A copy of the page gets a probe script that, once the page has loaded, writes each image's
``complete`` / ``naturalWidth`` / ``naturalHeight`` into the DOM, which ``--dump-dom`` prints.
Skipped only where no Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from karpy.sim import report

BROWSER = next(
    (found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))),
    None,
)

_PROBE = """<script>
window.addEventListener("load", () => {
  const seen = Array.from(document.images).map((i) => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]);
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
});
</script>"""


def _run(cost: float, nodes: list[int], memory: float) -> dict[str, object]:
    return {
        "cost_usd": cost,
        "pending_seconds": {"p50": 0.0, "p95": 2.0, "p99": 3.0, "max": 4.0},
        "ready_seconds": {"p50": 5.0, "p95": 6.0, "p99": 7.0, "max": 8.0},
        "pods_created": 10,
        "pods_never_scheduled": 0,
        "nodes_created": 3,
        "nodes_removed": 1,
        "peak_nodes": max(nodes),
        "evictions": 0,
        "disruptions": {},
        "node_hours": 3.0,
        "node_hours_by_capacity_type": {"spot": 1.0},
        "utilization": {"cpu": 0.5, "memory": memory},
        "series": {
            "t": [0, 1800, 3600],
            "nodes": nodes,
            "pending": [3, 0, 0],
            "cost": [0, 0.1, 0.2],
            "cpu": [0, 0.5, 0.6],
            "memory": [0, memory, memory],
            "disruptions": [0, 0, 0],
        },
    }


@pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (Debian: apt-get install chromium)")
def test_every_plot_loads_in_headless_chromium(tmp_path: Path) -> None:
    assert BROWSER is not None
    page = tmp_path / "report.html"
    document = {
        "scenario": "browser",
        "seed": 3,
        "start": "2026-03-02T07:00:00Z",
        "end": "2026-03-02T08:00:00Z",
        "runs": {"karpy": _run(1.0, [1, 2, 2], 0.85), "cluster-autoscaler": _run(2.0, [2, 3, 3], 0.49)},
    }
    report.write_html(document, page)
    text = page.read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("</body>", _PROBE + "</body>"))
    done = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"no probe in the dumped DOM (exit {done.returncode}):\n{done.stderr[-2000:]}"
    seen = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    sources = re.findall(r"<img alt='([^']*)' src='data:image/png;base64,([A-Za-z0-9+/=]+)'>", text)
    assert [alt for alt, *_ in seen] == [title for _, title, _, _ in report.PLOTS] == [a for a, _ in sources]
    for (alt, complete, width, height), (_, data) in zip(seen, sources, strict=True):
        image = Image.open(io.BytesIO(base64.b64decode(data)))
        image.verify()  # a whole, valid PNG
        assert image.format == "PNG"
        assert complete and (width, height) == image.size, f"{alt}: the browser did not load it"
        assert width > 600 and height > 200, alt
