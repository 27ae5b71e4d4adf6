"""Write the upstream reference data in ``data/upstream/`` by running upstream FastReID's own code.

Run by hand against a checkout of upstream (JDAI-CV/fast-reid), from anywhere::

    python tests/modeling/data/make_upstream_reference.py /path/to/upstream-fastreid [--out DIR] [name ...]

The script puts the checkout first on ``sys.path`` (so ``fastreid`` is upstream's package, not this
project's) and works from its folder (upstream's RegNet reads its YAML files by relative path). With
names, only those backbone cases or models are written; ``--out`` writes to another folder (to
compare with the stored files without touching them). Not a test: the suite only reads what this
writes. Two kinds of entries:

- backbones, one per ``upstream_reference.CASES`` entry, built by upstream's ``build_backbone`` from
  pristine defaults: ``<case>.keys.txt`` (key names, shapes, dtypes) and, where asked, ``<case>.out.pt``
  (the eval-mode output for ``reference_input()`` with ``deterministic_state_dict`` weights);
- whole models, one per ``MODELS`` entry below: the upstream config (from upstream's ``configs/``)
  with the listed overrides, built by upstream's ``build_model``; its state-dict key names and
  shapes go to ``<name>.json`` together with the upstream commit and source files; where asked, the
  model is filled with ``deterministic_state``, its norms calibrated (``calibrate_norms``), and its
  eval features, the backbone's output (averaged over positions) and the training losses on
  ``reference_images`` go to ``<name>.pt``.

Every recorded output is computed in float64 (weights, buffers and inputs in double, as
``REFERENCE_DTYPE`` says): float32 through fifty layers rounds differently on another CPU's kernels,
float64 agrees to ~1e-12 of the magnitudes everywhere, so the tests can compare tightly on any CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from upstream_reference import (
    BATCH_TARGETS,
    CASES,
    DATA_DIR,
    NUM_CLASSES,
    REFERENCE_DTYPE,
    calibrate_norms,
    deterministic_state,
    deterministic_state_dict,
    reference_images,
    reference_input,
    sample_positions,
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


def write_keys(path: str, state_dict: Mapping[str, torch.Tensor], header: str) -> None:
    """Write ``state_dict``'s key names, shapes and dtypes as ``upstream_reference.read_keys`` reads them."""
    with open(path, "w") as f:
        f.write(header)
        for name, value in state_dict.items():
            shape = "x".join(str(d) for d in value.shape) or "scalar"
            f.write(f"{name} {shape} {str(value.dtype).replace('torch.', '')}\n")


def summarize_output(out: torch.Tensor) -> dict:
    """The recorded form of a backbone output: shape, sampled values, sum and sum of magnitudes."""
    flat = out.detach().reshape(-1).double()
    return {
        "shape": tuple(out.shape),
        "values": flat[sample_positions(flat.numel())],
        "sum": float(flat.sum()),
        "abs_sum": float(flat.abs().sum()),
    }


def _record_outputs(model, size) -> dict:
    from fastreid.utils.events import EventStorage

    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    model.to(REFERENCE_DTYPE)
    model.load_state_dict(deterministic_state(shapes))
    images = reference_images(*size).to(REFERENCE_DTYPE)
    calibration = {
        "images": reference_images(*size, n=8, seed=7).to(REFERENCE_DTYPE),
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


def write_backbones(upstream: str, commit: str, out_dir: str, only: list[str]) -> None:
    from fastreid.config import get_cfg
    from fastreid.modeling.backbones import build_backbone
    from fastreid.modeling.backbones.regnet import config as regnet_config

    # Upstream merges each RegNet/EfficientNet YAML into one global cfg, so a RegNetX built after a
    # RegNetY keeps SE_ON=True. Each case here starts from the pristine defaults instead.
    pristine = regnet_config.cfg.clone()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for case, (overrides, with_output) in CASES.items():
        if only and case not in only:
            continue
        regnet_config.cfg.merge_from_other_cfg(pristine)
        cfg = get_cfg()
        cfg.MODEL.BACKBONE.PRETRAIN = False
        for key, value in overrides.items():
            setattr(cfg.MODEL.BACKBONE, key, value)
        model = build_backbone(cfg).eval()
        name = cfg.MODEL.BACKBONE.NAME
        module_file = os.path.relpath(sys.modules[type(model).__module__].__file__, upstream)
        header = (
            f"# upstream FastReID {module_file} ({name}), commit {commit}\n"
            f"# MODEL.BACKBONE overrides: {overrides}\n# key shape dtype\n"
        )
        write_keys(os.path.join(out_dir, f"{case}.keys.txt"), model.state_dict(), header)
        if with_output:
            keys = {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
            model.to(REFERENCE_DTYPE).load_state_dict(deterministic_state_dict(keys), strict=True)
            with torch.no_grad():
                out = model(reference_input().to(REFERENCE_DTYPE))
            summary = summarize_output(out)
            summary["source"] = f"{module_file} @ {commit}"
            torch.save(summary, os.path.join(out_dir, f"{case}.out.pt"))
        print(case, "written", "with output" if with_output else "")
    torch.set_num_threads(threads)


def write_models(upstream: str, commit: str, out_dir: str, only: list[str]) -> None:
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    for name, (config, overrides, files, outputs) in MODELS.items():
        if only and name not in only:
            continue
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
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(ref, f, indent=0)
        if outputs:
            torch.save(_record_outputs(model, cfg.INPUT.SIZE_TEST), os.path.join(out_dir, f"{name}.pt"))
        print(name, len(ref["keys"]), "keys", "+ outputs" if outputs else "")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("upstream", help="a checkout of upstream FastReID")
    parser.add_argument("names", nargs="*", help="backbone cases or models to write (default: all)")
    parser.add_argument("--out", default=DATA_DIR, help="folder to write to (default: %(default)s)")
    args = parser.parse_intermixed_args(argv)
    unknown = sorted(set(args.names) - set(CASES) - set(MODELS))
    if unknown:
        parser.error(f"unknown names {unknown}; known: {sorted(CASES) + sorted(MODELS)}")
    upstream = os.path.abspath(args.upstream)
    out_dir = os.path.abspath(args.out)
    commit = subprocess.run(
        ["git", "-C", upstream, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    os.makedirs(out_dir, exist_ok=True)
    sys.path.insert(0, upstream)
    os.chdir(upstream)
    write_models(upstream, commit, out_dir, args.names)
    write_backbones(upstream, commit, out_dir, args.names)


if __name__ == "__main__":
    main(sys.argv[1:])
