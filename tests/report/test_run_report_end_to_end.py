"""The report as a user gets it: fastreid-train writes report.html (and the evaluator the per-query
details it shows) at the end of training and of --eval-only; fastreid-report writes it for one run
or compares two; a report that cannot be written never fails the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "engine"))
from test_reliability_tool import REPO, _env, run_tool

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(synthetic_market_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    result = run_tool(synthetic_market_root, out)
    assert result.returncode == 0, result.stderr[-3000:]
    return synthetic_market_root, out


def _shown_metrics(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_training_writes_the_report_and_the_details_it_shows(trained):
    _, out = trained
    report, details = out / "report.html", out / "evaluation_details.npz"
    assert report.is_file() and details.is_file()
    assert f"Report: {report}" in (out / "log.txt").read_text()
    from fastreid.evaluation.details import EvaluationDetails

    loaded = EvaluationDetails.load(str(details))
    results = json.loads((out / "evaluation_results.json").read_text())
    # the details are those of the evaluation whose metrics were written
    assert abs(float(loaded.ap.mean()) * 100 - results["mAP"]) < 1e-6
    assert all(os.path.isfile(p) for p in loaded.q_paths[:5]) and len(loaded.g_paths) == len(loaded.g_pids)
    text = _shown_metrics(report.read_text(encoding="utf-8"))
    assert f"{results['mAP']:.2f}" in text and f"{results['Rank-1']:.2f}" in text


def test_eval_only_writes_the_report_and_report_off_writes_none(trained, tmp_path):
    data_root, out = trained
    weights = str(out / "model_final.pth")
    evaluated = tmp_path / "eval"
    result = run_tool(data_root, evaluated, "MODEL.WEIGHTS", weights, flags=("--eval-only",))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (evaluated / "report.html").is_file() and (evaluated / "evaluation_details.npz").is_file()
    quiet = tmp_path / "quiet"
    result = run_tool(
        data_root, quiet, "MODEL.WEIGHTS", weights, "TEST.REPORT", "False", "TEST.DETAILS_TOPK", 0,
        flags=("--eval-only",),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (quiet / "report.html").exists() and not (quiet / "evaluation_details.npz").exists()


def test_fastreid_report_command_for_one_run_and_two(trained, tmp_path):
    data_root, out = trained
    command = [sys.executable, "-m", "fastreid.cli.report"]
    single = tmp_path / "single.html"
    proc = subprocess.run([*command, str(out), "-o", str(single)], capture_output=True, text=True,
                          env=_env(data_root), timeout=120, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0 and f"Report: {single}" in proc.stdout, proc.stderr[-2000:]
    both = tmp_path / "both.html"
    proc = subprocess.run([*command, str(out), str(out), "-o", str(both), "--static"], capture_output=True,
                          text=True, env=_env(data_root), timeout=120, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "runs compared" in both.read_text(encoding="utf-8")
    proc = subprocess.run([*command, str(tmp_path / "nope")], capture_output=True, text=True,
                          env=_env(data_root), timeout=120, cwd=REPO)  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "nope" in proc.stderr


def test_a_report_that_cannot_be_written_is_a_warning(monkeypatch, fr_log, tmp_path):
    import fastreid.report
    from fastreid.cli.report import write_run_report
    from fastreid.config import get_cfg

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(fastreid.report, "write_report", broken)
    cfg = get_cfg()
    cfg.OUTPUT_DIR = str(tmp_path)
    assert write_run_report(cfg) is None
    assert "Could not write the run report (OSError: disk full)" in fr_log.text
