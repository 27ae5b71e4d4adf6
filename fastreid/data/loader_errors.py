"""Loader errors; moved to :mod:`fastreid.data.loading.errors` (this import path stays)."""

from fastreid.data.loading.errors import SampleLoadError, describe_sample, describe_samples

__all__ = ["SampleLoadError", "describe_sample", "describe_samples"]
