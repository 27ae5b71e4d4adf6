"""The pseudo-label step: DBSCAN on the k-reciprocal Jaccard distance of the target's features, the
cluster means that start the memory, the checks that stop a run whose clustering cannot train,
and how good the pseudo labels are where the target has identities.

The distance is upstream's ``compute_jaccard_distance`` (cluster-contrast-reid's, to 1e-6), built
as a sparse graph holding only the pairs within ``eps``
(:func:`fastreid.utils.kreciprocal.knn_jaccard_graph`: the same values, bit for bit, as the dense
``N x N`` matrix, which is never made), so DBSCAN (scikit-learn's, ``metric="precomputed"`` on
the sparse graph) finds the same clusters as on the dense matrix, at 100,000 images too.
scikit-learn is the ``uda`` extra.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from fastreid.utils.errors import UserError
from fastreid.utils.extras import require
from fastreid.utils.kreciprocal import knn_jaccard_graph

__all__ = [
    "MAX_CLUSTER_SHARE",
    "ClusteringError",
    "PseudoLabels",
    "check_clustering",
    "check_target_size",
    "cluster_centroids",
    "dbscan_labels",
    "jaccard_graph_matrix",
    "label_quality",
    "pseudo_labels",
]

logger = logging.getLogger("fastreid.uda")

#: A cluster holding more than this share of the target's images is "one giant cluster": the
#: clustering merged what it should separate (``eps`` too large), and the run stops.
MAX_CLUSTER_SHARE = 0.5


class ClusteringError(UserError):
    """The target's clustering gives nothing to train on: too few images, every image an
    outlier, or one giant cluster. The message names ``UDA.CLUSTER.EPS`` and what to try."""

    exit_code = 2


@dataclass
class PseudoLabels:
    """One epoch's clustering of the target: ``labels`` (int64, per target image; -1 an outlier),
    and what the run's log and report show of it."""

    labels: np.ndarray
    num_clusters: int
    quality: dict[str, float] = field(default_factory=dict)

    @property
    def outlier_share(self) -> float:
        return float((self.labels < 0).mean()) if len(self.labels) else 0.0

    @property
    def largest_share(self) -> float:
        """The share of all target images in the largest cluster."""
        kept = self.labels[self.labels >= 0]
        return float(np.bincount(kept).max()) / len(self.labels) if len(kept) else 0.0

    def scalars(self) -> dict[str, float]:
        """What goes into the event storage (``pseudo_labels/<name>``)."""
        return {
            "clusters": float(self.num_clusters),
            "outlier_share": self.outlier_share,
            "largest_cluster_share": self.largest_share,
            **self.quality,
        }

    def describe(self) -> str:
        clustered = int((self.labels >= 0).sum())
        text = (
            f"{self.num_clusters} clusters of {clustered} images, {100 * self.outlier_share:.1f}% of "
            f"{len(self.labels)} left out as outliers, largest cluster {100 * self.largest_share:.1f}%"
        )
        if self.quality:
            text += "; against the identities: " + ", ".join(f"{k} {v:.3f}" for k, v in self.quality.items())
        return text


def _sklearn_cluster() -> Any:
    return require("sklearn.cluster", "Clustering the target's images (ClusterContrast)", "uda")


def jaccard_graph_matrix(features: torch.Tensor, k1: int, k2: int, eps: float) -> Any:
    """The k-reciprocal Jaccard distances of ``features`` (L2-normalised rows) that are at most
    ``eps``, as a ``scipy.sparse.csr_matrix`` (rows sorted by distance, the diagonal stored)."""
    sparse = require("scipy.sparse", "The sparse Jaccard graph (ClusterContrast)", "uda")
    n = int(features.shape[0])
    indptr, indices, dist = knn_jaccard_graph(features, k1, k2, max_distance=eps)
    return sparse.csr_matrix((dist, indices, indptr), shape=(n, n))


def dbscan_labels(distances: Any, eps: float, min_samples: int) -> np.ndarray:
    """scikit-learn's DBSCAN on precomputed distances (a dense matrix, or a sparse graph whose
    stored entries are the neighbours): cluster per row, 0..C-1, or -1 for an outlier."""
    dbscan = _sklearn_cluster().DBSCAN(eps=float(eps), min_samples=int(min_samples), metric="precomputed")
    return np.asarray(dbscan.fit_predict(distances), dtype=np.int64)


def pseudo_labels(
    features: torch.Tensor,
    *,
    k1: int,
    k2: int,
    eps: float,
    min_samples: int,
    identities: Optional[Any] = None,
) -> PseudoLabels:
    """Cluster the target's ``features`` (N x D; L2-normalised here): the sparse Jaccard graph,
    then DBSCAN. ``identities`` (the target's ground truth, when it has any) only measure the
    result (:func:`label_quality`); they never change it."""
    unit = F.normalize(features.float(), dim=1)
    labels = dbscan_labels(jaccard_graph_matrix(unit, k1, k2, eps), eps, min_samples)
    result = PseudoLabels(labels=labels, num_clusters=int(labels.max()) + 1 if len(labels) else 0)
    if identities is not None:
        result.quality = label_quality(labels, identities)
    return result


