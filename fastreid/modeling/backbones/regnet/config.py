"""The global config of pycls's RegNet / EfficientNet code (``cfg``), as upstream FastReID keeps it.

Upstream's ``RegNet(last_stride, bn_norm)``, ``AnyNet()`` and ``EffNet(last_stride, bn_norm)``
read their design from this node (``REGNET``, ``ANYNET``, ``EN``; ``BN.ZERO_INIT_FINAL_GAMMA`` and
``MEM.RELU_INPLACE`` too) after a pycls YAML file was merged into it. This package's builders pass
each variant's numbers explicitly and never change it; code written for upstream that merges a
file and then builds still works. The keys and defaults are pycls's.
"""

from __future__ import annotations

import argparse
import os
import sys

from fastreid.config import CfgNode

__all__ = ["cfg", "assert_and_infer_cfg", "dump_cfg", "load_cfg", "load_cfg_fom_args"]


def _section(**values: object) -> CfgNode:
    node = CfgNode()
    for key, value in values.items():
        node[key] = value
    return node


_C = CfgNode()
cfg = _C

_C.MODEL = _section(TYPE="", DEPTH=0, NUM_CLASSES=10, LOSS_FUN="cross_entropy")
# pycls's ResNet: TRANS_FUN names the block; NUM_GROUPS > 1 and WIDTH_PER_GROUP 4 make a ResNeXt
_C.RESNET = _section(TRANS_FUN="basic_transform", NUM_GROUPS=1, WIDTH_PER_GROUP=64, STRIDE_1X1=True)
# AnyNet: one value per stage for DEPTHS, WIDTHS, STRIDES, BOT_MULS and GROUP_WS
_C.ANYNET = _section(
    STEM_TYPE="simple_stem_in",
    STEM_W=32,
    BLOCK_TYPE="res_bottleneck_block",
    DEPTHS=[],
    WIDTHS=[],
    STRIDES=[],
    BOT_MULS=[],
    GROUP_WS=[],
    SE_ON=False,
    SE_R=0.25,
)
# RegNet: per-block widths w0 + wa * i quantised on w0 * wm^k (DEPTH blocks), SE for RegNetY
_C.REGNET = _section(
    STEM_TYPE="simple_stem_in",
    STEM_W=32,
    BLOCK_TYPE="res_bottleneck_block",
    STRIDE=2,
    SE_ON=False,
    SE_R=0.25,
    DEPTH=10,
    W0=32,
    WA=5.0,
    WM=2.5,
    GROUP_W=16,
    BOT_MUL=1.0,
)
# EfficientNet: one value per stage for DEPTHS, WIDTHS, EXP_RATIOS, STRIDES and KERNELS
_C.EN = _section(
    STEM_W=32,
    DEPTHS=[],
    WIDTHS=[],
    EXP_RATIOS=[],
    SE_R=0.25,
    STRIDES=[],
    KERNELS=[],
    HEAD_W=1280,
    DC_RATIO=0.0,
    DROPOUT_RATIO=0.0,
)
# MOM is torch's momentum (1 - Caffe2's)
_C.BN = _section(
    EPS=1e-5,
    MOM=0.1,
    USE_PRECISE_STATS=True,
    NUM_SAMPLES_PRECISE=8192,
    ZERO_INIT_FINAL_GAMMA=False,
    USE_CUSTOM_WEIGHT_DECAY=False,
    CUSTOM_WEIGHT_DECAY=0.0,
)
_C.OPTIM = _section(
    BASE_LR=0.1,
    LR_POLICY="cos",
    GAMMA=0.1,
    STEPS=[],
    LR_MULT=0.1,
    MAX_EPOCH=200,
    MOMENTUM=0.9,
    DAMPENING=0.0,
    NESTEROV=True,
    WEIGHT_DECAY=5e-4,
    WARMUP_FACTOR=0.1,
    WARMUP_ITERS=0,
)
_C.TRAIN = _section(
    DATASET="",
    SPLIT="train",
    BATCH_SIZE=128,
    IM_SIZE=224,
    EVAL_PERIOD=1,
    CHECKPOINT_PERIOD=1,
    AUTO_RESUME=True,
    WEIGHTS="",
)
_C.TEST = _section(DATASET="", SPLIT="val", BATCH_SIZE=200, IM_SIZE=256, WEIGHTS="")
_C.DATA_LOADER = _section(NUM_WORKERS=8, PIN_MEMORY=True)
_C.MEM = _section(RELU_INPLACE=True)
_C.CUDNN = _section(BENCHMARK=True)
_C.PREC_TIME = _section(WARMUP_ITER=3, NUM_ITER=30)
_C.NUM_GPUS = 1
_C.OUT_DIR = "/tmp"
_C.CFG_DEST = "config.yaml"
_C.RNG_SEED = 1
_C.LOG_DEST = "stdout"
_C.LOG_PERIOD = 10
_C.DIST_BACKEND = "nccl"
_C.HOST = "localhost"
_C.PORT_RANGE = [10000, 65000]
_C.DOWNLOAD_CACHE = "/tmp/pycls-download-cache"

_SPLITS = ("train", "val", "test")


def assert_and_infer_cfg() -> None:
    """Check the invariants pycls relies on (``AssertionError`` naming the broken one)."""
    assert not _C.OPTIM.STEPS or _C.OPTIM.STEPS[0] == 0, "The first lr step must start at 0"
    for split in (_C.TRAIN.SPLIT, _C.TEST.SPLIT):
        assert split in _SPLITS, f"Data split '{split}' not supported"
    for batch in (_C.TRAIN.BATCH_SIZE, _C.TEST.BATCH_SIZE):
        assert batch % _C.NUM_GPUS == 0, "Mini-batch size should be a multiple of NUM_GPUS."
    assert _C.LOG_DEST in ("stdout", "file"), f"Log destination '{_C.LOG_DEST}' not supported"


def dump_cfg() -> None:
    """Write the config to ``OUT_DIR/CFG_DEST``."""
    with open(os.path.join(_C.OUT_DIR, _C.CFG_DEST), "w", encoding="utf-8") as f:
        _C.dump(stream=f)


def load_cfg(out_dir: str, cfg_dest: str = "config.yaml") -> None:
    """Merge ``out_dir/cfg_dest`` (a file written by :func:`dump_cfg`) into the config."""
    _C.merge_from_file(os.path.join(out_dir, cfg_dest))


def load_cfg_fom_args(description: str = "Config file options.") -> None:
    """Merge ``--cfg FILE`` and ``KEY VALUE`` overrides from the command line into the config
    (upstream's name, misspelt ``fom``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cfg", dest="cfg_file", help="Config file location", required=True, type=str)
    parser.add_argument(
        "opts", help="KEY VALUE overrides of the config", default=None, nargs=argparse.REMAINDER
    )
    if len(sys.argv) == 1:
        parser.print_help()
        sys.exit(1)
    args = parser.parse_args()
    _C.merge_from_file(args.cfg_file)
    _C.merge_from_list(args.opts)
