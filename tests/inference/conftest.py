"""A tiny ResNet-18 config and a checkpoint of it, shared by the inference tests (generated, nothing
downloaded); the data set is the shared ``synthetic_market_root``."""

from __future__ import annotations

import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# On top of the shared tiny ResNet-18 options (tests/conftest.py).
INFERENCE_OPTS = [
    "MODEL.HEADS.NUM_CLASSES",
    12,
    "DATALOADER.NUM_THREADS",
    0,
    "TEST.IMS_PER_BATCH",
    16,
    "DATASETS.TESTS",
    ("Market1501",),
]


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Every test here runs torch on one thread (see tests/conftest.py)."""


@pytest.fixture(scope="session")
def tiny_model_files(tmp_path_factory, tiny_resnet18_opts) -> tuple[str, str]:
    """``(config.yaml, model.pth)`` of a randomly initialised tiny model whose BN statistics are
    not the defaults (so features depend on the weights actually being loaded)."""
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    folder = tmp_path_factory.mktemp("tiny_model")
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Demo", "bagtricks_demo.yml"))
    cfg.merge_from_list([*tiny_resnet18_opts, *INFERENCE_OPTS])
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


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory, tiny_model_files) -> str:
    """The tiny model exported to ONNX with a dynamic batch (``fastreid.inference.export``)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from fastreid.inference import FeatureExtractor
    from fastreid.inference.export import export_onnx

    config_file, weights = tiny_model_files
    model = FeatureExtractor(config_file=config_file, weights=weights, device="cpu").model
    example = torch.rand(2, 3, 64, 32, generator=torch.Generator().manual_seed(0)) * 255
    return export_onnx(
        model, example, str(tmp_path_factory.mktemp("tiny_onnx") / "model.onnx"), dynamic_batch=True
    )