def cluster_centroids(features: torch.Tensor, labels: np.ndarray, num_clusters: int) -> torch.Tensor:
    """The mean of each cluster's features (``num_clusters`` x D, float32; outliers left out), as
    cluster-contrast-reid starts its memory (the model L2-normalises the rows)."""
    feats = features.float()
    kept = torch.from_numpy(labels >= 0)
    index = torch.from_numpy(labels[labels >= 0])
    sums = torch.zeros(num_clusters, feats.shape[1], dtype=torch.float64)
    sums.index_add_(0, index, feats[kept].double())
    counts = torch.bincount(index, minlength=num_clusters).clamp_min(1).to(torch.float64)
    return (sums / counts[:, None]).float()


def _codes(values: Any) -> np.ndarray:
    return np.unique(np.asarray([str(v) for v in values]), return_inverse=True)[1].ravel()


def _pairs(counts: np.ndarray) -> float:
    counts = counts.astype(np.float64)
    return float((counts * (counts - 1) / 2).sum())


def label_quality(labels: np.ndarray, identities: Any) -> dict[str, float]:
    """How the pseudo ``labels`` (-1: outlier) agree with the target's ``identities`` (fractions):

    - ``NMI`` and ``ARI`` (scikit-learn's), each outlier counted as a cluster of its own;
    - ``pair_precision``: of the image pairs put in one cluster, the share of one identity;
    - ``pair_recall``: of the image pairs of one identity (outliers included), the share put in
      one cluster."""
    metrics = require("sklearn.metrics", "Measuring the pseudo labels (ClusterContrast)", "uda")
    truth = _codes(identities)
    labels = np.asarray(labels, dtype=np.int64)
    if len(truth) != len(labels):
        raise ValueError(f"{len(labels)} pseudo labels for {len(truth)} identities")
    singletons = labels.copy()
    outliers = np.flatnonzero(labels < 0)
    singletons[outliers] = labels.max(initial=-1) + 1 + np.arange(len(outliers))
    kept = labels >= 0
    joint = np.unique(np.stack([labels[kept], truth[kept]]), axis=1, return_counts=True)[1]
    together = _pairs(joint)
    clustered = _pairs(np.bincount(labels[kept])) if kept.any() else 0.0
    same_identity = _pairs(np.bincount(truth))
    return {
        "NMI": float(metrics.normalized_mutual_info_score(truth, singletons)),
        "ARI": float(metrics.adjusted_rand_score(truth, singletons)),
        "pair_precision": together / clustered if clustered else 0.0,
        "pair_recall": together / same_identity if same_identity else 0.0,
    }


def check_clustering(
    result: PseudoLabels, *, eps: float, min_samples: int, identities_per_batch: int, epoch: int
) -> None:
    """Raise :class:`ClusteringError` when ``result`` cannot train an epoch: every image an
    outlier, fewer clusters than a batch needs identities, or one cluster holding more than
    :data:`MAX_CLUSTER_SHARE` of the images."""
    n = len(result.labels)
    where = f"epoch {epoch + 1}: DBSCAN at UDA.CLUSTER.EPS {eps:g} (MIN_SAMPLES {min_samples}) on {n} target images"
    if result.num_clusters == 0:
        raise ClusteringError(
            f"{where} left every image an outlier: raise UDA.CLUSTER.EPS (e.g. {min(eps + 0.1, 0.95):g}) "
            "or lower UDA.CLUSTER.MIN_SAMPLES, or start from a source model (MODEL.WEIGHTS)"
        )
    if result.largest_share > MAX_CLUSTER_SHARE:
        raise ClusteringError(
            f"{where} put {100 * result.largest_share:.0f}% of them in one cluster "
            f"({result.num_clusters} clusters in all): lower UDA.CLUSTER.EPS (e.g. {max(eps - 0.1, 0.05):g})"
        )
    if result.num_clusters < identities_per_batch:
        raise ClusteringError(
            f"{where} found {result.num_clusters} cluster(s), fewer than the {identities_per_batch} "
            "identities a batch needs (SOLVER.IMS_PER_BATCH / DATALOADER.NUM_INSTANCE): lower "
            "UDA.CLUSTER.EPS to split clusters apart or raise it to gather outliers into clusters, "
            "or lower SOLVER.IMS_PER_BATCH"
        )


def check_target_size(num_images: int, *, k1: int, eps: float, min_samples: int) -> None:
    """Raise :class:`ClusteringError` when the target has too few images to cluster at all."""
    if num_images <= max(k1, min_samples):
        raise ClusteringError(
            f"The target has {num_images} images, too few to cluster with UDA.CLUSTER.K1 {k1} and "
            f"MIN_SAMPLES {min_samples} at UDA.CLUSTER.EPS {eps:g} (it needs more than "
            f"{max(k1, min_samples)}): add target images (DATASETS.NAMES, DATASETS.UNLABELED_FOLDERS) "
            "or lower UDA.CLUSTER.K1"
        )
