"""The report of a real (tiny) training run, opened in a real browser: headless Chromium driven by
Playwright, from file:// as a user opens it. It loads with no console error and no network
request, shows the numbers of metrics.json (tables and charts), draws every chart, loads every
image, and with JavaScript disabled still shows the metrics and static charts.

Needs the ``playwright`` package (the dev extra) and Chromium at /usr/bin/chromium (Debian's
``chromium`` package; ``playwright install`` is not used). ``FASTREID_UPDATE_SCREENSHOTS=1``
saves docs/images/report.png.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_runs import REPO, evaluation_lines

from fastreid.report import REPORT_FILE

CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = REPO / "docs" / "images" / "report.png"
METRICS = ("Rank-1", "Rank-5", "Rank-10", "mAP", "mINP", "metric")

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="playwright is not installed (pip install playwright, or the dev extra)",
    ),
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK), reason=f"no Chromium at {CHROMIUM} (Debian: apt install chromium)"
    ),
]

# Each table of a section as rows of {header: text}; the text a reader sees (innerText).
_TABLES_JS = """(section) => Array.from(document.querySelectorAll(`#${section} table`)).map(table => {
  const header = Array.from(table.querySelectorAll("thead th")).map(th => th.innerText.trim());
  return Array.from(table.querySelectorAll("tbody tr")).map(tr => {
    const cells = Array.from(tr.querySelectorAll("td")).map(td => td.innerText.trim());
    return Object.fromEntries(header.map((h, i) => [h, cells[i]]));
  });
})"""

# Every chart's state: whether the static SVG is hidden, and the points Plotly drew.
_CHARTS_JS = """() => Array.from(document.querySelectorAll("figure.chart")).map(figure => {
  const plot = figure.querySelector(".plot");
  const drawn = Array.from(plot.querySelectorAll("g.trace path"))
    .filter(p => (p.getAttribute("d") || "").length > 8).length;
  return {id: figure.id, staticHidden: figure.querySelector(".static").style.display === "none",
          staticVisible: figure.querySelector(".static svg").getBoundingClientRect().height > 0,
          traces: (plot.data || []).map(t => ({name: t.name, x: t.x, y: t.y})), drawn: drawn};
})"""


def shown(value: float) -> str:
    return f"{value:.2f}"


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield browser
        browser.close()


class Visit:
    """A page opened in a fresh context, with what it logged and requested."""

    def __init__(self, browser, path: Path, javascript: bool = True):
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(
            java_script_enabled=javascript, viewport={"width": 1280, "height": 1600}
        )
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.blocked: list[str] = []
        self.context.route("http*://**/*", self._block)  # nothing may leave the machine
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(self.url, wait_until="load")

    def _block(self, route) -> None:
        self.blocked.append(route.request.url)
        route.abort()

    def tables(self, section: str) -> list[list[dict[str, str]]]:
        return self.page.evaluate(_TABLES_JS, section)

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def report(trained_run) -> Path:
    out, _, _ = trained_run
    return out / REPORT_FILE


def test_report_opens_offline_and_shows_the_numbers_of_metrics_json(browser, report, trained_run):
    out, _, _ = trained_run
    visit = Visit(browser, report)
    try:
        page = visit.page
        # Plotly replaces each static chart once it has drawn it
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('figure.chart .static'))"
            ".every(s => s.style.display === 'none')",
            timeout=60_000,
        )
        lines = evaluation_lines(out)
        final = lines[-1]
        (summary,) = visit.tables("summary")
        assert [summary[0][m] for m in METRICS] == [shown(final[m]) for m in METRICS]
        (evaluations,) = visit.tables("evaluation")
        assert [row["iterations done"] for row in evaluations] == [str(e["iteration"] + 1) for e in lines]
        assert [[row[m] for m in METRICS] for row in evaluations] == [
            [shown(e[m]) for m in METRICS] for e in lines
        ]

        charts = {c["id"]: c for c in page.evaluate(_CHARTS_JS)}
        assert {"chart-losses", "chart-lr", "chart-metric-trend", "chart-cmc", "chart-roc"} <= set(charts)
        for chart in charts.values():
            assert chart["staticHidden"] and chart["drawn"] > 0, chart["id"]  # bars and lines drawn
        trend = {t["name"]: t for t in charts["chart-metric-trend"]["traces"]}
        for name in ("Rank-1", "mAP"):
            assert trend[name]["x"] == [e["iteration"] + 1 for e in lines]
            assert trend[name]["y"] == [e[name] for e in lines]  # the exact values of the file
        text = (out / "metrics.json").read_text(encoding="utf-8").splitlines()
        training = [json.loads(t) for t in text if "total_loss" in t]
        losses = {t["name"]: t for t in charts["chart-losses"]["traces"]}
        assert losses["total_loss"]["y"] == [t["total_loss"] for t in training]

        images = page.evaluate(
            "() => Array.from(document.images).map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0}))"
        )
        assert len(images) == page.locator(".ranklist figure").count() > 0
        assert [i["alt"] for i in images if not i["ok"]] == []

        assert visit.errors == []
        assert visit.blocked == [] and set(visit.requests) <= {visit.url}
        if os.environ.get("FASTREID_UPDATE_SCREENSHOTS") == "1":
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT))
    finally:
        visit.close()


def test_without_javascript_the_metrics_and_static_charts_are_readable(browser, report, trained_run):
    out, _, _ = trained_run
    visit = Visit(browser, report, javascript=False)
    try:
        final = evaluation_lines(out)[-1]
        (summary,) = visit.tables("summary")
        assert [summary[0][m] for m in METRICS] == [shown(final[m]) for m in METRICS]
        assert visit.page.locator("#summary table").is_visible()
        charts = visit.page.evaluate(_CHARTS_JS)
        assert charts and all(
            c["staticVisible"] and not c["staticHidden"] and c["drawn"] == 0 for c in charts
        )
        assert visit.errors == [] and visit.blocked == []
    finally:
        visit.close()
