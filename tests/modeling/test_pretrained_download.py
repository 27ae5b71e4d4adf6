"""Published ImageNet weights: the URL table, the download into TORCH_HOME, the offline message,
files already cached (here or where upstream keeps them), and checkpoint layouts (pycls, IBN-Net)."""

from __future__ import annotations

import os
import urllib.request

import pytest
import torch

from fastreid.cli import train
from fastreid.config import get_cfg
from fastreid.modeling import build_backbone
from fastreid.modeling.backbones.pretrained import PretrainUnavailableError
from fastreid.modeling.backbones.pretrained_urls import PRETRAINED_WEIGHTS, pretrained_weights_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def small_cfg(**backbone):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    for key, value in backbone.items():
        setattr(cfg.MODEL.BACKBONE, key, value)
    return cfg


@pytest.fixture
def torch_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def downloads(monkeypatch):
    """Replaces the network: records each request; ``serve`` says what the "server" answers."""
    calls = []
    state = {"serve": None}

    def fake_download(url, dst, hash_prefix=None, progress=True):
        calls.append({"url": url, "dst": dst, "hash_prefix": hash_prefix})
        if state["serve"] is None:
            raise OSError("network is unreachable")
        state["serve"](dst)

    monkeypatch.setattr(torch.hub, "download_url_to_file", fake_download)
    return calls, state


def test_table_matches_upstream_names():
    assert pretrained_weights_for("resnest", "50x").file_name == "resnest50-528c19ca.pth"
    assert pretrained_weights_for("resnest", "50x").hash_prefix == "528c19ca"
    assert pretrained_weights_for("resnet", "ibn_50x").file_name == "resnet50_ibn_a-d9d0bb7b.pth"
    assert pretrained_weights_for("resnet", "se_ibn_101x").url.endswith("se_resnet101_ibn_a-fabed4e2.pth")
    assert pretrained_weights_for("osnet", "ibn_x1_0").file_name == "osnet_ibn_x1_0_imagenet.pth"
    # upstream's 800x entry points at the 200MF file; each RegNet variant has its own file here
    assert "RegNetX-800MF" in pretrained_weights_for("regnet", "800x").url
    assert pretrained_weights_for("mobilenetv2", "1.0x") is None
    for (family, variant), weights in PRETRAINED_WEIGHTS.items():
        assert weights.url.startswith("https://") and weights.file_name, (family, variant)


@pytest.mark.slow
def test_offline_names_url_file_and_folder(torch_home, downloads):
    calls, _ = downloads
    with pytest.raises(PretrainUnavailableError) as info:
        build_backbone(small_cfg(NAME="build_resnest_backbone", PRETRAIN=True))
    message = str(info.value)
    folder = os.path.join(str(torch_home), "hub", "checkpoints")
    assert (
        "https://github.com/zhanghang1989/ResNeSt/releases/download/weights_step1/resnest50-528c19ca.pth"
        in message
    )
    assert f"resnest50-528c19ca.pth in {folder}" in message
    assert "network is unreachable" in message
    assert "PRETRAIN_PATH" in message and "PRETRAIN False" in message
    assert "\n" not in message
    assert calls == [
        {
            "url": pretrained_weights_for("resnest", "50x").url,
            "dst": os.path.join(folder, "resnest50-528c19ca.pth"),
            "hash_prefix": "528c19ca",
        }
    ]


def test_downloaded_file_is_loaded_and_reused(torch_home, downloads):
    calls, state = downloads
    reference = build_backbone(small_cfg(NAME="build_osnet_backbone", DEPTH="x0_25", WITH_IBN=False))
    # deep-person-reid's layout: DataParallel prefixes and a classifier
    published = {
        "module." + k: torch.full_like(v, 0.5) if v.is_floating_point() else v
        for k, v in reference.state_dict().items()
    }
    published["module.classifier.weight"] = torch.zeros(1000, 128)
    state["serve"] = lambda dst: torch.save(published, dst)

    cfg = small_cfg(NAME="build_osnet_backbone", DEPTH="x0_25", PRETRAIN=True)
    model = build_backbone(cfg)
    assert torch.all(model.conv1.conv.weight == 0.5)
    assert calls[0]["dst"].endswith(os.path.join("hub", "checkpoints", "osnet_x0_25_imagenet.pth"))
    build_backbone(cfg)
    assert len(calls) == 1, "a cached file is not downloaded again"


