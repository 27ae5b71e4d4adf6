"""Heads. Importing registers them."""

from .build import HEADS_REGISTRY, REID_HEADS_REGISTRY, build_heads
from .clas_head import ClasHead
from .embedding_head import EmbeddingHead

__all__ = ["HEADS_REGISTRY", "REID_HEADS_REGISTRY", "build_heads", "EmbeddingHead", "ClasHead"]
