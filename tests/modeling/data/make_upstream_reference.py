"""Write the upstream reference data in ``data/upstream/`` by running upstream FastReID's code.

Run with upstream's package first on the path (a checkout of JDAI-CV/fast-reid), from this folder::

    PYTHONPATH=/tmp/upstream-fastreid python make_upstream_reference.py /tmp/upstream-fastreid

For each entry: the upstream config (read from upstream's ``configs/``) with the listed overrides is
built by upstream's ``build_model`` (or an upstream module class is built with the listed
arguments); its state-dict key names and shapes go to ``<name>.json`` together with the upstream
commit and source files; where asked, the model is filled with ``deterministic_state``, its norms calibrated (``calibrate_norms``), and its
eval features, the backbone's output (averaged over positions) and the training losses on
``reference_images`` go to ``<name>.pt``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from upstream_reference import (  # noqa: E402
    BATCH_TARGETS,
    DATA_DIR,
    NUM_CLASSES,
    calibrate_norms,
    deterministic_state,
    reference_images,
)

COMMON = ["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAIN", False, "MODEL.HEADS.NUM_CLASSES", NUM_CLASSES]
SMALL = ["INPUT.SIZE_TRAIN", [64, 32], "INPUT.SIZE_TEST", [64, 32]]

# name -> (config, overrides, upstream source files, record features/losses at 64x32)
MODELS = {
    "bagtricks_R50": (
        "configs/Market1501/bagtricks_R50.yml",
        [],
        ["fastreid/modeling/backbones/resnet.py"],
        False,
    ),
    "AGW_R50": (
        "configs/Market1501/AGW_R50.yml",
        SMALL,
        ["fastreid/modeling/backbones/resnet.py", "fastreid/layers/non_local.py"],
        True,
    ),
    "AGW_R101-ibn": (
        "configs/Market1501/AGW_R101-ibn.yml",
        [],
        ["fastreid/modeling/backbones/resnet.py", "fastreid/layers/non_local.py"],
        False,
    ),
    "sbs_R50-ibn": (
        "configs/Market1501/sbs_R50-ibn.yml",
        SMALL,
        [
            "fastreid/modeling/backbones/resnet.py",
            "fastreid/layers/non_local.py",
            "fastreid/modeling/heads/embedding_head.py",
        ],
        True,
    ),
    "mgn_R50-ibn": (
        "configs/Market1501/mgn_R50-ibn.yml",
        ["INPUT.SIZE_TRAIN", [96, 32], "INPUT.SIZE_TEST", [96, 32]],
        ["fastreid/modeling/meta_arch/mgn.py"],
        True,
    ),
    "moco_R50": (
        "configs/Market1501/bagtricks_R50.yml",
        SMALL + ["MODEL.META_ARCHITECTURE", "MoCo", "MODEL.QUEUE_SIZE", 64],
        ["fastreid/modeling/meta_arch/moco.py"],
        False,
    ),
    "clas_R50": (
        "configs/Market1501/bagtricks_R50.yml",
        SMALL + ["MODEL.HEADS.NAME", "ClasHead"],
        ["fastreid/modeling/heads/clas_head.py"],
        True,
    ),
    "bagtricks_vit": (
        "configs/Market1501/bagtricks_vit.yml",
        [],
        ["fastreid/modeling/backbones/vision_transformer.py"],
        False,
    ),
    "vit_small": (
        "configs/Market1501/bagtricks_vit.yml",
        SMALL + ["MODEL.BACKBONE.DEPTH", "small", "MODEL.BACKBONE.DROP_PATH_RATIO", 0.0],
        ["fastreid/modeling/backbones/vision_transformer.py"],
        True,
    ),
    "repvgg_A0": (
        "configs/Market1501/bagtricks_R50.yml",
        SMALL
        + [
            "MODEL.BACKBONE.NAME",
            "build_repvgg_backbone",
            "MODEL.BACKBONE.DEPTH",
            "A0",
            "MODEL.BACKBONE.FEAT_DIM",
            1280,
        ],
        ["fastreid/modeling/backbones/repvgg.py"],
        True,
    ),
    "repvgg_B1g2": (
        "configs/Market1501/bagtricks_R50.yml",
        [
            "MODEL.BACKBONE.NAME",
            "build_repvgg_backbone",
            "MODEL.BACKBONE.DEPTH",
            "B1g2",
            "MODEL.BACKBONE.FEAT_DIM",
            2048,
        ],
        ["fastreid/modeling/backbones/repvgg.py"],
        False,
    ),
    "mobilenetv3_Large": (
        "configs/Market1501/bagtricks_R50.yml",
        SMALL
        + [
            "MODEL.BACKBONE.NAME",
            "build_mobilenetv3_backbone",
            "MODEL.BACKBONE.DEPTH",
            "Large",
            "MODEL.BACKBONE.FEAT_DIM",
            1280,
        ],
        ["fastreid/modeling/backbones/mobilenetv3.py"],
        True,
    ),
    "mobilenetv3_Small": (
        "configs/Market1501/bagtricks_R50.yml",
        [
            "MODEL.BACKBONE.NAME",
            "build_mobilenetv3_backbone",
            "MODEL.BACKBONE.DEPTH",
            "Small",
            "MODEL.BACKBONE.FEAT_DIM",
            1024,
        ],
        ["fastreid/modeling/backbones/mobilenetv3.py"],
        False,
    ),
}


def _record_outputs(model, size) -> dict:
    from fastreid.utils.events import EventStorage

    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    model.load_state_dict(deterministic_state(shapes))
    images = reference_images(*size).float()
    calibration = {
        "images": reference_images(*size, n=8, seed=7).float(),
        "targets": torch.arange(8) % NUM_CLASSES,
    }
    with EventStorage(0):
        calibrate_norms(model, lambda: model({k: v.clone() for k, v in calibration.items()}))
    model.eval()
    with torch.no_grad():
        features = model(images.clone())
        normalized = (images - model.pixel_mean) / model.pixel_std
        backbone = model.backbone(normalized)
        backbone = backbone.mean(dim=(2, 3)) if backbone.dim() == 4 else backbone
    model.train()
    batch = {"images": images.clone(), "targets": torch.tensor(BATCH_TARGETS)}
    with EventStorage(0):
        losses = model(batch)
    return {"features": features, "backbone": backbone, "losses": {k: v.detach() for k, v in losses.items()}}


def main(upstream: str) -> None:
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    commit = subprocess.run(
        ["git", "-C", upstream, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    os.makedirs(DATA_DIR, exist_ok=True)
    for name, (config, overrides, files, outputs) in MODELS.items():
        torch.manual_seed(0)
        cfg = get_cfg()
        cfg.merge_from_file(os.path.join(upstream, config))
        cfg.merge_from_list(COMMON + overrides)
        model = build_model(cfg)
        ref = {
            "source": {
                "repository": "https://github.com/JDAI-CV/fast-reid",
                "commit": commit,
                "files": files,
            },
            "config": config,
            "overrides": COMMON + overrides,
            "keys": {k: list(v.shape) for k, v in model.state_dict().items()},
        }
        with open(os.path.join(DATA_DIR, f"{name}.json"), "w") as f:
            json.dump(ref, f, indent=0)
        if outputs:
            torch.save(_record_outputs(model, cfg.INPUT.SIZE_TEST), os.path.join(DATA_DIR, f"{name}.pt"))
        print(name, len(ref["keys"]), "keys", "+ outputs" if outputs else "")


if __name__ == "__main__":
    main(sys.argv[1])