def test_file_where_upstream_keeps_it_is_used(torch_home, downloads):
    calls, _ = downloads
    reference = build_backbone(small_cfg(NAME="build_regnet_backbone", DEPTH="200x"))
    os.makedirs(torch_home / "checkpoints")
    pycls = {
        "epoch": 99,
        "model_state": {
            **{
                k: torch.ones_like(v) if v.is_floating_point() else v
                for k, v in reference.state_dict().items()
            },
            "head.fc.weight": torch.zeros(1000, 368),
            "head.fc.bias": torch.zeros(1000),
        },
    }
    torch.save(pycls, torch_home / "checkpoints" / "RegNetX-200MF_dds_8gpu.pyth")
    model = build_backbone(small_cfg(NAME="build_regnet_backbone", DEPTH="200x", PRETRAIN=True))
    assert calls == []
    assert torch.all(model.stem.conv.weight == 1)


def test_web_page_instead_of_weights_is_rejected(torch_home, downloads):
    _, state = downloads

    def serve_html(dst):
        with open(dst, "w") as f:
            f.write("<!DOCTYPE html><html>Google Drive - virus scan warning</html>")

    state["serve"] = serve_html
    with pytest.raises(
        PretrainUnavailableError, match="web page.*with a browser \\(or gdown\\).*osnet_ibn_x1_0_imagenet.pth"
    ):
        build_backbone(small_cfg(NAME="build_osnet_backbone", DEPTH="x1_0", WITH_IBN=True, PRETRAIN=True))
    assert not (torch_home / "hub" / "checkpoints" / "osnet_ibn_x1_0_imagenet.pth").exists()


def test_ibn_resnet_downloads_ibn_net_weights(torch_home, downloads):
    calls, _ = downloads
    with pytest.raises(PretrainUnavailableError, match="resnet50_ibn_a-d9d0bb7b.pth"):
        build_backbone(small_cfg(DEPTH="50x", WITH_IBN=True, PRETRAIN=True))
    assert (
        calls[0]["url"]
        == "https://github.com/XingangPan/IBN-Net/releases/download/v1.0/resnet50_ibn_a-d9d0bb7b.pth"
    )
    assert calls[0]["hash_prefix"] is None


@pytest.mark.slow
def test_train_net_offline_says_where_to_put_the_file(tmp_path, synthetic_market_root, run_tool, monkeypatch):
    """As a user sees it: train_net (its ``fastreid.cli.train.run``, in this process, logging as in
    a fresh interpreter) on an S50 config, no network (an unreachable proxy), ImageNet weights
    requested: exit 1, one line naming the URL, the file and the folder, no traceback."""
    unreachable = "http://127.0.0.1:9"
    env = {
        "FASTREID_DATASETS": synthetic_market_root,
        "TORCH_HOME": str(tmp_path / "th"),
        "https_proxy": unreachable,
        "HTTPS_PROXY": unreachable,
        "http_proxy": unreachable,
        "HTTP_PROXY": unreachable,
        "no_proxy": "",
        "NO_PROXY": "",
        "OMP_NUM_THREADS": "1",
    }
    # urlopen's opener reads the proxy variables when it is built, once per process: built anew
    # here, as in a fresh interpreter, and the test's own dropped afterwards
    monkeypatch.setattr(urllib.request, "_opener", None)
    monkeypatch.chdir(tmp_path)
    proc = run_tool(
        train.run,
        "--config-file",
        os.path.join(REPO, "configs", "Market1501", "bagtricks_S50.yml"),
        "MODEL.DEVICE",
        "cpu",
        "MODEL.BACKBONE.PRETRAIN",
        "True",
        "DATALOADER.NUM_WORKERS",
        "0",
        "OUTPUT_DIR",
        tmp_path / "out",
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    folder = os.path.join(str(tmp_path / "th"), "hub", "checkpoints")
    assert lines[0].startswith(
        "PretrainUnavailableError: Could not fetch the ImageNet weights for ResNeSt-50"
    )
    assert (
        "https://github.com/zhanghang1989/ResNeSt/releases/download/weights_step1/resnest50-528c19ca.pth"
        in lines[0]
    )
    assert f"save it as resnest50-528c19ca.pth in {folder}" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
