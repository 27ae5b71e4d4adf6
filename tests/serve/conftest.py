"""What the fastreid-serve tests share, all generated (nothing downloaded): a training run's folder
holding a tiny randomly initialised model, a gallery folder copied from the shared synthetic
Market-1501, the gallery indexed once, and a real uvicorn server on 127.0.0.1 over it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from serve_testing import GALLERY_SIZE, MAX_BYTES, REPO, serving


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """torch on one thread for every test here (see tests/conftest.py)."""


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory, tiny_resnet18_opts) -> Path:
    """A training run's OUTPUT_DIR as fastreid-serve --model takes it: ``config.yaml`` and
    ``model_final.pth`` of a tiny ResNet-18 whose BN statistics are not the defaults (so features
    depend on the weights actually being loaded)."""
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    folder = tmp_path_factory.mktemp("run")
    cfg = get_cfg()
    cfg.merge_from_file(str(REPO / "configs" / "Demo" / "bagtricks_demo.yml"))
    cfg.merge_from_list([*tiny_resnet18_opts, "MODEL.HEADS.NUM_CLASSES", 12, "DATALOADER.NUM_THREADS", 0])
    torch.manual_seed(7)
    model = build_model(cfg, log_summary=False)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    (folder / "config.yaml").write_text(cfg.dump(), encoding="utf-8")
    torch.save({"model": model.state_dict()}, folder / "model_final.pth")
    return folder


@pytest.fixture(scope="session")
def gallery_dir(synthetic_market_root, tmp_path_factory) -> Path:
    """``GALLERY_SIZE`` images of the synthetic Market-1501's gallery, Market's names kept."""
    source = os.path.join(synthetic_market_root, "Market-1501-v15.09.15", "bounding_box_test")
    folder = tmp_path_factory.mktemp("gallery")
    for name in sorted(os.listdir(source))[:GALLERY_SIZE]:
        shutil.copy(os.path.join(source, name), folder / name)
    return folder


@pytest.fixture(scope="session")
def gallery(run_dir, gallery_dir):
    """The gallery folder indexed with the run's model (built once)."""
    from fastreid.inference import FeatureExtractor
    from fastreid.serve import Gallery

    extractor = FeatureExtractor(str(run_dir / "config.yaml"), str(run_dir / "model_final.pth"), device="cpu")
    return Gallery.build(extractor, folder=str(gallery_dir))


@pytest.fixture(scope="session")
def live_server(gallery) -> Iterator[str]:
    """The URL of a real uvicorn server on 127.0.0.1 over ``gallery`` (upload limit ``MAX_BYTES``,
    the Host check of a loopback server), for the session."""
    from fastreid.serve import create_app

    app = create_app(gallery, max_bytes=MAX_BYTES, allowed_hosts=["127.0.0.1", "localhost"])
    with serving(app) as url:
        yield url
