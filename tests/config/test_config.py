import glob
import os

import pytest
import yaml
from fvcore.common.config import CfgNode as FvCfgNode

from fastreid.config import CfgNode, ConfigError, configurable, get_cfg
from fastreid.config.config import _safe_load, keys_of

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_FILES = sorted(glob.glob(os.path.join(REPO, "configs", "**", "*.yml"), recursive=True)) + sorted(
    glob.glob(os.path.join(REPO, "custom_configs", "**", "*.yml"), recursive=True)
)

# A sample of upstream FastReID's default values (fastreid/config/defaults.py upstream).
UPSTREAM_DEFAULTS = {
    "MODEL.DEVICE": "cuda",
    "MODEL.META_ARCHITECTURE": "Baseline",
    "MODEL.QUEUE_SIZE": 8192,
    "MODEL.BACKBONE.NAME": "build_resnet_backbone",
    "MODEL.BACKBONE.DEPTH": "50x",
    "MODEL.BACKBONE.LAST_STRIDE": 1,
    "MODEL.BACKBONE.FEAT_DIM": 2048,
    "MODEL.BACKBONE.PRETRAIN": False,
    "MODEL.HEADS.NAME": "EmbeddingHead",
    "MODEL.HEADS.NUM_CLASSES": 0,
    "MODEL.HEADS.POOL_LAYER": "GlobalAvgPool",
    "MODEL.HEADS.CLS_LAYER": "Linear",
    "MODEL.LOSSES.NAME": ("CrossEntropyLoss",),
    "MODEL.LOSSES.CE.ALPHA": 0.2,
    "MODEL.LOSSES.TRI.MARGIN": 0.3,
    "MODEL.LOSSES.CIRCLE.GAMMA": 128,
    "KD.EMA.MOMENTUM": 0.999,
    "INPUT.SIZE_TRAIN": [256, 128],
    "INPUT.CROP.SCALE": [0.16, 1],
    "INPUT.CJ.HUE": 0.1,
    "INPUT.REA.PROB": 0.5,
    "DATASETS.NAMES": ("Market1501",),
    "DATALOADER.SAMPLER_TRAIN": "TrainingSampler",
    "DATALOADER.NUM_INSTANCE": 4,
    "DATALOADER.NUM_WORKERS": 8,
    "SOLVER.OPT": "Adam",
    "SOLVER.MAX_EPOCH": 120,
    "SOLVER.BASE_LR": 3e-4,
    "SOLVER.WEIGHT_DECAY_BIAS": 0.0005,
    "SOLVER.STEPS": [30, 55],
    "SOLVER.WARMUP_ITERS": 1000,
    "SOLVER.IMS_PER_BATCH": 64,
    "SOLVER.CLIP_GRADIENTS.NORM_TYPE": 2.0,
    "TEST.EVAL_PERIOD": 20,
    "TEST.METRIC": "cosine",
    "TEST.RERANK.K1": 20,
    "TEST.AQE.QE_K": 5,
    "TEST.PRECISE_BN.NUM_ITER": 300,
    "OUTPUT_DIR": "logs/",
    "CUDNN_BENCHMARK": False,
}

NEW_KEYS = {
    "DATALOADER.MP_CONTEXT": "auto",
    "DATALOADER.WINDOWS_SAFE": True,
    "DATALOADER.NUM_THREADS": 0,
    "DATALOADER.PIN_MEMORY": "auto",
    "DATALOADER.PERSISTENT_WORKERS": "auto",
    "DATALOADER.PREFETCH_FACTOR": 2,
    "DATALOADER.BACKGROUND_GENERATOR": "auto",
    "SEED": 42,
    "DETERMINISTIC": False,
    "TEST.REPORT": True,
}


def _get(cfg, key):
    node = cfg
    for part in key.split("."):
        node = node[part]
    return node


@pytest.mark.parametrize("key,value", sorted({**UPSTREAM_DEFAULTS, **NEW_KEYS}.items()))
def test_defaults(key, value):
    got = _get(get_cfg(), key)
    assert got == value and type(got) is type(value), (key, got)


def test_get_cfg_returns_independent_copies():
    a, b = get_cfg(), get_cfg()
    a.SOLVER.BASE_LR = 1.0
    assert b.SOLVER.BASE_LR == 3e-4


def test_new_keys_are_documented_in_their_module():
    with open(os.path.join(REPO, "fastreid", "config", "fastreid_keys.py"), encoding="utf-8") as f:
        text = f.read()
    lines = [line.strip() for line in text.splitlines()]
    for key in NEW_KEYS:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"_C.{key} ="))
        start = at
        while lines[start - 1].startswith("#"):
            start -= 1
        assert start < at, f"{key} has no comment above it"
        assert lines[start].startswith("# [fastreid]"), f"{key}'s comment is not marked [fastreid]"


