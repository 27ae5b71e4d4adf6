"""What the ClusterContrast tests share: the tiny settings and the command line of a tiny run."""

from __future__ import annotations

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(REPO, "configs", "UDA", "Base-cluster-contrast.yml")

# On the small synthetic Market-1501 (about 60 training images of 12 identities) a randomly
# initialised ResNet-18 clusters into ~14 clusters at these settings, the largest ~10% (measured
# with seeds 1-3): far from the checks' limits (4 clusters, 50%), on any CPU's rounding.
TINY = [
    "MODEL.PRECISION", "fp32",
    "INPUT.PADDING.SIZE", 4,
    "UDA.CLUSTER.K1", 6,
    "UDA.CLUSTER.K2", 2,
    "UDA.CLUSTER.EPS", 0.45,
    "UDA.CLUSTER.MIN_SAMPLES", 2,
    "UDA.ITERS_PER_EPOCH", 2,
    "DATALOADER.NUM_INSTANCE", 4,
    "SOLVER.IMS_PER_BATCH", 16,
    "SOLVER.MAX_EPOCH", 2,
    "SOLVER.STEPS", [1],
    "SOLVER.LOG_PERIOD", 1,
    "TEST.EVAL_PERIOD", 2,
    "TEST.IMS_PER_BATCH", 64,
    "DATASETS.NAMES", ("Market1501",),
    "DATASETS.TESTS", ("Market1501",),
    "CUDNN_BENCHMARK", False,
    "SEED", 7,
]  # fmt: skip


def as_argv(options: list) -> list[str]:
    """Config options as command-line words."""
    return [str(v) if not isinstance(v, (list, tuple)) else repr(v) for v in options]


def train_argv(output_dir, tiny_opts, *overrides, resume: bool = False) -> list[str]:
    """``fastreid-train`` arguments: the base config, the tiny ResNet-18, TINY and ``overrides``."""
    argv = ["--config-file", CONFIG, *(["--resume"] if resume else [])]
    return argv + as_argv([*tiny_opts, *TINY, "OUTPUT_DIR", str(output_dir), *overrides])
