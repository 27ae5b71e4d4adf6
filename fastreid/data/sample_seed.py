"""Per-sample seeds; moved to :mod:`fastreid.data.loading.seeds` (this import path stays)."""

from fastreid.data.loading.seeds import (
    GlobalSeededDataset,
    SampleKey,
    SeededBatchSampler,
    mix_seed,
    sample_index,
    sample_seed,
    seed_global_rngs,
)

__all__ = [
    "SampleKey",
    "mix_seed",
    "SeededBatchSampler",
    "sample_index",
    "sample_seed",
    "GlobalSeededDataset",
    "seed_global_rngs",
]
