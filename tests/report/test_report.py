"""The HTML report of a run folder: what it shows, that it needs nothing beside it, bad input."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.evaluation.details import DETAILS_FILE, compute_details
from fastreid.evaluation.rank import evaluate_rank
from fastreid.report import ReportInputError, load_run, write_report
from fastreid.report.thumbnails import MISSING_URI
from fastreid.utils.pairwise import iter_dist_chunks


def make_run(folder, *, seed=0, name_in_config="bagtricks", images=True):
    """A run folder as training leaves it: config, env, metrics.json, evaluation results and
    per-query details over real image files; the final metrics are the details' (one evaluation).
    Returns the folder, the details and the final metrics."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    (folder / "config.yaml").write_text(
        "MODEL:\n  BACKBONE:\n    NAME: build_resnet_backbone\n    DEPTH: 18x\n"
        f"SOLVER:\n  IMS_PER_BATCH: 16\nDATASETS:\n  TESTS: [Market1501]\nNOTE: {name_in_config}\n"
    )
    (folder / "env.txt").write_text("Python 3.11\ntorch 2.x\n")

    nq, ng, ids = 8, 30, 5
    q_pids, g_pids = np.arange(nq) % ids, rng.integers(0, ids, ng)
    q_cams, g_cams = rng.integers(0, 3, nq), rng.integers(0, 3, ng)
    centres = rng.normal(size=(ids, 6))
    qf = torch.from_numpy(centres[q_pids] + rng.normal(size=(nq, 6))).float()
    gf = torch.from_numpy(centres[g_pids] + rng.normal(size=(ng, 6))).float()
    img_dir = folder / "images"
    img_dir.mkdir(exist_ok=True)
    paths = []
    for i in range(nq + ng):
        path = img_dir / f"{i:03d}.jpg"
        if images:
            Image.fromarray(rng.integers(0, 256, (32, 16, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    dist = np.concatenate([d.numpy() for _, _, d in iter_dist_chunks(qf, gf, "cosine")])
    cmc, ap, inp = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
    details = compute_details(
        iter_dist_chunks(qf, gf, "cosine"), qf, gf, q_pids, g_pids, q_cams, g_cams,
        paths[:nq], paths[nq:], ap, cmc, "cosine", k=5,
    )  # fmt: skip
    details.save(str(folder / DETAILS_FILE))
    final = {"Rank-1": float(cmc[0]) * 100, "Rank-5": float(cmc[4]) * 100, "Rank-10": float(cmc[9]) * 100,
             "mAP": float(ap.mean()) * 100, "mINP": float(inp.mean()) * 100,
             "metric": (float(ap.mean()) + float(cmc[0])) / 2 * 100}  # fmt: skip

    lines = []
    for it in range(20):
        lines.append(
            {
                "iteration": it,
                "total_loss": 5 - it * 0.1,
                "loss_cls": 3 - it * 0.05,
                "loss_triplet": 2 - it * 0.05,
                "lr": 0.001 * (it + 1),
                "time": 0.5,
                "data_time": 0.01,
            }
        )
        if it == 9:
            lines.append({"iteration": it, "Rank-1": 10.0, "Rank-5": 20.0, "Rank-10": 30.0,
                          "mAP": 5.0, "mINP": 1.0, "metric": 7.5})  # fmt: skip
    lines.append({"iteration": 19, **final})
    (folder / "metrics.json").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"iteration": 2')
    (folder / "evaluation_results.json").write_text(json.dumps(final))
    return folder, details, final


def _figures(text: str) -> dict:
    match = re.search(r'<script id="figures" type="application/json">(.*?)</script>', text, re.S)
    assert match, "no chart data in the page"
    return json.loads(match.group(1).replace("<\\/", "</"))


def test_one_run_report_shows_what_the_run_did(tmp_path):
    run_dir, details, final = make_run(tmp_path / "run")
    path = write_report([str(run_dir)])
    assert path == str(run_dir / "report.html")
    text = (run_dir / "report.html").read_text(encoding="utf-8")
    for title in ("Summary", "Training", "Evaluation", "CMC, ROC and distances", "Cameras and identities",
                  "Queries", "Config and environment"):  # fmt: skip
        assert f"<h2>{title}</h2>" in text, title
    assert f"<td>{final['Rank-1']:.2f}</td>" in text and f"<td>{final['mAP']:.2f}</td>" in text
    assert "<td>resnet 18x</td>" in text  # the backbone, named shortly in the summary
    figures = _figures(text)
    assert {"losses", "lr", "throughput", "metric-trend", "cmc", "roc"} <= set(figures)
    losses = {trace["name"]: trace for trace in figures["losses"]["data"]}
    assert set(losses) == {"total_loss", "loss_cls", "loss_triplet"}
    assert (
        losses["total_loss"]["y"][0] == 5.0 and len(losses["total_loss"]["x"]) == 20
    )  # cut last line skipped
    assert figures["throughput"]["data"][0]["y"][0] == pytest.approx(32.0)  # 16 images / 0.5 s
    trend = {t["name"]: t for t in figures["metric-trend"]["data"]}
    assert trend["mAP"]["x"] == [10, 20] and trend["mAP"]["y"] == [5.0, final["mAP"]]
    assert figures["cmc"]["data"][0]["y"][0] == pytest.approx(details.cmc[0] * 100)
    # every chart also as a static SVG (read with scripts blocked)
    assert text.count('<div class="static"><svg') == len(figures)
    # the queries: thumbnails inline, true and false matches marked
    assert text.count('class="ranklist"') == min(20, int((details.first_match >= 0).sum())) + min(
        10, int((details.first_match >= 0).sum())
    )
    assert 'class="hit"' in text and 'class="miss"' in text and "data:image/jpeg;base64," in text
    # nothing outside the file: no external script, stylesheet or image (plotly.js's own strings aside)
    markup = re.sub(r"<script>.*?</script>", "", text, flags=re.S)
    assert not re.search(r'(src|href)=["\'](https?:|//|file:)', markup)
    assert text.count("<script>") == 2 and "<script src" not in text


def test_report_compares_several_runs(tmp_path):
    a, _, final_a = make_run(tmp_path / "exp1" / "run")
    b, _, final_b = make_run(tmp_path / "exp2" / "run", seed=1)
    assert final_a["mAP"] != final_b["mAP"]
    out = tmp_path / "compare.html"
    write_report([str(a), str(b)], str(out))
    text = out.read_text(encoding="utf-8")
    assert "2 runs compared" in text
    assert "exp1/run" in text and "exp2/run" in text
    for final in (final_a, final_b):
        assert f"<td>{final['Rank-1']:.2f}</td>" in text and f"<td>{final['mAP']:.2f}</td>" in text
    names = {t["name"] for t in _figures(text)["metric-trend"]["data"]}
    assert {"exp1/run: mAP", "exp2/run: mAP"} <= names


def test_missing_images_and_hostile_names_do_not_break_the_page(tmp_path):
    run_dir, *_ = make_run(tmp_path / "run</script><script>alert(1)</script>", images=False)
    path = write_report([str(run_dir)], str(tmp_path / "r.html"), interactive=True)
    text = Path(path).read_text(encoding="utf-8")
    assert MISSING_URI in text
    assert "<script>alert(1)" not in text  # escaped in HTML, "<\/" inside the chart data
    assert html.escape("</script><script>alert(1)</script>") in text


def test_static_report_is_small_and_has_no_script(tmp_path):
    run_dir, *_ = make_run(tmp_path / "run")
    path = write_report([str(run_dir)], str(tmp_path / "static.html"), interactive=False)
    text = Path(path).read_text(encoding="utf-8")
    assert "<script" not in text and "<svg" in text
    assert len(text) < 1_000_000


def test_a_run_without_details_or_training_still_reports(tmp_path):
    folder = tmp_path / "eval_only"
    folder.mkdir()
    (folder / "evaluation_results.json").write_text(json.dumps({"Rank-1": 12.5, "mAP": 7.25}))
    text = Path(write_report([str(folder)])).read_text(encoding="utf-8")
    assert "<td>12.50</td>" in text and "<h2>Queries</h2>" not in text and "<h2>Training</h2>" not in text


def test_not_a_run_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ReportInputError, match="is not a folder"):
        load_run(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportInputError, match="not the OUTPUT_DIR of a run"):
        write_report([str(tmp_path / "empty")])
    with pytest.raises(ReportInputError, match="No run folder"):
        write_report([])


def test_a_damaged_details_file_is_left_out_with_a_warning(tmp_path, fr_log):
    run_dir, *_ = make_run(tmp_path / "run")
    (run_dir / DETAILS_FILE).write_bytes(b"not a zip")
    text = Path(write_report([str(run_dir)])).read_text(encoding="utf-8")
    assert "<h2>Queries</h2>" not in text and "<h2>Training</h2>" in text
    assert any("cannot be read" in r.getMessage() for r in fr_log.records)


def test_details_of_another_evaluation_are_left_out_with_a_note(tmp_path, fr_log):
    """A details file older than the metrics (e.g. the untrained model's, when the final one could
    not be written) would put other numbers next to them: it is left out, and the page says so."""
    run_dir, _, final = make_run(tmp_path / "run")
    _, other, _ = make_run(tmp_path / "other", seed=5)
    other.save(str(run_dir / DETAILS_FILE))
    run = load_run(str(run_dir))
    assert run.details is None and run.results["mAP"] == final["mAP"]
    text = Path(write_report([str(run_dir)])).read_text(encoding="utf-8")
    assert "<h2>Queries</h2>" not in text and "is from another evaluation than the metrics" in text
    assert f"<td>{final['mAP']:.2f}</td>" in text


def test_eval_only_on_several_test_sets_names_the_set_of_its_metrics(tmp_path):
    """--eval-only leaves only the last test set's metrics (unnamed); the details name the set, so
    the summary shows them under its name, not as the run's (or the first set's) numbers."""
    run_dir, details, final = make_run(tmp_path / "run")
    (run_dir / "metrics.json").unlink()
    text = (run_dir / "config.yaml").read_text().replace("[Market1501]", "[DukeMTMC, Market1501]")
    (run_dir / "config.yaml").write_text(text)
    details.dataset = "Market1501"
    details.save(str(run_dir / DETAILS_FILE))
    run = load_run(str(run_dir))
    assert run.results["Market1501/mAP"] == final["mAP"] and "mAP" not in run.results
    assert run.details is not None  # the named metrics still match the details
    page = Path(write_report([str(run_dir)])).read_text(encoding="utf-8")
    assert "<th>Market1501/Rank-1</th>" in page and "Test set: <b>Market1501</b>" in page


def test_details_without_image_paths_show_rankings_without_pictures(tmp_path, fr_log):
    run_dir, details, _ = make_run(tmp_path / "run")
    details.q_paths = [""] * len(details.q_paths)
    details.g_paths = [""] * len(details.g_paths)
    details.save(str(run_dir / DETAILS_FILE))
    text = Path(write_report([str(run_dir)])).read_text(encoding="utf-8")
    assert "<h2>Queries</h2>" in text and 'class="noimage"' in text and "<img" not in text
    assert "recorded no image paths" in text
    assert not any("cannot be read" in r.getMessage() for r in fr_log.records)
