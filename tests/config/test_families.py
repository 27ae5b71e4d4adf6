"""A config that names a task family's meta architecture, head or data set gets the family's keys
by itself (upstream's projects call add_*_config(cfg) before merge_from_file)."""

from __future__ import annotations

import sys

import pytest

from fastreid.config import ConfigError, families, get_cfg

FAMILY = """
from fastreid.config import CfgNode

CALLS = []


def add_toy_config(cfg):
    CALLS.append(1)
    if "TOY" not in cfg.MODEL:  # idempotent: calling it before merge_from_file, as upstream does, is fine
        cfg.MODEL.TOY = CfgNode({"SIZE": 1, "NAMES": ["a"]})
"""


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    (tmp_path / "toyfamily.py").write_text(FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(families.FAMILIES, "ToyArch", "toyfamily:add_toy_config")
    monkeypatch.setitem(families.FAMILIES, "ToyData", "toyfamily:add_toy_config")
    yield
    sys.modules.pop("toyfamily", None)


def _write(tmp_path, text):
    path = tmp_path / "cfg.yml"
    path.write_text(text)
    return str(path)


def test_a_config_naming_a_family_gets_its_keys(tmp_path, toy_family):
    base = _write(tmp_path, "MODEL:\n  META_ARCHITECTURE: ToyArch\n")
    child = tmp_path / "child.yml"
    child.write_text(f"_BASE_: {base}\nDATASETS:\n  NAMES: ('ToyData',)\nMODEL:\n  TOY:\n    SIZE: 3\n")
    cfg = get_cfg()
    cfg.merge_from_file(str(child))  # the name is in the _BASE_ file; the family is added once
    assert cfg.MODEL.TOY.SIZE == 3 and cfg.MODEL.TOY.NAMES == ["a"]
    assert sys.modules["toyfamily"].CALLS == [1]
    sys.modules["toyfamily"].add_toy_config(cfg)  # as upstream's train_net.py would: nothing reset
    assert cfg.MODEL.TOY.SIZE == 3


def test_without_the_family_the_key_is_unknown(tmp_path):
    path = _write(tmp_path, "MODEL:\n  META_ARCHITECTURE: Baseline\n  TOY:\n    SIZE: 3\n")
    with pytest.raises(ConfigError, match="MODEL.TOY"):
        get_cfg().merge_from_file(path)


def test_names_in_reads_architecture_head_and_data_sets():
    loaded = {"MODEL": {"META_ARCHITECTURE": "A", "HEADS": {"NAME": "H"}},
              "DATASETS": {"NAMES": ["D1"], "TESTS": "D2"}}  # fmt: skip
    assert families.names_in(loaded) == {"A", "H", "D1", "D2"}
