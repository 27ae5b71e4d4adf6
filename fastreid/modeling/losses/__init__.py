"""Loss functions with upstream FastReID's maths (same weights, same batch -> same losses)."""

from .circle import pairwise_circleloss
from .cosface import pairwise_cosface
from .cross_entropy import classification_accuracy, cross_entropy_loss
from .focal import focal_loss
from .triplet import triplet_loss

__all__ = [
    "classification_accuracy",
    "cross_entropy_loss",
    "focal_loss",
    "pairwise_circleloss",
    "pairwise_cosface",
    "triplet_loss",
]
