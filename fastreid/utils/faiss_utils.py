"""Upstream FastReID's ``fastreid.utils.faiss_utils``: k-nearest-neighbour search on torch tensors
with faiss. On the CPU the tensors are passed to faiss as numpy arrays (no copy); the GPU
functions need a faiss built with GPU support and say so when it is not."""

from __future__ import annotations

from typing import Any, Optional

import faiss
import numpy as np
import torch

__all__ = [
    "index_init_cpu",
    "index_init_gpu",
    "search_index_pytorch",
    "search_raw_array_pytorch",
    "swig_ptr_from_FloatTensor",
    "swig_ptr_from_LongTensor",
]


def _checked(x: torch.Tensor, dtype: torch.dtype, what: str) -> np.ndarray:
    if x.dtype != dtype or not x.is_contiguous():
        raise ValueError(f"{what}: expected a contiguous {dtype} tensor, got {x.dtype}")
    if x.is_cuda:
        raise ValueError(f"{what}: a CUDA tensor needs a faiss built with GPU support; move it to the CPU")
    return x.numpy()


def swig_ptr_from_FloatTensor(x: torch.Tensor) -> Any:
    """A faiss pointer to the data of a contiguous float32 CPU tensor."""
    return faiss.swig_ptr(_checked(x, torch.float32, "swig_ptr_from_FloatTensor"))


def swig_ptr_from_LongTensor(x: torch.Tensor) -> Any:
    """A faiss pointer to the data of a contiguous int64 CPU tensor."""
    return faiss.swig_ptr(_checked(x, torch.int64, "swig_ptr_from_LongTensor"))


def search_index_pytorch(
    index: Any,
    x: torch.Tensor,
    k: int,
    D: Optional[torch.Tensor] = None,
    I: Optional[torch.Tensor] = None,  # noqa: E741
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(D, I)``: distances and ids of the ``k`` nearest entries of ``index`` for each row of
    ``x``, written into ``D`` / ``I`` when given."""
    query = np.ascontiguousarray(x.detach().cpu().numpy(), dtype=np.float32)
    distances, ids = index.search(query, k)
    out_d, out_i = torch.from_numpy(distances), torch.from_numpy(ids).long()
    if D is not None:
        D.copy_(out_d)
        out_d = D
    if I is not None:
        I.copy_(out_i)
        out_i = I
    return out_d, out_i


def search_raw_array_pytorch(
    res: Any,
    xb: torch.Tensor,
    xq: torch.Tensor,
    k: int,
    D: Optional[torch.Tensor] = None,
    I: Optional[torch.Tensor] = None,  # noqa: E741  (upstream's argument name)
    metric: Optional[int] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Brute-force ``k`` nearest rows of ``xb`` for each row of ``xq`` (L2, or ``metric``), with
    faiss's CPU ``knn``; ``res`` (GPU resources upstream) is not used on the CPU."""
    metric = faiss.METRIC_L2 if metric is None else metric
    base = np.ascontiguousarray(xb.detach().cpu().numpy(), dtype=np.float32)
    query = np.ascontiguousarray(xq.detach().cpu().numpy(), dtype=np.float32)
    distances, ids = faiss.knn(query, base, k, metric=metric)
    out_d, out_i = torch.from_numpy(distances), torch.from_numpy(ids).long()
    if D is not None:
        D.copy_(out_d)
        out_d = D
    if I is not None:
        I.copy_(out_i)
        out_i = I
    return out_d, out_i


def index_init_gpu(ngpus: int, feat_dim: int) -> Any:
    """A flat L2 index sharded over ``ngpus`` GPUs (needs a faiss built with GPU support)."""
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() < max(1, ngpus):
        raise RuntimeError(
            f"index_init_gpu: this faiss has no GPU support or fewer than {ngpus} GPUs; "
            "use index_init_cpu (or install faiss-gpu on a CUDA machine)"
        )
    flat_config = []
    for i in range(ngpus):
        config = faiss.GpuIndexFlatConfig()
        config.useFloat16 = False
        config.device = i
        flat_config.append(config)
    resources = [faiss.StandardGpuResources() for _ in range(ngpus)]
    indexes = [faiss.GpuIndexFlatL2(resources[i], feat_dim, flat_config[i]) for i in range(ngpus)]
    index = faiss.IndexShards(feat_dim)
    for sub_index in indexes:
        index.add_shard(sub_index)
    index.reset()
    return index


def index_init_cpu(feat_dim: int) -> Any:
    """An empty flat (exact) L2 index for ``feat_dim``-dimensional vectors."""
    return faiss.IndexFlatL2(feat_dim)
