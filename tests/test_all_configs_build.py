"""Every config in configs/ and custom_configs/ (upstream's 47 and ours) builds its model with
``MODEL.BACKBONE.PRETRAIN False`` and runs one training step (loss, backward, optimizer step from
its own SOLVER section) and one evaluation batch, on tiny images from synthetic data sets.

Person configs read their own data sets: a synthetic Market-1501, the same pictures laid out as
DukeMTMC-reID and as MSMT17 (list files). Vehicle configs (VeRi, VehicleID, VERI-Wild) find no
data here and must say so in one clear error naming the data set, never a KeyError. Configs that
build the same model share one model (built once)."""

from __future__ import annotations

import math
import os

import pytest
import torch
from shipped_configs import reid_configs

from fastreid.config import get_cfg
from fastreid.utils.errors import UserError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# re-ID configs; a task family's configs (attributes, classification, ...) train another task on
# other data, and its own tests build and train them
CONFIGS = reid_configs("configs/**/*.yml", "custom_configs/**/*.yml")
VEHICLE_SETS = {
    "VeRi",
    "VehicleID",
    "VeRiWild",
    "VERIWild",
    "SmallVeRiWild",
    "MediumVeRiWild",
    "LargeVeRiWild",
    "SmallVehicleID",
    "MediumVehicleID",
    "LargeVehicleID",
}
# Large models: still checked, in the slow set.
SLOW_MARKERS = ("R101", "S50", "mgn_", "vit", "Base-MGN", "VeRi/", "VERIWild/", "VehicleID/")

TINY = [
    "MODEL.DEVICE",
    "cpu",
    "MODEL.BACKBONE.PRETRAIN",
    False,
    "MODEL.BACKBONE.PRETRAIN_PATH",
    "",
    "MODEL.WEIGHTS",
    "",
    # the smallest input every model takes: 3 rows of features for MGN's stripes, 3 x 1 ViT
    # patches. The cost of a step is mostly the weights' (backward, optimizer state), not the pixels:
    # 4 images of 48 x 16 measured 25-45 % less CPU than 8 of 48 x 32 (R101, MGN, ViT)
    "INPUT.SIZE_TRAIN",
    [48, 16],
    "INPUT.SIZE_TEST",
    [48, 16],
    "INPUT.CROP.SIZE",
    [48, 16],
    "DATASETS.COMBINEALL",
    False,
    "DATALOADER.NUM_WORKERS",
    0,
    "DATALOADER.NUM_THREADS",
    0,
    "DATALOADER.NUM_INSTANCE",
    2,  # 2 identities of 2 images: positives and negatives for the triplet and circle losses
    "DATALOADER.CACHE",
    False,
    "SOLVER.IMS_PER_BATCH",
    4,
    "TEST.IMS_PER_BATCH",
    4,
]
_MODELS: dict[str, object] = {}


def _param(config):
    return pytest.param(config, marks=pytest.mark.slow) if any(m in config for m in SLOW_MARKERS) else config


