"""Every config in configs/ and custom_configs/ merges, builds its model and its loaders on a tiny
synthetic Market-1501 (tiny overrides: CPU, no pretrained download, 64x32 images, small batches),
and the loaders deliver a batch. Configs naming a model fastreid does not build fail with the
clear "not supported" ConfigError."""

from __future__ import annotations

import glob
import os

import pytest
import torch

from fastreid.config import ConfigError, get_cfg

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(
    os.path.relpath(p, REPO)
    for pattern in ("configs/**/*.yml", "custom_configs/**/*.yml")
    for p in glob.glob(os.path.join(REPO, pattern), recursive=True)
)

TINY = [
    "MODEL.DEVICE", "cpu",
    "MODEL.BACKBONE.PRETRAIN", False,
    "MODEL.BACKBONE.PRETRAIN_PATH", "",
    "MODEL.WEIGHTS", "",
    "INPUT.SIZE_TRAIN", [64, 32],
    "INPUT.SIZE_TEST", [64, 32],
    "INPUT.CROP.SIZE", [64, 32],
    "DATASETS.NAMES", ("Market1501",),
    "DATASETS.TESTS", ("Market1501",),
    "DATASETS.COMBINEALL", False,
    "DATALOADER.NUM_WORKERS", 0,
    "DATALOADER.NUM_THREADS", 0,
    "DATALOADER.NUM_INSTANCE", 4,
    "DATALOADER.CACHE", False,
    "SOLVER.IMS_PER_BATCH", 8,
    "TEST.IMS_PER_BATCH", 16,
]

_MODELS: dict[str, object] = {}  # identical MODEL sections build identical models: build once


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory):
    from fastreid.data.datasets.synthetic import SyntheticSpec, generate_market1501

    root = str(tmp_path_factory.mktemp("configs_data"))
    generate_market1501(root, SyntheticSpec.small(seed=5))
    old = os.environ.get("FASTREID_DATASETS")
    os.environ["FASTREID_DATASETS"] = root
    yield root
    if old is None:
        os.environ.pop("FASTREID_DATASETS", None)
    else:
        os.environ["FASTREID_DATASETS"] = old


def test_configs_were_found():
    assert len(CONFIGS) >= 40
    assert "configs/Demo/bagtricks_demo.yml" in CONFIGS
    assert sum(c.startswith("custom_configs/plateau_solutions/") for c in CONFIGS) >= 5


@pytest.mark.parametrize("config", CONFIGS)
def test_config_builds_model_and_loaders(config, synthetic_root, tmp_path):
    from fastreid.data.build import build_reid_test_loader, build_reid_train_loader
    from fastreid.modeling import build_model

    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, config))
    cfg.merge_from_list(TINY + ["OUTPUT_DIR", str(tmp_path)])

    key = cfg.MODEL.dump()
    if key not in _MODELS:
        try:
            _MODELS[key] = build_model(cfg, log_summary=False)
        except ConfigError as e:
            _MODELS[key] = e
    model = _MODELS[key]
    if isinstance(model, ConfigError):
        assert "not supported" in str(model), f"{config}: {model}"
        return

    train_loader = build_reid_train_loader(cfg)
    batch = next(iter(train_loader))
    assert batch["images"].shape == (8, 3, 64, 32)
    assert int(batch["targets"].max()) < train_loader.dataset.num_classes
    test_loader, num_query = build_reid_test_loader(cfg, dataset_name="Market1501")
    assert num_query > 0 and len(test_loader.dataset) > num_query
    assert isinstance(model, torch.nn.Module)
    for loader in (train_loader, test_loader):
        shutdown = getattr(loader, "shutdown", None)
        if callable(shutdown):
            shutdown()
