"""Average query expansion (alpha-weighted, Radenovic et al.), upstream's ``aqe``.

Every item (queries and gallery) is replaced by the weighted mean of its ``qe_k`` nearest items (itself
included) with weights ``cos ** alpha``; repeated ``qe_times`` times. Similarities are computed in row
chunks with ``torch.topk`` instead of a dense ``N x N`` matrix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fastreid.utils.pairwise import as_float_tensor, default_chunk_rows

__all__ = ["aqe"]


@torch.no_grad()
def aqe(
    query_feat: torch.Tensor,
    gallery_feat: torch.Tensor,
    qe_times: int = 1,
    qe_k: int = 10,
    alpha: float = 3.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Expanded (query, gallery) features, not normalised, as upstream returns them."""
    q, g = as_float_tensor(query_feat, "query_feat"), as_float_tensor(gallery_feat, "gallery_feat")
    num_query = q.shape[0]
    feats = torch.cat([q, g])
    n = feats.shape[0]
    if qe_k < 1 or qe_times < 0:
        raise ValueError(f"AQE needs QE_K >= 1 and QE_TIME >= 0, got qe_k={qe_k}, qe_times={qe_times}")
    k = min(qe_k, n)
    for _ in range(qe_times):
        normed = F.normalize(feats, p=2, dim=1)
        expanded = torch.empty_like(feats)
        rows = default_chunk_rows(n)
        for s in range(0, n, rows):
            sim = torch.mm(normed[s : s + rows], normed.t())
            weights, idx = torch.topk(sim, k, dim=1)
            weights = weights.pow(alpha)
            # mean over the k neighbours of (weight * feature), as upstream computes it
            expanded[s : s + rows] = (feats[idx] * weights[..., None]).mean(dim=1)
        feats = expanded
    return feats[:num_query].clone(), feats[num_query:].clone()