def _link(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.symlink(src, dst)
    except OSError:  # no symlinks (some Windows setups): copy
        import shutil

        shutil.copyfile(src, dst)


def _msmt17_from_market(market: str, root: str) -> None:
    """MSMT17_V1 (train/, test/, list_*.txt) holding the synthetic Market-1501 pictures."""
    base = os.path.join(root, "MSMT17_V1")
    for split, folders in (
        ("train", ["bounding_box_train"]),
        ("query", ["query"]),
        ("gallery", ["bounding_box_test"]),
    ):
        lines = []
        for folder in folders:
            for name in sorted(os.listdir(os.path.join(market, folder))):
                pid, cam = name.split("_")[:2]
                if int(pid) < 0:
                    continue
                rel = (
                    f"{int(pid):04d}/{int(pid):04d}_{len(lines):03d}_{int(cam[1]):02d}_0303morning_0001_0.jpg"
                )
                _link(
                    os.path.join(market, folder, name),
                    os.path.join(base, "train" if split == "train" else "test", rel),
                )
                lines.append(f"{rel} {int(pid)}")
        if split == "train":  # MSMT17 relabels nothing: train ids must be 0..N-1
            ids = {pid: i for i, pid in enumerate(sorted({ln.split()[1] for ln in lines}, key=int))}
            lines = [f"{ln.split()[0]} {ids[ln.split()[1]]}" for ln in lines]
        with open(os.path.join(base, f"list_{split}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(base, "list_val.txt"), "w") as f:
        f.write("")


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory):
    from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501

    root = str(tmp_path_factory.mktemp("configs_data"))
    generate_market1501(root, SyntheticSpec.small(seed=5))
    market = os.path.join(root, "Market-1501-v15.09.15")
    os.symlink(market, os.path.join(root, "DukeMTMC-reID"))
    _msmt17_from_market(market, root)
    old = os.environ.get("FASTREID_DATASETS")
    os.environ["FASTREID_DATASETS"] = root
    yield root
    if old is None:
        os.environ.pop("FASTREID_DATASETS", None)
    else:
        os.environ["FASTREID_DATASETS"] = old


def test_configs_were_found():
    assert len(CONFIGS) >= 47
    assert "configs/Demo/bagtricks_demo.yml" in CONFIGS and "configs/Market1501/bagtricks_vit.yml" in CONFIGS
    assert sum(c.startswith("custom_configs/plateau_solutions/") for c in CONFIGS) >= 5


def _tiny_cfg(config: str, output_dir: str):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, config))
    cfg.merge_from_list(TINY + ["OUTPUT_DIR", output_dir])
    return cfg


def _model_for(cfg):
    from fastreid.modeling import build_model

    key = cfg.MODEL.dump() + str(cfg.INPUT.SIZE_TRAIN)
    if key not in _MODELS:
        torch.manual_seed(0)
        _MODELS[key] = build_model(cfg, log_summary=False)
    return _MODELS[key]


@pytest.mark.slow
@pytest.mark.parametrize("config", [_param(c) for c in CONFIGS])
def test_config_trains_one_step_and_evaluates(config, synthetic_root, tmp_path):
    from fastreid.data.build import build_reid_test_loader, build_reid_train_loader
    from fastreid.solver import build_optimizer

    cfg = _tiny_cfg(config, str(tmp_path))
    vehicle = set(cfg.DATASETS.NAMES) & VEHICLE_SETS
    if vehicle:
        name = sorted(vehicle)[0]
        try:
            build_reid_train_loader(cfg)
        except UserError as e:
            assert name in str(e) and ("not found" in str(e) or "unknown data set" in str(e)), str(e)
            return
        pytest.fail(f"{config}: expected a clear 'data set not found' error for {name}")

    train_loader = build_reid_train_loader(cfg)
    test_loader, num_query = build_reid_test_loader(cfg, dataset_name=cfg.DATASETS.TESTS[0])
    try:
        cfg.defrost()
        cfg.MODEL.HEADS.NUM_CLASSES = train_loader.dataset.num_classes  # as the trainer does
        model = _model_for(cfg)
        batch = next(iter(train_loader))
        assert batch["images"].shape == (4, 3, 48, 16)
        model.train()
        optimizer, _ = build_optimizer(cfg, model)
        before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        losses = model(batch)
        total = sum(losses.values())
        assert math.isfinite(float(total.detach())), {k: float(v) for k, v in losses.items()}
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
        changed = [
            n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(before[n], p)
        ]
        assert changed, "the optimizer step changed no parameter"

        model.eval()
        assert num_query > 0
        test_batch = next(iter(test_loader))
        with torch.no_grad():
            features = model(test_batch)
        assert features.shape[0] == test_batch["images"].shape[0] and torch.isfinite(features).all()
    finally:
        for loader in (train_loader, test_loader):
            shutdown = getattr(loader, "shutdown", None)
            if callable(shutdown):
                shutdown()
