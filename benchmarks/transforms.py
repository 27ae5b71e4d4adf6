"""Images/s of the bagtricks train pipeline, ours vs PIL + classic torchvision.transforms.

    python benchmarks/transforms.py [--images 1200] [--repeats 3] [--threads 1]

The same files (Market-sized 128x64 JPEGs from the synthetic generator) go through:

- classic: PIL open + convert("RGB"), T.Resize((256, 128), bicubic), T.RandomHorizontalFlip,
  T.Pad(10), T.RandomCrop((256, 128)), T.PILToTensor(), T.RandomErasing(value=REA.VALUE);
- ours, from JPEG: ``CommDataset[SampleKey]`` with ``build_transforms(cfg)`` (torchvision
  decode, uint8 bicubic resize, fused pad + crop, flip, in-tensor erasing, per-sample generator);
- ours, decoded cache: the same dataset reading the uint8 memory map (DATALOADER.CACHE).

Everything runs in this one process with ``torch.set_num_threads(--threads)``; the best of
``--repeats`` passes is reported. Targets: ours >= 1.5x classic from JPEG, >= 4x with the cache.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
import torchvision.transforms as T
from PIL import Image

from fastreid.config import get_cfg
from fastreid.data.cache import DecodedCache
from fastreid.data.common import CommDataset
from fastreid.data.datasets.market_format import parse_market_folder
from fastreid.data.loading.seeds import SampleKey, mix_seed
from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501
from fastreid.data.transforms import build_transforms


def bagtricks_cfg():
    cfg = get_cfg()
    cfg.INPUT.SIZE_TRAIN = [256, 128]
    cfg.INPUT.FLIP.ENABLED = True
    cfg.INPUT.PADDING.ENABLED = True
    cfg.INPUT.PADDING.SIZE = 10
    cfg.INPUT.REA.ENABLED = True
    return cfg


def classic_pipeline(cfg):
    size = tuple(cfg.INPUT.SIZE_TRAIN)
    tf = T.Compose(
        [
            T.Resize(size, interpolation=T.InterpolationMode.BICUBIC),
            T.RandomHorizontalFlip(p=cfg.INPUT.FLIP.PROB),
            T.Pad(cfg.INPUT.PADDING.SIZE),
            T.RandomCrop(size),
            T.PILToTensor(),
            T.RandomErasing(p=cfg.INPUT.REA.PROB, value=[round(v) for v in cfg.INPUT.REA.VALUE]),
        ]
    )

    def load(path: str) -> torch.Tensor:
        with Image.open(path) as im:
            return tf(im.convert("RGB"))

    return load


def run(fn, n: int, repeats: int) -> float:
    """Best images/s over ``repeats`` passes of ``fn(i)`` for i < n."""
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        best = max(best, n / (time.perf_counter() - start))
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=1200, help="about this many JPEGs are generated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (PIL uses one)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    torch.set_num_threads(args.threads)
    cfg = bagtricks_cfg()

    with tempfile.TemporaryDirectory() as tmp:
        n_ids = max(2, args.images // 12)
        spec = SyntheticSpec(
            num_train_ids=n_ids, num_test_ids=1, min_images=10, max_images=14, num_distractors=0, num_junk=0
        )
        out = generate_market1501(tmp, spec)
        items = parse_market_folder(os.path.join(out, "bounding_box_train"), 6)
        paths = [p for p, _, _ in items]
        n = len(paths)

        classic = classic_pipeline(cfg)
        ours = CommDataset(items, build_transforms(cfg, is_train=True))
        cache = DecodedCache(paths, cfg.INPUT.SIZE_TRAIN, os.path.join(tmp, "cache"))
        t0 = time.perf_counter()
        cache.build(progress=False)
        build_s = time.perf_counter() - t0
        cached = CommDataset(items, build_transforms(cfg, is_train=True), cache=cache)

        sample = ours[SampleKey(0, 1)]["images"]
        assert sample.shape == (3, 256, 128) and sample.dtype == torch.uint8
        assert torch.equal(sample, cached[SampleKey(0, 1)]["images"])

        run(lambda i: classic(paths[i]), min(n, 100), 1)  # warm-up (file cache, lazy imports)
        run(lambda i: ours[SampleKey(i, i)], min(n, 100), 1)
        run(lambda i: cached[SampleKey(i, i)], min(n, 100), 1)
        r_classic = run(lambda i: classic(paths[i]), n, args.repeats)
        r_ours = run(lambda i: ours[SampleKey(i, mix_seed(1, i))], n, args.repeats)
        r_cache = run(lambda i: cached[SampleKey(i, mix_seed(1, i))], n, args.repeats)

    print(
        f"bagtricks train pipeline (resize 256x128 bicubic, flip, pad 10 + random crop, REA), "
        f"{n} Market-sized JPEGs, 1 process, torch threads {args.threads}, best of {args.repeats}"
    )
    print(f"  {'pipeline':<40} {'images/s':>10} {'vs classic':>11}")
    print(f"  {'PIL + classic torchvision.transforms':<40} {r_classic:>10.0f} {1.0:>10.2f}x")
    print(f"  {'ours, from JPEG':<40} {r_ours:>10.0f} {r_ours / r_classic:>10.2f}x   (target >= 1.5x)")
    print(f"  {'ours, decoded cache':<40} {r_cache:>10.0f} {r_cache / r_classic:>10.2f}x   (target >= 4x)")
    print(f"  cache build: {build_s:.2f} s for {n} images ({n / build_s:.0f} images/s, once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
