"""Samplers of the train and test loaders (all seeded, sharded by rank, resumable)."""

from .data_sampler import InferenceSampler, TrainingSampler
from .imbalance_sampler import ImbalancedDatasetSampler
from .triplet_sampler import BalancedIdentitySampler, NaiveIdentitySampler, SetReWeightSampler

__all__ = [
    "TrainingSampler",
    "InferenceSampler",
    "NaiveIdentitySampler",
    "BalancedIdentitySampler",
    "SetReWeightSampler",
    "ImbalancedDatasetSampler",
]
