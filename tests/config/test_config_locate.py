"""--config-file outside a checkout: a path missing from the working directory is found among the
configs shipped with the package, with one log line; a path found nowhere is left for the usual
"Config file not found" error."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from fastreid.config import ConfigError, get_cfg, locate
from fastreid.config.locate import packaged_config_file, packaged_configs_dir, resolve_config_file

REPO = Path(__file__).resolve().parents[2]
MARKET = "configs/Market1501/bagtricks_R50.yml"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """The working directory is a folder without configs/ (a user's project, not the checkout)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def wheel_layout(tmp_path, monkeypatch):
    """The package as a wheel installs it: site-packages/fastreid/configs, no pyproject.toml."""
    package = tmp_path / "site-packages" / "fastreid"
    (package / "configs" / "Market1501").mkdir(parents=True)
    (package / "configs" / "Base-tiny.yml").write_text("MODEL:\n  BACKBONE:\n    DEPTH: 18x\n")
    (package / "configs" / "Market1501" / "tiny.yml").write_text("_BASE_: ../Base-tiny.yml\n")
    monkeypatch.setattr(locate, "_PACKAGE", package)
    return package / "configs"


def test_checkout_configs_are_the_shipped_ones_in_a_checkout():
    assert packaged_configs_dir() == str(REPO / "configs")


def test_missing_relative_path_uses_the_shipped_config_and_says_so(elsewhere, caplog):
    with caplog.at_level(logging.INFO, logger="fastreid.config.locate"):
        found = resolve_config_file(MARKET)
    assert found == str(REPO / "configs" / "Market1501" / "bagtricks_R50.yml")
    lines = [r.getMessage() for r in caplog.records if r.name == "fastreid.config.locate"]
    assert len(lines) == 1 and MARKET in lines[0] and found in lines[0]
    cfg = get_cfg()
    cfg.merge_from_file(found)  # its _BASE_ (../Base-bagtricks.yml) resolves next to it
    assert cfg.DATASETS.NAMES == ("Market1501",)
    assert cfg.MODEL.LOSSES.NAME == ("CrossEntropyLoss", "TripletLoss")  # from the base file


def test_existing_path_wins_over_the_shipped_one(elsewhere, caplog):
    own = elsewhere / "configs" / "Market1501"
    own.mkdir(parents=True)
    (own / "bagtricks_R50.yml").write_text("SOLVER:\n  BASE_LR: 0.5\n")
    with caplog.at_level(logging.INFO, logger="fastreid.config.locate"):
        assert resolve_config_file(MARKET) == MARKET
    assert caplog.records == []


def test_path_found_nowhere_keeps_the_not_found_error(elsewhere, caplog):
    with caplog.at_level(logging.INFO, logger="fastreid.config.locate"):
        assert resolve_config_file("configs/Market1501/no_such.yml") == "configs/Market1501/no_such.yml"
        assert resolve_config_file("") == ""
    assert caplog.records == []
    with pytest.raises(ConfigError, match=r"^Config file not found: configs/Market1501/no_such.yml$"):
        get_cfg().merge_from_file(resolve_config_file("configs/Market1501/no_such.yml"))


@pytest.mark.parametrize(
    "path, expected",
    [
        ("Market1501/bagtricks_R50.yml", "Market1501/bagtricks_R50.yml"),
        ("./configs/Market1501/bagtricks_R50.yml", "Market1501/bagtricks_R50.yml"),
        ("configs\\Market1501\\bagtricks_R50.yml", "Market1501/bagtricks_R50.yml"),  # a Windows habit
        ("configs/Base-bagtricks.yml", "Base-bagtricks.yml"),
        ("configs/../pyproject.toml", None),  # never outside the shipped folder
        ("../configs/Market1501/bagtricks_R50.yml", None),
        ("configs/Market1501", None),  # a folder is not a config file
        ("/nowhere/configs/Market1501/bagtricks_R50.yml", None),  # absolute paths are taken as given
    ],
)
def test_which_paths_name_a_shipped_config(path, expected):
    found = packaged_config_file(path)
    if expected is None:
        assert found is None
    else:
        assert found == os.path.join(str(REPO / "configs"), *expected.split("/"))


def test_installed_wheel_layout(wheel_layout, elsewhere):
    assert packaged_configs_dir() == str(wheel_layout)
    found = resolve_config_file("configs/Market1501/tiny.yml")
    assert found == str(wheel_layout / "Market1501" / "tiny.yml")
    cfg = get_cfg()
    cfg.merge_from_file(found)
    assert cfg.MODEL.BACKBONE.DEPTH == "18x"


def test_no_shipped_configs_anywhere(tmp_path, monkeypatch, elsewhere):
    """A package folder with neither fastreid/configs nor a checkout around it."""
    monkeypatch.setattr(locate, "_PACKAGE", tmp_path / "lonely" / "fastreid")
    assert packaged_configs_dir() is None
    assert resolve_config_file(MARKET) == MARKET
