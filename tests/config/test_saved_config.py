"""The config a run saves (``fastreid.config.saved``): upstream's keys in ``config.yaml``, this
package's beside it in ``config.fastreid.yaml``, and both read back as they were written; dumps of
older versions (every key inline, no side file) read as before. That upstream's ``get_cfg()`` takes
``config.yaml`` is tested against upstream's own behaviour in ``tests/compat/test_upstream_edges.py``."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

from fastreid.config import ConfigError, get_cfg
from fastreid.config.defaults import FASTREID_KEYS
from fastreid.config.saved import save_config, side_file
from fastreid.engine.defaults import write_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FASTREID_VALUES = ("MODEL.PRECISION", "fp32", "SOLVER.PLATEAU.ENABLED", True, "SOLVER.PLATEAU.FACTOR", 0.5)
MORE_VALUES = (
    "SEED",
    7,
    "TEST.KEEP_SAME_CAMERA",
    True,
    "DATALOADER.PIN_MEMORY",
    False,
    "SOLVER.MAX_ITER",
    30,
)
LOOSER_TYPES = ("MODEL.HEADS.SCALE", 64.0, "MODEL.LOSSES.CIRCLE.GAMMA", 80.5)
CASES = {
    "defaults": (None, ()),
    "non-default fastreid keys and looser types": (
        "configs/Market1501/AGW_R50.yml",
        (*FASTREID_VALUES, *MORE_VALUES, *LOOSER_TYPES),
    ),
    "task family": ("configs/Attr/pa100.yml", ("TEST.THRES", 0.4, "MODEL.COMPILE", True)),
}


def _cfg(config_file, opts):
    cfg = get_cfg()
    if config_file:
        cfg.merge_from_file(os.path.join(REPO, config_file))
    cfg.merge_from_list(list(opts))
    return cfg


def _read(path):
    cfg = get_cfg()
    cfg.merge_from_file(str(path))
    return cfg


def _leaves(node, prefix=""):
    out = {}
    for key, value in node.items():
        out.update(
            _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value}
        )
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_a_saved_config_reads_back_as_it_was(name, tmp_path):
    cfg = _cfg(*CASES[name])
    path, side = save_config(cfg, str(tmp_path / "config.yaml"))
    assert side == str(tmp_path / "config.fastreid.yaml")
    written = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    own = yaml.safe_load(Path(side).read_text(encoding="utf-8"))
    assert set(_leaves(own)) == set(FASTREID_KEYS)  # every one of fastreid's keys, beside the file
    assert not set(_leaves(written)) & FASTREID_KEYS  # none in the file upstream reads
    again = _read(path)
    assert again == cfg  # equal values everywhere
    for key, value in _leaves(cfg).items():  # and this package's keys in their own types
        if key in FASTREID_KEYS:
            assert type(_leaves(again)[key]) is type(value), key


def test_values_upstream_cannot_hold_are_written_as_they_are_with_a_warning(tmp_path, caplog):
    cfg = _cfg(None, ("MODEL.HEADS.SCALE", 30.5, "MODEL.HEADS.MARGIN", 1))
    with caplog.at_level(logging.WARNING, logger="fastreid.config.saved"):
        path, _ = save_config(cfg, str(tmp_path / "config.yaml"))
    written = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    assert written["MODEL"]["HEADS"]["SCALE"] == 30.5 and "MODEL.HEADS.SCALE 30.5" in caplog.text
    assert type(written["MODEL"]["HEADS"]["MARGIN"]) is float  # an int for a float key: upstream's type
    assert _read(path) == cfg


def test_a_numeric_depth_is_kept_as_upstreams_spelling():
    assert _cfg(None, ("MODEL.BACKBONE.DEPTH", 101)).MODEL.BACKBONE.DEPTH == "101x"
    assert _cfg(None, ("MODEL.BACKBONE.DEPTH", "18")).MODEL.BACKBONE.DEPTH == "18x"  # as on a command line
    assert _cfg(None, ("MODEL.BACKBONE.DEPTH", "x1_0")).MODEL.BACKBONE.DEPTH == "x1_0"


def test_an_older_dump_with_every_key_inline_reads_as_before(tmp_path):
    cfg = _cfg(*CASES["non-default fastreid keys and looser types"])
    path = tmp_path / "config.yaml"
    path.write_text(cfg.dump(), encoding="utf-8")  # what versions before the split wrote
    again = _read(path)
    assert again.dump() == cfg.dump()


def test_a_key_set_by_hand_in_config_yaml_wins_over_the_side_file(tmp_path):
    path, side = save_config(_cfg(None, ("MODEL.PRECISION", "fp32")), str(tmp_path / "config.yaml"))
    with open(path, "a", encoding="utf-8") as f:
        f.write("SEED: 5\n")  # a fastreid key added to config.yaml, as to any config
    again = _read(path)
    assert again.SEED == 5 and again.MODEL.PRECISION == "fp32"


def test_a_config_yaml_copied_without_its_side_file_says_so(tmp_path, caplog):
    path, side = save_config(_cfg(None, ("MODEL.PRECISION", "fp32")), str(tmp_path / "config.yaml"))
    os.remove(side)
    with caplog.at_level(logging.WARNING, logger="fastreid.config.saved"):
        again = _read(path)
    assert again.MODEL.PRECISION == "auto"  # the default, and a warning saying why
    assert f"{side}, which is missing" in caplog.text and "copy it beside the file" in caplog.text
    caplog.clear()
    plain = tmp_path / "mine.yaml"
    plain.write_text("MODEL:\n  PRECISION: fp32\n", encoding="utf-8")  # a user's YAML: no side file expected
    with caplog.at_level(logging.WARNING, logger="fastreid.config.saved"):
        assert _read(plain).MODEL.PRECISION == "fp32"
    assert caplog.text == ""


def test_a_broken_side_file_is_one_line_naming_it(tmp_path):
    path, side = save_config(get_cfg(), str(tmp_path / "config.yaml"))
    with open(side, "a", encoding="utf-8") as f:
        f.write("SEED: [\n")
    with pytest.raises(
        ConfigError, match=r"config\.fastreid\.yaml \(the fastreid keys of .*config\.yaml\) is not valid"
    ):
        _read(path)


def test_a_run_writes_both_files_and_a_header_stays_a_comment(tmp_path):
    cfg = _cfg(None, ("SEED", 3))
    path = write_config(cfg, str(tmp_path / "run"))  # what default_setup calls
    assert path == str(tmp_path / "run" / "config.yaml") and os.path.isfile(side_file(path))
    assert _read(path) == cfg
    best, _ = save_config(cfg, str(tmp_path / "best_config.yaml"), header="the best of 4 trials\nmAP 12.5")
    assert Path(best).read_text(encoding="utf-8").splitlines()[:2] == ["# the best of 4 trials", "# mAP 12.5"]
    assert _read(best) == cfg and side_file(best) == str(tmp_path / "best_config.fastreid.yaml")
