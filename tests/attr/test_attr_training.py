"""Training attributes through the standard front door: ``fastreid-train`` / ``tools/train_net.py``
with ``configs/Attr/pa100.yml`` picks AttrTrainer, which loads the attribute set, gives the model the
training set's positive ratios and evaluates with AttrEvaluator; a config that does not fit the
data stops before training with one line naming the file and the fix."""

from __future__ import annotations

import json
import os

import pytest
import torch
from train_command import train_log  # tests/, on the path

from fastreid.cli import train
from fastreid.config import ConfigError, get_cfg
from fastreid.projects.attr import PA100K, AttrTrainer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = "configs/Attr/pa100.yml"
# a small ResNet-18 from scratch on 32x16 images, float32, the main process loading
TINY = [
    "MODEL.DEVICE",
    "cpu",
    "MODEL.PRECISION",
    "fp32",
    "MODEL.BACKBONE.PRETRAIN",
    "False",
    "MODEL.BACKBONE.DEPTH",
    "18x",
    "MODEL.BACKBONE.FEAT_DIM",
    "512",
    "INPUT.SIZE_TRAIN",
    "[32,16]",
    "INPUT.SIZE_TEST",
    "[32,16]",
    "SOLVER.IMS_PER_BATCH",
    "16",
    "TEST.IMS_PER_BATCH",
    "16",
    "SOLVER.WARMUP_ITERS",
    "0",
    "DATALOADER.NUM_WORKERS",
    "0",
    "CUDNN_BENCHMARK",
    "False",
    "SEED",
    "3",
]


def _cfg(output_dir, *opts):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, CONFIG))
    cfg.merge_from_list([*TINY, "OUTPUT_DIR", str(output_dir), *opts])
    return cfg


def test_the_train_loader_gives_label_batches_and_the_sample_weights(pa100k_root, monkeypatch, tmp_path):
    monkeypatch.setenv("FASTREID_DATASETS", pa100k_root)
    monkeypatch.setattr(AttrTrainer, "sample_weights", None)
    cfg = _cfg(tmp_path)
    loader = AttrTrainer.build_train_loader(cfg)
    try:
        batch = next(iter(loader))
    finally:
        loader.shutdown()
    assert batch["images"].shape == (16, 3, 32, 16) and batch["targets"].shape == (16, 26)
    assert batch["targets"].dtype == torch.float32
    train = PA100K(root=pa100k_root).train
    expected = torch.tensor(sum(labels for _, labels in train) / len(train))
    assert torch.allclose(AttrTrainer.sample_weights, expected)
    model = AttrTrainer.build_model(cfg)
    assert torch.equal(model.sample_weights, AttrTrainer.sample_weights)
    cfg.MODEL.LOSSES.BCE.WEIGHT_ENABLED = False
    assert AttrTrainer.build_model(cfg).sample_weights is None


def test_num_classes_must_be_the_files_attribute_count(pa100k_root, monkeypatch, tmp_path):
    monkeypatch.setenv("FASTREID_DATASETS", pa100k_root)
    cfg = _cfg(tmp_path, "MODEL.HEADS.NUM_CLASSES", "27")
    with pytest.raises(ConfigError) as e:
        AttrTrainer.build_train_loader(cfg)
    message = str(e.value)
    assert os.path.join(pa100k_root, "PA-100K", "annotation.mat") in message
    assert "has 26 attributes but MODEL.HEADS.NUM_CLASSES is 27" in message
    assert "set MODEL.HEADS.NUM_CLASSES 26" in message
    with pytest.raises(ConfigError, match="set MODEL.HEADS.NUM_CLASSES 26"):
        AttrTrainer.build_test_loader(cfg, "PA100K")
    with pytest.raises(ConfigError, match="set DATALOADER.SAMPLER_TRAIN TrainingSampler"):
        AttrTrainer.build_train_loader(_cfg(tmp_path, "DATALOADER.SAMPLER_TRAIN", "NaiveIdentitySampler"))


def test_the_command_prints_one_line_and_stops_before_training(pa100k_root, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FASTREID_DATASETS", pa100k_root)
    argv = [
        "--config-file",
        CONFIG,
        *TINY,
        "OUTPUT_DIR",
        str(tmp_path / "run"),
        "MODEL.HEADS.NUM_CLASSES",
        "25",
    ]
    assert train.run(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Config error")]
    assert len(lines) == 1 and "annotation.mat has 26 attributes" in lines[0], lines
    assert not os.path.exists(tmp_path / "run" / "model_final.pth")

    argv = [
        "--config-file",
        CONFIG,
        *TINY,
        "OUTPUT_DIR",
        str(tmp_path / "r2"),
        "DATASETS.NAMES",
        "('PA-100K',)",
    ]
    assert train.run(argv) == 1
    err = capsys.readouterr().err
    assert "UnknownDatasetError: 'PA-100K' in DATASETS.NAMES" in err and "Did you mean 'PA100K'" in err


@pytest.mark.slow
def test_tools_train_net_trains_and_evaluates_pa100_then_evaluates_its_weights(
    pa100k_root, tmp_path, run_tool
):
    """``tools/train_net.py --config-file configs/Attr/pa100.yml`` with tiny overrides: six
    iterations on the synthetic PA-100K, the evaluation printed; then ``--eval-only`` of the
    weights it wrote gives the same numbers. Both runs are the command tools/train_net.py runs
    (``fastreid.cli.train.run``), in this process."""
    out = tmp_path / "run"
    opts = [*TINY, "SOLVER.MAX_EPOCH", "2", "TEST.EVAL_PERIOD", "2", "OUTPUT_DIR", str(out)]

    log = train_log(run_tool, pa100k_root, "--config-file", CONFIG, *opts)
    assert "AttrBaseline trains with fastreid.projects.attr.trainer.AttrTrainer" in log
    assert "| Accu" in log and "| mA" in log and "Skirt&Dress" in log, log[-3000:]
    assert "loss_bce" in log
    with open(out / "metrics.json", encoding="utf-8") as f:
        evaluations = [r for r in map(json.loads, f) if "mA" in r]
    assert evaluations, "no evaluation in metrics.json"
    trained = evaluations[-1]
    assert 0 <= trained["mA"] <= 100 and trained["metric"] == trained["mA"]

    log = train_log(
        run_tool,
        pa100k_root,
        "--config-file",
        CONFIG,
        "--eval-only",
        *opts[:-2],
        "OUTPUT_DIR",
        tmp_path / "eval",
        "MODEL.WEIGHTS",
        out / "model_final.pth",
    )
    row = next(line for line in log.splitlines() if line.startswith("| PA100K"))
    values = [float(v) for v in row.strip("|").split("|")[1:]]
    assert values == pytest.approx(
        [trained[k] for k in ("Accu", "Prec", "Recall", "F1", "mA", "metric")], abs=0.01
    )
