"""Data loading benchmark: worker processes, threads, start methods, persistence, background thread.

Generates Market-1501-sized JPEGs (128x64) in a temporary folder, loads them with the bagtricks
train transforms (``fastreid.data.transforms.build_transforms`` on configs/Base-bagtricks.yml) and
prints, for each loader setting, batches/s, images/s, time to the first batch and time to the first
batch of the second epoch. Then checks the targets of the loader issue:

- DataLoaderX costs at most 3% over a plain torch DataLoader with the same settings;
- zero workers + background generator with a GIL-releasing "GPU step" as long as loading a batch
  runs at most 1.2x the longer of the two;
- 2 spawn workers: first batch within 3 s; with persistent workers the second epoch starts at once.

``--costs`` measures, side by side, what the hardening of the loader costs:

- a user's dataset drawing from the global random generators, loaded with a seed (the global
  generators seeded from each sample's seed, the caller's state saved and restored) against the
  same loader without a seed: target at most 3% at batch 64;
- zero workers with ``DATALOADER.TIMEOUT`` (loading in a helper thread so the timeout can fire)
  against timeout 0 (no thread at all);
- ``read_image_tensor`` (size read from the header before decoding) against torchvision's
  ``decode_image`` on the same bytes.

Writes JSON and a PNG plot under benchmarks/results/ (git-ignored).

    .venv/bin/python benchmarks/dataloader.py            # full sweep (a few minutes on 2 cores)
    .venv/bin/python benchmarks/dataloader.py --quick    # fewer settings and images
    .venv/bin/python benchmarks/dataloader.py --costs    # only the costs of the hardening
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tabulate import tabulate
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

REPO = Path(__file__).resolve().parents[1]
warnings.filterwarnings(
    "ignore", message="This DataLoader will create"
)  # 4 and 8 workers on 2 CPUs are on purpose
sys.path.insert(0, str(REPO))

from fastreid.config import get_cfg  # noqa: E402
from fastreid.data.data_utils import DataLoaderX, read_image_tensor  # noqa: E402
from fastreid.data.loading.seeds import sample_index, sample_seed  # noqa: E402


# --------------------------------------------------------------------------------------------- data
def make_jpegs(root: Path, count: int) -> list[str]:
    """Person-sized (128x64) JPEGs with smooth content, so that they compress like real crops."""
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        low = rng.integers(0, 256, (16, 8, 3), dtype=np.uint8)
        img = Image.fromarray(low).resize((64, 128), Image.BILINEAR)
        noise = rng.integers(-12, 13, (128, 64, 3))
        img = Image.fromarray(np.clip(np.asarray(img).astype(int) + noise, 0, 255).astype(np.uint8))
        path = root / f"{i % 751:04d}_c{i % 6 + 1}s1_{i:06d}_00.jpg"
        img.save(path, quality=90)
        paths.append(str(path))
    return paths


def bagtricks_transform():
    cfg = get_cfg()
    cfg.merge_from_file(str(REPO / "configs" / "Base-bagtricks.yml"))
    from fastreid.data.transforms import build_transforms

    return build_transforms(cfg, is_train=True)


class JpegDataset:
    """Keyed dataset over JPEG files: decode, bagtricks transforms seeded per sample."""

    accepts_sample_keys = True

    def __init__(self, paths: list[str], transform):
        self.img_items = [(p, 0, 0) for p in paths]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.img_items)

    def __getitem__(self, item):
        path = self.img_items[sample_index(item)][0]
        g = torch.Generator().manual_seed(sample_seed(item))
        return {"images": self.transform(read_image_tensor(path), g), "targets": sample_index(item)}


class GlobalRngJpegDataset(JpegDataset):
    """A user's dataset: no sample keys, randomness from torch's global generator."""

    accepts_sample_keys = False

    def __getitem__(self, index):
        path = self.img_items[index][0]
        return {"images": self.transform(read_image_tensor(path), torch.default_generator), "targets": index}


def collate(samples: list[dict]) -> dict:
    return {
        "images": torch.stack([s["images"] for s in samples]),
        "targets": torch.tensor([s["targets"] for s in samples], dtype=torch.int64),
    }


# --------------------------------------------------------------------------------------------- runs
def batch_sampler(n: int, batch_size: int) -> BatchSampler:
    return BatchSampler(RandomSampler(range(n), generator=torch.Generator().manual_seed(0)), batch_size, True)


def run_epochs(loader, epochs: int = 2, step=None) -> dict:
    firsts, batches, start = [], 0, time.perf_counter()
    for _ in range(epochs):
        t0 = time.perf_counter()
        for i, _batch in enumerate(loader):
            if i == 0:
                firsts.append(time.perf_counter() - t0)
            if step is not None:
                step()
            batches += 1
    total = time.perf_counter() - start
    shutdown = getattr(loader, "shutdown", None)
    if callable(shutdown):
        shutdown()
    return {
        "first_batch_s": firsts[0],
        "epoch2_start_s": firsts[1] if len(firsts) > 1 else None,
        "total_s": total,
        "batches": batches,
    }


def make_loader(kind: str, dataset, batch_size: int, **kw):
    sampler = batch_sampler(len(dataset), batch_size)
    if kind == "torch":
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, **kw)
    return DataLoaderX(dataset, batch_sampler=sampler, collate_fn=collate, seed=0, device="cpu", **kw)


def sweep(dataset, batch_size: int, quick: bool) -> list[dict]:
    workers = [0, 2] if quick else [0, 1, 2, 4, 8]
    settings: list[tuple[str, dict]] = []
    for n in workers:
        kw = {"num_workers": n}
        if n:
            kw.update(multiprocessing_context="fork", persistent_workers=False)
        settings.append((f"{n} fork workers" if n else "0 workers", kw))
    settings += [
        (
            "2 fork workers, persistent",
            {"num_workers": 2, "multiprocessing_context": "fork", "persistent_workers": True},
        ),
        (
            "2 spawn workers",
            {"num_workers": 2, "multiprocessing_context": "spawn", "persistent_workers": False},
        ),
        (
            "2 spawn workers, persistent",
            {"num_workers": 2, "multiprocessing_context": "spawn", "persistent_workers": True},
        ),
        ("2 threads", {"num_threads": 2}),
        ("0 workers + background", {"background": True}),
    ]
    if not quick:
        settings += [
            (
                "2 forkserver workers, persistent",
                {"num_workers": 2, "multiprocessing_context": "forkserver", "persistent_workers": True},
            ),
            ("4 threads", {"num_threads": 4}),
            ("2 threads + background", {"num_threads": 2, "background": True}),
            (
                "2 spawn workers, persistent + background",
                {
                    "num_workers": 2,
                    "multiprocessing_context": "spawn",
                    "persistent_workers": True,
                    "background": True,
                },
            ),
        ]
    rows = []
    for name, kw in settings:
        kw.setdefault("background", False)
        result = run_epochs(make_loader("x", dataset, batch_size, **kw))
        result.update(
            setting=name,
            images_per_s=result["batches"] * batch_size / result["total_s"],
            batches_per_s=result["batches"] / result["total_s"],
        )
        rows.append(result)
        print(
            f"  {name:45s} {result['batches_per_s']:7.2f} batches/s  first {result['first_batch_s']:.2f} s"
            f"  epoch 2 starts {result['epoch2_start_s']:.3f} s",
            flush=True,
        )
    return rows


def overhead(dataset, batch_size: int, repeats: int) -> list[dict]:
    """DataLoaderX vs torch DataLoader, interleaved and best-of-N to resist noise."""
    out = []
    for label, kw in [
        ("0 workers", {}),
        ("2 fork workers", {"num_workers": 2, "multiprocessing_context": "fork"}),
    ]:
        best = {"torch": float("inf"), "x": float("inf")}
        for _ in range(repeats):
            for kind in ("torch", "x"):
                extra = {} if kind == "torch" else {"background": False}
                best[kind] = min(
                    best[kind], run_epochs(make_loader(kind, dataset, batch_size, **kw, **extra))["total_s"]
                )
        out.append(
            {
                "setting": label,
                "torch_s": best["torch"],
                "dataloaderx_s": best["x"],
                "ratio": best["x"] / best["torch"],
            }
        )
    return out


def overlap(dataset, batch_size: int) -> dict:
    """Zero workers + background generator, with a GIL-releasing step as long as loading a batch."""
    base = run_epochs(make_loader("x", dataset, batch_size, background=False), epochs=1)
    load = base["total_s"] / base["batches"]

    def step():
        time.sleep(load)  # what a CUDA step looks like to the CPU: the GIL is free meanwhile

    with_bg = run_epochs(make_loader("x", dataset, batch_size, background=True), epochs=1, step=step)
    without = run_epochs(make_loader("x", dataset, batch_size, background=False), epochs=1, step=step)
    longer = base["batches"] * load  # compute == load
    return {
        "load_per_batch_s": load,
        "with_background_s": with_bg["total_s"],
        "without_background_s": without["total_s"],
        "ratio_to_longer": with_bg["total_s"] / longer,
        "ratio_without": without["total_s"] / longer,
    }


def _best(fns: dict, repeats: int) -> dict:
    """Best-of-``repeats`` seconds of each callable, run interleaved (resists drifting load)."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def costs(paths: list[str], transform, batch_size: int, repeats: int) -> list[list]:
    """What the hardening costs, measured side by side (see the module docstring)."""
    from torchvision.io import ImageReadMode, decode_image

    user = GlobalRngJpegDataset(paths, transform)
    sampler = batch_sampler(len(user), batch_size)

    def epoch(**kw):
        return lambda: run_epochs(
            DataLoaderX(user, batch_sampler=sampler, collate_fn=collate, background=False, **kw), epochs=1
        )

    rng = _best({"no seed": epoch(), "seed": epoch(seed=0)}, repeats)
    timed = _best({"timeout 0": epoch(timeout=0), "timeout 300": epoch(timeout=300)}, repeats)
    import timeit

    from fastreid.data.loading.seeds import (
        GlobalSeededDataset,
        SampleKey,
        _SavedGlobalRngs,
        mix_seed,
        seed_global_rngs,
    )

    # the same samples fetched directly: batches of 64 through __getitems__ (as torch's fetcher does)
    wrapped = GlobalSeededDataset(user)
    keys = [SampleKey(i, mix_seed(0, i)) for i in range(len(user))]
    direct = _best(
        {
            "plain": lambda: [user[k.index] for k in keys],
            "seeded": lambda: [
                wrapped.__getitems__(keys[i : i + batch_size]) for i in range(0, len(keys), batch_size)
            ],
        },
        repeats,
    )

    def seed_one_batch():  # the added work alone: one save/restore per batch, three seeds per sample
        with _SavedGlobalRngs():
            for key in keys[:batch_size]:
                seed_global_rngs(key.seed)

    seeding_us = (
        min(timeit.repeat(seed_one_batch, number=20, repeat=max(repeats, 5))) / (20 * batch_size) * 1e6
    )
    sample_us = direct["plain"] / len(keys) * 1e6

    def header_checked():
        for p in paths[:256]:
            read_image_tensor(p)

    def torchvision_only():
        for p in paths[:256]:
            data = Path(p).read_bytes()
            decode_image(
                torch.frombuffer(bytearray(data), dtype=torch.uint8),
                mode=ImageReadMode.RGB,
                apply_exif_orientation=True,
            )

    decode = _best({"checked": header_checked, "plain": torchvision_only}, repeats)
    n = len(paths) // batch_size * batch_size
    return [
        [
            f"global RNGs seeded per sample (batch {batch_size}, 0 workers): seeded / unseeded",
            f"{rng['seed'] / rng['no seed']:.3f}",
            "<= 1.03",
            rng["seed"] / rng["no seed"] <= 1.03,
        ],
        ["  per sample: seeded - unseeded (us)", f"{(rng['seed'] - rng['no seed']) / n * 1e6:.1f}", "", ""],
        [
            f"same samples without a loader, batches of {batch_size}: seeded / plain",
            f"{direct['seeded'] / direct['plain']:.3f}",
            "<= 1.03",
            direct["seeded"] / direct["plain"] <= 1.03,
        ],
        [
            "  per sample: seeded - plain (us)",
            f"{(direct['seeded'] - direct['plain']) / len(keys) * 1e6:.1f}",
            f"of {sample_us:.0f} us per sample",
            "",
        ],
        [
            "the seeding work alone (timeit, min): us per sample / us to load a sample",
            f"{seeding_us:.1f} / {sample_us:.0f} = {seeding_us / sample_us:.3f}",
            "<= 0.03",
            seeding_us / sample_us <= 0.03,
        ],
        [
            "0 workers, TIMEOUT 300 (helper thread) / TIMEOUT 0 (none)",
            f"{timed['timeout 300'] / timed['timeout 0']:.3f}",
            "~1",
            "",
        ],
        [
            "read_image_tensor (header checked) / file read + decode_image",
            f"{decode['checked'] / decode['plain']:.3f}",
            "",
            "",
        ],
        [
            "  per image: read_image_tensor - (read + decode_image) (us)",
            f"{(decode['checked'] - decode['plain']) / 256 * 1e6:.1f}",
            "",
            "",
        ],
    ]


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.5))
    ax.barh([r["setting"] for r in rows], [r["images_per_s"] for r in rows], color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlabel("images/s (bagtricks train transforms, 128x64 JPEGs)")
    ax.set_title("fastreid DataLoaderX")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats for the overhead check")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--costs", action="store_true", help="only measure the costs of the loader's hardening"
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="intra-op threads of the main process (1: as when a GPU does the training; "
        "2 OpenMP threads on tiny image ops spin badly on a loaded 2-core machine)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    if args.quick:
        args.images = min(args.images, 1024)
        args.repeats = min(args.repeats, 2)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fastreid-bench-") as tmp:
        t0 = time.perf_counter()
        paths = make_jpegs(Path(tmp), args.images)
        print(
            f"{len(paths)} JPEGs (128x64) in {time.perf_counter() - t0:.1f} s; torch threads {torch.get_num_threads()},"
            f" CPUs {os.cpu_count()}",
            flush=True,
        )
        dataset = JpegDataset(paths, bagtricks_transform())
        run_epochs(
            make_loader("x", dataset, args.batch_size, background=False), epochs=1
        )  # warm-up: file cache
        if args.costs:
            rows = costs(paths, dataset.transform, args.batch_size, max(args.repeats, 3))
            print(tabulate(rows, headers=["cost", "measured", "wanted", "met"], tablefmt="github"))
            return 0

        print("sweep:", flush=True)
        rows = sweep(dataset, args.batch_size, args.quick)
        print("overhead (DataLoaderX vs DataLoader):", flush=True)
        over = overhead(dataset, args.batch_size, args.repeats)
        print("overlap (0 workers + background generator):", flush=True)
        ovl = overlap(dataset, args.batch_size)

    table = [
        [
            r["setting"],
            f"{r['batches_per_s']:.2f}",
            f"{r['images_per_s']:.0f}",
            f"{r['first_batch_s']:.3f}",
            f"{r['epoch2_start_s']:.3f}",
        ]
        for r in rows
    ]
    print()
    print(
        tabulate(
            table,
            headers=["setting", "batches/s", "images/s", "first batch (s)", "epoch 2 starts (s)"],
            tablefmt="github",
        )
    )
    print()
    spawn = next(r for r in rows if r["setting"] == "2 spawn workers, persistent")
    spawn_np = next(r for r in rows if r["setting"] == "2 spawn workers")
    checks = [
        [f"DataLoaderX / DataLoader, {o['setting']}", f"{o['ratio']:.3f}", "<= 1.03", o["ratio"] <= 1.03]
        for o in over
    ]
    checks += [
        [
            "0 workers + background, step = load: time / longer of the two",
            f"{ovl['ratio_to_longer']:.2f}",
            "<= 1.2",
            ovl["ratio_to_longer"] <= 1.2,
        ],
        ["  (same without background generator)", f"{ovl['ratio_without']:.2f}", "~2", ""],
        [
            "2 spawn workers: first batch (s)",
            f"{spawn['first_batch_s']:.2f}",
            "<= 3",
            spawn["first_batch_s"] <= 3,
        ],
        [
            "2 spawn workers, persistent: epoch 2 starts (s)",
            f"{spawn['epoch2_start_s']:.3f}",
            f"at once (not re-spawned: {spawn_np['epoch2_start_s']:.2f} s)",
            spawn["epoch2_start_s"] < 0.5 * spawn_np["epoch2_start_s"],
        ],
    ]
    print(tabulate(checks, headers=["target", "measured", "wanted", "met"], tablefmt="github"))

    result = {
        "images": args.images,
        "batch_size": args.batch_size,
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "sweep": rows,
        "overhead": over,
        "overlap": ovl,
    }
    (out_dir / "dataloader.json").write_text(json.dumps(result, indent=2))
    plot(rows, out_dir / "dataloader.png")
    print(f"\nwrote {out_dir / 'dataloader.json'} and {out_dir / 'dataloader.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
