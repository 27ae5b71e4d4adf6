"""Unsupervised and domain-adaptive re-identification: Cluster Contrast (Dai et al., ACCV 2022;
alibaba/cluster-contrast-reid) as a task family, the code upstream FastReID's
``projects/CrossDomainReID`` promised.

A model learns from a target domain's images without their identities: before each epoch the
target's features are clustered (DBSCAN on the k-reciprocal Jaccard distance, sparse at scale), the
clusters become pseudo identities and start a memory of centroids, and the epoch trains the
InfoNCE loss against that memory, which each image then updates. Start from a model trained on
labelled source data (``MODEL.WEIGHTS``: domain adaptation) or from ImageNet / random weights
(fully unsupervised)::

    fastreid-train --config-file configs/UDA/cc_duke_R50.yml MODEL.WEIGHTS logs/market/model_final.pth

Importing this package registers the meta architecture ``ClusterContrast`` and its trainer
(``UdaTrainer``); a config naming ``ClusterContrast`` imports it (:mod:`fastreid.config.families`).
DBSCAN is scikit-learn's: the ``uda`` extra (``pip install "fastreid[uda]"``). docs/uda.md has the
details.
"""

from .cluster_contrast import ClusterContrast, update_centroids
from .clustering import (
    ClusteringError,
    PseudoLabels,
    check_clustering,
    check_target_size,
    cluster_centroids,
    dbscan_labels,
    jaccard_graph_matrix,
    label_quality,
    pseudo_labels,
)
from .config import add_uda_config, check_uda_config
from .target import TargetImages, target_images
from .trainer import PendingLabels, PseudoLabelHook, UdaTrainer, extract_features

__all__ = [
    "ClusterContrast",
    "ClusteringError",
    "PendingLabels",
    "PseudoLabelHook",
    "PseudoLabels",
    "TargetImages",
    "UdaTrainer",
    "add_uda_config",
    "check_uda_config",
    "check_clustering",
    "check_target_size",
    "cluster_centroids",
    "dbscan_labels",
    "extract_features",
    "jaccard_graph_matrix",
    "label_quality",
    "pseudo_labels",
    "target_images",
    "update_centroids",
]
