"""Charts of the report, each described once (:class:`Chart`) and drawn twice: as a Plotly figure
(interactive, when the page may run scripts) and as an SVG drawn by matplotlib (what the page shows
with scripts blocked, and until Plotly has drawn)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from fastreid.utils.visualizer import agg_pyplot

__all__ = ["Chart", "Series", "plotly_figure", "static_svg"]

# Colours shared by both renderings, so a run has the same colour in every chart.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass
class Series:
    """One line (or one set of bars) of a chart."""

    name: str
    x: Sequence[Any]  # numbers, or labels for bars
    y: Sequence[float]
    dashed: bool = False


@dataclass
class Chart:
    """A chart: ``kind`` "line", "step" (staircase, e.g. a CMC) or "bar" (grouped bars)."""

    id: str
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    kind: str = "line"
    log_x: bool = False
    log_y: bool = False

    def empty(self) -> bool:
        return not any(len(s.y) for s in self.series)


def _finite(values: Sequence[float]) -> list[float | None]:
    """JSON-safe values: NaN and infinities become gaps (``None``)."""
    return [float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def plotly_figure(chart: Chart) -> dict[str, Any]:
    """``{"data": [...], "layout": {...}}`` for ``Plotly.newPlot``."""
    data = []
    for i, s in enumerate(chart.series):
        colour = PALETTE[i % len(PALETTE)]
        x = list(s.x) if chart.kind == "bar" else _finite(s.x)
        trace: dict[str, Any] = {"name": s.name, "x": x, "y": _finite(s.y)}
        if chart.kind == "bar":
            trace.update(type="bar", marker={"color": colour})
        else:
            trace.update(
                type="scatter", mode="lines", line={"color": colour, "dash": "dash" if s.dashed else "solid"}
            )
            if chart.kind == "step":
                trace["line"]["shape"] = "hv"
        data.append(trace)
    layout = {
        "title": {"text": chart.title},
        # bars are labelled ("cam 1"): a category axis (a linear one would draw none of them)
        "xaxis": {"title": {"text": chart.xlabel}, "type": _x_type(chart)},
        "yaxis": {"title": {"text": chart.ylabel}, "type": "log" if chart.log_y else "linear"},
        "barmode": "group",
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "height": 360,
        "legend": {"orientation": "h", "y": -0.2},
    }
    return {"data": data, "layout": layout}


def _x_type(chart: Chart) -> str:
    if chart.kind == "bar":
        return "category"
    return "log" if chart.log_x else "linear"


def static_svg(chart: Chart) -> str:
    """The chart as an ``<svg>`` element (matplotlib), for pages read with scripts blocked.

    Drawn with fixed margins and its text as SVG text, not glyph outlines: about twice as fast as
    ``tight_layout`` with outlines (every run's report draws eight or so), and the page's text
    stays selectable."""
    plt = agg_pyplot()
    with plt.rc_context({"svg.fonttype": "none"}):
        return _svg(chart, plt)


def _svg(chart: Chart, plt: ModuleType) -> str:
    fig, ax = plt.subplots(figsize=(7.0, 3.6), dpi=96)
    try:
        if chart.kind == "bar":
            _bars(ax, chart.series)
        else:
            for i, s in enumerate(chart.series):
                colour, style = PALETTE[i % len(PALETTE)], "--" if s.dashed else "-"
                if chart.kind == "step":
                    ax.step(list(s.x), list(s.y), where="post", color=colour, linestyle=style, label=s.name)
                else:
                    ax.plot(list(s.x), list(s.y), color=colour, linestyle=style, label=s.name)
        ax.set_title(chart.title)
        ax.set_xlabel(chart.xlabel)
        ax.set_ylabel(chart.ylabel)
        if chart.log_x:
            ax.set_xscale("log")
        if chart.log_y:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        if len(chart.series) > 1:
            ax.legend(fontsize="small")
        rotated = chart.kind == "bar" and len(chart.series[0].x if chart.series else []) > 8
        fig.subplots_adjust(left=0.11, right=0.98, top=0.9, bottom=0.3 if rotated else 0.15)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
    finally:
        plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the SVG sits inside HTML


def _bars(ax, series: list[Series]) -> None:
    labels = [str(x) for x in series[0].x] if series else []
    width = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        positions = [j + (i - (len(series) - 1) / 2) * width for j in range(len(s.y))]
        ax.bar(positions, list(s.y), width=width, color=PALETTE[i % len(PALETTE)], label=s.name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(
        labels, rotation=30 if len(labels) > 8 else 0, ha="right" if len(labels) > 8 else "center"
    )
