"""Model table: parameters, FLOPs, CPU images/s (eval forward and train step), and, where
torchvision ships the same network, our forward time against torchvision's in the same run.

    python benchmarks/models.py --quick          # batch 8, 3 timed repeats (a few minutes)
    python benchmarks/models.py                  # batch 32, 5 timed repeats
    python benchmarks/models.py --only R50 ViT   # rows whose name contains one of the words

Every row is a whole model built from a config (``MODEL.BACKBONE.PRETRAIN False``) on 256x128
images: "eval img/s" times ``model(images)`` in eval mode under ``torch.no_grad``; "train img/s"
times forward, losses, backward and an optimizer step (its config's optimizer, 751 identities).
FLOPs are fvcore's multiply-adds of one 256x128 image. The torchvision comparison times the
backbone alone against torchvision's network computing the same thing (same strides; ViT at
224x224 since torchvision's ViT only takes square images), interleaved, median of the repeats.
Rows of ``benchmarks/model_specs.py`` (the backbones helper's list) are added when present.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fastreid.config import get_cfg  # noqa: E402
from fastreid.modeling import build_model  # noqa: E402
from fastreid.modeling.backbones import build_backbone  # noqa: E402
from fastreid.modeling.summary import count_flops, count_parameters  # noqa: E402
from fastreid.solver import build_optimizer  # noqa: E402


def _tv(name: str, **kwargs) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kwargs)

    return build


def _tv_resnet_trunk(name: str) -> Callable[[], nn.Module]:
    """torchvision's ResNet without pooling and classifier (upstream's stem: ceil-mode max pool)."""

    def build() -> nn.Module:
        net = _tv(name)()
        net.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)
        return nn.Sequential(*list(net.children())[:-2])

    return build


def _tv_mobilenetv3(name: str, last: int) -> Callable[[], nn.Module]:
    """torchvision's MobileNetV3 features plus the same 1x1 conv + BN + ReLU6 upstream adds."""

    def build() -> nn.Module:
        features = _tv(name)().features
        channels = features[-1].out_channels
        return nn.Sequential(
            features, nn.Conv2d(channels, last, 1, bias=False), nn.BatchNorm2d(last), nn.ReLU6()
        )

    return build


