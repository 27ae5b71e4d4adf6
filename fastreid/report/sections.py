"""The report's sections, each built from the runs: a title, HTML (tables, images) and the charts
it places. HTML is escaped here; :mod:`.page` assembles the sections into one file."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .charts import Chart, Series
from .run import Run
from .thumbnails import thumbnail_uri

__all__ = ["Section", "build_sections"]


@dataclass
class Section:
    id: str
    title: str
    body: str = ""  # HTML; may hold "{chart:<id>}" placeholders where a chart goes
    charts: list[Chart] = field(default_factory=list)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2e}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], css: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _series(name: str, points: Sequence[tuple[float, float]], dashed: bool = False) -> Series:
    """A series from ``(x, y)`` points."""
    return Series(name, [x for x, _ in points], [y for _, y in points], dashed=dashed)


def _placeholder(chart: Chart) -> str:
    return "{chart:" + chart.id + "}"


# ------------------------------------------------------------------------------------------ summary


def summary_section(runs: Sequence[Run]) -> Section:
    metrics: list[str] = []
    for run in runs:
        metrics += [m for m in run.metric_names() if m not in metrics]
    rows = []
    for run in runs:
        iters = max((line["iteration"] for line in run.scalars), default=None)
        rows.append(
            [run.name, run.config_value("MODEL.BACKBONE.NAME", "?").replace("build_", "").replace("_backbone", "")
             + f" {run.config_value('MODEL.BACKBONE.DEPTH', '')}",
             ", ".join(run.config_value("DATASETS.TESTS", []) or []),
             "" if iters is None else int(iters) + 1]
            + [run.results.get(m, "") for m in metrics]
        )  # fmt: skip
    header = ["run", "backbone", "test sets", "iterations"] + metrics
    note = (
        "<p class='note'>Rank-k, mAP and mINP in percent; TPR@FPR as fractions (upstream's convention); "
        "<code>metric</code> is (mAP + Rank-1) / 2.</p>"
    )
    paths = "".join(f"<li><code>{_e(r.path)}</code></li>" for r in runs)
    notes = "".join(
        f"<p class='warning'>{_e(r.name) + ': ' if len(runs) > 1 else ''}{_e(n)}</p>"
        for r in runs
        for n in r.notes
    )
    return Section("summary", "Summary", _table(header, rows, "metrics") + note + notes + f"<ul>{paths}</ul>")


# ----------------------------------------------------------------------------------------- training


def training_section(runs: Sequence[Run]) -> Section | None:
    if not any(r.scalars for r in runs):
        return None
    multi = len(runs) > 1
    losses = Chart("losses", "Losses", "iterations done", "loss")
    lr = Chart("lr", "Learning rate", "iterations done", "learning rate", log_y=True)
    speed = Chart("throughput", "Training throughput", "iterations done", "images per second")
    for run in runs:
        prefix = f"{run.name}: " if multi else ""
        for name in run.loss_names():
            points = [(line["iteration"] + 1, line[name]) for line in run.scalars if name in line]
            losses.series.append(_series(prefix + name, points, dashed=name != "total_loss"))
        points = [(line["iteration"] + 1, line["lr"]) for line in run.scalars if "lr" in line]
        if points:
            lr.series.append(_series(run.name, points))
        batch = run.config_value("SOLVER.IMS_PER_BATCH")
        points = [(line["iteration"] + 1, batch / line["time"]) for line in run.scalars if line.get("time")]
        if batch and points:
            speed.series.append(_series(run.name, points))
    charts = [c for c in (losses, lr, speed) if not c.empty()]
    body = "".join(_placeholder(c) for c in charts)
    if not speed.empty():
        body += "<p class='note'>Throughput: SOLVER.IMS_PER_BATCH / seconds per iteration (median of the logging window).</p>"
    return Section("training", "Training", body, charts)


# ----------------------------------------------------------------------------------- pseudo labels

#: The pseudo-label measures drawn (fractions), in this order, when a run has them.
_PSEUDO_LABEL_CURVES = ("NMI", "ARI", "pair_precision", "pair_recall", "outlier_share")


def pseudo_labels_section(runs: Sequence[Run]) -> Section | None:
    """The clustering before each epoch of an unsupervised run (``fastreid.projects.uda``): the
    clusters, the outliers and, where the target has identities, how the clusters match them."""
    if not any(r.pseudo_labels for r in runs):
        return None
    multi = len(runs) > 1
    chart = Chart("pseudo-labels", "Pseudo labels at each epoch", "iterations done", "fraction")
    tables = []
    for run in runs:
        steps = run.pseudo_labels
        for name in _PSEUDO_LABEL_CURVES:
            points = [(s["iteration"], s[name]) for s in steps if name in s]
            if points:
                chart.series.append(_series((f"{run.name}: " if multi else "") + name, points))
        names = ["clusters", "outlier_share", "largest_cluster_share"]
        names += [n for n in _PSEUDO_LABEL_CURVES if n != "outlier_share" and any(n in s for s in steps)]
        rows = [[int(s["iteration"])] + [s.get(n, "") for n in names] for s in steps]
        caption = f"<h3>{_e(run.name)}</h3>" if multi else ""
        tables.append(caption + _table(["iterations done", *names], rows, "metrics"))
    note = (
        "<p class='note'>Before each epoch the target's images are clustered (DBSCAN on the k-reciprocal "
        "Jaccard distance); outliers sit the epoch out. NMI, ARI and pair precision / recall compare the "
        "clusters with the target's identities (an outlier counts as a cluster of its own), where it has "
        "them; fractions.</p>"
    )
    return Section("pseudo-labels", "Pseudo labels", _placeholder(chart) + note + "".join(tables), [chart])


# --------------------------------------------------------------------------------------- evaluation


def evaluation_section(runs: Sequence[Run]) -> Section | None:
    if not any(r.evaluations for r in runs):
        return None
    multi = len(runs) > 1
    trend = Chart("metric-trend", "Metrics at each evaluation", "iterations done", "percent")
    tables = []
    for run in runs:
        names = [m for m in run.metric_names() if "TPR@" not in m and not m.endswith("metric")]
        for name in names:
            points = [(e["iteration"] + 1, e[name]) for e in run.evaluations if name in e]
            if points:
                trend.series.append(_series((f"{run.name}: " if multi else "") + name, points))
        all_names = run.metric_names()
        rows = [[int(e["iteration"]) + 1] + [e.get(m, "") for m in all_names] for e in run.evaluations]
        caption = f"<h3>{_e(run.name)}</h3>" if multi else ""
        tables.append(caption + _table(["iterations done"] + all_names, rows, "metrics"))
    return Section("evaluation", "Evaluation", _placeholder(trend) + "".join(tables), [trend])


def curves_section(runs: Sequence[Run]) -> Section | None:
    with_details = [r for r in runs if r.details is not None]
    if not with_details:
        return None
    multi = len(runs) > 1
    cmc = Chart("cmc", "CMC", "rank", "matching rate (%)", kind="step")
    roc = Chart("roc", "ROC of query-gallery pairs", "false positive rate", "true positive rate", log_x=True)
    charts = [cmc, roc]
    for run in with_details:
        d = run.details
        assert d is not None
        ranks = min(len(d.cmc), 50)
        cmc.series.append(Series(run.name, list(range(1, ranks + 1)), (d.cmc[:ranks] * 100).tolist()))
        fpr, tpr, _ = d.roc()
        keep = fpr > 0  # a log axis: from the first false positive on
        roc.series.append(Series(run.name, fpr[keep].tolist(), tpr[keep].tolist()))
        hist = Chart(
            f"dist-{len(charts)}",
            f"Distances of true and false matches{f' ({run.name})' if multi else ''}",
            f"{d.metric} distance",
            "share of pairs",
        )
        centres = ((d.hist_edges[1:] + d.hist_edges[:-1]) / 2).tolist()
        hist.series.append(Series("true matches", centres, (d.pos_hist / max(1, d.pos_hist.sum())).tolist()))
        hist.series.append(Series("false matches", centres, (d.neg_hist / max(1, d.neg_hist.sum())).tolist()))
        charts.append(hist)
    notes = "".join(
        f"<p class='note'>{_e(r.name) + ': ' if multi else ''}the last evaluation, on "
        f"{_e(r.details.dataset)}.</p>"
        for r in with_details
        if r.details is not None and r.details.dataset
    )
    body = notes + "".join(_placeholder(c) for c in charts)
    return Section("curves", "CMC, ROC and distances", body, charts)


# ---------------------------------------------------------------------------------------- breakdown


def _per_group(keys: np.ndarray, ap: np.ndarray, rank1: np.ndarray) -> list[tuple[int, int, float, float]]:
    """(group, queries, Rank-1 %, mAP %) for each distinct key."""
    rows = []
    for key in np.unique(keys):
        chosen = keys == key
        rows.append(
            (int(key), int(chosen.sum()), float(rank1[chosen].mean() * 100), float(ap[chosen].mean() * 100))
        )
    return rows


def breakdown_section(runs: Sequence[Run], worst_identities: int = 15) -> Section | None:
    with_details = [r for r in runs if r.details is not None]
    if not with_details:
        return None
    body: list[str] = []
    charts: list[Chart] = []
    for run in with_details:
        d = run.details
        assert d is not None
        answered = d.first_match >= 0  # queries with a true match in the gallery (the metrics' set)
        ap, rank1 = d.ap[answered], (d.first_match[answered] == 0).astype(float)
        cams, pids = d.q_camids[answered], d.q_pids[answered]
        by_camera = _per_group(cams, ap, rank1)
        chart = Chart(
            f"cameras-{len(charts)}", f"By query camera ({run.name})", "camera", "percent", kind="bar"
        )
        chart.series = [
            Series("Rank-1", [f"cam {c}" for c, *_ in by_camera], [r for _, _, r, _ in by_camera]),
            Series("mAP", [f"cam {c}" for c, *_ in by_camera], [m for *_, m in by_camera]),
        ]
        charts.append(chart)
        worst = sorted(_per_group(pids, ap, rank1), key=lambda row: (row[3], row[0]))[:worst_identities]
        body.append(
            f"<h3>{_e(run.name)}</h3>"
            + _placeholder(chart)
            + _table(["query camera", "queries", "Rank-1 (%)", "mAP (%)"], by_camera, "metrics")
            + f"<h4>The {len(worst)} hardest identities (lowest mAP over their queries)</h4>"
            + _table(["identity", "queries", "Rank-1 (%)", "mAP (%)"], worst, "metrics")
            + (f"<p class='note'>{int((~answered).sum())} queries have no true match in the gallery and are "
               "left out, as in the metrics.</p>" if (~answered).any() else "")
        )  # fmt: skip
    return Section("breakdown", "Cameras and identities", "".join(body), charts)


# ------------------------------------------------------------------------------------------ queries


def _image(path: str, alt: str) -> str:
    """The image inline, or a labelled empty box when the evaluation recorded no path."""
    if not path:
        return f'<span class="noimage" title="{_e(alt)}">no image</span>'
    return f'<img src="{thumbnail_uri(path)}" alt="{_e(alt)}" title="{_e(path)}">'


def _rank_list(run: Run, q: int) -> str:
    d = run.details
    assert d is not None
    cells = [
        f'<figure class="query">{_image(d.q_paths[q], f"query {q}")}<figcaption>id {d.q_pids[q]} '
        f"cam {d.q_camids[q]}<br>AP {d.ap[q] * 100:.1f}</figcaption></figure>"
    ]
    for index, dist in zip(d.topk_index[q], d.topk_dist[q]):
        if index < 0:
            break
        hit = d.g_pids[index] == d.q_pids[q]
        cells.append(
            f'<figure class="{"hit" if hit else "miss"}">'
            f"{_image(d.g_paths[index], 'true match' if hit else 'false match')}<figcaption>{'&#10003;' if hit else '&#10007;'} {dist:.3f}<br>id {d.g_pids[index]} "
            f"cam {d.g_camids[index]}</figcaption></figure>"
        )
    first = d.first_match[q]
    tail = f"first true match at rank {first + 1}" if first >= 0 else "no true match in the gallery"
    return f'<div class="ranklist" data-query="{q}">{"".join(cells)}<p class="note">{tail}</p></div>'


def queries_section(runs: Sequence[Run], worst: int = 20, best: int = 10) -> Section | None:
    with_details = [r for r in runs if r.details is not None]
    if not with_details:
        return None
    run = with_details[0]  # one run's queries: several runs' lists side by side would not be readable
    d = run.details
    assert d is not None
    answered = np.flatnonzero(d.first_match >= 0)
    order = answered[np.lexsort((answered, d.ap[answered]))]  # AP ascending, then query index
    legend = (
        "<p class='note'>Each row: the query, then its nearest gallery images with the distance "
        "(&#10003; green: same identity, &#10007; red: another identity). Same-camera images of the "
        "query's identity are left out, as in the metrics.</p>"
    )
    if d.dataset:
        legend = f"<p>Test set: <b>{_e(d.dataset)}</b></p>" + legend
    if not d.has_images():
        legend += (
            "<p class='note'>The evaluation recorded no image paths (its batches had no "
            "<code>img_paths</code>): the rankings are shown without pictures.</p>"
        )
    body = (
        legend
        + f"<h3>The {min(worst, len(order))} worst queries (lowest AP)</h3>"
        + "".join(_rank_list(run, int(q)) for q in order[:worst])
        + f"<h3>The {min(best, len(order))} best queries</h3>"
        + "".join(_rank_list(run, int(q)) for q in order[::-1][:best])
    )
    title = "Queries" + (f" ({run.name})" if len(runs) > 1 else "")
    return Section("queries", title, body)


# ------------------------------------------------------------------------------------------- config


def config_section(runs: Sequence[Run]) -> Section:
    parts = []
    for run in runs:
        parts.append(
            f"<h3>{_e(run.name)}</h3>"
            f"<details><summary>config.yaml</summary><pre>{_e(run.config_text or '(none)')}</pre></details>"
            f"<details><summary>environment</summary><pre>{_e(run.env_text or '(none)')}</pre></details>"
        )
    return Section("config", "Config and environment", "".join(parts))


def build_sections(runs: Sequence[Run], worst: int = 20, best: int = 10) -> list[Section]:
    candidates = [
        summary_section(runs),
        training_section(runs),
        pseudo_labels_section(runs),
        evaluation_section(runs),
        curves_section(runs),
        breakdown_section(runs),
        queries_section(runs, worst, best),
        config_section(runs),
    ]
    return [s for s in candidates if s is not None]
