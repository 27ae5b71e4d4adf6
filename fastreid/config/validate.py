"""Value checks of a merged config, run before any data is read or model built.

Merging already checks keys and types; this checks that the values make sense (a batch size of
0, a NaN learning rate or a seed numpy cannot take would otherwise fail minutes later, after the
model was built or after training). Each problem is a one-line :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from fastreid.utils.errors import DeviceError

from .config import CfgNode, ConfigError

__all__ = ["ensure_output_dir", "validate_config"]

# Samplers that build batches of NUM_INSTANCE images per identity.
_IDENTITY_SAMPLERS = ("NaiveIdentitySampler", "BalancedIdentitySampler", "SetReWeightSampler")
# Seeds torch.manual_seed and the samplers take (numpy gets the seed modulo 2**32).
_MAX_SEED = 2**63 - 1
# Sections whose float values must all be finite (a NaN or inf there is never meaningful).
_FINITE_SECTIONS = ("SOLVER", "MODEL.LOSSES", "MODEL.HEADS", "INPUT", "TEST")


def _leaves(node: CfgNode, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        if isinstance(value, CfgNode):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _get(cfg: CfgNode, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    return node


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_finite(cfg: CfgNode) -> None:
    for section in _FINITE_SECTIONS:
        for key, value in _leaves(_get(cfg, section), section + "."):
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, float) and not math.isfinite(v):
                    raise ConfigError(f"{key} is {value!r}; it must be a finite number")


def _positive_int(cfg: CfgNode, key: str, minimum: int = 1) -> int:
    value = _get(cfg, key)
    if not _is_number(value) or value < minimum or int(value) != value:
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{key} is {value!r}; it must be {bound}")
    return int(value)


def _check_sizes(cfg: CfgNode) -> None:
    keys = ["INPUT.SIZE_TRAIN", "INPUT.SIZE_TEST"]
    if cfg.INPUT.CROP.ENABLED:
        keys.append("INPUT.CROP.SIZE")
    for key in keys:
        size = _get(cfg, key)
        if key != "INPUT.CROP.SIZE" and len(size) == 1 and _is_number(size[0]) and size[0] == 0:
            continue  # [0]: no resize (upstream's FastClas trains on random resized crops of the originals)
        if len(size) not in (1, 2) or not all(_is_number(v) and v > 0 and int(v) == v for v in size):
            raise ConfigError(f"{key} is {list(size)!r}; it must be [height, width] with positive integers")


def _check_batches(cfg: CfgNode, world_size: int) -> None:
    total = _positive_int(cfg, "SOLVER.IMS_PER_BATCH")
    if total % world_size:
        raise ConfigError(
            f"SOLVER.IMS_PER_BATCH {total} is not divisible by the number of processes ({world_size}); "
            "it is the batch size summed over all processes"
        )
    test_total = _positive_int(cfg, "TEST.IMS_PER_BATCH")
    if test_total % world_size:
        raise ConfigError(
            f"TEST.IMS_PER_BATCH {test_total} is not divisible by the number of processes ({world_size})"
        )
    if cfg.DATALOADER.SAMPLER_TRAIN in _IDENTITY_SAMPLERS:
        k = _positive_int(cfg, "DATALOADER.NUM_INSTANCE")
        per_process = total // world_size
        if per_process % k:
            where = f" per process ({total} / {world_size})" if world_size > 1 else ""
            raise ConfigError(
                f"SOLVER.IMS_PER_BATCH{where} {per_process} is not a multiple of DATALOADER.NUM_INSTANCE {k} "
                f"({cfg.DATALOADER.SAMPLER_TRAIN} puts {k} images of each identity in a batch)"
            )


def _check_learning_rate(cfg: CfgNode) -> None:
    lr = cfg.SOLVER.BASE_LR
    if not (_is_number(lr) and math.isfinite(lr) and lr > 0):
        raise ConfigError(f"SOLVER.BASE_LR is {lr!r}; it must be a finite number > 0")
    for key in (
        "SOLVER.ETA_MIN_LR",
        "SOLVER.WEIGHT_DECAY",
        "SOLVER.WEIGHT_DECAY_NORM",
        "SOLVER.WEIGHT_DECAY_BIAS",
    ):
        value = _get(cfg, key)
        if value < 0:
            raise ConfigError(f"{key} is {value!r}; it must be >= 0")


def _check_loader(cfg: CfgNode) -> None:
    for key in ("DATALOADER.NUM_WORKERS", "DATALOADER.NUM_THREADS"):
        _positive_int(cfg, key, minimum=0)
    _positive_int(cfg, "DATALOADER.PREFETCH_FACTOR")
    timeout = cfg.DATALOADER.TIMEOUT
    if not (_is_number(timeout) and math.isfinite(timeout) and timeout >= 0):
        raise ConfigError(f"DATALOADER.TIMEOUT is {timeout!r}; it must be >= 0 seconds (0 = wait forever)")


def _check_counts(cfg: CfgNode) -> None:
    for key in (
        "SOLVER.MAX_EPOCH",
        "SOLVER.MAX_ITER",
        "SOLVER.WARMUP_ITERS",
        "SOLVER.FREEZE_ITERS",
        "SOLVER.DELAY_EPOCHS",
        "SOLVER.CHECKPOINT_PERIOD",
        "TEST.EVAL_PERIOD",
        "MODEL.HEADS.NUM_CLASSES",
        "MODEL.HEADS.EMBEDDING_DIM",
    ):
        _positive_int(cfg, key, minimum=0)
    _positive_int(cfg, "SOLVER.LOG_PERIOD")


def _check_pixels_and_probabilities(cfg: CfgNode) -> None:
    for key in ("MODEL.PIXEL_MEAN", "MODEL.PIXEL_STD"):
        values = _get(cfg, key)
        if len(values) not in (1, 3) or not all(_is_number(v) and math.isfinite(v) for v in values):
            raise ConfigError(f"{key} is {list(values)!r}; it must be 3 finite numbers (0..255 scale)")
    if not all(v > 0 for v in cfg.MODEL.PIXEL_STD):
        raise ConfigError(f"MODEL.PIXEL_STD is {list(cfg.MODEL.PIXEL_STD)!r}; every value must be > 0")
    for key, value in _leaves(cfg.INPUT, "INPUT."):
        if key.endswith(".PROB") and not (_is_number(value) and 0 <= value <= 1):
            raise ConfigError(f"{key} is {value!r}; a probability must be between 0 and 1")


def _check_seed(cfg: CfgNode) -> None:
    seed = cfg.SEED
    if not isinstance(seed, int) or isinstance(seed, bool) or seed > _MAX_SEED or seed < -_MAX_SEED - 1:
        raise ConfigError(
            f"SEED is {seed!r}; it must be an integer from 0 to 2**63-1 (a negative seed draws a fresh one)"
        )


def _check_device(cfg: CfgNode) -> None:
    # imports torch: fastreid.config stays torch-free (fastreid-train imports it before the OpenMP decision)
    from fastreid.utils.device import VALID_DEVICES, check_device_string

    try:
        check_device_string(cfg.MODEL.DEVICE)
    except DeviceError:
        raise ConfigError(f"MODEL.DEVICE {cfg.MODEL.DEVICE!r} is not a device; use {VALID_DEVICES}") from None


# SOLVER.FUSED: torch's fused optimizer kernel where measured faster (CPU), always, or never.
FUSED_CHOICES = ("auto", "on", "off")
# TEST.RERANK.METHOD: upstream's evaluator (kNN Jaccard combined with the original distance), and the
# classic k-reciprocal re-ranking (fastreid.evaluation.rerank).
RERANK_METHODS = ("knn_jaccard", "k_reciprocal")


def _check_choices(cfg: CfgNode) -> None:
    from fastreid.utils.pairwise import METRICS  # imports torch: fastreid.config stays torch-free (as above)

    for key, choices in (
        ("TEST.METRIC", METRICS),
        ("TEST.RERANK.METHOD", RERANK_METHODS),
        ("SOLVER.FUSED", FUSED_CHOICES),
    ):
        value = _get(cfg, key)
        if value not in choices:
            raise ConfigError(f"{key} {value!r} is unknown; use one of {', '.join(choices)}")


def _check_precision(cfg: CfgNode) -> None:
    """``MODEL.PRECISION`` and ``MODEL.CHANNELS_LAST`` are known values, and an explicit ``bf16``
    can run natively on the device the job will use (the precision decider's rule)."""
    from fastreid.utils.device import device_type_of  # imports torch: fastreid.config stays torch-free
    from fastreid.utils.precision import PrecisionError, decide  # torch, as above

    try:
        device_type = device_type_of(cfg.MODEL.DEVICE)
    except DeviceError:
        device_type = "cpu"  # a device index this machine lacks: resolve_device says so later
    try:
        decide(
            cfg.MODEL.PRECISION,
            device_type,
            amp=bool(cfg.SOLVER.AMP.ENABLED),
            channels_last=cfg.MODEL.CHANNELS_LAST,
        )
    except PrecisionError as e:
        raise ConfigError(str(e)) from None


def validate_config(cfg: CfgNode, world_size: int = 1) -> None:
    """Check the values of a merged config; raise a one-line :class:`ConfigError` for the first
    bad one. ``world_size`` is the number of training processes (batch sizes are split among them)."""
    world_size = max(1, int(world_size))
    _check_device(cfg)
    _check_seed(cfg)
    _check_finite(cfg)
    _check_learning_rate(cfg)
    _check_batches(cfg, world_size)
    _check_sizes(cfg)
    _check_loader(cfg)
    _check_counts(cfg)
    _check_pixels_and_probabilities(cfg)
    _check_choices(cfg)
    _check_precision(cfg)


def ensure_output_dir(path: str, key: str = "OUTPUT_DIR") -> None:
    """Create ``path`` and check that a file can be written in it; one-line :class:`ConfigError`
    naming ``key`` otherwise (instead of a PermissionError traceback from the first log write)."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConfigError(
            f"{key} {path!r} is not a writable folder ({reason}); set {key} to a folder you can write to"
        ) from None