class _TvViTTrunk(nn.Module):
    """torchvision's ViT-B/16 up to the class token (no classifier)."""

    def __init__(self) -> None:
        super().__init__()
        self.vit = _tv("vit_b_16")()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.vit._process_input(x)
        x = torch.cat([self.vit.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.vit.encoder(x)[:, 0]


# name, config, overrides, torchvision twin of the backbone (with backbone overrides making it the
# same computation), test size for the comparison
ROWS: list[tuple[str, str, list, Callable[[], nn.Module] | None, list, tuple[int, int]]] = [
    (
        "bagtricks R50",
        "configs/Market1501/bagtricks_R50.yml",
        [],
        _tv_resnet_trunk("resnet50"),
        ["MODEL.BACKBONE.LAST_STRIDE", 2],
        (256, 128),
    ),
    ("bagtricks R101-ibn", "configs/Market1501/bagtricks_R101-ibn.yml", [], None, [], (256, 128)),
    ("AGW R50 (non-local)", "configs/Market1501/AGW_R50.yml", [], None, [], (256, 128)),
    ("SBS R50-ibn", "configs/Market1501/sbs_R50-ibn.yml", [], None, [], (256, 128)),
    ("MGN R50-ibn", "configs/Market1501/mgn_R50-ibn.yml", [], None, [], (256, 128)),
    (
        "OSNet x1_0",
        "configs/Market1501/bagtricks_R50.yml",
        [
            "MODEL.BACKBONE.NAME",
            "build_osnet_backbone",
            "MODEL.BACKBONE.DEPTH",
            "x1_0",
            "MODEL.BACKBONE.FEAT_DIM",
            512,
        ],
        None,
        [],
        (256, 128),
    ),
    (
        "RepVGG-A0",
        "configs/Market1501/bagtricks_R50.yml",
        [
            "MODEL.BACKBONE.NAME",
            "build_repvgg_backbone",
            "MODEL.BACKBONE.DEPTH",
            "A0",
            "MODEL.BACKBONE.FEAT_DIM",
            1280,
        ],
        None,
        [],
        (256, 128),
    ),
    (
        "MobileNetV3-Large",
        "configs/Market1501/bagtricks_R50.yml",
        [
            "MODEL.BACKBONE.NAME",
            "build_mobilenetv3_backbone",
            "MODEL.BACKBONE.DEPTH",
            "Large",
            "MODEL.BACKBONE.FEAT_DIM",
            1280,
        ],
        _tv_mobilenetv3("mobilenet_v3_large", 1280),
        [],
        (256, 128),
    ),
    (
        "MobileNetV3-Small",
        "configs/Market1501/bagtricks_R50.yml",
        [
            "MODEL.BACKBONE.NAME",
            "build_mobilenetv3_backbone",
            "MODEL.BACKBONE.DEPTH",
            "Small",
            "MODEL.BACKBONE.FEAT_DIM",
            1024,
        ],
        _tv_mobilenetv3("mobilenet_v3_small", 1024),
        [],
        (256, 128),
    ),
    (
        "ViT-B/16 (bagtricks_vit)",
        "configs/Market1501/bagtricks_vit.yml",
        ["MODEL.BACKBONE.DROP_PATH_RATIO", 0.0],
        _TvViTTrunk,
        ["INPUT.SIZE_TRAIN", [224, 224]],
        (224, 224),
    ),
]


def _spec_rows() -> list:
    """The backbones helper's ``BACKBONE_SPECS`` as rows, when benchmarks/model_specs.py exists."""
    try:
        from model_specs import BACKBONE_SPECS
    except ImportError:
        return []
    rows = []
    for spec in BACKBONE_SPECS:
        keys = {f"MODEL.BACKBONE.{k}": v for k, v in spec.overrides.items()}
        stride = {k: keys.pop(k) for k in list(keys) if k.endswith("LAST_STRIDE")}
        rows.append(
            (
                spec.name,
                "configs/Market1501/bagtricks_R50.yml",
                [x for kv in keys.items() for x in kv],
                spec.torchvision,
                [x for kv in stride.items() for x in kv],
                (256, 128),
            )
        )
    return rows


def _cfg(config: str, overrides: list):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, config))
    cfg.merge_from_list(
        [
            "MODEL.DEVICE",
            "cpu",
            "MODEL.BACKBONE.PRETRAIN",
            False,
            "MODEL.HEADS.NUM_CLASSES",
            751,
            "INPUT.SIZE_TRAIN",
            [256, 128],
            "INPUT.SIZE_TEST",
            [256, 128],
        ]
        + overrides
    )
    return cfg


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _side_by_side(
    ours: Callable[[], object], theirs: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Median seconds of each, alternating calls so both see the same machine load."""
    ours(), theirs()
    a, b = [], []
    for _ in range(repeats):
        for fn, out in ((ours, a), (theirs, b)):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def measure(row, batch: int, repeats: int) -> dict:
    name, config, overrides, tv_builder, tv_overrides, tv_size = row
    cfg = _cfg(config, overrides)
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    params, _ = count_parameters(model)
    flops = count_flops(model, 256, 128)
    images = torch.randint(0, 256, (batch, 3, 256, 128), dtype=torch.uint8)
    batch_dict = {
        "images": images,
        "targets": torch.arange(batch) % 751,
        "camids": torch.zeros(batch, dtype=torch.long),
    }

    model.eval()
    with torch.no_grad():
        eval_s = _median_seconds(lambda: model(batch_dict), repeats)
    model.train()
    optimizer, _ = build_optimizer(cfg, model)

    def train_step() -> None:
        losses = model(batch_dict)
        optimizer.zero_grad(set_to_none=True)
        sum(losses.values()).backward()
        optimizer.step()

    train_s = _median_seconds(train_step, max(1, repeats // 2))
    result = {
        "name": name,
        "params": params,
        "flops": flops,
        "eval": batch / eval_s,
        "train": batch / train_s,
        "ours_ms": None,
        "tv_ms": None,
    }
    if tv_builder is not None:
        ours = build_backbone(_cfg(config, overrides + tv_overrides)).eval()
        theirs = tv_builder().eval()
        x = torch.randn(batch, 3, *tv_size)
        with torch.no_grad():
            a, b = _side_by_side(lambda: ours(x), lambda: theirs(x), repeats)
        result["ours_ms"], result["tv_ms"] = a * 1000, b * 1000
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="batch 8 and 3 repeats")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=[], help="rows whose name contains one of these words")
    args = parser.parse_args(argv)
    batch = args.batch or (8 if args.quick else 32)
    repeats = args.repeats or (3 if args.quick else 5)
    rows = ROWS + _spec_rows()
    if args.only:
        rows = [r for r in rows if any(w.lower() in r[0].lower() for w in args.only)]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {batch}, 256x128, median of {repeats}"
    )
    print(
        "| model | params (M) | GFLOPs | eval img/s | train img/s | backbone ms: ours | torchvision | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        r = measure(row, batch, repeats)
        compare = (
            "| | |"
            if r["tv_ms"] is None
            else f"| {r['ours_ms']:.0f} | {r['tv_ms']:.0f} | {r['ours_ms'] / r['tv_ms']:.2f}x |"
        )
        print(
            f"| {r['name']} | {r['params'] / 1e6:.1f} | {r['flops'] / 1e9:.2f} | {r['eval']:.1f} | "
            f"{r['train']:.1f} {compare}",
            flush=True,
        )


if __name__ == "__main__":
    main()
