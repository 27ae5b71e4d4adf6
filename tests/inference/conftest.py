"""A tiny synthetic Market-1501, a tiny ResNet-18 config and a checkpoint of it, shared by the
inference tests (all generated, nothing downloaded)."""

from __future__ import annotations

import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TINY_OPTS = [
    "MODEL.DEVICE",
    "cpu",
    "MODEL.BACKBONE.DEPTH",
    "18x",
    "MODEL.BACKBONE.FEAT_DIM",
    512,
    "MODEL.BACKBONE.PRETRAIN",
    False,
    "MODEL.HEADS.NUM_CLASSES",
    12,
    "INPUT.SIZE_TRAIN",
    [64, 32],
    "INPUT.SIZE_TEST",
    [64, 32],
    "DATALOADER.NUM_WORKERS",
    0,
    "DATALOADER.NUM_THREADS",
    0,
    "TEST.IMS_PER_BATCH",
    16,
    "DATASETS.TESTS",
    ("Market1501",),
]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def market_root(tmp_path_factory) -> str:
    """``FASTREID_DATASETS`` folder holding the small synthetic Market-1501."""
    from fastreid.data.datasets.synthetic import SyntheticSpec, generate_market1501

    root = str(tmp_path_factory.mktemp("datasets"))
    generate_market1501(root, SyntheticSpec.small())
    return root


@pytest.fixture(scope="session")
def tiny_model_files(tmp_path_factory) -> tuple[str, str]:
    """``(config.yaml, model.pth)`` of a randomly initialised tiny model whose BN statistics are
    not the defaults (so features depend on the weights actually being loaded)."""
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    folder = tmp_path_factory.mktemp("tiny_model")
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Demo", "bagtricks_demo.yml"))
    cfg.merge_from_list(TINY_OPTS)
    torch.manual_seed(123)
    model = build_model(cfg, log_summary=False)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    config_file = str(folder / "config.yaml")
    with open(config_file, "w", encoding="utf-8") as f:
        f.write(cfg.dump())
    weights = str(folder / "model.pth")
    torch.save({"model": model.state_dict()}, weights)
    return config_file, weights
