"""Loss functions with upstream FastReID's maths (same weights, same batch -> same losses), in
upstream's files (``cross_entroy_loss`` is upstream's spelling of :mod:`.cross_entropy_loss`)."""

from .circle_loss import pairwise_circleloss, pairwise_cosface
from .cross_entropy_loss import cross_entropy_loss, log_accuracy
from .focal_loss import focal_loss
from .triplet_loss import triplet_loss

__all__ = [
    "cross_entropy_loss",
    "focal_loss",
    "log_accuracy",
    "pairwise_circleloss",
    "pairwise_cosface",
    "triplet_loss",
]
