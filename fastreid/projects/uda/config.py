"""The config keys of unsupervised and domain-adaptive re-ID (Cluster Contrast)."""

from __future__ import annotations

from typing import Any

from fastreid.config import CfgNode as CN
from fastreid.config import ConfigError

__all__ = ["add_uda_config", "check_uda_config", "UDA_DEFAULTS"]

#: The family's keys and their defaults (cluster-contrast-reid's, except the momentum: the paper's 0.1).
UDA_DEFAULTS: dict[str, Any] = {
    "CLUSTER": {
        "K1": 30,  # k-reciprocal Jaccard distance: neighbours of the k-reciprocal sets
        "K2": 6,  # neighbours averaged in the query expansion
        "EPS": 0.6,  # DBSCAN: the largest Jaccard distance between two neighbours
        "MIN_SAMPLES": 4,  # DBSCAN: images (itself included) within EPS that make an image a core
    },
    "MEMORY": {
        "MOMENTUM": 0.1,  # centroid <- MOMENTUM * centroid + (1 - MOMENTUM) * feature, per image
        "TEMP": 0.05,  # InfoNCE temperature over the centroids
    },
    "ITERS_PER_EPOCH": 0,  # 0: the target's images // SOLVER.IMS_PER_BATCH
}


def _merge_missing(node: Any, defaults: dict[str, Any]) -> None:
    for key, value in defaults.items():
        if isinstance(value, dict):
            if key not in node:
                node[key] = CN()
            _merge_missing(node[key], value)
        elif key not in node:
            node[key] = value


def add_uda_config(cfg: Any) -> Any:
    """Add the family's keys, leaving keys that are already there (and their values) alone, so
    calling it twice, or after a config file set them, changes nothing. Returns ``cfg``.

    - ``UDA.CLUSTER.K1`` / ``K2`` (30 / 6): the k-reciprocal Jaccard distance of the target's
      features (``fastreid.utils.compute_dist.compute_jaccard_distance``'s ``k1`` / ``k2``);
    - ``UDA.CLUSTER.EPS`` (0.6) / ``MIN_SAMPLES`` (4): DBSCAN on that distance; images in no
      cluster (outliers) sit the epoch out;
    - ``UDA.MEMORY.MOMENTUM`` (0.1) / ``TEMP`` (0.05): the cluster memory's update and the
      InfoNCE temperature;
    - ``UDA.ITERS_PER_EPOCH`` (0): iterations between two clusterings; 0 is one pass's worth of
      the target's images;
    - ``DATASETS.UNLABELED_FOLDERS`` ([]): folders of images (searched recursively) added to the
      target, with no identities; ``DATASETS.NAMES`` gives registered data sets whose training
      images are the target (their identities are never read for training).
    """
    if "UDA" not in cfg:
        cfg.UDA = CN()
    _merge_missing(cfg.UDA, UDA_DEFAULTS)
    if "UNLABELED_FOLDERS" not in cfg.DATASETS:
        cfg.DATASETS.UNLABELED_FOLDERS = []
    return cfg


def check_uda_config(cfg: Any) -> None:
    """The family's values, before anything is built: a :class:`ConfigError` naming the key."""
    cluster, memory = cfg.UDA.CLUSTER, cfg.UDA.MEMORY
    if not 0.0 < float(cluster.EPS) < 1.0:
        raise ConfigError(
            f"UDA.CLUSTER.EPS must be in (0, 1) (a Jaccard distance; pairs with nothing in common are at 1), "
            f"got {cluster.EPS}; cluster-contrast-reid uses 0.6"
        )
    for key in ("K1", "K2", "MIN_SAMPLES"):
        if int(cluster[key]) < 1:
            raise ConfigError(f"UDA.CLUSTER.{key} must be at least 1, got {cluster[key]}")
    if int(cfg.UDA.ITERS_PER_EPOCH) < 0:
        raise ConfigError(
            f"UDA.ITERS_PER_EPOCH must be 0 (one pass over the target) or more, got {cfg.UDA.ITERS_PER_EPOCH}"
        )
    if not 0.0 <= float(memory.MOMENTUM) < 1.0:
        raise ConfigError(f"UDA.MEMORY.MOMENTUM must be in [0, 1), got {memory.MOMENTUM}")
    if not float(memory.TEMP) > 0.0:
        raise ConfigError(f"UDA.MEMORY.TEMP must be positive, got {memory.TEMP}")
