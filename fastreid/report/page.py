"""One self-contained HTML file from the report's sections: styles, images, chart data and the
plotting library inline, so it opens anywhere (a zip on a laptop, no server, no network).

Every chart is in the page twice: a static SVG, shown first and the only one with scripts blocked,
and a Plotly figure that replaces it when the page may run scripts.
"""

from __future__ import annotations

import datetime
import html
import json
import logging
import re
from collections.abc import Sequence

from fastreid import __version__
from fastreid.utils.atomic import atomic_write

from .charts import Chart, plotly_figure, static_svg
from .sections import Section

__all__ = ["render_page", "write_page"]

logger = logging.getLogger(__name__)

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222; }
header { background: #243b55; color: #fff; padding: 1em 2em; }
header h1 { margin: 0 0 .2em 0; font-size: 1.5em; }
nav { padding: .5em 2em; background: #eef1f5; position: sticky; top: 0; z-index: 2; }
nav a { margin-right: 1.2em; color: #243b55; text-decoration: none; }
main { padding: 0 2em 2em 2em; max-width: 1200px; }
section { margin-top: 1.5em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f4f6f8; }
td:first-child, th:first-child { text-align: left; }
.note { color: #555; font-size: .85em; }
.warning { background: #fff4e5; border-left: 4px solid #ff7f0e; padding: .4em .8em; }
figure.chart { margin: .5em 0; max-width: 720px; }
figure.chart .static svg { max-width: 100%; height: auto; }
.ranklist { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 4px; margin: .6em 0; }
.ranklist figure { margin: 0; text-align: center; font-size: .7em; width: 56px; }
.ranklist img { border: 3px solid #999; display: block; margin: 0 auto; }
.ranklist figure.query img { border-color: #243b55; }
.ranklist figure.hit img { border-color: #2ca02c; }
.ranklist figure.miss img { border-color: #d62728; }
.ranklist .note { flex-basis: 100%; margin: 0; }
.ranklist .noimage { display: block; width: 48px; height: 96px; margin: 0 auto; border: 3px solid #999;
  background: #eee; color: #777; font-size: .9em; line-height: 96px; }
.ranklist figure.hit .noimage { border-color: #2ca02c; }
.ranklist figure.miss .noimage { border-color: #d62728; }
pre { background: #f7f7f7; padding: .5em; overflow-x: auto; font-size: .8em; }
"""

_DRAW = """
(function () {
  var figures = JSON.parse(document.getElementById("figures").textContent);
  if (typeof Plotly === "undefined") { return; }
  Object.keys(figures).forEach(function (id) {
    var holder = document.getElementById("chart-" + id);
    var plot = holder.querySelector(".plot");
    var fig = figures[id];
    Plotly.newPlot(plot, fig.data, fig.layout, {responsive: true, displaylogo: false}).then(function () {
      holder.querySelector(".static").style.display = "none";
    });
  });
})();
"""


def _plotly_js() -> str:
    """The Plotly library's JavaScript, or "" when the package is missing (static charts only)."""
    try:
        from plotly.offline import get_plotlyjs  # optional at run time: the page works without it
    except ImportError:
        logger.warning(
            "The report's charts are static: the 'plotly' package is not installed (pip install plotly)"
        )
        return ""
    return get_plotlyjs()


def _script_safe(text: str) -> str:
    """Text placed inside <script>: no "</" that could end the element early."""
    return text.replace("</", "<\\/")


def _chart_html(chart: Chart) -> str:
    return (
        f'<figure class="chart" id="chart-{html.escape(chart.id)}">'
        f'<div class="static">{static_svg(chart)}</div><div class="plot"></div></figure>'
    )


def render_page(title: str, sections: Sequence[Section], subtitle: str = "", interactive: bool = True) -> str:
    """The whole HTML document."""
    charts = {c.id: c for s in sections for c in s.charts}
    nav = "".join(f'<a href="#{html.escape(s.id)}">{html.escape(s.title)}</a>' for s in sections)
    parts = []
    for s in sections:
        body = re.sub(r"\{chart:([\w-]+)\}", lambda m: _chart_html(charts[m.group(1)]), s.body)
        parts.append(f'<section id="{html.escape(s.id)}"><h2>{html.escape(s.title)}</h2>{body}</section>')
    script = ""
    if interactive and charts:
        library = _plotly_js()
        if library:
            figures = json.dumps({cid: plotly_figure(c) for cid, c in charts.items()}, allow_nan=False)
            script = (
                f'<script id="figures" type="application/json">{_script_safe(figures)}</script>'
                f"<script>{library}</script><script>{_DRAW}</script>"
            )
    made = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>{html.escape(title)}</h1><div>{html.escape(subtitle)}</div>"
        f"<div class='note' style='color:#cfd8e3'>fastreid {html.escape(__version__)}, {made}</div></header>"
        f"<nav>{nav}</nav><main>{''.join(parts)}</main>{script}</body></html>\n"
    )


def write_page(path: str, text: str) -> str:
    """Write ``text`` to ``path`` atomically (a reader never sees half a page)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
    return path
