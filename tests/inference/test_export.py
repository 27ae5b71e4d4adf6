"""Export round trips: the exported file, run by onnxruntime / torch.jit.load on decoded images,
gives PyTorch's features; every architecture that builds here exports to TorchScript."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from shipped_configs import reid_configs

from fastreid.cli import export
from fastreid.config import ConfigError, get_cfg
from fastreid.inference.export import (
    ExportCheckError,
    MissingExtraError,
    check_export,
    export_onnx,
    export_torchscript,
    require,
)
from fastreid.modeling.backbones.resnet import RESNET_DEPTHS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_INPUT = [
    "INPUT.SIZE_TEST",
    [64, 32],
    "MODEL.DEVICE",
    "cpu",
    "MODEL.BACKBONE.PRETRAIN",
    False,
    "MODEL.HEADS.NUM_CLASSES",
    4,
]


def _model(config_file: str | None, opts: list) -> torch.nn.Module:
    from fastreid.modeling import build_model

    cfg = get_cfg()
    if config_file:
        cfg.merge_from_file(config_file)
    cfg.merge_from_list(TINY_INPUT + opts)
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    with torch.no_grad():  # non-default BN statistics, as in a trained model
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def _images(tmp_path, count: int = 4, size: tuple[int, int] = (64, 32)) -> torch.Tensor:
    """Decoded JPEG files (the test transform's output), as the export tool checks."""
    from fastreid.inference.inputs import to_image_tensor

    rng = np.random.default_rng(0)
    out = []
    for i in range(count):
        path = tmp_path / f"img{i}_{size[0]}x{size[1]}.jpg"
        Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(path)
        out.append(to_image_tensor(str(path)))
    return torch.stack(out).float()


ARCHS = {
    "R18-IBN": (
        None,
        ["MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.WITH_IBN", True, "MODEL.BACKBONE.FEAT_DIM", 512],
    ),
    "R50-IBN-NL-GeM": (os.path.join(REPO, "configs", "Market1501", "AGW_R50-ibn.yml"), []),
    "OSNet": (
        None,
        [
            "MODEL.BACKBONE.NAME",
            "build_osnet_backbone",
            "MODEL.BACKBONE.DEPTH",
            "x0_25",
            "MODEL.BACKBONE.FEAT_DIM",
            128,
        ],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ARCHS))
def test_onnx_round_trip(name, tmp_path):
    """8 to 16 s of CPU each, nearly all in torch.onnx's dynamo exporter (tracing, decomposition,
    translation, optimisation: the graph's size counts, not the images'), the export users run."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    model = _model(*ARCHS[name])
    images = _images(tmp_path)
    path = export_onnx(model, images[:2], str(tmp_path / "m.onnx"), dynamic_batch=True)
    result = check_export(model, path, "onnx", images, (1, 3, 4))
    # relative to the features' magnitude (ONNX Runtime's kernels round differently): ~1e-6 measured
    assert result.scaled_diff <= 1e-5 and result.batch_sizes == (1, 3, 4)


@pytest.mark.parametrize("name", ["R18-IBN", pytest.param("OSNet", marks=pytest.mark.slow)])
def test_torchscript_round_trip(name, tmp_path):
    model = _model(*ARCHS[name])
    images = _images(tmp_path)
    path = export_torchscript(model, images[:2], str(tmp_path / "m.ts"))
    result = check_export(model, path, "torchscript", images, (1, 3, 4))
    assert result.max_abs_diff <= 1e-4


def test_check_fails_when_the_export_differs(tmp_path):
    model = _model(*ARCHS["R18-IBN"])
    images = _images(tmp_path, 2)
    path = export_torchscript(model, images, str(tmp_path / "m.ts"))
    other = _model(*ARCHS["R18-IBN"])
    with torch.no_grad():
        other.backbone.conv1.weight.mul_(1.01)
    with pytest.raises(ExportCheckError, match="differ from PyTorch"):
        check_export(other, path, "torchscript", images, (2,))


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_resnet_backbone_scripts():
    """torch.jit.script works on the ResNet, non-local blocks included (it failed on _nl_after)."""
    from fastreid.modeling.backbones import build_backbone

    cfg = get_cfg()
    cfg.merge_from_list(
        [
            "MODEL.BACKBONE.PRETRAIN",
            False,
            "MODEL.BACKBONE.DEPTH",
            "50x",
            "MODEL.BACKBONE.WITH_IBN",
            True,
            "MODEL.BACKBONE.WITH_NL",
            True,
        ]
    )
    backbone = build_backbone(cfg).eval()
    scripted = torch.jit.script(backbone)
    x = torch.rand(1, 3, 64, 32)
    with torch.no_grad():
        torch.testing.assert_close(scripted(x), backbone(x))


def _buildable_configs() -> list[str]:
    """The re-ID configs (a task family's: its own tests; a distillation student needs its trained
    teacher's files to build)."""
    return [os.path.join(REPO, p) for p in reid_configs("configs/*/*.yml")]


def _architecture(cfg) -> tuple:
    """What decides the code a config's model runs. A ResNet's depth counts through its block
    (R101 runs R50's Bottleneck code with more blocks, and its non-local blocks at other indices
    of the same stages), another backbone's depth as it is."""
    bb, heads = cfg.MODEL.BACKBONE, cfg.MODEL.HEADS
    depth = str(bb.DEPTH)
    if bb.NAME == "build_resnet_backbone" and depth in RESNET_DEPTHS:
        depth = RESNET_DEPTHS[depth][0].__name__
    return (
        cfg.MODEL.META_ARCHITECTURE,
        bb.NAME,
        depth,
        bb.WITH_IBN,
        bb.WITH_NL,
        bb.WITH_SE,
        bb.NORM,
        heads.NAME,
        heads.POOL_LAYER,
        heads.NECK_FEAT,
        heads.EMBEDDING_DIM,
    )


def _blocks(cfg) -> int:
    """Residual blocks of a ResNet config (0 for other backbones): the smaller model of an
    architecture is the one exported."""
    depth = RESNET_DEPTHS.get(str(cfg.MODEL.BACKBONE.DEPTH))
    return sum(depth[1]) if cfg.MODEL.BACKBONE.NAME == "build_resnet_backbone" and depth else 0


@pytest.mark.slow
def test_every_buildable_architecture_exports_to_torchscript(tmp_path):
    """Each distinct architecture among the shipped configs (every one of them builds), in its
    smallest config, on 32x16 images (the export does not depend on the size). 14 architectures
    at ~3 s of CPU each, a trace and the loaded file's first, optimising runs: one per
    architecture is the least that checks each."""
    smallest: dict[tuple, tuple[int, str]] = {}
    for config_file in _buildable_configs():
        cfg = get_cfg()
        try:
            cfg.merge_from_file(config_file)
        except ConfigError:
            continue
        key = _architecture(cfg)
        smallest[key] = min(smallest.get(key, (_blocks(cfg), config_file)), (_blocks(cfg), config_file))
    exported = []
    for _, config_file in sorted(smallest.values(), key=lambda x: x[1]):
        cfg = get_cfg()
        cfg.merge_from_file(config_file)
        # MGN cuts its maps into 2 and 3 stripes: 96 pixels high gives 6 rows at LAST_STRIDE 1
        size = (96, 48) if cfg.MODEL.META_ARCHITECTURE == "MGN" else (32, 16)
        model = _model(config_file, ["INPUT.SIZE_TEST", list(size), "INPUT.SIZE_TRAIN", list(size)])
        images = _images(tmp_path, 3, size)
        path = export_torchscript(model, images[:2], str(tmp_path / "m.ts"))
        check_export(model, path, "torchscript", images, (1, 3))
        exported.append(os.path.relpath(config_file, REPO))
    assert any("bagtricks_R50" in p for p in exported) and any("mgn" in p for p in exported), exported
    assert any("vit" in p for p in exported) and any("S50" in p for p in exported), exported


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # what an absent package looks like to import
    with pytest.raises(MissingExtraError, match=r"'deploy' extra: pip install \"fastreid\[deploy\]\""):
        require("onnx", "ONNX export")


def _export_argv(config_file, weights, *args) -> list:
    return ["--config-file", config_file, "--format", "onnx", *args, "MODEL.WEIGHTS", weights]


@pytest.mark.slow
def test_export_tool_without_onnx_is_one_line(tmp_path, tiny_model_files):
    """tools/deploy/export.py as a user runs it, in an interpreter where onnx cannot be imported
    (the one test that runs the script file itself)."""
    fake = tmp_path / "fake" / "onnx"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named onnx')\n")
    config_file, weights = tiny_model_files
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "fake"), REPO]), OMP_NUM_THREADS="1")
    tool = os.path.join(REPO, "tools", "deploy", "export.py")
    argv = _export_argv(config_file, weights, "--output", str(tmp_path / "m.onnx"))
    proc = subprocess.run([sys.executable, tool, *argv], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "MissingExtraError: ONNX export needs the 'onnx' package of the 'deploy' extra: "
        'pip install "fastreid[deploy]" (in a checkout: pip install -e ".[deploy]")'
    )


@pytest.mark.slow
def test_export_tool_onnx_on_images(tmp_path, tiny_model_files, run_tool):
    """fastreid-export's command line (what tools/deploy/export.py calls) in this process."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    config_file, weights = tiny_model_files
    _images(tmp_path, 3)
    argv = _export_argv(
        config_file,
        weights,
        "--dynamic-batch",
        "--output",
        tmp_path / "m.onnx",
        "--input",
        tmp_path / "*.jpg",
    )
    proc = run_tool(export.run, *argv, env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "check on 3 images, batch sizes 1, 3: max |difference|" in proc.stdout
    assert os.path.getsize(tmp_path / "m.onnx") > 1000
