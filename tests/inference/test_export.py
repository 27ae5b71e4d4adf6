"""Export round trips: the exported file, run by onnxruntime / torch.jit.load on decoded images,
gives PyTorch's features; every architecture that builds here exports to TorchScript."""

from __future__ import annotations

import os
import runpy
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


def _cfg(config_file: str | None, opts: list):
    cfg = get_cfg()
    if config_file:
        cfg.merge_from_file(config_file)
    cfg.merge_from_list(TINY_INPUT + opts)
    return cfg


def _model(config_file: str | None, opts: list) -> torch.nn.Module:
    from fastreid.modeling import build_model

    cfg = _cfg(config_file, opts)
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
@pytest.mark.parametrize("name", ["OSNet"])
def test_onnx_round_trip(name, tmp_path):
    """~12 s of CPU, nearly all in torch.onnx's dynamo exporter (tracing, decomposition,
    translation, optimisation: the graph's size counts, not the images'; OSNet's widths and block
    counts are fixed, x0_25 is its smallest), the export users run: OSNet's depthwise convolutions
    and gates. The operators a ResNet's code adds (IBN's instance norm, non-local blocks, GeM
    pooling) are exported by test_export_tool_onnx_on_images; the plain ResNet-18 by
    tests/inference/conftest.py's tiny_onnx."""
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


# Options a backbone's builder ignores with a warning (fastreid/modeling/backbones/resnest.py): no
# code of theirs runs, on or off (test_the_options_resnest_ignores_build_the_same_backbone).
IGNORED_OPTIONS = {"build_resnest_backbone": ("WITH_IBN", "WITH_SE", "WITH_NL")}


def _code_paths(cfg) -> set[tuple]:
    """The code a config's model runs, piece by piece: its backbone's block with each of its
    options on or off (an option's code is the backbone's own: IBN in a ResNet's Bottleneck is not
    IBN in its BasicBlock; an option the backbone ignores runs no code), and each head and pooling
    choice, which any backbone feeds alike."""
    arch = _architecture(cfg)
    meta, backbone, depth, ibn, nl, se, norm, head, pool, neck, embedding = arch
    options = {"WITH_IBN": ("ibn", ibn), "WITH_NL": ("nl", nl), "WITH_SE": ("se", se)}
    return {
        ("meta", meta),
        (backbone, depth),
        *(
            (backbone, depth, *value)
            for key, value in options.items()
            if key not in IGNORED_OPTIONS.get(backbone, ())
        ),
        ("norm", norm),
        ("head", head),
        ("pool", pool),
        ("neck", neck),
        ("embedding", embedding > 0),
    }


def test_the_options_resnest_ignores_build_the_same_backbone():
    """What lets _code_paths leave IGNORED_OPTIONS out: the backbone built with them on has the
    parameters and buffers (names and shapes) of the one built with them off."""
    from fastreid.modeling.backbones import build_backbone

    for backbone, keys in IGNORED_OPTIONS.items():
        built = []
        for on in (False, True):
            cfg = get_cfg()
            cfg.merge_from_list(["MODEL.BACKBONE.NAME", backbone, "MODEL.BACKBONE.PRETRAIN", False])
            cfg.merge_from_list([x for key in keys for x in (f"MODEL.BACKBONE.{key}", on)])
            built.append({k: v.shape for k, v in build_backbone(cfg).state_dict().items()})
        assert built[0] == built[1], backbone


def _covering_configs(configs: list[str]) -> list[str]:
    """The fewest configs (smallest models first) whose code paths (:func:`_code_paths`) are
    every shipped config's: each option and head choice runs once, not once per combination
    (e.g. sbs_R50-ibn's IBN, non-local blocks and GeM-P pooling each run in another config)."""
    paths = {}
    for config_file in configs:
        cfg = get_cfg()
        try:
            cfg.merge_from_file(config_file)
        except ConfigError:
            continue
        paths[config_file] = (_blocks(cfg), _code_paths(cfg))
    left = set().union(*(p for _, p in paths.values()))
    chosen = []
    while left:  # greedy set cover: the config running the most code not yet run, the smaller first
        best = min(paths, key=lambda c: (-len(paths[c][1] & left), paths[c][0], c))
        chosen.append(best)
        left -= paths[best][1]
    return sorted(chosen)


