"""The report from real runs: the details a training run's evaluation writes and load_run reads
back, the report written at the end of training and of --eval-only (and not when turned off, and
a failing writer that does not fail the run), fastreid-report as a command, make demo's last line.
The numbers a report shows are checked against the files the run wrote."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from html.parser import HTMLParser

import numpy as np
import pytest
from report_runs import REPO, evaluation_lines, train_tiny

from fastreid.evaluation.details import DETAILS_FILE
from fastreid.evaluation.reid_evaluation import RESULTS_FILE
from fastreid.report import REPORT_FILE, load_run

METRICS = ("Rank-1", "Rank-5", "Rank-10", "mAP", "mINP", "metric")


class _Tables(HTMLParser):
    """The tables of one ``<section id=...>``: header cells and body rows, as text."""

    def __init__(self, section: str):
        super().__init__()
        self.section, self.inside, self.cell = section, False, None
        self.tables: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.inside = dict(attrs).get("id") == self.section
        elif self.inside and tag == "table":
            self.tables.append({"header": [], "rows": []})
        elif self.inside and tag == "tr":
            self.tables[-1]["rows"].append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if self.inside and tag in ("td", "th") and self.cell is not None:
            row = self.tables[-1]["rows"][-1]
            row.append(self.cell.strip())
            self.cell = None
        elif tag == "section":
            self.inside = False


def section_tables(html: str, section: str) -> list[list[dict[str, str]]]:
    """Each table of ``section`` as a list of rows, a row as {header: cell text}."""
    parser = _Tables(section)
    parser.feed(html)
    out = []
    for table in parser.tables:
        header, *rows = table["rows"]
        out.append([dict(zip(header, row)) for row in rows])
    return out


def shown(value: float) -> str:
    """How the report writes a metric (two decimals)."""
    return f"{value:.2f}"


def assert_summary_shows(html: str, results: dict) -> None:
    (summary,) = section_tables(html, "summary")
    assert len(summary) == 1
    for name in METRICS:
        assert summary[0][name] == shown(results[name]), name


# ------------------------------------------------------------------------------------- training


def test_training_writes_the_details_load_run_reads(trained_run):
    out, trainer, results = trained_run
    run = load_run(str(out))
    assert run.details is not None and run.details.dataset == "Market1501"
    d = run.details
    assert all(os.path.isfile(p) for p in d.q_paths + d.g_paths) and len(d.q_paths) == len(d.q_pids)
    assert d.topk_index.shape == (len(d.q_pids), min(10, len(d.g_pids)))
    # the details are the final evaluation's: its Rank-1 and mAP
    answered = d.first_match >= 0
    assert float(d.cmc[0]) * 100 == results["Rank-1"]
    assert float(np.mean(d.ap[answered])) * 100 == pytest.approx(results["mAP"], abs=1e-9)
    # what the report shows as the final metrics is what the run wrote, in both files
    final_line = evaluation_lines(out)[-1]
    saved = json.loads((out / RESULTS_FILE).read_text())
    for name in METRICS:
        assert run.results[name] == saved[name] == final_line[name] == results[name], name
    assert [e["iteration"] for e in run.evaluations] == [e["iteration"] for e in evaluation_lines(out)]


def test_training_writes_the_report_and_logs_its_path(trained_run):
    out, trainer, results = trained_run
    report = out / REPORT_FILE
    assert trainer.report_path == os.path.abspath(report) and report.is_file()
    assert f"Report: {os.path.abspath(report)}" in (out / "log.txt").read_text(encoding="utf-8")
    html = report.read_text(encoding="utf-8")
    assert_summary_shows(html, results)
    (evaluations,) = section_tables(html, "evaluation")
    lines = evaluation_lines(out)
    assert len(evaluations) == len(lines) == 2  # one evaluation per epoch
    for row, line in zip(evaluations, lines):
        assert row["iterations done"] == str(line["iteration"] + 1)
        for name in METRICS:
            assert row[name] == shown(line[name]), (line["iteration"], name)
    assert "<h2>Queries</h2>" in html and "data:image/jpeg;base64," in html


@pytest.mark.slow
def test_eval_only_writes_its_report(eval_only_run, trained_run):
    out, results = eval_only_run
    _, _, trained = trained_run
    assert results["mAP"] == trained["mAP"]  # the same weights, the same data
    report = out / REPORT_FILE
    assert report.is_file() and f"Report: {os.path.abspath(report)}" in (out / "log.txt").read_text(
        encoding="utf-8"
    )
    html = report.read_text(encoding="utf-8")
    assert_summary_shows(html, json.loads((out / RESULTS_FILE).read_text()))
    assert_summary_shows(html, results)
    assert "<h2>Training</h2>" not in html and "<h2>Queries</h2>" in html


@pytest.mark.slow
def test_no_report_when_turned_off(tmp_path, tiny_run_cfg, trained_run):
    from fastreid.cli.train import main
    from fastreid.engine import default_argument_parser
    from fastreid.engine.hooks import RunReport

    trainer, _ = train_tiny(tiny_run_cfg(tmp_path / "train", "SOLVER.MAX_ITER", 1, "TEST.REPORT", False))
    assert not any(isinstance(h, RunReport) for h in trainer._hooks) and trainer.report_path is None
    assert not (tmp_path / "train" / REPORT_FILE).exists()
    assert (tmp_path / "train" / DETAILS_FILE).is_file()  # fastreid-report can still show them

    trained, _, _ = trained_run
    args = default_argument_parser().parse_args(
        ["--config-file", str(trained / "config.yaml"), "--eval-only", "MODEL.WEIGHTS",
         str(trained / "model_final.pth"), "OUTPUT_DIR", str(tmp_path / "eval"), "TEST.REPORT", "False"]
    )  # fmt: skip
    assert main(args)["mAP"] > 0
    assert not (tmp_path / "eval" / REPORT_FILE).exists()


@pytest.mark.slow
def test_a_failing_report_writer_does_not_fail_training(tmp_path, tiny_run_cfg, monkeypatch, fr_log):
    import fastreid.report

    def broken(*args, **kwargs):
        raise RuntimeError("simulated report failure")

    monkeypatch.setattr(fastreid.report, "write_report", broken)
    trainer, results = train_tiny(tiny_run_cfg(tmp_path, "SOLVER.MAX_ITER", 1))
    assert results["mAP"] > 0 and (tmp_path / "model_final.pth").is_file()
    assert trainer.report_path is None and not (tmp_path / REPORT_FILE).exists()
    warnings = [r.getMessage() for r in fr_log.records if r.levelno == logging.WARNING]
    (warning,) = [
        m for m in warnings if "run report was not written" in m and "simulated report failure" in m
    ]
    # the command the warning names writes it, once the cause is gone
    monkeypatch.undo()
    from fastreid.cli.report import run

    command = warning.split("Write it later with: ", 1)[1].split()
    assert command[0] == "fastreid-report" and command[1:] == [str(tmp_path)], warning
    assert run(command[1:]) == 0 and (tmp_path / REPORT_FILE).is_file()


# ---------------------------------------------------------------------------------- the command


@pytest.fixture
def report_command(run_tool, monkeypatch):
    """``report_command(*args, cwd=folder)``: fastreid-report's command (``fastreid.cli.report.run``)
    in this process, run from ``cwd`` (the working directory is restored after the test)."""
    from fastreid.cli.report import run

    def call(*args, cwd):
        monkeypatch.chdir(cwd)
        return run_tool(run, *args)

    return call


@pytest.mark.slow
def test_fastreid_report_on_a_run_folder(trained_run, tmp_path, report_command):
    out, _, results = trained_run
    target = tmp_path / "again.html"
    proc = report_command(out, "-o", target, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"Report: {target}"
    assert_summary_shows(target.read_text(encoding="utf-8"), results)


@pytest.mark.slow
def test_fastreid_report_compares_two_run_folders(trained_run, eval_only_run, tmp_path, report_command):
    trained, _, trained_results = trained_run
    evaluated, eval_results = eval_only_run
    proc = report_command(trained, evaluated, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    target = tmp_path / "report-compare.html"  # several runs: in the current folder
    assert proc.stdout.strip().splitlines()[-1] == f"Report: {target}"
    html = target.read_text(encoding="utf-8")
    assert "2 runs compared" in html
    (summary,) = section_tables(html, "summary")
    assert [row["run"] for row in summary] == ["trained", "evaluated"]
    for row, results in zip(summary, (trained_results, eval_results)):
        for name in METRICS:
            assert row[name] == shown(results[name]), (row["run"], name)
    assert (trained / REPORT_FILE).stat().st_size > 0  # the run's own report is left as it was


def test_fastreid_report_errors_are_one_line(tmp_path, capsys):
    from fastreid.cli.report import run

    assert run([str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("ReportInputError:") and "is not a folder" in err
    (tmp_path / "empty").mkdir()
    assert run([str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not the OUTPUT_DIR of a run" in err


def test_fastreid_report_cannot_write_is_one_line(tmp_path, capsys):
    from fastreid.cli.report import run

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / RESULTS_FILE).write_text(json.dumps({"Rank-1": 50.0, "mAP": 40.0}))
    (tmp_path / "file").write_text("")
    assert run([str(folder), "-o", str(tmp_path / "file" / "r.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot write the report to" in err
    assert run([str(folder), "-o", str(tmp_path / "new" / "r.html"), "--static"]) == 0  # folder made
    assert "<script" not in (tmp_path / "new" / "r.html").read_text(encoding="utf-8")
    assert run([str(folder), "-o", str(tmp_path / "new")]) == 0  # a folder: report.html in it
    assert (tmp_path / "new" / REPORT_FILE).is_file()


# ------------------------------------------------------------------------------------------ demo


@pytest.mark.slow
def test_demo_ends_with_the_path_of_its_report(report_data_root, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", report_data_root)  # the demo sets it; restored after
    # tools/demo.py by its path: "import demo" could find upstream's demo/ folder at the root instead
    spec = importlib.util.spec_from_file_location("fastreid_tools_demo", REPO / "tools" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)

    out = tmp_path / "demo"
    code = demo.main(
        ["--root", report_data_root, "--output", str(out), "--num-pictures", "2",
         "INPUT.SIZE_TRAIN", "[64, 32]", "INPUT.SIZE_TEST", "[64, 32]", "SOLVER.MAX_EPOCH", "1",
         "SOLVER.IMS_PER_BATCH", "16", "SOLVER.WARMUP_ITERS", "2", "SOLVER.CHECKPOINT_PERIOD", "100"]
    )  # fmt: skip
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    report = out / REPORT_FILE
    assert last == f"Report: {os.path.abspath(report)}" and report.is_file()
    assert_summary_shows(report.read_text(encoding="utf-8"), evaluation_lines(out)[-1])