def _leaves(node, prefix=""):
    for key, value in node.items():
        if isinstance(value, FvCfgNode):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _sections_only(node):
    """The tree's sections without their values: what upstream's part of defaults.py provides."""
    return CfgNode({k: _sections_only(v) for k, v in node.items() if isinstance(v, CfgNode)})


def test_fastreid_keys_module_adds_only_keys_upstream_lacks():
    from fastreid.config.fastreid_keys import add_fastreid_keys

    tree = _sections_only(get_cfg())
    add_fastreid_keys(tree)
    added = dict(_leaves(tree))
    assert set(NEW_KEYS) <= set(added)
    assert not set(added) & set(UPSTREAM_DEFAULTS)
    full = dict(_leaves(get_cfg()))
    assert all(full[k] == v and type(full[k]) is type(v) for k, v in added.items())


def test_config_files_exist():
    names = {os.path.relpath(p, REPO) for p in CONFIG_FILES}
    for required in (
        "configs/Base-bagtricks.yml",
        "configs/Base-AGW.yml",
        "configs/Base-SBS.yml",
        "configs/Market1501/bagtricks_R50.yml",
        "configs/DukeMTMC/sbs_R50.yml",
        "configs/MSMT17/AGW_R50.yml",
    ):
        assert required in names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: os.path.relpath(p, REPO))
def test_every_config_merges(path):
    cfg = get_cfg()
    cfg.merge_from_file(path)
    assert cfg.MODEL.META_ARCHITECTURE
    assert isinstance(cfg.MODEL.LOSSES.NAME, tuple)


def test_base_inheritance_and_string_tuples():
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Market1501", "sbs_R50-ibn.yml"))
    assert cfg.MODEL.BACKBONE.WITH_IBN is True  # the file itself
    assert cfg.MODEL.HEADS.CLS_LAYER == "CircleSoftmax"  # Base-SBS
    assert cfg.INPUT.REA.ENABLED is True  # Base-bagtricks, two levels up
    assert cfg.MODEL.LOSSES.NAME == ("CrossEntropyLoss", "TripletLoss")
    assert cfg.MODEL.FREEZE_LAYERS == ["backbone"]
    assert cfg.DATASETS.NAMES == ("Market1501",)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_unknown_key_names_closest(tmp_path):
    path = _write(tmp_path, "bad.yml", "SOLVER:\n  BASE_LRR: 0.1\n")
    with pytest.raises(ConfigError) as e:
        get_cfg().merge_from_file(path)
    msg = str(e.value)
    assert "SOLVER.BASE_LRR" in msg and "did you mean SOLVER.BASE_LR?" in msg and "\n" not in msg


def test_unknown_section_names_closest():
    with pytest.raises(ConfigError, match=r"DATALOADER\.NUM_WORKERS"):
        get_cfg().merge_from_list(["DATALOADR.NUM_WORKERS", "2"])


def test_wrong_type_names_key_and_both_types(tmp_path):
    path = _write(tmp_path, "bad.yml", "SOLVER:\n  IMS_PER_BATCH: lots\n")
    with pytest.raises(ConfigError) as e:
        get_cfg().merge_from_file(path)
    msg = str(e.value)
    assert "SOLVER.IMS_PER_BATCH" in msg and "int" in msg and "str" in msg and "\n" not in msg


def test_bool_is_not_an_int():
    with pytest.raises(ConfigError, match="expects int"):
        get_cfg().merge_from_list(["SOLVER.IMS_PER_BATCH", "True"])


def test_missing_file_names_path(tmp_path):
    missing = str(tmp_path / "nope.yml")
    with pytest.raises(ConfigError, match="Config file not found: .*nope.yml"):
        get_cfg().merge_from_file(missing)


def test_missing_base_names_path(tmp_path):
    path = _write(tmp_path, "child.yml", "_BASE_: parent.yml\nSEED: 1\n")
    with pytest.raises(ConfigError, match="parent.yml"):
        get_cfg().merge_from_file(path)