@pytest.mark.slow
def test_every_buildable_architecture_exports_to_torchscript(tmp_path):
    """Each piece of model code among the shipped configs (every one of them builds), in the
    fewest, smallest configs that run them all (:func:`_covering_configs`: 6 of the 14 distinct
    architectures), on 32x16 images (the export does not depend on the size). ~3 s of CPU per
    config, a trace and the loaded file's first, optimising runs."""
    exported = []
    for config_file in _covering_configs(_buildable_configs()):
        cfg = get_cfg()
        cfg.merge_from_file(config_file)
        # MGN cuts its maps into 2 and 3 stripes: 96 pixels high gives 6 rows at LAST_STRIDE 1
        size = (96, 48) if cfg.MODEL.META_ARCHITECTURE == "MGN" else (32, 16)
        model = _model(config_file, ["INPUT.SIZE_TEST", list(size), "INPUT.SIZE_TRAIN", list(size)])
        images = _images(tmp_path, 3, size)
        path = export_torchscript(model, images[:2], str(tmp_path / "m.ts"))
        check_export(model, path, "torchscript", images, (1, 3))
        exported.append(os.path.relpath(config_file, REPO))
    assert any("R50-ibn" in p for p in exported) and any("mgn" in p for p in exported), exported
    assert any("vit" in p for p in exported) and any("S50" in p for p in exported), exported


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # what an absent package looks like to import
    with pytest.raises(MissingExtraError, match=r"'deploy' extra: pip install \"fastreid\[deploy\]\""):
        require("onnx", "ONNX export")


def _export_argv(config_file, weights, *args) -> list:
    return ["--config-file", config_file, "--format", "onnx", *args, "MODEL.WEIGHTS", weights]


def test_export_tool_without_onnx_is_one_line(tmp_path, tiny_model_files, run_tool, monkeypatch):
    """tools/deploy/export.py as a user runs it (the script file itself, as ``__main__``; the one
    test that runs it), in this process, where onnx cannot be imported."""
    monkeypatch.setitem(sys.modules, "onnx", None)  # what an absent package looks like to import
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the checkout in front
    config_file, weights = tiny_model_files
    tool = os.path.join(REPO, "tools", "deploy", "export.py")
    argv = _export_argv(config_file, weights, "--output", str(tmp_path / "m.onnx"))

    def script(_) -> int:  # the script ends in sys.exit(code): a normal end is exit 0
        runpy.run_path(tool, run_name="__main__")
        return 0

    proc = run_tool(script, *argv, script=tool)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "MissingExtraError: ONNX export needs the 'onnx' package of the 'deploy' extra: "
        'pip install "fastreid[deploy]" (in a checkout: pip install -e ".[deploy]")'
    )
    assert not os.path.exists(tmp_path / "m.onnx")


@pytest.mark.slow
def test_export_tool_onnx_on_images(tmp_path, run_tool):
    """fastreid-export's command line (what tools/deploy/export.py calls) in this process, on the
    AGW ResNet-50-IBN (configs/Market1501/AGW_R50-ibn.yml: IBN's instance norm, non-local blocks,
    GeM pooling, the operators a ResNet's code adds to the plain ResNet-18 of tiny_onnx): ~15 s of
    CPU, nearly all in torch.onnx's dynamo exporter, whose cost is the graph's size, fixed by the
    ResNet-50's blocks (a ResNet-18 has no non-local blocks). Its check on 4 images in batches of
    1, 3 and 4 within 1e-5 of the features' magnitude (ONNX Runtime's kernels round differently:
    ~1e-6 measured)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    config_file, opts = ARCHS["R50-IBN-NL-GeM"]
    cfg = _cfg(config_file, opts)
    assert cfg.MODEL.BACKBONE.WITH_IBN and cfg.MODEL.BACKBONE.WITH_NL and cfg.MODEL.BACKBONE.DEPTH == "50x"
    assert cfg.MODEL.HEADS.POOL_LAYER == "GeneralizedMeanPooling"
    with open(tmp_path / "config.yaml", "w", encoding="utf-8") as f:
        f.write(cfg.dump())
    torch.save({"model": _model(config_file, opts).state_dict()}, tmp_path / "model.pth")
    _images(tmp_path, 4)
    argv = _export_argv(
        tmp_path / "config.yaml",
        tmp_path / "model.pth",
        "--dynamic-batch",
        "--tolerance",
        "1e-5",
        "--output",
        tmp_path / "m.onnx",
        "--input",
        tmp_path / "*.jpg",
    )
    proc = run_tool(export.run, *argv, env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "check on 4 images, batch sizes 1, 3, 4: max |difference|" in proc.stdout
    assert "<= tolerance 1e-05) OK" in proc.stdout
    assert os.path.getsize(tmp_path / "m.onnx") > 1000
