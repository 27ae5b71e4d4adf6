"""Every tool that takes --config-file finds ``configs/...`` among the shipped configs when the
working directory has no such file (a user outside the checkout), and says which file it used."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fastreid.cli import export as export_tool
from fastreid.cli import extract as extract_tool
from fastreid.cli import search as search_tool
from fastreid.cli import train
from fastreid.cli.convert import parse_args as convert_args

REPO = Path(__file__).resolve().parents[2]
MARKET = "configs/Market1501/bagtricks_R50.yml"
SHIPPED = str(REPO / "configs" / "Market1501" / "bagtricks_R50.yml")


def _tool_module(name: str, folder: str = "tools"):
    spec = importlib.util.spec_from_file_location(f"{folder}_{name}", REPO / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "parse",
    [
        lambda argv: extract_tool.get_parser().parse_args([*argv, "--input", "x", "--output", "y"]),
        lambda argv: export_tool.get_parser().parse_args([*argv, "--format", "onnx"]),
        lambda argv: search_tool.get_parser().parse_args([*argv, "--query", "q", "--gallery", "g"]),
        lambda argv: _tool_module("visualize_result").get_parser().parse_args(argv),
        lambda argv: _tool_module("demo").parse_args(argv),
        lambda argv: _tool_module("demo", "demo").get_parser().parse_args([*argv, "--input", "x"]),
    ],
    ids=["extract", "export", "search", "visualize_result", "demo", "upstream_demo"],
)
def test_tools_resolve_a_shipped_config(parse, elsewhere):
    assert parse(["--config-file", MARKET]).config_file == SHIPPED
    assert parse(["--config-file", "configs/nope.yml"]).config_file == "configs/nope.yml"


def test_merge_from_file_finds_a_shipped_config_from_any_folder(elsewhere, tmp_path):
    """Library code (an upstream project's setup) calls cfg.merge_from_file("configs/...") itself."""
    from fastreid.config import ConfigError, get_cfg

    cfg = get_cfg()
    cfg.merge_from_file(MARKET)
    assert "TripletLoss" in cfg.MODEL.LOSSES.NAME and "TripletLoss" not in get_cfg().MODEL.LOSSES.NAME
    own = tmp_path / "configs" / "Market1501" / "bagtricks_R50.yml"  # the working folder's file wins
    own.parent.mkdir(parents=True)
    own.write_text("SOLVER:\n  BASE_LR: 0.5\n")
    cfg = get_cfg()
    cfg.merge_from_file(MARKET)
    assert cfg.SOLVER.BASE_LR == 0.5 and "TripletLoss" not in cfg.MODEL.LOSSES.NAME
    with pytest.raises(ConfigError, match="not found: configs/nope.yml"):
        get_cfg().merge_from_file("configs/nope.yml")


def test_convert_resolves_each_config_and_defaults_to_the_shipped_folder(elsewhere):
    args = convert_args(["model.pth", "--config-file", MARKET, "--config-file", "configs/Base-AGW.yml"])
    assert args.config_file == [SHIPPED, str(REPO / "configs" / "Base-AGW.yml")]


def test_build_cache_merges_the_shipped_config(elsewhere, capsys):
    build_cache = _tool_module("build_cache")
    assert build_cache.main(["--config-file", MARKET, "SOLVER.BASE_LRR", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "Config error: Unknown config key SOLVER.BASE_LRR (command line)" in err  # the file merged


def test_train_net_outside_the_checkout(elsewhere, run_tool):
    """As a user: tools/train_net.py (its ``fastreid.cli.train.run``, in this process, logging as
    in a fresh interpreter) run from another folder with upstream's relative path. The config is
    found and merged (the next error is the bad override), with one line saying where."""
    proc = run_tool(train.run, "--config-file", MARKET, "SOLVER.BASE_LRR", "1", env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"Config file {MARKET} is not in {elsewhere}; using the one shipped with fastreid: {SHIPPED}",
        "Config error: Unknown config key SOLVER.BASE_LRR (command line); did you mean SOLVER.BASE_LR?",
    ]

    missing = run_tool(
        train.run, "--config-file", "configs/Market1501/nope.yml", env={"OMP_NUM_THREADS": "1"}
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "Config error: Config file not found: configs/Market1501/nope.yml"
    ]