def test_invalid_yaml(tmp_path):
    path = _write(tmp_path, "broken.yml", "SOLVER: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        get_cfg().merge_from_file(path)
    # PyYAML's own parser names the place, as before configs were parsed by libyaml
    with pytest.raises(yaml.YAMLError) as pure:
        yaml.safe_load("SOLVER: [unclosed\n")
    assert " ".join(str(pure.value).split()) in str(info.value)


def test_configs_read_with_libyaml_hold_what_pyyaml_reads():
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: configs are read by its own parser")
    for path in CONFIG_FILES:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert _safe_load(text) == yaml.safe_load(text), path
    # the same implicit types (YAML 1.1: 1e-3 without a dot is a string, yes is True)
    text = "A: 1e-3\nB: 1.0e-3\nC: yes\nD: [1, 2.5, null]\nE: '7'\n"
    assert (
        _safe_load(text)
        == yaml.safe_load(text)
        == {"A": "1e-3", "B": 1e-3, "C": True, "D": [1, 2.5, None], "E": "7"}
    )


def test_coercions_and_multi_type_keys():
    cfg = get_cfg()
    cfg.merge_from_list(
        [
            "SOLVER.BASE_LR",
            "1",  # int where a float is expected
            "INPUT.SIZE_TRAIN",
            "(64, 32)",  # tuple where a list is expected
            "DATASETS.NAMES",
            '["DukeMTMC"]',  # list where a tuple is expected
            "DATALOADER.PIN_MEMORY",
            "False",  # "auto" | bool
            "DATALOADER.BACKGROUND_GENERATOR",
            "True",
            "MODEL.BACKBONE.DEPTH",
            "18x",  # unquoted string
            "TEST.METRIC",
            "euclidean",
        ]
    )
    assert cfg.SOLVER.BASE_LR == 1.0 and isinstance(cfg.SOLVER.BASE_LR, float)
    assert cfg.INPUT.SIZE_TRAIN == [64, 32]
    assert cfg.DATASETS.NAMES == ("DukeMTMC",)
    assert cfg.DATALOADER.PIN_MEMORY is False
    assert cfg.DATALOADER.BACKGROUND_GENERATOR is True
    assert cfg.MODEL.BACKBONE.DEPTH == "18x"
    assert cfg.TEST.METRIC == "euclidean"


def test_odd_override_list():
    with pytest.raises(ConfigError, match="KEY VALUE pairs"):
        get_cfg().merge_from_list(["SEED"])


def test_section_given_a_scalar():
    with pytest.raises(ConfigError, match="section"):
        get_cfg().merge_from_list(["SOLVER", "1"])


def test_frozen_config_refuses_merge():
    cfg = get_cfg()
    cfg.freeze()
    with pytest.raises(ConfigError, match="frozen"):
        cfg.merge_from_list(["SEED", "1"])


def test_dump_round_trip(tmp_path):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Market1501", "AGW_R50.yml"))
    path = _write(tmp_path, "dumped.yml", cfg.dump())
    again = get_cfg()
    again.merge_from_file(path)
    assert again == cfg


def test_keys_of_lists_nested_keys():
    keys = set(keys_of(get_cfg()))
    assert {"MODEL", "MODEL.BACKBONE.DEPTH", "TEST.RERANK.LAMBDA"} <= keys


class _Builder:
    @configurable
    def __init__(self, width: int, depth: int = 2, name: str = "x"):
        self.width, self.depth, self.name = width, depth, name

    @classmethod
    def from_config(cls, cfg):
        return {"width": cfg.SOLVER.IMS_PER_BATCH, "depth": cfg.DATALOADER.NUM_INSTANCE}


def _fn_from_config(cfg, scale=1):
    return {"lr": cfg.SOLVER.BASE_LR * scale}


@configurable(from_config=_fn_from_config)
def _build_fn(lr, momentum=0.9):
    return lr, momentum


def test_configurable_class():
    cfg = get_cfg()
    built = _Builder(cfg)
    assert (built.width, built.depth, built.name) == (64, 4, "x")
    built = _Builder(cfg, name="y")  # extra explicit arguments pass through
    assert built.name == "y"
    built = _Builder(width=3)
    assert (built.width, built.depth) == (3, 2)


def test_configurable_function():
    cfg = get_cfg()
    assert _build_fn(cfg) == (3e-4, 0.9)
    assert _build_fn(cfg, scale=2, momentum=0.5) == (6e-4, 0.5)
    assert _build_fn(0.1) == (0.1, 0.9)


def test_cfgnode_is_fvcore_compatible():
    from fvcore.common.config import CfgNode as FvCfgNode

    assert isinstance(get_cfg(), FvCfgNode)
    assert isinstance(get_cfg().MODEL, CfgNode)


def test_set_global_cfg_updates_the_object_other_modules_imported():
    from fastreid.config import global_cfg, set_global_cfg

    cfg = get_cfg()
    cfg.SOLVER.BASE_LR = 0.123
    set_global_cfg(cfg)
    try:
        assert global_cfg.SOLVER.BASE_LR == 0.123
        import fastreid.config.config as config_module

        assert config_module.global_cfg is global_cfg
    finally:
        global_cfg.clear()
